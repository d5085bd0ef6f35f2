package processor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
)

// testLoop is the event loop as the coordinator and the checkpoint writer
// see it, for tests that drive the coordinator on its own: a map of live
// sessions, loaded from their checkpoints on first use.
type testLoop struct {
	testOwner
	p *Processor
}

func (l testLoop) session(id string) *live {
	if ls, ok := l.testOwner[id]; ok {
		return ls
	}
	s, rev, err := l.p.store.Load(context.Background(), id)
	if err != nil {
		return nil
	}
	ls := &live{s: s, rev: rev}
	l.testOwner[id] = ls
	return ls
}

// coordRig is a coordinator and its checkpoint writer on a real broker
// and summarizer, with no event loop: the test applies events and hands
// fold results back itself.
type coordRig struct {
	*rig
	p    *Processor
	w    *checkpointWriter
	c    *coordinator
	loop testLoop
}

func newCoordRig(t *testing.T) *coordRig {
	r := newRig(t)
	ctx := context.Background()
	p, err := New(Config{RetryBackoff: time.Minute, RetryBackoffMax: time.Hour}, Deps{JS: r.js, Layout: r.layout, Store: r.store, Summarizer: r.sum, Log: r.log})
	if err != nil {
		t.Fatal(err)
	}
	if p.inStream, err = r.js.Stream(ctx, r.layout.In); err != nil {
		t.Fatal(err)
	}
	if p.outStrm, err = r.js.Stream(ctx, r.layout.Out); err != nil {
		t.Fatal(err)
	}
	cr := &coordRig{rig: r, p: p, loop: testLoop{testOwner: testOwner{}, p: p}}
	w := newCheckpointWriter(p, cr.loop)
	cr.w = &w
	cr.c = newCoordinator(p, cr.w, cr.loop, ctx)
	return cr
}

// applied is session id with n turns published and applied to it, as the
// loop would apply them (nothing checkpointed).
func (cr *coordRig) applied(id string, n int) *live {
	cr.turns(id, n)
	ls := &live{s: state.New(id)}
	ctx := context.Background()
	filter := cr.layout.Subjects.InSession(id)
	for next := uint64(1); ; {
		msg, err := cr.p.inStream.GetMsg(ctx, next, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			cr.t.Fatal(err)
		}
		next = msg.Sequence + 1
		_, kind, err := cr.p.subj.ParseIn(msg.Subject)
		if err != nil {
			cr.t.Fatal(err)
		}
		in, _, err := cr.p.adm.Admit(ls.s, kind, id, msg.Data, msg.Time)
		if err != nil {
			cr.t.Fatal(err)
		}
		if _, err := ls.s.Apply(msg.Sequence, in); err != nil {
			cr.t.Fatal(err)
		}
	}
	if ls.s.Total != int64(n) {
		cr.t.Fatalf("applied %d turns, want %d", ls.s.Total, n)
	}
	cr.loop.testOwner[id] = ls
	return ls
}

// result waits for the next fold result the coordinator's goroutines hand
// back.
func (cr *coordRig) result() foldResult {
	select {
	case r := <-cr.c.results:
		return r
	case <-time.After(20 * time.Second):
		cr.t.Fatal("no fold result")
		return foldResult{}
	}
}

// A fold the trigger check finds due starts under a lease of this owner,
// publishes its summary off the loop, and lands when its result is handed
// back: the cursor moves past the batch, the version is the one stored on
// the outbound stream, the lease is gone, and the session is written.
func TestCoordinatorStartsAndLandsAFold(t *testing.T) {
	cr := newCoordRig(t)
	c := cr.c
	ls := cr.applied("s1", 61) // recent window 50, batch 10: one batch due
	c.evaluate(ls, "turn", false)
	if ls.s.Lease == nil || ls.s.Lease.Owner != cr.p.cfg.InstanceID || ls.running != ls.s.Lease.FoldID || c.inFlight != 1 {
		t.Fatalf("after the check: lease %+v, running %q, %d in flight; want this owner's fold running", ls.s.Lease, ls.running, c.inFlight)
	}
	if ls.s.Lease.From != 0 || ls.s.Lease.To != 10 {
		t.Fatalf("leased turns %d..%d, want 0..10", ls.s.Lease.From, ls.s.Lease.To)
	}
	c.evaluate(ls, "generate", false) // asked again while it runs
	if c.inFlight != 1 {
		t.Fatalf("%d folds in flight after a second check, want the one", c.inFlight)
	}
	r := cr.result()
	if r.err != nil || r.seq == 0 {
		t.Fatalf("fold result: err %v, stored at %d", r.err, r.seq)
	}
	c.applyResult(r)
	s := ls.s
	if s.Cursor != 10 || s.Version != 1 || s.SummarySeq != r.seq || s.Lease != nil || ls.running != "" || c.inFlight != 0 {
		t.Fatalf("after landing: cursor %d version %d seq %d (stored %d) lease %+v running %q in flight %d",
			s.Cursor, s.Version, s.SummarySeq, r.seq, s.Lease, ls.running, c.inFlight)
	}
	if s.Summary != "Alice and Bob discussed messages 000 to 009." {
		t.Fatalf("summary %q", s.Summary)
	}
	if !ls.dirty {
		t.Fatal("the landed fold is not queued for a checkpoint")
	}
	cr.w.flush(true)
	cr.w.landSaves(<-cr.w.saves)
	if got := cr.checkpoint("s1"); got.Cursor != 10 || got.Version != 1 || got.Lease != nil {
		t.Fatalf("checkpoint after landing: cursor %d version %d lease %+v", got.Cursor, got.Version, got.Lease)
	}
	sums := cr.summaries("s1")
	if len(sums) != 1 || sums[0].Version != 1 || sums[0].Cursor != 10 {
		t.Fatalf("outbound summaries %+v, want version 1 at cursor 10", sums)
	}
	cr.eventually("started, skipped (in flight) and completed published", func() bool {
		lc := cr.lifecycle("s1")
		return hasType(lc, events.EventCompactionStarted, "") && hasType(lc, events.EventCompactionSkipped, "already_in_flight") &&
			hasType(lc, events.EventCompactionCompleted, "")
	})
}

// A fold whose summarizer fails moves nothing: the lease is cleared, the
// session backs off and is woken when the backoff ends, and the failure is
// published; a check before then does not call the model.
func TestCoordinatorFailedFoldBacksOff(t *testing.T) {
	cr := newCoordRig(t)
	cr.llm.SetFunc(func(int, openaitest.Request) openaitest.Reply { return openaitest.ServerError() })
	c := cr.c
	ls := cr.applied("s1", 61)
	c.evaluate(ls, "turn", false)
	if ls.running == "" {
		t.Fatal("no fold started")
	}
	r := cr.result()
	if r.err == nil || !r.model {
		t.Fatalf("fold result: err %v (model %v), want the summarizer's failure", r.err, r.model)
	}
	before := time.Now()
	c.applyResult(r)
	s := ls.s
	if s.Cursor != 0 || s.Version != 0 || s.Lease != nil || s.Failures != 1 || c.inFlight != 0 {
		t.Fatalf("after the failure: cursor %d version %d lease %+v failures %d in flight %d", s.Cursor, s.Version, s.Lease, s.Failures, c.inFlight)
	}
	if !s.RetryAfter.After(before) || !c.waking("s1") || !c.wake["s1"].Equal(s.RetryAfter) {
		t.Fatalf("retry after %v, wake %v (set %v): want a wake at the backoff's end", s.RetryAfter, c.wake["s1"], c.waking("s1"))
	}
	calls := cr.llm.Calls()
	c.evaluate(ls, "turn", false)
	if ls.running != "" || c.inFlight != 0 || cr.llm.Calls() != calls {
		t.Fatal("a check during the backoff started a fold")
	}
	cr.eventually("compaction_failed published", func() bool { return hasType(cr.lifecycle("s1"), events.EventCompactionFailed, "") })
	if len(cr.summaries("s1")) != 0 {
		t.Fatal("a failed fold published a summary")
	}
}

// Abandoning a fold (a reset, an end) drops its lease at once and cancels
// it; the session waits for the result, which moves nothing when it comes
// back.
func TestCoordinatorAbandonedFoldMovesNothing(t *testing.T) {
	cr := newCoordRig(t)
	release := make(chan struct{})
	defer close(release)
	cr.llm.SetFunc(func(int, openaitest.Request) openaitest.Reply {
		<-release
		return openaitest.OK("late")
	})
	c := cr.c
	ls := cr.applied("s1", 61)
	c.evaluate(ls, "turn", false)
	if ls.running == "" {
		t.Fatal("no fold started")
	}
	if c.abandon(ls, "test") { // the summarizer is still thinking
		t.Fatal("abandon reported the fold over while it runs")
	}
	if ls.s.Lease != nil || ls.wait != waitFold || c.waitOver(ls) {
		t.Fatalf("after abandon: lease %+v, wait %d; want no lease and the session waiting for its fold", ls.s.Lease, ls.wait)
	}
	c.applyResult(cr.result())
	if !c.waitOver(ls) || ls.running != "" || c.inFlight != 0 || !c.abandon(ls, "test") {
		t.Fatalf("after the result: wait %d running %q in flight %d", ls.wait, ls.running, c.inFlight)
	}
	if ls.s.Cursor != 0 || ls.s.Version != 0 {
		t.Fatalf("abandoned fold moved the session: cursor %d version %d", ls.s.Cursor, ls.s.Version)
	}
}
