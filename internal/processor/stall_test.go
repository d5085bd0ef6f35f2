package processor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/crashtest"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// competingPull takes one delivery of the processor's consumer away from
// it (a second pull on the same durable, as a consumer leader failing
// mid-delivery would lose it) and sends its stream sequence, never acked;
// the channel closes without one if nothing came within wait. It returns
// once the pull is waiting beside the processor's.
func (r *rig) competingPull(wait time.Duration) <-chan uint64 {
	r.t.Helper()
	ctx := context.Background()
	cons, err := r.JS.Consumer(ctx, r.Layout.In, "foldstream")
	if err != nil {
		r.t.Fatal(err)
	}
	lost := make(chan uint64, 1)
	go func() {
		defer close(lost)
		b, err := cons.Fetch(1, jetstream.FetchMaxWait(wait))
		if err != nil {
			return
		}
		for msg := range b.Messages() {
			md, _ := msg.Metadata()
			lost <- md.Sequence.Stream
		}
	}()
	r.Eventually("the competing pull to wait", func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.NumWaiting >= 2
	})
	return lost
}

// The last delivery of a burst that never reaches the processor leaves no
// later delivery to reveal the gap: without the stall watch it would sit
// unacked until AckWait (here two minutes). The watch sees the consumer
// ahead of what the engine received and rewinds within seconds.
func TestLostLastDeliveryIsRecoveredBeforeAckWait(t *testing.T) {
	r, m := newModelRig(t, retry.Policy{MaxAttempts: 1})
	p, _ := r.start(Config{Window: fold.Window{Recent: 6, Batch: 4}, AckWait: 2 * time.Minute})
	r.publishTurns("s1", 0, 3)
	r.Settled("s1", 3, 0)
	ctx := context.Background()
	lost := r.competingPull(20 * time.Second)
	// One turn at a time until the competing pull takes one: the taken
	// delivery is then the last one, with nothing after it.
	total := 3
	for taken := false; !taken && total < 40; {
		r.publishTurns("s1", total, total+1)
		total++
		select {
		case seq, ok := <-lost:
			if !ok {
				t.Fatal("the competing pull got nothing")
			}
			t.Logf("the delivery of stream sequence %d did not reach the processor", seq)
			taken = true
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.Settled("s1", int64(total), 0)
	if got := testutil.ToFloat64(p.m.rewinds); got < 1 {
		t.Errorf("rewinds = %v, want the stall watch's rewind", got)
	}
	for _, prob := range crashtest.Verify(ctx, r.env(), m, crashtest.Expect{Session: "s1", Turns: total, Recent: 6, Batch: 4, MaxSummaryChars: 1200}) {
		t.Error(prob)
	}
}

// A re-attach whose delete succeeded and whose create failed leaves no
// consumer, and so no ack floor: the next attach starts after the floor
// it saw last, not from the stream's first event.
func TestReattachWithoutConsumerKeepsTheFloor(t *testing.T) {
	r := newRig(t)
	p, _ := r.start(Config{})
	r.Turns("s1", 20)
	r.Settled("s1", 20, 0)
	ctx := context.Background()
	attachedAfter := func(startSeq uint64) bool {
		cons, err := r.JS.Consumer(ctx, r.Layout.In, "foldstream")
		if err != nil {
			return false
		}
		info, err := cons.Info(ctx)
		return err == nil && info.Config.OptStartSeq == startSeq
	}
	p.cons.requestRewind("test", errors.New("a rewind, to read the floor"))
	r.Eventually("re-attached after the ack floor", func() bool { return attachedAfter(21) })
	// As if the next re-attach deleted the consumer and could not create it.
	if err := r.JS.DeleteConsumer(ctx, r.Layout.In, "foldstream"); err != nil {
		t.Fatal(err)
	}
	p.cons.requestRewind("test", errors.New("a rewind with the consumer gone"))
	r.Eventually("re-attached after the remembered floor", func() bool { return attachedAfter(21) })
	r.Turns("s1", 1)
	r.Settled("s1", 21, 0)
	if got := testutil.ToFloat64(p.m.redelivered); got != 0 {
		t.Errorf("%v events redelivered, want none: the stream was read again from its start", got)
	}
}

// A consumer the watch cannot read while no delivery comes (deleted under
// the engine, or with no leader after a node went away) is reported as a
// stall: the iterator would otherwise wait on a pull nobody answers, and
// nothing else notices. Gone: on the second sighting, as for any answer.
// Unanswered for another reason: after stallUnanswered checks in a row.
func TestStallWatchRewindsWhenTheConsumerCannotBeRead(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	cons, err := r.JS.CreateOrUpdateConsumer(ctx, r.Layout.In, jetstream.ConsumerConfig{Durable: "probe", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var w stallWatch
	if err := w.check(ctx, cons, 0); err != nil {
		t.Fatalf("an empty, readable consumer is quiet, not stuck: %v", err)
	}
	if err := r.JS.DeleteConsumer(ctx, r.Layout.In, "probe"); err != nil {
		t.Fatal(err)
	}
	if err := w.check(ctx, cons, 0); err != nil {
		t.Fatalf("first sighting of a gone consumer: %v, want a second look first", err)
	}
	if err := w.check(ctx, cons, 0); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("second sighting of a gone consumer: %v, want a stall naming it", err)
	}

	// No JetStream answering at all: every question fails, whatever the error.
	cons, err = r.JS.CreateOrUpdateConsumer(ctx, r.Layout.In, jetstream.ConsumerConfig{Durable: "probe2", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	w = stallWatch{}
	if err := r.NS.DisableJetStream(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= stallUnanswered; i++ {
		err := w.check(ctx, cons, 0)
		if w.err == nil {
			t.Fatalf("check %d: the consumer answered with JetStream disabled", i)
		}
		if (err != nil) != (i == stallUnanswered) {
			t.Fatalf("check %d of %d unanswered: %v", i, stallUnanswered, err)
		}
	}
}

// An attach that fails for a reason that passes (a cluster's meta group
// electing a leader answers 503; a partition guard's KV read times out) is
// retried with backoff until it succeeds, the first attach too; after
// leaderlessAttempts 503s in a row the connection moves to another server;
// an attach that time cannot fix ends Run with the error.
func TestAttachRetriesTransientFailures(t *testing.T) {
	r := newRig(t)
	var calls atomic.Int32
	transient := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	p, err := New(Config{FlushInterval: 5 * time.Millisecond}, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log,
		BeforeAttach: func(context.Context) error {
			switch n := calls.Add(1); {
			case n == 1:
				return fmt.Errorf("ownership unknown: %w", nats.ErrTimeout)
			case n <= 1+leaderlessAttempts:
				return transient
			}
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("Run gave up on a transient attach failure: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("not attached within 20 s")
	}
	r.Turns("s1", 3)
	r.Settled("s1", 3, 0)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, want := calls.Load(), int32(2+leaderlessAttempts); n != want {
		t.Errorf("%d attach attempts, want %d (a timeout, %d refusals, then the attach)", n, want, leaderlessAttempts)
	}
	// Refused that many times in a row by the server it is connected to,
	// the engine moved its connection (a node without a meta leader
	// refuses every create; another may not).
	if got := r.NC.Stats().Reconnects; got < 1 {
		t.Errorf("%d reconnects after %d refusals in a row, want the connection moved", got, leaderlessAttempts)
	}

	fatal := errors.New("partition 3: not the owner")
	p, err = New(Config{}, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log,
		BeforeAttach: func(context.Context) error { return fatal }})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- p.Run(context.Background()) }()
	select {
	case err := <-ran:
		if !errors.Is(err, fatal) {
			t.Fatalf("Run = %v, want the attach's error", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run kept retrying an attach that cannot succeed")
	}
}
