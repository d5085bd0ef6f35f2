package processor

import (
	"context"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
)

// deliveries fetches n inbound messages from a consumer nobody acks and
// makes them what the processor's dispatch hands a shard.
func deliveries(t *testing.T, r *rig, p *Processor, n int) []inMsg {
	t.Helper()
	ctx := context.Background()
	cons, err := r.JS.CreateOrUpdateConsumer(ctx, r.Layout.In, jetstream.ConsumerConfig{Durable: "loop", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []inMsg
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		session, kind, err := p.subj.ParseIn(m.Subject())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, inMsg{msg: m, seq: md.Sequence.Stream, received: md.Timestamp, session: session, kind: kind})
	}
	if len(out) != n {
		t.Fatalf("fetched %d messages, want %d", len(out), n)
	}
	return out
}

// A session whose reset must wait for its fold to come back holds the
// reset and its later events, in order, without holding up the loop: the
// shard's other sessions go on, and the held events are applied once the
// fold's result has landed.
func TestLoopHoldsASessionWaitingForItsFold(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p, err := New(Config{}, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log})
	if err != nil {
		t.Fatal(err)
	}
	if p.outStrm, err = r.JS.Stream(ctx, r.Layout.Out); err != nil {
		t.Fatal(err)
	}
	sh := newShard(p, 0, ctx)
	r.Turns("s1", 2)
	r.Control("s1", events.OpReset, nil)
	r.Turns("s1", 1)
	r.Turns("s2", 1)
	ms := deliveries(t, r, p, 5)
	sh.accept(ms[0]) // read aside, with the next turn parked behind the read
	sh.accept(ms[1])
	sh.ld.land(<-sh.ld.done)
	ls := sh.sessions["s1"]
	if ls == nil || ls.s.Total != 2 {
		t.Fatal("the first two turns of s1 were not applied")
	}

	// A fold of s1 is in flight, as startFold leaves it.
	canceled := false
	ls.s.Lease = &state.Lease{FoldID: "f1", Owner: p.cfg.InstanceID, Deadline: p.clock.Now().Add(time.Minute), To: 1}
	ls.running, ls.cancel = "f1", func() { canceled = true }
	sh.co.inFlight++

	sh.accept(ms[2]) // the reset
	if !canceled || ls.s.Lease != nil || ls.wait == nil || ls.wait.on != waitFold || len(ls.wait.held) != 1 || ls.s.Epoch != 0 {
		t.Fatalf("reset during the fold: canceled %v lease %+v wait %+v epoch %d; want the fold canceled and the reset held",
			canceled, ls.s.Lease, ls.wait, ls.s.Epoch)
	}
	sh.accept(ms[3]) // s1's next turn waits behind the reset
	if len(ls.wait.held) != 2 || ls.s.Total != 2 {
		t.Fatalf("a later event of the waiting session: %d held, total %d; want it held", len(ls.wait.held), ls.s.Total)
	}
	if ls.quiet() {
		t.Fatal("a session with held events counts as quiet (it could be packed or evicted)")
	}
	sh.accept(ms[4]) // another session goes on meanwhile
	sh.ld.land(<-sh.ld.done)
	if o := sh.sessions["s2"]; o == nil || o.s.Total != 1 {
		t.Fatal("another session of the shard waited for s1's fold")
	}

	sh.land(foldResult{job: foldJob{session: "s1", foldID: "f1"}, err: context.Canceled})
	if sh.co.inFlight != 0 || ls.wait != nil {
		t.Fatalf("after the fold's result: %d in flight, wait %+v; want nothing left waiting", sh.co.inFlight, ls.wait)
	}
	if ls.s.Epoch != 1 || ls.s.Total != 1 || ls.s.LastSeq != ms[3].seq {
		t.Fatalf("after the held events: epoch %d total %d last seq %d; want the reset, then one turn (seq %d)", ls.s.Epoch, ls.s.Total, ls.s.LastSeq, ms[3].seq)
	}
	if ls.s.Cursor != 0 || ls.s.Version != 0 {
		t.Fatalf("the abandoned fold moved the session: cursor %d version %d", ls.s.Cursor, ls.s.Version)
	}
}

// A rewind drops the events queued from the old consumer without applying
// or acking them (they come again, in order, after it), then forgets every
// session; what was checkpointed before stays.
func TestLoopRewindDropsTheQueuedEvents(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p, err := New(Config{FlushInterval: time.Hour}, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log})
	if err != nil {
		t.Fatal(err)
	}
	if p.outStrm, err = r.JS.Stream(ctx, r.Layout.Out); err != nil {
		t.Fatal(err)
	}
	sh := newShard(p, 0, ctx)
	r.Turns("s1", 3)
	ms := deliveries(t, r, p, 3)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sh.run()
	}()
	sh.in <- ms[0]
	sh.in <- ms[1]
	r.Eventually("the first two turns checkpointed", func() bool {
		s, _, err := r.Store.Load(ctx, "s1")
		return err == nil && s.LastSeq == ms[1].seq
	})
	p.cons.rewind.Store(true) // as requestRewind: the consumer stops dispatching
	sh.in <- ms[2]            // dispatched before it stopped
	rewound := make(chan struct{})
	sh.ctrl <- rewound
	<-rewound
	p.cons.rewind.Store(false)
	close(sh.in)
	<-done
	if len(sh.sessions) != 0 || sh.w.busy() || sh.w.acksWaiting() != 0 {
		t.Fatalf("after the rewind: %d sessions, writer busy %v, %d acks waiting; want all forgotten", len(sh.sessions), sh.w.busy(), sh.w.acksWaiting())
	}
	if s := r.Checkpoint("s1"); s.LastSeq != ms[1].seq {
		t.Fatalf("checkpoint at sequence %d after the rewind, want %d: the queued turn was applied", s.LastSeq, ms[1].seq)
	}
	cons, err := r.JS.Consumer(ctx, r.Layout.In, "loop")
	if err != nil {
		t.Fatal(err)
	}
	r.Eventually("the queued turn left unacked", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumAckPending == 1 && info.AckFloor.Stream == ms[1].seq
	})
}
