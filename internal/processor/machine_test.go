package processor

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// The session machine is tested on its own: sessions built by applying
// events to state.Session, steps taken at given times, and the effects
// they return asserted. No broker, no goroutine, no clock.

var machineNow = time.Date(2026, 11, 22, 21, 0, 0, 0, time.UTC)

func testMachine(cfg Config) *machine {
	cfg = cfg.withDefaults()
	cfg.InstanceID = "me"
	br := retry.NewBreaker(retry.BreakerConfig{Endpoint: "test"}, zerolog.Nop())
	return newMachine(cfg, br, "test", zerolog.Nop(), newMetrics(prometheus.NewRegistry()), new(atomic.Uint64))
}

// machineSession is session id with n turns of tokens each applied, one a
// second from t0, Alice and Bob taking turns.
func machineSession(t *testing.T, id string, n, tokens int) *live {
	t.Helper()
	ls := &live{s: state.New(id)}
	addTurns(t, ls, 0, n, tokens)
	return ls
}

func addTurns(t *testing.T, ls *live, from, to, tokens int) {
	t.Helper()
	for i := from; i < to; i++ {
		speaker, role := "Alice", "user"
		if i%2 == 1 {
			speaker, role = "Bob", "assistant"
		}
		turn := &events.Turn{TurnID: fmt.Sprintf("t%03d", i), At: t0.Add(time.Duration(i) * time.Second), Speaker: speaker, Role: role,
			Text: fmt.Sprintf("message %03d", i), Tokens: tokens}
		if _, err := ls.s.Apply(ls.s.LastSeq+1, events.Inbound{Kind: events.KindTurn, Session: ls.s.ID, Turn: turn}); err != nil {
			t.Fatal(err)
		}
	}
}

func control(t *testing.T, ls *live, op string) {
	t.Helper()
	c := &events.Control{Op: op, At: machineNow}
	if _, err := ls.s.Apply(ls.s.LastSeq+1, events.Inbound{Kind: events.KindControl, Session: ls.s.ID, Control: c}); err != nil {
		t.Fatal(err)
	}
}

// started is what the coordinator does with a start effect that matters
// to the machine: the fold's goroutine runs.
func started(t *testing.T, ls *live, e effects) foldJob {
	t.Helper()
	if e.start == nil {
		t.Fatalf("no fold started: %+v", e)
	}
	ls.running = e.start.foldID
	return *e.start
}

// stored is the result of job whose summary the stream stored at seq.
func stored(job foldJob, summary string, seq uint64) foldResult {
	return foldResult{job: job, out: fold.Outcome{Summary: summary, Tier: fold.TierFull}, seq: seq,
		summary: &events.SummaryUpdated{Session: job.session, Version: job.prevVer + 1, Cursor: job.to, Summary: summary}}
}

func types(e effects) []string {
	var out []string
	for _, ev := range e.events {
		out = append(out, ev.Type+":"+ev.Reason)
	}
	return out
}

// A batch due starts a fold under this owner's lease, with copies of the
// turns it folds; a second check while it runs starts nothing; its stored
// result moves the cursor, the session is written and checked again.
func TestMachinePlansAFoldAndLandsIt(t *testing.T) {
	m := testMachine(Config{})
	ls := machineSession(t, "s1", 61, 0) // recent window 50, batch 10: one batch due
	e := m.evaluate(ls, machineNow, "turn", false, false)
	job := started(t, ls, e)
	if s := ls.s; s.Lease == nil || s.Lease.Owner != "me" || s.Lease.FoldID != job.foldID || !s.Lease.Deadline.After(machineNow) {
		t.Fatalf("lease %+v, want this owner's for fold %s", s.Lease, job.foldID)
	}
	if job.from != 0 || job.to != 10 || len(job.turns) != 10 || !job.model || job.final || !e.dirty || !e.markDue {
		t.Fatalf("job %d..%d (%d turns, model %v, final %v), dirty %v, mark due %v", job.from, job.to, len(job.turns), job.model, job.final, e.dirty, e.markDue)
	}
	if got := types(e); len(got) != 1 || got[0] != events.EventCompactionStarted+":" {
		t.Fatalf("events %v, want compaction_started", got)
	}
	e = m.evaluate(ls, machineNow, "generate", false, false)
	if e.start != nil {
		t.Fatal("a second fold started while the first runs")
	}
	if got := types(e); len(got) != 1 || got[0] != events.EventCompactionSkipped+":"+string(fold.SkipAlreadyInFlight) {
		t.Fatalf("events %v, want the skip (already in flight)", got)
	}

	e = m.land(ls, stored(job, "Alice and Bob talked.", 7), machineNow.Add(time.Second))
	s := ls.s
	if s.Cursor != 10 || s.Version != 1 || s.SummarySeq != 7 || s.Summary != "Alice and Bob talked." || s.Lease != nil || ls.running != "" {
		t.Fatalf("after landing: cursor %d version %d seq %d summary %q lease %+v running %q", s.Cursor, s.Version, s.SummarySeq, s.Summary, s.Lease, ls.running)
	}
	if !e.dirty || e.save || !e.again || e.archive != "" {
		t.Fatalf("landing effects: dirty %v save %v again %v archive %q; want written with the next flush, then checked again", e.dirty, e.save, e.again, e.archive)
	}
	if got := types(e); len(got) != 1 || got[0] != events.EventCompactionCompleted+":" || e.events[0].NewCursor != 10 || e.events[0].Version != 1 {
		t.Fatalf("events %v (%+v), want compaction_completed at cursor 10, version 1", got, e.events)
	}
	if m.landed.Load() != 1 {
		t.Fatalf("%d folds counted, want 1", m.landed.Load())
	}
}

// A fold whose summarizer failed moves nothing: the session backs off and
// wakes when the backoff ends; a check before then starts nothing.
func TestMachineFailedFoldBacksOff(t *testing.T) {
	m := testMachine(Config{RetryBackoff: time.Minute, RetryBackoffMax: time.Hour})
	ls := machineSession(t, "s1", 61, 0)
	job := started(t, ls, m.evaluate(ls, machineNow, "turn", false, false))
	r := foldResult{job: job, err: &retry.Error{Class: retry.Server, Err: errors.New("500")}, model: true}
	e := m.land(ls, r, machineNow)
	s := ls.s
	if s.Cursor != 0 || s.Lease != nil || s.Failures != 1 || !s.RetryAfter.Equal(machineNow.Add(time.Minute)) {
		t.Fatalf("after the failure: cursor %d lease %+v failures %d retry after %v", s.Cursor, s.Lease, s.Failures, s.RetryAfter)
	}
	if len(e.wakes) != 1 || !e.wakes[0].at.Equal(s.RetryAfter) || !e.dirty || e.again {
		t.Fatalf("effects %+v, want a wake at the backoff's end and a write", e)
	}
	if got := types(e); len(got) != 1 || got[0] != events.EventCompactionFailed+":" || e.events[0].ErrorClass != string(retry.Server) {
		t.Fatalf("events %v, want compaction_failed (server)", got)
	}
	if e := m.evaluate(ls, machineNow.Add(30*time.Second), "turn", false, false); e.start != nil {
		t.Fatal("a check during the backoff started a fold")
	}
	if e := m.evaluate(ls, machineNow.Add(time.Minute), "turn", false, false); e.start == nil {
		t.Fatal("no fold after the backoff")
	}
}

// While the summarizer's breaker is open a fold that needs the model is
// not started: the session backs off until the breaker's probe.
func TestMachineOpenBreakerHoldsFolds(t *testing.T) {
	m := testMachine(Config{RetryBackoffMax: time.Hour})
	m.breaker.Record(machineNow, &retry.Error{Class: retry.Auth, Err: errors.New("401")}, false)
	ls := machineSession(t, "s1", 61, 0)
	e := m.evaluate(ls, machineNow, "turn", false, false)
	if e.start != nil || ls.s.Lease != nil {
		t.Fatal("a fold started while the breaker is open")
	}
	if got := types(e); len(got) != 1 || got[0] != events.EventCompactionSkipped+":"+string(fold.SkipRetryBackoff) {
		t.Fatalf("events %v, want the skip (retry backoff)", got)
	}
	if len(e.wakes) != 1 || !e.wakes[0].at.Equal(ls.s.RetryAfter) || !ls.s.RetryAfter.After(machineNow) {
		t.Fatalf("wakes %+v, retry after %v: want a wake at the probe", e.wakes, ls.s.RetryAfter)
	}
}

// Mode evict's fold needs no model: it is planned with Model false (no
// breaker, no text read) and lands its note, counting the turns evicted.
func TestMachineEvictionIsAFold(t *testing.T) {
	m := testMachine(Config{
		Mode: fold.ModeEvict, RecallEnabled: true,
		Tokens: fold.TokenPolicy{ContextWindow: 2000, ReserveTokens: 200},
		Evict:  fold.EvictPolicy{TargetUtilization: 0.5, MinKeepMessages: 4},
	})
	m.breaker.Record(machineNow, &retry.Error{Class: retry.Auth, Err: errors.New("401")}, false) // no model needed
	ls := machineSession(t, "ev", 19, 100)                                                       // 1900 > 1800 tokens: evict 9
	job := started(t, ls, m.evaluate(ls, machineNow, "turn", false, false))
	if job.model || job.from != 0 || job.to != 9 {
		t.Fatalf("eviction job %d..%d model %v, want 0..9 without a model", job.from, job.to, job.model)
	}
	r := stored(job, "[Context rolled: 9 messages evicted]", 3)
	r.out.Note = true
	m.land(ls, r, machineNow)
	if s := ls.s; s.Cursor != 9 || s.Evicted != 9 || s.EvictedTokens != 900 || !s.SummaryIsNote {
		t.Fatalf("after the eviction: cursor %d evicted %d/%d note %v", s.Cursor, s.Evicted, s.EvictedTokens, s.SummaryIsNote)
	}
}

// An ended session folds what is left (the final fold), then is archived:
// the archive makes the session a tombstone.
func TestMachineEndedSessionFoldsThenArchives(t *testing.T) {
	m := testMachine(Config{})
	ls := machineSession(t, "s1", 12, 0)
	control(t, ls, events.OpEnd)
	job := started(t, ls, m.evaluate(ls, machineNow, "end", false, false))
	if !job.final || job.from != 0 || job.to != 12 || job.cause != fold.CauseEnd {
		t.Fatalf("final fold %d..%d final %v cause %s, want everything, final", job.from, job.to, job.final, job.cause)
	}
	e := m.land(ls, stored(job, "The end.", 4), machineNow)
	if e.archive != "end" || e.again || !e.save {
		t.Fatalf("after the final fold: archive %q again %v save %v; want the archive and a write now", e.archive, e.again, e.save)
	}
	e = m.archived(ls, "end", errors.New("kv down"), machineNow)
	if ls.s.Archived || len(e.wakes) != 1 || !e.wakes[0].at.Equal(machineNow.Add(m.cfg.RetryBackoff)) {
		t.Fatalf("a failed archive write: archived %v wakes %+v; want a retry after the backoff", ls.s.Archived, e.wakes)
	}
	e = m.archived(ls, "end", nil, machineNow)
	if !ls.s.Archived || !e.dirty || e.drop == nil {
		t.Fatalf("after the archive: archived %v dirty %v drop %+v", ls.s.Archived, e.dirty, e.drop)
	}
	if got := types(e); len(got) != 1 || got[0] != events.EventSessionArchived+":end" {
		t.Fatalf("events %v, want session_archived", got)
	}
	if e := m.evaluate(ls, machineNow, "end", false, false); e.start != nil || e.archive != "" {
		t.Fatal("an archived session folded or archived again")
	}
}

// Another owner's expired lease is first reconciled with the outbound
// stream: a summary it published is adopted, and nothing is folded again.
func TestMachineReconcilesAnotherOwnersLease(t *testing.T) {
	m := testMachine(Config{})
	ls := machineSession(t, "s1", 61, 0)
	ls.s.Lease = &state.Lease{FoldID: "theirs", Owner: "other", Deadline: machineNow.Add(-time.Second), From: 0, To: 10}
	e := m.evaluate(ls, machineNow, "turn", false, false)
	if !e.reconcile || e.recheck == nil || e.recheck.trigger != "turn" || e.start != nil {
		t.Fatalf("effects %+v, want the outbound stream read first", e)
	}
	theirs := summaryRecord{ev: &events.SummaryUpdated{Session: "s1", Version: 1, Cursor: 10, Summary: "theirs", Compactions: 1}, seq: 5}
	e = m.reconciled(ls, theirs, nil, machineNow)
	if s := ls.s; s.Cursor != 10 || s.Version != 1 || s.SummarySeq != 5 || s.Lease != nil || !e.dirty {
		t.Fatalf("after reconciling: cursor %d version %d seq %d lease %+v dirty %v; want their summary adopted", s.Cursor, s.Version, s.SummarySeq, s.Lease, e.dirty)
	}
	if e := m.evaluate(ls, machineNow, "turn", false, true); e.start != nil {
		t.Fatalf("folded again after adopting: job %+v", e.start)
	}
}

// A refused publish whose record covers turns still being redelivered
// holds the session's folds until they are back, then adopts the record.
func TestMachineAwaitsARecordAhead(t *testing.T) {
	m := testMachine(Config{})
	ls := machineSession(t, "s1", 61, 0)
	job := started(t, ls, m.evaluate(ls, machineNow, "turn", false, false))
	ahead := summaryRecord{ev: &events.SummaryUpdated{Session: "s1", Version: 3, Cursor: 70, Summary: "ahead", Compactions: 3}, seq: 9}
	e := m.land(ls, foldResult{job: job, conflict: true, last: ahead}, machineNow)
	if ls.s.Lease != nil || ls.s.Version != 0 || !e.dirty || e.republish != nil {
		t.Fatalf("after the refusal: lease %+v version %d dirty %v republish %v", ls.s.Lease, ls.s.Version, e.dirty, e.republish != nil)
	}
	if e := m.evaluate(ls, machineNow, "generate", false, false); e.start != nil || len(e.events) != 1 || e.events[0].Reason != string(fold.SkipAlreadyInFlight) {
		t.Fatalf("while awaiting the turns: start %v events %v; want the fold reported in flight", e.start != nil, types(e))
	}
	addTurns(t, ls, 61, 75, 0)
	m.evaluate(ls, machineNow, "turn", false, false)
	if s := ls.s; s.Version != 3 || s.Cursor != 70 || s.Summary != "ahead" {
		t.Fatalf("once the turns are back: version %d cursor %d summary %q; want the record adopted", s.Version, s.Cursor, s.Summary)
	}
}

// A refused publish whose record the session cannot take is published
// again after it, with a version above it.
func TestMachineRepublishesAfterAForeignRecord(t *testing.T) {
	m := testMachine(Config{})
	ls := machineSession(t, "s1", 61, 0)
	job := started(t, ls, m.evaluate(ls, machineNow, "turn", false, false))
	old := summaryRecord{ev: &events.SummaryUpdated{Session: "s1", Version: 4, Cursor: 3, Epoch: 7}, seq: 2} // another epoch
	e := m.land(ls, foldResult{job: job, conflict: true, last: old}, machineNow)
	if e.republish == nil || !e.republish.republished || e.republish.job.prevVer != 4 || e.republish.job.summarySeq != 2 || !ls.landing {
		t.Fatalf("republish %+v landing %v; want it published again after sequence 2, as version 5", e.republish, ls.landing)
	}
	if ls.s.SummarySeq != 2 || ls.s.Lease == nil {
		t.Fatalf("summary seq %d lease %+v; want the sequence learned and the lease kept", ls.s.SummarySeq, ls.s.Lease)
	}
	r := stored(e.republish.job, "again", 8)
	r.republished = true
	m.land(ls, r, machineNow)
	if s := ls.s; s.Version != 5 || s.SummarySeq != 8 || ls.landing {
		t.Fatalf("after the republish: version %d seq %d landing %v", s.Version, s.SummarySeq, ls.landing)
	}
}

// A quiet session in mode tokens is woken at its idle threshold; settle
// clears the wake of a session with nothing pending.
func TestMachineWakes(t *testing.T) {
	m := testMachine(Config{Mode: fold.ModeTokens, Tokens: fold.TokenPolicy{ContextWindow: 2000, ReserveTokens: 200, IdleAfter: time.Minute, IdleThreshold: 0.3}})
	ls := machineSession(t, "s1", 8, 100) // 800 tokens: above 600 (idle), below the trigger
	ls.s.LastActivity = machineNow
	e := m.turn(ls, machineNow)
	if e.start != nil || len(e.wakes) != 1 || !e.wakes[0].earliest || !e.wakes[0].at.Equal(machineNow.Add(time.Minute)) {
		t.Fatalf("after a turn: start %v wakes %+v; want a wake at the idle threshold", e.start != nil, e.wakes)
	}
	quiet := machineSession(t, "s2", 2, 100)
	quiet.s.LastActivity = machineNow
	if e := m.settle(quiet, machineNow); len(e.wakes) != 1 || !e.wakes[0].clear {
		t.Fatalf("settle of a session below its idle threshold: wakes %+v, want the wake cleared", e.wakes)
	}
}
