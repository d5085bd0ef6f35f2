package processor

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/crashtest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestSlowDeadLetterStreamDoesNotHoldUpTheLoop: with the dead-letter
// stream not answering (a subscriber that never replies stands where the
// stream was, so every publish times out), a rejected turn of session s1
// is being retried while s1's later turns and g1's are applied and folded
// exactly; the rejected turn is not acked meanwhile. Once the stream is
// back, the rejected turn is kept there exactly once (not in the log only)
// and acked.
func TestSlowDeadLetterStreamDoesNotHoldUpTheLoop(t *testing.T) {
	r, m := newModelRig(t, retry.Policy{MaxAttempts: 1})
	ctx := context.Background()
	tries, restore := r.silenceDeadLetters()
	// Tried until the stream is back, however long the sessions take to
	// settle on a loaded machine.
	p, _ := r.start(Config{Window: fold.Window{Recent: 6, Batch: 4}, deadLetterAttempts: 1000})
	r.publishTurns("g1", 0, 3)
	seq := r.publishBadTurn("s1")
	tried := <-tries // the dead-letter copy is on its way, unanswered
	if got := tried.Header.Get(events.HeaderOriginalSeq); got != strconv.FormatUint(seq, 10) {
		t.Fatalf("dead letter of sequence %s, want %d", got, seq)
	}
	r.publishTurns("g1", 3, 14)
	r.publishTurns("s1", 0, 14)
	expects := []crashtest.Expect{
		{Session: "g1", Turns: 14, Recent: 6, Batch: 4, MaxSummaryChars: 1200},
		{Session: "s1", Turns: 14, Recent: 6, Batch: 4, MaxSummaryChars: 1200},
	}
	r.settleExactly(m, expects...)
	// Still being retried: nothing kept, not even in the log, and the
	// rejected turn not acked before its dead letter is kept.
	if n := testutil.ToFloat64(p.m.deadLetters.WithLabelValues(keptLog)) + testutil.ToFloat64(p.m.deadLetters.WithLabelValues(keptCopy)) +
		testutil.ToFloat64(p.m.deadLetters.WithLabelValues(keptReference)); n != 0 {
		t.Fatalf("%v dead letters counted while the dead-letter stream was not answering", n)
	}
	c, err := r.JS.Consumer(ctx, r.Layout.In, p.cfg.Consumer)
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream >= seq || info.NumAckPending == 0 {
		t.Errorf("the rejected turn (sequence %d) was acked before its dead letter was kept: ack floor %d, %d pending",
			seq, info.AckFloor.Stream, info.NumAckPending)
	}

	// The stream is back: the next try stores it.
	restore()
	r.waitAckedThrough(p, seq)
	if kept := r.deadLetteredTimes(seq); kept != 1 {
		t.Errorf("the rejected turn is %d times on the dead-letter stream, want once", kept)
	}
	if n := testutil.ToFloat64(p.m.deadLetters.WithLabelValues(keptLog)); n != 0 {
		t.Errorf("%v rejected events counted as kept in the log only, want 0", n)
	}
	if n := testutil.ToFloat64(p.m.rejected.WithLabelValues(events.CodeInvalidField)); n != 1 {
		t.Errorf("%v rejected events counted, want 1", n)
	}
}

// TestRejectedEventHeldAtACrashIsKeptAfterRestart: a processor crashes (its
// connection cut) while its dead-letter worker still retries a rejected
// turn of s1, after s1's later turns were applied and checkpointed. The
// rejected turn was never acked, so the next processor gets it again,
// behind s1's checkpoint: it is rejected again, not taken as applied
// before, and kept on the dead-letter stream exactly once.
func TestRejectedEventHeldAtACrashIsKeptAfterRestart(t *testing.T) {
	r, m := newModelRig(t, retry.Policy{MaxAttempts: 1})
	ctx := context.Background()
	tries, restore := r.silenceDeadLetters()
	cfg := Config{Window: fold.Window{Recent: 6, Batch: 4}, RetryBackoff: 50 * time.Millisecond, FlushInterval: 5 * time.Millisecond,
		FoldTimeout: 10 * time.Second, ShutdownGrace: time.Second, deadLetterAttempts: 1000} // still trying when the connection is cut
	nc1, js1 := r.Client("crashing")
	kv1, err := js1.KeyValue(ctx, r.Layout.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := New(cfg, Deps{JS: js1, Layout: r.Layout, Store: state.NewStore(js1, kv1), Summarizer: r.sum, Log: r.Log, Clock: SystemClock{}})
	if err != nil {
		t.Fatal(err)
	}
	stop1 := brokertest.RunEngine(t, p1)
	seq := r.publishBadTurn("s1")
	<-tries // the dead-letter copy is on its way, unanswered
	r.publishTurns("s1", 0, 14)
	expect := crashtest.Expect{Session: "s1", Turns: 14, Recent: 6, Batch: 4, MaxSummaryChars: 1200}
	r.settle(expect)
	if s := r.Checkpoint("s1"); s.LastSeq <= seq {
		t.Fatalf("s1's checkpoint is at sequence %d, not past the rejected turn's %d", s.LastSeq, seq)
	}
	nc1.Close()
	stop1()

	restore()
	p, _ := r.start(Config{Window: fold.Window{Recent: 6, Batch: 4}})
	_, last := r.inboundLast(r.Layout.Subjects.In("s1", events.KindTurn))
	r.waitAckedThrough(p, last)
	if kept := r.deadLetteredTimes(seq); kept != 1 {
		t.Errorf("the rejected turn is %d times on the dead-letter stream, want once", kept)
	}
	r.settleExactly(m, expect)
}

// TestFullDeadLetterQueueGoesToTheLogWhileTheStreamIsDown: with the
// dead-letter stream not answering, more rejected turns than the worker's
// queue holds arrive: the ones that find it full are kept in the log at
// once (dead_letter_failed, kept="log") and acked, the others wait in the
// queue; another session's turns are applied meanwhile. Once the stream is
// back every rejected turn is accounted for exactly once: on the
// dead-letter stream or in the log, and all are acked.
func TestFullDeadLetterQueueGoesToTheLogWhileTheStreamIsDown(t *testing.T) {
	r, m := newModelRig(t, retry.Policy{MaxAttempts: 1})
	ctx := context.Background()
	tries, restore := r.silenceDeadLetters()
	p, _ := r.start(Config{Window: fold.Window{Recent: 6, Batch: 4}})
	seqs := []uint64{r.publishBadTurn("s1")}
	select {
	case <-tries: // the worker is on it, unanswered
	case <-time.After(20 * time.Second):
		t.Fatal("no dead-letter publish tried in 20 s")
	}
	for range deadLetterQueue + 8 {
		seqs = append(seqs, r.publishBadTurn("s1"))
	}
	r.publishTurns("g1", 0, 14)
	expect := crashtest.Expect{Session: "g1", Turns: 14, Recent: 6, Batch: 4, MaxSummaryChars: 1200}
	r.settle(expect)
	r.Eventually("rejected turns that found the queue full kept in the log", func() bool {
		return testutil.ToFloat64(p.m.deadLetters.WithLabelValues(keptLog)) >= 8
	})

	restore()
	r.waitAckedThrough(p, seqs[len(seqs)-1])
	onDLQ := map[string]int{}
	for _, dl := range r.DeadLetters() {
		onDLQ[dl.Header.Get(events.HeaderOriginalSeq)]++
	}
	for seq, n := range onDLQ {
		if n != 1 {
			t.Errorf("sequence %s is %d times on the dead-letter stream", seq, n)
		}
	}
	logged := testutil.ToFloat64(p.m.deadLetters.WithLabelValues(keptLog))
	if got := float64(len(onDLQ)) + logged; got != float64(len(seqs)) {
		t.Errorf("%d rejected turns on the dead-letter stream and %v in the log only, want %d in all", len(onDLQ), logged, len(seqs))
	}
	if len(onDLQ) < deadLetterQueue {
		t.Errorf("only %d rejected turns kept on the dead-letter stream, want the %d the queue held", len(onDLQ), deadLetterQueue)
	}
	for _, p := range crashtest.Verify(ctx, r.env(), m, expect) {
		t.Error(p)
	}
}

// silenceDeadLetters deletes the rig's dead-letter stream and subscribes
// where it was, so every dead-letter publish times out unanswered; tries
// receives each attempt (the buffer is large enough for the tests' bursts:
// a dropped one would only be a slow-consumer error). restore brings the
// stream back as it was.
func (r *rig) silenceDeadLetters() (tries chan *nats.Msg, restore func()) {
	r.t.Helper()
	ctx := context.Background()
	dlq, err := r.JS.Stream(ctx, r.Layout.DLQ)
	if err != nil {
		r.t.Fatal(err)
	}
	cfg := dlq.CachedInfo().Config
	if err := r.JS.DeleteStream(ctx, r.Layout.DLQ); err != nil {
		r.t.Fatal(err)
	}
	tries = make(chan *nats.Msg, 4096)
	hole, err := r.NC.ChanSubscribe(r.Layout.Subjects.DeadLetterAll(), tries)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.NC.Flush(); err != nil {
		r.t.Fatal(err)
	}
	return tries, func() {
		r.t.Helper()
		if err := hole.Unsubscribe(); err != nil {
			r.t.Fatal(err)
		}
		if _, err := r.JS.CreateStream(ctx, cfg); err != nil {
			r.t.Fatal(err)
		}
	}
}

// TestRedeliveredRejectionIsHeldOnce: a rejected turn waits with the
// dead-letter worker longer than AckWait (the dead-letter stream does not
// answer), so the server delivers it again, more than once. A redelivery
// only replaces the delivery the worker acks: the turn is reported
// rejected once (one event_rejected, one count), kept once when the stream
// is back, and acked.
func TestRedeliveredRejectionIsHeldOnce(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	tries, restore := r.silenceDeadLetters()
	p, _ := r.start(Config{Window: fold.Window{Recent: 6, Batch: 4}, AckWait: 300 * time.Millisecond, deadLetterAttempts: 1000})
	seq := r.publishBadTurn("s1")
	<-tries
	r.Eventually("the rejected turn delivered twice more", func() bool {
		c, err := r.JS.Consumer(ctx, r.Layout.In, p.ConsumerName())
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.Delivered.Consumer >= 3
	})
	restore()
	r.waitAckedThrough(p, seq)
	if kept := r.deadLetteredTimes(seq); kept != 1 {
		t.Errorf("the rejected turn is %d times on the dead-letter stream, want once", kept)
	}
	if n := testutil.ToFloat64(p.m.rejected); n != 1 {
		t.Errorf("rejected counted %v times, want once", n)
	}
	var reported int
	for _, ev := range decodeAll[events.Lifecycle](r, "s1", events.KindEvent) {
		if ev.Type == events.EventRejected {
			reported++
		}
	}
	if reported != 1 {
		t.Errorf("%d event_rejected for one rejected turn, want 1", reported)
	}
}

// deadLetteredTimes counts the dead letters of the inbound message at seq.
func (r *rig) deadLetteredTimes(seq uint64) int {
	r.t.Helper()
	var n int
	for _, dl := range r.DeadLetters() {
		if dl.Header.Get(events.HeaderOriginalSeq) == strconv.FormatUint(seq, 10) {
			n++
		}
	}
	return n
}

// settleExactly waits until every expected session settles, then checks
// each against the model: every turn once, in order, folded as expected.
func (r *rig) settleExactly(m *crashtest.Model, expects ...crashtest.Expect) {
	r.t.Helper()
	r.settle(expects...)
	for _, e := range expects {
		for _, p := range crashtest.Verify(context.Background(), r.env(), m, e) {
			r.t.Error(p)
		}
	}
}

// publishBadTurn publishes a turn the processor rejects (badTurn) for
// session and returns its inbound sequence.
func (r *rig) publishBadTurn(session string) uint64 {
	r.t.Helper()
	msg := nats.NewMsg(r.Layout.Subjects.In(session, events.KindTurn))
	msg.Data = badTurn
	return r.publishRaw(msg)
}
