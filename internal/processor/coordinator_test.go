package processor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
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

func (l testLoop) withSession(id string, fn func(*live)) {
	if ls := l.session(id); ls != nil {
		fn(ls)
	}
}

func (l testLoop) unpark(string) {}

// coordRig is a coordinator and its checkpoint writer on a real broker
// and summarizer, with no event loop: the test applies events and hands
// fold results back itself.
type coordRig struct {
	*rig
	p    *Processor
	w    *checkpointWriter
	c    *coordinator
	a    *aside
	loop testLoop
}

func newCoordRig(t *testing.T, cfg Config) *coordRig {
	r := newRig(t)
	ctx := context.Background()
	cfg.RetryBackoff, cfg.RetryBackoffMax = time.Minute, time.Hour
	p, err := New(cfg, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log})
	if err != nil {
		t.Fatal(err)
	}
	if p.inStream, err = r.JS.Stream(ctx, r.Layout.In); err != nil {
		t.Fatal(err)
	}
	if p.outStrm, err = r.JS.Stream(ctx, r.Layout.Out); err != nil {
		t.Fatal(err)
	}
	cr := &coordRig{rig: r, p: p, loop: testLoop{testOwner: testOwner{}, p: p}}
	cr.w = newCheckpointWriter(p, cr.loop)
	cr.a = newAside(p.store, p.log)
	cr.c = newCoordinator(p, cr.w, cr.loop, cr.a, p.newRecorder(), ctx)
	return cr
}

// applied is session id with n turns published and applied to it, as the
// loop would apply them (nothing checkpointed).
func (cr *coordRig) applied(id string, n int) *live {
	cr.Turns(id, n)
	return cr.applyStream(id, n)
}

// applyStream applies the session's n events on the inbound stream to a
// new live session.
func (cr *coordRig) applyStream(id string, n int) *live {
	ls := &live{s: state.New(id)}
	ctx := context.Background()
	filter := cr.Layout.Subjects.InSession(id)
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
	cr := newCoordRig(t, Config{})
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
	c.resultBack()
	c.applyResult(cr.loop.session(r.job.session), r)
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
	if got := cr.Checkpoint("s1"); got.Cursor != 10 || got.Version != 1 || got.Lease != nil {
		t.Fatalf("checkpoint after landing: cursor %d version %d lease %+v", got.Cursor, got.Version, got.Lease)
	}
	sums := cr.Summaries("s1")
	if len(sums) != 1 || sums[0].Version != 1 || sums[0].Cursor != 10 {
		t.Fatalf("outbound summaries %+v, want version 1 at cursor 10", sums)
	}
	cr.Eventually("started, skipped (in flight) and completed published", func() bool {
		lc := cr.Lifecycle("s1")
		return hasType(lc, events.EventCompactionStarted, "") && hasType(lc, events.EventCompactionSkipped, "already_in_flight") &&
			hasType(lc, events.EventCompactionCompleted, "")
	})
}

// A fold whose summarizer fails moves nothing: the lease is cleared, the
// session backs off and is woken when the backoff ends, and the failure is
// published; a check before then does not call the model.
func TestCoordinatorFailedFoldBacksOff(t *testing.T) {
	cr := newCoordRig(t, Config{})
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
	c.resultBack()
	c.applyResult(cr.loop.session(r.job.session), r)
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
	cr.Eventually("compaction_failed published", func() bool { return hasType(cr.Lifecycle("s1"), events.EventCompactionFailed, "") })
	if len(cr.Summaries("s1")) != 0 {
		t.Fatal("a failed fold published a summary")
	}
}

// Abandoning a fold (a reset, an end) drops its lease at once and cancels
// it; the session waits for the result, which moves nothing when it comes
// back.
func TestCoordinatorAbandonedFoldMovesNothing(t *testing.T) {
	cr := newCoordRig(t, Config{})
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
	if ls.s.Lease != nil || ls.wait == nil || ls.wait.on != waitFold || c.waitOver(ls) {
		t.Fatalf("after abandon: lease %+v, wait %+v; want no lease and the session waiting for its fold", ls.s.Lease, ls.wait)
	}
	r := cr.result()
	c.resultBack()
	c.applyResult(cr.loop.session(r.job.session), r)
	if !c.waitOver(ls) || ls.running != "" || c.inFlight != 0 || !c.abandon(ls, "test") {
		t.Fatalf("after the result: wait %+v running %q in flight %d", ls.wait, ls.running, c.inFlight)
	}
	if ls.s.Cursor != 0 || ls.s.Version != 0 {
		t.Fatalf("abandoned fold moved the session: cursor %d version %d", ls.s.Cursor, ls.s.Version)
	}
}

// An eviction records its note off the loop: while it is being published
// the session starts nothing else, and it lands when its result is handed
// back (cursor, counters, version at the stored sequence). A refused
// publish that finds a stopped owner's note of the same turns adopts it.
func TestCoordinatorRecordsAnEvictionOffTheLoop(t *testing.T) {
	evictCfg := Config{
		Mode: fold.ModeEvict, RecallEnabled: true,
		Tokens: fold.TokenPolicy{ContextWindow: 2000, ReserveTokens: 200},
		Evict:  fold.EvictPolicy{TargetUtilization: 0.5, MinKeepMessages: 4},
	}
	t.Run("lands", func(t *testing.T) {
		cr := newCoordRig(t, evictCfg)
		c := cr.c
		cr.sizedTurns("ev", 0, 19, 100) // 1900 > 1800 tokens: evict 9 to reach 1000
		ls := cr.applyStream("ev", 19)
		c.evaluate(ls, "turn", false)
		if ls.s.Lease == nil || ls.running != ls.s.Lease.FoldID || c.inFlight != 1 || ls.s.Cursor != 0 {
			t.Fatalf("after the check: lease %+v running %q in flight %d cursor %d; want the eviction recording, nothing moved yet",
				ls.s.Lease, ls.running, c.inFlight, ls.s.Cursor)
		}
		c.evaluate(ls, "turn", false)
		if c.inFlight != 1 {
			t.Fatalf("%d in flight after a second check during the eviction, want 1", c.inFlight)
		}
		r := cr.result()
		if r.err != nil || r.seq == 0 || !r.out.Note {
			t.Fatalf("eviction result: err %v, stored at %d, note %v", r.err, r.seq, r.out.Note)
		}
		c.resultBack()
		c.applyResult(cr.loop.session(r.job.session), r)
		s := ls.s
		if s.Lease != nil || ls.running != "" || c.inFlight != 0 || s.Cursor != 9 || s.Evicted != 9 || s.Version != 1 || s.SummarySeq != r.seq {
			t.Fatalf("after landing: lease %+v running %q in flight %d cursor %d evicted %d version %d seq %d (stored %d)",
				s.Lease, ls.running, c.inFlight, s.Cursor, s.Evicted, s.Version, s.SummarySeq, r.seq)
		}
		if len(decodeAll[events.Evicted](cr.rig, "ev", events.KindEvicted)) != 1 {
			t.Fatal("no evicted event on the outbound stream")
		}
	})
	t.Run("adopts a stopped owner's note", func(t *testing.T) {
		cr := newCoordRig(t, evictCfg)
		c := cr.c
		foreign := events.SummaryUpdated{V: 1, Session: "ev", Version: 1, Cursor: 9, CoveredThroughTurn: 8,
			Summary: "[Context rolled: 9 messages evicted (900 tokens). Published by a stopped owner]",
			From:    t0, To: t0.Add(80 * time.Second), FoldedTurns: 9, OriginalTokens: 900, Mode: string(fold.ModeEvict),
			Tier: "evicted", Compactions: 1, Model: "none"}
		cr.Publish(cr.Layout.Subjects.Out("ev", events.KindSummary), foreign, events.RecordID("ev", events.KindSummary, 1))
		cr.sizedTurns("ev", 0, 19, 100)
		ls := cr.applyStream("ev", 19)
		c.evaluate(ls, "turn", false)
		r := cr.result()
		if !r.conflict {
			t.Fatalf("eviction result: err %v conflict %v, want a refused publish", r.err, r.conflict)
		}
		c.resultBack()
		c.applyResult(cr.loop.session(r.job.session), r)
		s := ls.s
		if s.Summary != foreign.Summary || s.Version != 1 || s.Cursor != 9 || s.Evicted != 9 || c.inFlight != 0 {
			t.Fatalf("after the refusal: summary %q version %d cursor %d evicted %d in flight %d; want the stopped owner's note adopted",
				s.Summary, s.Version, s.Cursor, s.Evicted, c.inFlight)
		}
		if n := len(cr.Summaries("ev")); n != 1 {
			t.Fatalf("%d summaries on the stream, want the stopped owner's only", n)
		}
	})
}

// Outbound events go out without waiting; their acks are checked later: a
// confirmed one is dropped, one the stream refused is logged, or has its
// failed action run when it has one.
func TestSentEventsAreCheckedForTheirAcks(t *testing.T) {
	r := newRig(t)
	var buf testlog.Buffer
	se := sentEvents{log: zerolog.New(&buf)}
	ok, err := r.JS.PublishAsync(r.Layout.Subjects.Out("s1", events.KindEvent), []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	se.add(sentEvent{f: ok, session: "s1", typ: "stored", at: time.Now()})
	// No stream holds this subject: the server answers no responders.
	refused, err := r.JS.PublishAsync("nowhere.s2", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	se.add(sentEvent{f: refused, session: "s2", typ: "refused", at: time.Now()})
	// One that says what to do when it is not stored: that, instead of a log.
	var lostErr error
	lost, err := r.JS.PublishAsync("nowhere.s3", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	se.add(sentEvent{f: lost, session: "s3", typ: "memory", at: time.Now(), failed: func(err error) { lostErr = err }})
	r.Eventually("all answered and checked", func() bool {
		se.check(time.Now())
		return len(se.waiting) == 0
	})
	lines := buf.Lines(t)
	if len(lines) != 1 || lines[0]["event"] != "publish_failed" || lines[0]["session"] != "s2" || lines[0]["type"] != "refused" {
		t.Fatalf("log %v, want one publish_failed, for the refused event", lines)
	}
	if lostErr == nil {
		t.Fatal("the failed action of an event not stored did not run")
	}
}

// Lifecycle events go out without an ack of their own, but for one every
// confirmEvery and those that carry an error: all are stored, and only
// those ask for an ack.
func TestLifecycleEventsAskForAnAckOnlyNowAndThen(t *testing.T) {
	r := newRig(t)
	rec := &recorder{js: r.JS, subj: r.Layout.Subjects, clock: &fakeClock{now: t0}, log: zerolog.Nop(), sent: sentEvents{log: zerolog.Nop()}}
	for _, typ := range []string{events.EventCompactionStarted, events.EventCompactionCompleted, events.EventCompactionStarted} {
		rec.event("s1", events.Lifecycle{Type: typ})
	}
	rec.event("s1", events.Lifecycle{Type: events.EventCompactionFailed, Error: "model down"})
	r.Eventually("all four stored", func() bool { return len(r.Lifecycle("s1")) == 4 })
	if n := len(rec.sent.waiting); n != 2 {
		t.Fatalf("%d events asked for an ack, want 2: the first, and the one with an error", n)
	}
	if w := rec.sent.waiting; w[0].before != 0 || w[1].before != 2 || w[1].typ != events.EventCompactionFailed {
		t.Fatalf("acked events %+v, want the first with none before it and the failure with the 2 sent without an ack", w)
	}
}

// A lifecycle event the stream does not store is logged with the number
// of events sent without an ack before it, which it stood for.
func TestRefusedLifecycleEventNamesTheUnconfirmedBeforeIt(t *testing.T) {
	r := newRig(t)
	var buf testlog.Buffer
	subj, err := events.NewSubjects("nowhere") // no stream holds its subjects
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{js: r.JS, subj: subj, clock: SystemClock{}, log: zerolog.Nop(), sent: sentEvents{log: zerolog.New(&buf)}}
	rec.confirmedAt = time.Now() // the last acked event just left
	for range 3 {
		rec.event("s1", events.Lifecycle{Type: events.EventCompactionStarted})
	}
	rec.confirmedAt = time.Now().Add(-confirmEvery)
	rec.event("s1", events.Lifecycle{Type: events.EventCompactionCompleted})
	r.Eventually("the acked one answered and checked", func() bool {
		rec.sent.check(time.Now())
		return len(rec.sent.waiting) == 0
	})
	lines := buf.Lines(t)
	if len(lines) != 1 || lines[0]["event"] != "publish_failed" || lines[0]["type"] != events.EventCompactionCompleted || lines[0]["unconfirmed_before"] != float64(3) {
		t.Fatalf("log %v, want one publish_failed for the completed event, with the 3 sent before it", lines)
	}
}

// A lifecycle event asks for an ack once confirmEvery has passed on the
// recorder's clock since the last one that did, as its time (At) is read
// from that clock.
func TestLifecycleEventAckFollowsTheRecordersClock(t *testing.T) {
	r := newRig(t)
	clk := &fakeClock{now: t0}
	rec := &recorder{js: r.JS, subj: r.Layout.Subjects, clock: clk, log: zerolog.Nop(), sent: sentEvents{log: zerolog.Nop()}}
	for range 3 {
		rec.event("s1", events.Lifecycle{Type: events.EventCompactionStarted})
		clk.add(confirmEvery)
	}
	r.Eventually("all three stored", func() bool { return len(r.Lifecycle("s1")) == 3 })
	if n := len(rec.sent.waiting); n != 3 {
		t.Fatalf("%d of 3 events asked for an ack, want each: confirmEvery passed on the recorder's clock before each", n)
	}
}
