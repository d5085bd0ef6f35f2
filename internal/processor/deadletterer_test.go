package processor

import (
	"context"
	"strconv"
	"testing"

	"github.com/foldstream/foldstream/internal/crashtest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
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
	dlq, err := r.JS.Stream(ctx, r.Layout.DLQ)
	if err != nil {
		t.Fatal(err)
	}
	dcfg := dlq.CachedInfo().Config
	if err := r.JS.DeleteStream(ctx, r.Layout.DLQ); err != nil {
		t.Fatal(err)
	}
	tries := make(chan *nats.Msg, 16)
	hole, err := r.NC.ChanSubscribe(r.Layout.Subjects.DeadLetterAll(), tries)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	p, _ := r.start(Config{Window: fold.Window{Recent: 6, Batch: 4}})
	r.publishTurns("g1", 0, 3)
	msg := nats.NewMsg(r.Layout.Subjects.In("s1", events.KindTurn))
	msg.Data = badTurn
	seq := r.publishRaw(msg)
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
	r.settle(expects...)
	for _, e := range expects {
		for _, p := range crashtest.Verify(ctx, r.env(), m, e) {
			t.Error(p)
		}
	}
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
	if err := hole.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.JS.CreateStream(ctx, dcfg); err != nil {
		t.Fatal(err)
	}
	r.waitAckedThrough(p, seq)
	var kept int
	for _, dl := range r.DeadLetters() {
		if dl.Header.Get(events.HeaderOriginalSeq) == strconv.FormatUint(seq, 10) {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("the rejected turn is %d times on the dead-letter stream, want once", kept)
	}
	if n := testutil.ToFloat64(p.m.deadLetters.WithLabelValues(keptLog)); n != 0 {
		t.Errorf("%v rejected events counted as kept in the log only, want 0", n)
	}
	if n := testutil.ToFloat64(p.m.rejected.WithLabelValues(events.CodeInvalidField)); n != 1 {
		t.Errorf("%v rejected events counted, want 1", n)
	}
}
