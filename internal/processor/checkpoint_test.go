package processor

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The checkpoint writer on its own, on a shard that is not running: acks
// go out only once the write that covers them is stored, and the stored
// checkpoint is the session's; a write that finds another owner's
// revision drops the session, sends none of its acks, and asks for a
// rewind.
func TestCheckpointWriterAcksAfterTheCoveringWrite(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	p, err := New(Config{}, Deps{JS: r.js, Layout: r.layout, Store: r.store, Summarizer: r.sum, Log: r.log})
	if err != nil {
		t.Fatal(err)
	}
	sh := newShard(p, 0, ctx)
	r.turns("s1", 4)
	cons, err := r.js.CreateOrUpdateConsumer(ctx, r.layout.In, jetstream.ConsumerConfig{Durable: "writer", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(4, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != 4 {
		t.Fatalf("fetched %d turns, want 4", len(msgs))
	}
	ackPending := func() int {
		info, err := cons.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.NumAckPending
	}
	ls, err := sh.get("s1")
	if err != nil {
		t.Fatal(err)
	}
	take := func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		ls.s.LastSeq = md.Sequence.Stream // as if applied
		sh.addAck(ls, m)
	}
	for _, m := range msgs[:3] {
		take(m)
	}
	time.Sleep(100 * time.Millisecond) // an ack sent too early would have reached the server
	if n := ackPending(); n != 4 {
		t.Fatalf("%d deliveries unacked before any checkpoint, want 4", n)
	}
	sh.flush(true)
	if sh.writes != 1 || !ls.writing {
		t.Fatalf("flush: %d writes in flight (writing %v), want the session's one", sh.writes, ls.writing)
	}
	sh.landSaves(<-sh.saves)
	if sh.pending != 0 || len(ls.acks) != 0 {
		t.Fatalf("after the write: %d acks pending, want none", sh.pending)
	}
	r.eventually("the three covered deliveries acked", func() bool { return ackPending() == 1 })
	if got := r.checkpoint("s1"); got.LastSeq != ls.s.LastSeq {
		t.Fatalf("stored checkpoint at sequence %d, the session at %d", got.LastSeq, ls.s.LastSeq)
	}

	// Another owner writes the session: our next write conflicts.
	other := r.checkpoint("s1")
	_, rev, err := r.store.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Save(ctx, other, rev); err != nil {
		t.Fatal(err)
	}
	take(msgs[3])
	sh.flush(true)
	sh.landSaves(<-sh.saves)
	if _, kept := sh.sessions["s1"]; kept {
		t.Fatal("the session stayed in memory after its write met another owner's revision")
	}
	if !p.rewind.Load() {
		t.Fatal("no rewind asked for after a conflicting checkpoint")
	}
	time.Sleep(100 * time.Millisecond)
	if n := ackPending(); n != 1 {
		t.Fatalf("%d deliveries unacked after the conflict, want the uncovered one", n)
	}
}
