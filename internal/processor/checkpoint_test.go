package processor

import (
	"context"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// testOwner is the loop as the checkpoint writer sees it, for tests that
// drive the writer on its own: a map of live sessions.
type testOwner map[string]*live

func (o testOwner) holds(ls *live) bool { return o[ls.s.ID] == ls }
func (o testOwner) drop(id string)      { delete(o, id) }

// writerRig is a checkpoint writer on a real KV bucket, with n turns of
// session s1 on the inbound stream delivered to a consumer nobody acks.
type writerRig struct {
	*rig
	p     *Processor
	w     *checkpointWriter
	own   testOwner
	cons  jetstream.Consumer
	msgs  []jetstream.Msg
	ls    *live
	nextM int
	// acks receives every ack published on the server, and the markers
	// (acksSent).
	acks chan *nats.Msg
}

func newWriterRig(t *testing.T, n int) *writerRig {
	r := newRig(t)
	ctx := context.Background()
	p, err := New(Config{}, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log})
	if err != nil {
		t.Fatal(err)
	}
	wr := &writerRig{rig: r, p: p, own: testOwner{}}
	wr.w = newCheckpointWriter(p, wr.own)
	r.Turns("s1", n)
	wr.cons, err = r.JS.CreateOrUpdateConsumer(ctx, r.Layout.In, jetstream.ConsumerConfig{Durable: "writer", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := wr.cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		wr.msgs = append(wr.msgs, m)
	}
	if len(wr.msgs) != n {
		t.Fatalf("fetched %d turns, want %d", len(wr.msgs), n)
	}
	wr.ls = &live{s: state.New("s1")}
	wr.own["s1"] = wr.ls
	nc, _ := r.Client("acks")
	wr.acks = make(chan *nats.Msg, 64)
	for _, subj := range []string{"$JS.ACK.>", ackMarker} {
		if _, err := nc.ChanSubscribe(subj, wr.acks); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return wr
}

const ackMarker = "test.acks.marker"

// acksSent returns how many acks the writer sent since the last call: it
// publishes a marker on the writer's connection, behind whatever that
// connection sent before, and counts the acks that reach the subscriber
// before the marker does (one publisher's messages reach a subscriber in
// order).
func (wr *writerRig) acksSent() int {
	wr.t.Helper()
	if err := wr.p.js.Conn().Publish(ackMarker, nil); err != nil {
		wr.t.Fatal(err)
	}
	n := 0
	for {
		select {
		case m := <-wr.acks:
			if m.Subject == ackMarker {
				return n
			}
			n++
		case <-time.After(20 * time.Second):
			wr.t.Fatal("the ack marker never arrived")
		}
	}
}

// take applies the next delivery to the session, as the loop would, and
// hands its ack to the writer.
func (wr *writerRig) take() {
	m := wr.msgs[wr.nextM]
	wr.nextM++
	md, err := m.Metadata()
	if err != nil {
		wr.t.Fatal(err)
	}
	wr.ls.s.LastSeq = md.Sequence.Stream
	wr.w.addAck(wr.ls, m)
}

func (wr *writerRig) ackPending() int {
	info, err := wr.cons.Info(context.Background())
	if err != nil {
		wr.t.Fatal(err)
	}
	return info.NumAckPending
}

// Acks go out only once the write that covers them is stored, and the
// stored checkpoint is the session's; a write that finds another owner's
// revision drops the session, sends none of its acks, and asks for a
// rewind.
func TestCheckpointWriterAcksAfterTheCoveringWrite(t *testing.T) {
	wr := newWriterRig(t, 4)
	w, ls := wr.w, wr.ls
	for range 3 {
		wr.take()
	}
	if n := wr.acksSent(); n != 0 {
		t.Fatalf("%d acks sent before any checkpoint, want none", n)
	}
	w.flush(true)
	if w.writes != 1 || !ls.writing {
		t.Fatalf("flush: %d writes in flight (writing %v), want the session's one", w.writes, ls.writing)
	}
	w.landSaves(<-w.saves)
	if w.pending != 0 || len(ls.acks) != 0 || w.busy() {
		t.Fatalf("after the write: %d acks pending, busy %v, want none", w.pending, w.busy())
	}
	wr.Eventually("the three covered deliveries acked", func() bool { return wr.ackPending() == 1 })
	if n := wr.acksSent(); n != 3 {
		t.Fatalf("%d acks sent with the write, want the three it covers", n)
	}
	if got := wr.Checkpoint("s1"); got.LastSeq != ls.s.LastSeq {
		t.Fatalf("stored checkpoint at sequence %d, the session at %d", got.LastSeq, ls.s.LastSeq)
	}

	// Another owner writes the session: our next write conflicts.
	ctx := context.Background()
	other := wr.Checkpoint("s1")
	_, rev, err := wr.Store.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wr.Store.Save(ctx, other, rev); err != nil {
		t.Fatal(err)
	}
	wr.take()
	w.flush(true)
	w.landSaves(<-w.saves)
	if _, kept := wr.own["s1"]; kept {
		t.Fatal("the session stayed in memory after its write met another owner's revision")
	}
	if !wr.p.cons.rewinding() {
		t.Fatal("no rewind asked for after a conflicting checkpoint")
	}
	if w.pending != 0 {
		t.Fatalf("%d acks still counted after the session was dropped", w.pending)
	}
	if n := wr.acksSent(); n != 0 {
		t.Fatalf("%d acks sent after the conflict, want none", n)
	}
	if n := wr.ackPending(); n != 1 {
		t.Fatalf("%d deliveries unacked after the conflict, want the uncovered one", n)
	}
}

// A session changed while its write is in flight is written again once
// that write is back, on the revision it returned: a second write of the
// same session never races the first, and each ack goes out with the
// write that covers it.
func TestCheckpointWriterOneWriteOfASessionAtATime(t *testing.T) {
	wr := newWriterRig(t, 3)
	w, ls := wr.w, wr.ls
	wr.take()
	w.flush(true)
	wr.take()
	wr.take()
	w.flush(true) // the first write is not back: the session waits its turn
	if w.writes != 1 || len(w.dirty) != 1 || len(ls.acks) != 3 {
		t.Fatalf("second flush during the first write: %d writes, %d dirty, %d acks held; want 1, 1, 3", w.writes, len(w.dirty), len(ls.acks))
	}
	w.landSaves(<-w.saves)
	if len(ls.acks) != 2 || w.pending != 2 {
		t.Fatalf("after the first write: %d acks held (%d pending), want the two it did not cover", len(ls.acks), w.pending)
	}
	wr.Eventually("the first delivery acked", func() bool { return wr.ackPending() == 2 })
	w.flush(true)
	w.landSaves(<-w.saves)
	if _, kept := wr.own["s1"]; !kept || wr.p.cons.rewinding() {
		t.Fatalf("the second write conflicted with the first (kept %v, rewind %v)", kept, wr.p.cons.rewinding())
	}
	wr.Eventually("every delivery acked", func() bool { return wr.ackPending() == 0 })
	if got := wr.Checkpoint("s1"); got.LastSeq != ls.s.LastSeq {
		t.Fatalf("stored checkpoint at sequence %d, the session at %d", got.LastSeq, ls.s.LastSeq)
	}
	if w.busy() {
		t.Fatal("the writer is still busy after every write landed")
	}
}
