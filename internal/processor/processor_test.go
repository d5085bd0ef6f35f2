package processor

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// Window mode's progression: nothing at 60 turns, 61 folds 0..9, 71 folds 10..19.
func TestWindowProgression(t *testing.T) {
	r := newRig(t)
	p, _ := r.start(Config{})
	r.Turns("s1", 60)
	s := r.Settled("s1", 60, 0)
	if s.Version != 0 || r.llm.Calls() != 0 {
		t.Fatalf("folded below threshold: version %d, calls %d", s.Version, r.llm.Calls())
	}
	if len(s.Turns) != 60 {
		t.Fatalf("verbatim window holds %d turns, want 60", len(s.Turns))
	}

	r.Turns("s1", 1) // 61
	s = r.Settled("s1", 61, 10)
	if s.Version != 1 || s.CoveredThrough != 9 || s.Summary != "Alice and Bob discussed messages 000 to 009." {
		t.Fatalf("after 61: %+v", s)
	}
	if first, last := foldedRange(r.llm.Requests()[0]); first != "000" || last != "009" {
		t.Fatalf("first fold carried messages %s..%s, want 000..009", first, last)
	}

	r.Turns("s1", 9) // 70: waits
	s = r.Settled("s1", 70, 10)
	if s.Version != 1 {
		t.Fatalf("folded at 70: version %d", s.Version)
	}
	r.Turns("s1", 1) // 71
	s = r.Settled("s1", 71, 20)
	if s.Version != 2 || s.CoveredThrough != 19 || len(s.Turns) != 51 {
		t.Fatalf("after 71: version %d covered %d verbatim %d", s.Version, s.CoveredThrough, len(s.Turns))
	}
	reqs := r.llm.Requests()
	if first, last := foldedRange(reqs[1]); first != "010" || last != "019" {
		t.Fatalf("second fold carried %s..%s, want 010..019", first, last)
	}
	if !strings.Contains(reqs[1].Content(), "messages 000 to 009") {
		t.Fatal("second fold did not carry the previous summary")
	}

	sums := r.Summaries("s1")
	if len(sums) != 2 {
		t.Fatalf("%d summary-updated events, want 2", len(sums))
	}
	want := events.SummaryUpdated{V: 1, Session: "s1", Version: 2, Cursor: 20, CoveredThroughTurn: 19, FoldedTurns: 10,
		Mode: "window", Compactions: 2, Model: "fold-mini"}
	got := sums[1]
	if got.Version != want.Version || got.Cursor != want.Cursor || got.CoveredThroughTurn != want.CoveredThroughTurn ||
		got.FoldedTurns != want.FoldedTurns || got.Mode != want.Mode || got.Compactions != want.Compactions || got.Model != want.Model {
		t.Fatalf("summary event %+v", got)
	}
	if got.From != t0.Add(100*time.Second) || got.To != t0.Add(190*time.Second) {
		t.Fatalf("window %s..%s", got.From, got.To)
	}
	if got.SummaryChars != len(got.Summary) || got.OriginalTokens == 0 || got.SummaryTokens == 0 || got.Tier != "full" {
		t.Fatalf("counts: %+v", got)
	}
	lc := r.Lifecycle("s1")
	for _, typ := range []string{events.EventCompactionStarted, events.EventCompactionCompleted} {
		if !hasType(lc, typ, "") {
			t.Errorf("no %s event", typ)
		}
	}
	if hasType(lc, events.EventCompactionSkipped, events.SkipBelowThreshold) {
		t.Error("below_threshold published without an explicit check")
	}
	// Provider-reported usage (openaitest.OK reports 100 prompt tokens).
	if got := testutil.ToFloat64(p.m.sumTokens.WithLabelValues("input")); got != 200 {
		t.Errorf("summarizer input tokens %v, want 200", got)
	}
	if got := testutil.ToFloat64(p.m.foldedToks); got != float64(sums[0].OriginalTokens+sums[1].OriginalTokens) {
		t.Errorf("folded tokens %v", got)
	}
}

// While a fold is in flight the window stretches; when it lands the
// boundary snaps forward and no second fold starts before 71.
func TestElasticWindowWhileFoldInFlight(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply {
		if n == 0 {
			<-release
		}
		return openaitest.OK(echoSummary(req))
	})
	r.start(Config{})
	r.Turns("s1", 61)
	r.Eventually("fold in flight", func() bool { return r.llm.Calls() == 1 })
	r.Turns("s1", 3) // 64 while folding
	var s *state.Session
	r.Eventually("64 turns applied with the lease held", func() bool {
		s = r.Checkpoint("s1")
		return s.Total == 64 && s.Lease != nil
	})
	if s.Cursor != 0 || len(s.Turns) != 64 {
		t.Fatalf("during fold: cursor %d, verbatim %d; want 0 and 64", s.Cursor, len(s.Turns))
	}
	r.Eventually("already_in_flight skip", func() bool {
		return hasType(r.Lifecycle("s1"), events.EventCompactionSkipped, events.SkipAlreadyInFlight)
	})
	close(release)
	s = r.Settled("s1", 64, 10)
	if len(s.Turns) != 54 || s.Version != 1 {
		t.Fatalf("after fold: verbatim %d (want 54), version %d", len(s.Turns), s.Version)
	}
	r.Turns("s1", 6) // 70
	r.Settled("s1", 70, 10)
	if r.llm.Calls() != 1 {
		t.Fatalf("%d summarizer calls before 71, want 1", r.llm.Calls())
	}
	r.Turns("s1", 1)
	r.Settled("s1", 71, 20)
}

// Turns published while no processor runs are folded batch after batch
// once it starts.
func TestCatchUpAfterOutage(t *testing.T) {
	r := newRig(t)
	r.Turns("s1", 200)
	r.start(Config{})
	s := r.Settled("s1", 200, 140)
	if s.Version != 14 || len(s.Turns) != 60 {
		t.Fatalf("version %d verbatim %d", s.Version, len(s.Turns))
	}
	sums := r.Summaries("s1")
	if len(sums) != 14 {
		t.Fatalf("%d summaries, want 14", len(sums))
	}
	for i, ev := range sums {
		if ev.Version != uint64(i+1) || ev.Cursor != int64(10*(i+1)) {
			t.Fatalf("summary %d: version %d cursor %d", i, ev.Version, ev.Cursor)
		}
	}
	for i, req := range r.llm.Requests() {
		first, last := foldedRange(req)
		if first != fmt.Sprintf("%03d", 10*i) || last != fmt.Sprintf("%03d", 10*i+9) {
			t.Fatalf("fold %d carried %s..%s", i, first, last)
		}
	}
}

// Evicted notes wait as pending, go into the next batch and are cleared
// only when it succeeds; a note arriving during the fold stays pending.
func TestNotesFoldIntoNextBatch(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply {
		switch n {
		case 0:
			return openaitest.ServerError() // fail first: notes must stay
		case 1:
			<-release
		}
		return openaitest.OK(echoSummary(req))
	})
	r.start(Config{RetryBackoff: time.Millisecond})
	r.Note("s1", "n1", "James", "James was screen-sharing Marvel Rivals on Tokyo as Winter Soldier", t0)
	r.Turns("s1", 61)
	r.Eventually("failed fold", func() bool { return hasType(r.Lifecycle("s1"), events.EventCompactionFailed, "") })
	s := r.Checkpoint("s1")
	if len(s.PendingNotes) != 1 || s.Cursor != 0 || s.Summary != "" {
		t.Fatalf("after failure: pending %d cursor %d summary %q", len(s.PendingNotes), s.Cursor, s.Summary)
	}
	r.Turns("s1", 1) // retry on the next trigger
	r.Eventually("second fold in flight", func() bool { return r.llm.Calls() == 2 })
	r.Note("s1", "n2", "James", "James switched to the Yggsgard map", t0.Add(time.Hour))
	r.Eventually("note applied", func() bool { return len(r.Checkpoint("s1").PendingNotes) == 2 })
	close(release)
	s = r.Settled("s1", 62, 10)
	if len(s.PendingNotes) != 1 {
		t.Fatalf("pending notes after fold: %d, want 1 (the one that arrived during the fold)", len(s.PendingNotes))
	}
	req := r.llm.Requests()[1].Content()
	if !strings.Contains(req, "Tokyo as Winter Soldier") || strings.Contains(req, "Yggsgard") {
		t.Fatal("fold did not carry exactly the note pending at its start")
	}
	if ev := r.Summaries("s1")[0]; ev.FoldedNotes != 1 {
		t.Fatalf("folded_notes %d", ev.FoldedNotes)
	}
}

// A turn published twice counts once, whether the stream or the processor
// catches the duplicate.
func TestDuplicateTurnsCountOnce(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	turn := events.Turn{V: 1, Session: "s1", TurnID: "dup-1", At: t0, Speaker: "Alice", Role: "user", Text: "hello"}
	subj := r.Layout.Subjects.In("s1", events.KindTurn)
	r.Publish(subj, turn, "dup-1")
	r.Publish(subj, turn, "dup-1") // stream dedup (Nats-Msg-Id)
	r.Publish(subj, turn, "")      // no msg id: processor dedup by turn_id
	r.Turns("s1", 2)
	s := r.Settled("s1", 3, 0)
	if len(s.Turns) != 3 {
		t.Fatalf("verbatim %d", len(s.Turns))
	}
}

// Bad input is dead-lettered with its reason and everything else goes on.
func TestBadInputIsDeadLetteredAndProcessingContinues(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	good := events.Turn{V: 1, Session: "s1", TurnID: "x", At: t0, Speaker: "Alice", Role: "user", Text: "hi"}
	cases := []struct {
		subject, code, field string
		payload              any
	}{
		{"fold.in.s1.turn", events.CodeBadJSON, "payload", []byte(`{"v":1,`)},
		{"fold.in.s1.turn", events.CodeMissingField, "speaker", events.Turn{V: 1, Session: "s1", TurnID: "y", At: t0, Role: "user", Text: "hi"}},
		{"fold.in.a$b.turn", events.CodeBadSession, "subject session token", good},
		{"fold.in.s1.turn", events.CodeOversized, "text", events.Turn{V: 1, Session: "s1", TurnID: "z", At: t0, Speaker: "A", Role: "user", Text: strings.Repeat("x", 70<<10)}},
		{"fold.in.s1.shout", events.CodeUnknownType, "subject", good},
		{"fold.in.s1.turn", events.CodeSessionMismatch, "session", events.Turn{V: 1, Session: "s2", TurnID: "w", At: t0, Speaker: "A", Role: "user", Text: "hi"}},
	}
	for _, c := range cases {
		r.Publish(c.subject, c.payload, "")
	}
	r.Turns("s1", 3)
	r.Settled("s1", 3, 0)
	dls := map[int]string{}
	r.Eventually("dead letters", func() bool { return len(r.DeadLetters()) == len(cases) })
	for _, m := range r.DeadLetters() {
		// Sessions are owned by different shards, so dead letters of
		// different sessions may land in any order: match by sequence.
		i, _ := strconv.Atoi(m.Header.Get(events.HeaderOriginalSeq))
		i-- // the cases were the first messages on the stream
		if i < 0 || i >= len(cases) {
			t.Fatalf("dead letter with original sequence %q", m.Header.Get(events.HeaderOriginalSeq))
		}
		c := cases[i]
		if m.Header.Get(events.HeaderErrorCode) != c.code || m.Header.Get(events.HeaderErrorField) != c.field ||
			m.Header.Get(events.HeaderOriginalSubject) != c.subject {
			t.Errorf("dead letter %d: headers %v, want %s/%s from %s", i, m.Header, c.code, c.field, c.subject)
		}
		if !strings.Contains(m.Header.Get(events.HeaderError), c.field) {
			t.Errorf("dead letter %d: reason %q does not name %q", i, m.Header.Get(events.HeaderError), c.field)
		}
		dls[i] = m.Subject
	}
	if dls[2] != "fold.dlq._invalid" || dls[0] != "fold.dlq.s1" {
		t.Errorf("dead-letter subjects %v", dls)
	}
	if !hasType(r.Lifecycle("s1"), events.EventRejected, events.CodeBadJSON) {
		t.Error("no event_rejected on the session's event subject")
	}
}

// A processor restarted mid-session continues: nothing lost, nothing
// folded twice, versions strictly increasing.
func TestRestartContinuesWithoutLossOrRefold(t *testing.T) {
	r := newRig(t)
	_, stop := r.start(Config{})
	r.Turns("s1", 65)
	r.Settled("s1", 65, 10)
	stop()
	r.Turns("s1", 10) // 75 while down
	r.start(Config{})
	s := r.Settled("s1", 75, 20)
	if s.Version != 2 {
		t.Fatalf("version %d", s.Version)
	}
	r.Turns("s1", 6) // 81
	r.Settled("s1", 81, 30)
	sums := r.Summaries("s1")
	if len(sums) != 3 || r.llm.Calls() != 3 {
		t.Fatalf("%d summaries, %d calls; want 3 and 3", len(sums), r.llm.Calls())
	}
	for i, ev := range sums {
		if ev.Version != uint64(i+1) {
			t.Fatalf("versions not strictly increasing: %v", sums)
		}
	}
}

// A fold that fails keeps the summary and the cursor, reports its class,
// and is retried after its backoff even if the session sends nothing more
// (a bad request, which no retry fixes soon, waits RetryBackoffMax; one
// alone does not open the summarizer's breaker).
func TestFailedFoldMovesNothing(t *testing.T) {
	r := newRig(t)
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply {
		if n == 1 {
			return openaitest.BadRequest("bad things")
		}
		return openaitest.OK(echoSummary(req))
	})
	r.start(Config{RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 300 * time.Millisecond})
	r.Turns("s1", 71)
	s := r.Settled("s1", 71, 20) // no new turn: the retry comes from the backoff timer
	if s.Version != 2 || s.Summary != "Alice and Bob discussed messages 010 to 019." {
		t.Fatalf("after retry: %+v", s)
	}
	var failed events.Lifecycle
	for _, e := range r.Lifecycle("s1") {
		if e.Type == events.EventCompactionFailed {
			failed = e
		}
	}
	if failed.ErrorClass != "bad_request" || failed.Retryable == nil || *failed.Retryable || failed.Model != "openai:fold-mini" || failed.Cursor != 10 {
		t.Fatalf("failure event %+v", failed)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d summarizer calls, want 3", len(reqs))
	}
	for i, want := range []string{"010", "010"} { // the failed batch is retried as is
		if first, _ := foldedRange(reqs[i+1]); first != want {
			t.Fatalf("call %d folded from %s", i+1, first)
		}
	}
	sums := r.Summaries("s1")
	if len(sums) != 2 || sums[1].Version != 2 || sums[1].Cursor != 20 {
		t.Fatalf("summaries %+v", sums)
	}
}

// A summarizer that panics on one session's batch fails that session's
// fold, as a model error does: its summary and cursor stay, the batch is
// retried after its backoff (and panics again), the panic is counted, and
// the process goes on folding the other sessions.
func TestSummarizerPanicFailsOnlyItsFold(t *testing.T) {
	r := newRig(t)
	sum := &panicking{Summarizer: r.sum, bad: "bad"}
	r.sum = sum
	p, _ := r.start(Config{RetryBackoff: 50 * time.Millisecond, RetryBackoffMax: 100 * time.Millisecond})
	r.Turns("bad", 61)
	r.Turns("good", 61)
	r.Eventually("the bad session's fold tried again after its panic", func() bool { return sum.calls.Load() >= 2 })
	if got := r.Settled("good", 61, 10); got.Version != 1 || got.Summary != "Alice and Bob discussed messages 000 to 009." {
		t.Fatalf("the other session: version %d, summary %q", got.Version, got.Summary)
	}
	r.Turns("good", 10) // still served after the panics
	r.Settled("good", 71, 20)
	bad := r.Checkpoint("bad")
	if bad.Total != 61 || bad.Cursor != 0 || bad.Version != 0 || bad.Summary != "" {
		t.Fatalf("the panicking session moved: total %d, cursor %d, version %d, summary %q", bad.Total, bad.Cursor, bad.Version, bad.Summary)
	}
	var failed *events.Lifecycle
	for _, e := range r.Lifecycle("bad") {
		if e.Type == events.EventCompactionFailed {
			failed = &e
		}
	}
	if failed == nil || !strings.HasPrefix(failed.Error, "summarizer panicked: runtime error: index out of range") {
		t.Fatalf("failure event %+v, want the panic as its error", failed)
	}
	if n, f := testutil.ToFloat64(p.m.panics), testutil.ToFloat64(p.m.folds.WithLabelValues("failed")); n < 2 || f < n {
		t.Fatalf("%v panics and %v failed folds counted, want at least 2 panics, each a failed fold", n, f)
	}
	if len(r.Summaries("bad")) != 0 {
		t.Fatal("a summary was published for the panicking session")
	}
}

// panicking panics in every call for session bad, as a summarizer bug on
// that session's turns would (an index out of range), and answers as its
// Summarizer for the others.
type panicking struct {
	fold.Summarizer
	bad   string
	calls atomic.Int32
}

func (s *panicking) Summarize(ctx context.Context, req fold.Request) (fold.Result, error) {
	if req.Session == s.bad {
		s.calls.Add(1)
		var words []string
		return fold.Result{Summary: words[len(req.Turns)]}, nil
	}
	return s.Summarizer.Summarize(ctx, req)
}

// checkpointWithLease writes the checkpoint another owner would have left:
// every turn of session published so far applied, and lease held in it.
func (r *rig) checkpointWithLease(session string, lease *state.Lease) {
	r.t.Helper()
	r.checkpointWith(session, func(s *state.Session) { s.Lease = lease })
}

// checkpointWith stores the checkpoint a previous owner would have left
// after applying every turn on the stream, changed by edit.
func (r *rig) checkpointWith(session string, edit func(*state.Session)) {
	r.t.Helper()
	ctx := context.Background()
	in, _ := r.JS.Stream(ctx, r.Layout.In)
	info, _ := in.Info(ctx)
	s := state.New(session)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		s.AddTurn(state.HashID(fmt.Sprintf("%s-t%03d", session, seq-1)), state.TurnRef{Seq: seq})
	}
	s.LastSeq = info.State.LastSeq
	edit(s)
	if _, err := r.Store.Save(ctx, s, 0); err != nil {
		r.t.Fatal(err)
	}
}

// A crash between publishing a summary and checkpointing it leaves a lease
// in KV; the next owner adopts the published summary instead of folding
// the batch again.
func TestRecoversSummaryPublishedBeforeCrash(t *testing.T) {
	r := newRig(t)
	r.Turns("s1", 61)
	r.checkpointWithLease("s1", &state.Lease{FoldID: "crashed", Owner: "dead", Deadline: time.Now().Add(time.Hour), From: 0, To: 10})
	r.Publish(r.Layout.Subjects.Out("s1", events.KindSummary), events.SummaryUpdated{
		V: 1, Session: "s1", Version: 1, Summary: "Recovered summary.", Cursor: 10, CoveredThroughTurn: 9, Compactions: 1,
	}, "s1:summary:1")
	r.start(Config{})
	r.Turns("s1", 1) // 62: loads the session
	got := r.Settled("s1", 62, 10)
	if got.Summary != "Recovered summary." || got.Version != 1 || r.llm.Calls() != 0 {
		t.Fatalf("summary %q version %d calls %d", got.Summary, got.Version, r.llm.Calls())
	}
}

// A lease whose owner died blocks folds only until its deadline.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	r := newRig(t)
	r.Turns("s1", 60)
	r.checkpointWithLease("s1", &state.Lease{FoldID: "crashed", Owner: "dead", Deadline: time.Now().Add(300 * time.Millisecond), From: 0, To: 10})
	r.start(Config{})
	r.Turns("s1", 1) // 61: lease still held
	r.Eventually("already_in_flight", func() bool {
		return hasType(r.Lifecycle("s1"), events.EventCompactionSkipped, events.SkipAlreadyInFlight)
	})
	time.Sleep(350 * time.Millisecond)
	r.Turns("s1", 1) // 62: lease expired
	r.Settled("s1", 62, 10)
}

// A session in memory whose lease belongs to another owner that dies
// after publishing its summary (but before checkpointing it): when the
// lease expires, the outbound stream is read again and the summary is
// adopted, not folded a second time.
func TestExpiredForeignLeaseAdoptsItsPublishedSummary(t *testing.T) {
	r := newRig(t)
	r.Turns("s1", 60)
	r.checkpointWithLease("s1", &state.Lease{FoldID: "elsewhere", Owner: "other", Deadline: time.Now().Add(2 * time.Second), From: 0, To: 10})
	r.start(Config{})
	r.Turns("s1", 1) // 61: loaded with the other owner's lease still held
	r.Eventually("already_in_flight", func() bool {
		return hasType(r.Lifecycle("s1"), events.EventCompactionSkipped, events.SkipAlreadyInFlight)
	})
	// The other owner lands its fold on the stream, then dies.
	r.Publish(r.Layout.Subjects.Out("s1", events.KindSummary), events.SummaryUpdated{
		V: 1, Session: "s1", Version: 1, Summary: "Folded elsewhere.", Cursor: 10, CoveredThroughTurn: 9, Compactions: 1,
	}, "s1:summary:1")
	got := r.Settled("s1", 61, 10) // the lease's deadline wakes the session
	if got.Summary != "Folded elsewhere." || got.Version != 1 || r.llm.Calls() != 0 {
		t.Fatalf("summary %q version %d, %d summarizer calls; want the other owner's summary adopted and no call", got.Summary, got.Version, r.llm.Calls())
	}
}

// With the generation-driven trigger, only generate control events fold.
func TestGenerateTrigger(t *testing.T) {
	r := newRig(t)
	r.start(Config{Trigger: TriggerGenerate})
	r.Turns("s1", 5)
	r.Control("s1", events.OpGenerate, nil) // an explicit check reports why it did not fold
	r.Eventually("below_threshold published for the explicit check", func() bool {
		for _, e := range r.Lifecycle("s1") {
			if e.Type == events.EventCompactionSkipped && e.Reason == events.SkipBelowThreshold && e.Trigger == "generate" {
				return true
			}
		}
		return false
	})
	r.Turns("s1", 70)
	r.Settled("s1", 75, 0)
	r.Control("s1", events.OpGenerate, nil)
	// The fold at cursor 0 is followed by its catch-up check: 75−10 > 60.
	s := r.Settled("s1", 75, 20)
	if s.Version != 2 {
		t.Fatalf("version %d", s.Version)
	}
}

// Control ops: configure overrides the window, compact folds a partial
// batch, end refuses later events, reset starts over.
func TestControlOps(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	r.Control("s1", events.OpConfigure, &events.SessionConfig{RecentWindow: 5, BatchSize: 3})
	r.Turns("s1", 9) // 9 > 5+3: fold [0,3)
	r.Settled("s1", 9, 3)
	r.Turns("s1", 1) // 10: recentStart 5, eligible 2, below threshold
	r.Settled("s1", 10, 3)
	r.Control("s1", events.OpCompact, nil) // manual: folds the 2 eligible turns
	r.Settled("s1", 10, 5)
	r.Control("s1", events.OpEnd, nil)
	r.Eventually("ended", func() bool { return r.Checkpoint("s1").Ended })
	r.Turns("s1", 1)
	r.Eventually("turn after end refused", func() bool {
		for _, m := range r.DeadLetters() {
			if m.Header.Get(events.HeaderErrorCode) == events.CodeSessionEnded {
				return true
			}
		}
		return false
	})
	r.Control("s1", events.OpReset, nil)
	r.Eventually("reset", func() bool {
		s := r.Checkpoint("s1")
		return !s.Ended && s.Total == 0 && s.Summary == "" && s.Config != nil
	})
}

// Shutdown with a fold that will not finish: after the grace period the
// fold is abandoned, its lease cleared, nothing moved, and every applied
// event acknowledged.
func TestShutdownAbandonsInFlightFoldSafely(t *testing.T) {
	r := newRig(t)
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply { return openaitest.Hang() })
	_, stop := r.start(Config{ShutdownGrace: 200 * time.Millisecond})
	r.Turns("s1", 63)
	r.Eventually("fold in flight", func() bool { return r.llm.Calls() == 1 })
	r.Eventually("63 applied", func() bool { return r.Checkpoint("s1").Total == 63 })
	stop()
	s := r.Checkpoint("s1")
	if s.Lease != nil || s.Cursor != 0 || s.Summary != "" || s.Total != 63 {
		t.Fatalf("after shutdown: lease %v cursor %d summary %q total %d", s.Lease, s.Cursor, s.Summary, s.Total)
	}
	cons, err := r.JS.Consumer(context.Background(), r.Layout.In, "foldstream")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.AckFloor.Stream != 63 {
		t.Fatalf("unacked after shutdown: pending %d, ack floor %d", info.NumAckPending, info.AckFloor.Stream)
	}
	lc := r.Lifecycle("s1")
	if len(lc) == 0 || lc[len(lc)-1].Type != events.EventCompactionFailed || lc[len(lc)-1].ErrorClass != "canceled" {
		t.Fatalf("last lifecycle event %+v, want compaction_failed/canceled", lc[len(lc)-1])
	}
	// The next owner resumes the interrupted fold from the due mark, with
	// no new event from the session.
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply { return openaitest.OK(echoSummary(req)) })
	r.start(Config{})
	r.Settled("s1", 63, 10)
}

// A stopped processor leaves no fold slot goroutine behind: each ends with
// Run, not after idling for slotIdle.
func TestStopEndsTheFoldSlotGoroutines(t *testing.T) {
	r := newRig(t)
	p, stop := r.start(Config{MaxConcurrentFolds: 2})
	r.Turns("s1", 61)
	r.Turns("s2", 61)
	r.Settled("s1", 61, 10)
	r.Settled("s2", 61, 10)
	stop()
	started := 0
	for range p.slots.size() {
		sl := <-p.slots.free
		started += sl.started
		if sl.started > 0 && len(sl.ended) == 0 {
			t.Error("a fold slot's goroutine still runs after the processor stopped")
		}
	}
	if started == 0 {
		t.Fatal("no fold ran on a slot's goroutine")
	}
}

// A backlog larger than two ref chunks is sealed out of the checkpoint,
// survives a restart and is folded batch after batch exactly once.
func TestSealedBacklogSurvivesRestart(t *testing.T) {
	r := newRig(t)
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply { return openaitest.Hang() })
	_, stop := r.start(Config{ShutdownGrace: 50 * time.Millisecond})
	r.Turns("s1", 1300)
	var s *state.Session
	r.Eventually("backlog applied and sealed", func() bool {
		s = r.Checkpoint("s1")
		return s.Total == 1300 && s.Sealed == 2*state.ChunkSize
	})
	stop()
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply { return openaitest.OK(echoSummary(req)) })
	r.start(Config{})
	r.Turns("s1", 1)
	s = r.Settled("s1", 1301, 1250)
	if s.Version != 125 {
		t.Fatalf("version %d, want 125", s.Version)
	}
	reqs := r.llm.Requests()
	for i, req := range reqs[len(reqs)-125:] {
		first, last := foldedRange(req)
		if first != fmt.Sprintf("%03d", 10*i) || last != fmt.Sprintf("%03d", 10*i+9) {
			t.Fatalf("fold %d carried %s..%s", i, first, last)
		}
	}
}

// A checkpoint conflict (another owner wrote the session) must not lose or
// double-count events: the processor rewinds to the ack floor and
// re-applies, in order, on top of the newer checkpoint.
func TestCheckpointConflictRewindsWithoutLoss(t *testing.T) {
	r := newRig(t)
	p, _ := r.start(Config{})
	r.Turns("s1", 30)
	r.Turns("s2", 5)
	r.Settled("s1", 30, 0)
	ctx := context.Background()
	s, rev, err := r.Store.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Store.Save(ctx, s, rev); err != nil { // same state, new revision
		t.Fatal(err)
	}
	r.Turns("s1", 10)
	r.Turns("s2", 5)
	r.Settled("s1", 40, 0)
	r.Settled("s2", 10, 0)
	if got := testutil.ToFloat64(p.m.rewinds); got < 1 {
		t.Fatalf("rewinds %v, want at least 1", got)
	}
	r.Turns("s1", 21) // 61: the fold still happens exactly once
	r.Settled("s1", 61, 10)
	if r.llm.Calls() != 1 {
		t.Fatalf("%d summarizer calls", r.llm.Calls())
	}
	// The events the conflicting write covered were applied twice (before
	// and after the rewind), and are counted once.
	if got := p.Applied(); got != 71 {
		t.Errorf("Applied() = %d after 71 events", got)
	}
	if got := testutil.ToFloat64(p.m.events.WithLabelValues("turn")); got != 71 {
		t.Errorf("events_applied_total{kind=turn} = %v after 71 turns", got)
	}
}

// After a rewind, a session whose events are all checkpointed still gets
// its pending folds: nothing else would re-check it.
func TestRewindResumesDueSessions(t *testing.T) {
	r := newRig(t)
	release := make(chan struct{})
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply {
		if n == 0 {
			<-release
		}
		return openaitest.OK(echoSummary(req))
	})
	p, _ := r.start(Config{})
	r.Turns("s1", 80)
	r.Eventually("first fold in flight, all turns checkpointed", func() bool {
		s := r.Checkpoint("s1")
		return r.llm.Calls() == 1 && s.Total == 80 && s.Lease != nil
	})
	// Another writer moves the checkpoint: the fold's landing conflicts and
	// rewinds; no further event of s1 will come.
	ctx := context.Background()
	s, rev, err := r.Store.Load(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Store.Save(ctx, s, rev); err != nil {
		t.Fatal(err)
	}
	close(release)
	// Folds at 61 and 71 are due; 80−20 = 60 is not > 60. Both land
	// without any new turn.
	r.Settled("s1", 80, 20)
	if got := testutil.ToFloat64(p.m.rewinds); got < 1 {
		t.Fatalf("rewinds %v", got)
	}
}

// A fold reads its batch from the payloads its owner kept when it applied
// them; after a reload it reads them from the stream, one direct get each.
func TestFoldReadsBatchFromMemoryElseStream(t *testing.T) {
	r := newRig(t)
	var gets atomic.Int64
	sub, err := r.NC.Subscribe("$JS.API.DIRECT.GET."+r.Layout.In+".>", func(*nats.Msg) { gets.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	sub2, err := r.NC.Subscribe("$JS.API.DIRECT.GET."+r.Layout.In, func(*nats.Msg) { gets.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	defer sub2.Unsubscribe()
	_, stop := r.start(Config{})
	r.Turns("s1", 61)
	r.Settled("s1", 61, 10)
	if n := gets.Load(); n != 0 {
		t.Fatalf("fold made %d direct gets; its batch was in memory", n)
	}
	stop()
	r.start(Config{})
	r.Turns("s1", 10) // 71: folds 10..19, applied by the previous owner
	r.Settled("s1", 71, 20)
	if n := gets.Load(); n != 10 {
		t.Fatalf("fold after a reload made %d direct gets, want 10", n)
	}
	if first, last := foldedRange(r.llm.Requests()[1]); first != "010" || last != "019" {
		t.Fatalf("second fold carried %s..%s", first, last)
	}
}
