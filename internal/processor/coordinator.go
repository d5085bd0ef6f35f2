package processor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"
)

// coordinator owns a shard's folds: the trigger check of each session
// (evaluate), the fold lease, starting a fold and landing or failing its
// result, the summaries found on the outbound stream (adopted, or awaited
// while the session's turns are redelivered), and when a session must be
// looked at again without an event of its own (wake: a failed fold's
// backoff, another owner's lease, the idle threshold). It runs on its
// shard's goroutine; fold goroutines hand their results back on results,
// which the loop selects on and lands here. What it needs of the loop is
// foldLoop; of the checkpoint writer, markDirty and checkpointThen.
type coordinator struct {
	p        *coordParts
	w        *checkpointWriter
	loop     foldLoop
	aside    *aside          // the KV and stream calls it makes, off the loop
	rec      *recorder       // its publishes and reads of the outbound stream
	run      *foldRunner     // runs its folds (folding.go)
	results  chan foldResult // results of this shard's fold goroutines
	foldCtx  context.Context // parent of every fold's context (Abort, shutdown)
	inFlight int             // fold goroutines whose result is not back yet
	// wake holds when a session must be checked again without waiting for
	// its next event: a failed fold's backoff, another owner's lease, the
	// idle threshold.
	wake map[string]time.Time
	// ahead holds, for sessions reloaded behind the outbound stream, the
	// later summary to adopt once their redelivered turns reach its cursor
	// (awaitRecord).
	ahead map[string]summaryRecord
	// policies: the resolved policy of each configuration in use (modes.go)
	policies map[*events.SessionConfig]fold.Policy
}

// foldLoop is the event loop as the coordinator sees it.
type foldLoop interface {
	// withSession runs fn with the live session once it is at hand: read
	// from its checkpoint first if it is not in memory, after the call it
	// waits for if it waits for one (aside). fn does not run if the read
	// fails (a rewind was asked for).
	withSession(id string, fn func(*live))
	// holds reports whether ls is the loop's live state of its session.
	holds(ls *live) bool
	// unpark resumes the session if its wait is over.
	unpark(id string)
}

// coordParts is what a coordinator uses of its engine: the configuration
// and policies, the KV bucket, the summarizer (its name) and its breaker,
// the logger, clock and metrics, the consumer manager (whether a rewind is
// under way) and the engine's fold counters.
type coordParts struct {
	cfg           Config
	policy        fold.Policy // the deployment's
	sessionPolicy fold.Policy // policy as a session without overrides folds with
	resolve       func(fold.Policy) fold.Policy
	store         *state.Store
	sum           fold.Summarizer
	breaker       *retry.Breaker
	tokens        TokenCounter
	log           zerolog.Logger
	clock         Clock
	m             *metrics
	cons          *consumers
	folds         *sync.WaitGroup // every fold goroutine, waited for at shutdown
	landed        *atomic.Uint64  // folds completed (Processor.Folds)
}

// newCoordinator is a coordinator of p's folds, for the loop's sessions.
func newCoordinator(p *Processor, w *checkpointWriter, loop foldLoop, a *aside, rec *recorder, foldCtx context.Context) *coordinator {
	parts := &coordParts{cfg: p.cfg, policy: p.policy, sessionPolicy: p.sessionPolicy, resolve: p.resolve, store: p.store, sum: p.sum,
		breaker: p.breaker, tokens: p.tokens, log: p.log, clock: p.clock, m: p.m, cons: p.cons, folds: &p.folds, landed: &p.landed}
	return &coordinator{
		p: parts, w: w, loop: loop, aside: a, rec: rec, run: p.newFoldRunner(), foldCtx: foldCtx,
		results:  make(chan foldResult, 64),
		wake:     make(map[string]time.Time),
		ahead:    make(map[string]summaryRecord),
		policies: make(map[*events.SessionConfig]fold.Policy),
	}
}

// reset forgets the wakes and awaited records of the sessions a rewind
// drops. Folds in flight keep running: their results reload the session
// and land if its checkpointed lease is still theirs.
// Must be called on the loop.
func (c *coordinator) reset() {
	c.wake = make(map[string]time.Time)
	c.ahead = make(map[string]summaryRecord)
}

// forget drops what the coordinator holds of a session leaving memory; a
// record it awaited is learned again, by a refused publish, if still so.
// Must be called on the loop.
func (c *coordinator) forget(id string) { delete(c.ahead, id) }

// waking reports whether the session has a wake time set.
// Must be called on the loop.
func (c *coordinator) waking(id string) bool {
	_, ok := c.wake[id]
	return ok
}

// loaded looks at a session just loaded from its checkpoint: a lease in it
// is reconciled with the outbound stream, and the session is checked again
// without waiting for an event (it may never send another one) once the
// lease or its backoff ends. Must be called on the loop.
func (c *coordinator) loaded(ls *live) {
	s, id := ls.s, ls.s.ID
	if s.Lease != nil {
		c.reconcile(ls, func() {
			now := c.p.clock.Now()
			switch {
			case ls.s.Lease.Held(now):
				c.wake[id] = ls.s.Lease.Deadline
			default:
				c.wake[id] = now
			}
		})
	} else if c.p.clock.Now().Before(s.RetryAfter) {
		c.wake[id] = s.RetryAfter
	}
}

// turn runs the checks a newly applied turn calls for: the trigger check
// when the session folds on turns, and the idle wake of mode tokens.
// Must be called on the loop.
func (c *coordinator) turn(ls *live) {
	if c.trigger(ls) == TriggerTurn {
		c.evaluate(ls, "turn", false)
	}
	if at, ok := ls.s.IdleAt(c.policy(ls), c.p.clock.Now(), ls.unfoldedTokens); ok {
		if cur, has := c.wake[ls.s.ID]; !has || at.Before(cur) {
			c.wake[ls.s.ID] = at // a quiet session is folded at the idle threshold
		}
	}
}

// reconcile runs when a checkpoint is loaded with a fold lease: the
// previous owner may have published the summary and died before the
// checkpoint that clears the lease. The outbound stream is the record, so
// adopt what it says. The read runs aside: the session waits for it (its
// events held), then reconciled and then run on the loop. Must be called
// on the loop.
func (c *coordinator) reconcile(ls *live, then func()) {
	id := ls.s.ID
	ls.waits().on = waitIO
	c.aside.run(func(ctx context.Context) func() {
		last, err := c.rec.lastSummary(ctx, id)
		return func() {
			if w := ls.wait; w != nil {
				w.on = waitNone
			}
			if c.loop.holds(ls) {
				c.reconciled(ls, last, err)
				then()
			}
			c.loop.unpark(id)
		}
	})
}

// reconciled takes the subject's last summary read by reconcile. Must be
// called on the loop.
func (c *coordinator) reconciled(ls *live, last summaryRecord, err error) {
	s := ls.s
	if err != nil {
		c.p.log.Warn().Err(err).Str("event", "reconcile_failed").Str("session", s.ID).Msg("could not read the last summary; keeping the checkpoint")
		return
	}
	switch c.takeRecord(ls, last, "lease_found") {
	case recordAdopted:
		return
	case recordAwaited:
		// The lease's fold is in the record, and more: none of it is
		// folded again.
		s.Lease = nil
		c.w.markDirty(ls)
		return
	}
	if s.Lease != nil && !s.Lease.Held(c.p.clock.Now()) {
		c.p.log.Info().Str("event", "lease_expired").Str("session", s.ID).Str("fold_id", s.Lease.FoldID).
			Str("owner", s.Lease.Owner).Msg("cleared an expired fold lease; the batch will be folded again")
		s.Lease = nil
		c.w.markDirty(ls)
	}
}

// takeRecord is what an owner does with the subject's last summary when
// it is not the one the session last recorded: adopt it when the session
// has the turns it covers, await those turns when they are still coming,
// or leave it (another epoch, an older version) for the next publish to go
// after.
// Must be called on the loop.
func (c *coordinator) takeRecord(ls *live, last summaryRecord, why string) recordFate {
	switch {
	case ls.s.Adoptable(last.ev):
		c.adopt(ls, last, why)
		return recordAdopted
	case ls.s.Behind(last.ev):
		c.awaitRecord(ls, last, why)
		return recordAwaited
	}
	return recordNotTheSessions
}

// awaitRecord holds the session's folds and evictions until its turns
// reach last's cursor; evaluate then adopts last (heldByRecord).
// Must be called on the loop.
func (c *coordinator) awaitRecord(ls *live, last summaryRecord, why string) {
	s := ls.s
	c.ahead[s.ID] = last
	c.p.log.Info().Str("event", "summary_ahead").Str("session", s.ID).Str("why", why).Uint64("version", last.ev.Version).
		Int64("cursor", last.ev.Cursor).Uint64("previous_version", s.Version).Int64("total_turns", s.Total).
		Msg("the outbound stream holds a later summary of turns still being redelivered; folding waits for them, then adopts it")
}

// heldByRecord adopts the summary the session awaits once its turns reach
// the summary's cursor, and reports whether the session must still wait.
// Must be called on the loop.
func (c *coordinator) heldByRecord(ls *live) bool {
	s := ls.s
	last, ok := c.ahead[s.ID]
	if !ok {
		return false
	}
	switch {
	case s.Behind(last.ev):
		return true
	case s.Adoptable(last.ev):
		c.adopt(ls, last, "turns_replayed")
	}
	// Adopted, or no longer the session's (a reset, an end, a newer summary).
	delete(c.ahead, s.ID)
	return false
}

// adopt makes a summary found on the outbound stream the session's own:
// its owner published it and stopped before a checkpoint recorded it (a
// crash, a partition moved on). The stream is the record of what was
// folded, so the batch is not folded again.
// Must be called on the loop.
func (c *coordinator) adopt(ls *live, last summaryRecord, why string) {
	s, ev := ls.s, last.ev
	c.p.log.Info().Str("event", "summary_recovered").Str("session", s.ID).Str("why", why).Uint64("version", ev.Version).
		Uint64("previous_version", s.Version).Int64("cursor", ev.Cursor).Int64("previous_cursor", s.Cursor).
		Msg("adopted a summary published before the previous owner checkpointed it")
	c.p.m.recovered.Inc()
	if n := int(min(ev.Cursor-s.Cursor, int64(len(s.Turns)))); n > 0 {
		ls.payloads.drop(s.Turns[:n], s.PendingNotes[:min(ev.FoldedNotes, len(s.PendingNotes))])
	}
	s.Adopt(ev, last.seq)
	c.w.markDirty(ls)
}

// abandon drops an in-flight fold of this owner: its result is discarded
// by fold id, and nothing it would have moved moves.
//
// It reports whether the fold is over. If not, the session waits (ls.wait)
// and the caller stops: the loop holds the session's events and resumes it
// (shard.unpark) once the result is back, and the caller's step is taken
// again then. A summary on its way to the stream (a republish) lands
// first; a canceled fold may have been publishing its summary, so nothing
// of it may reach the stream after what comes next (a reset, the end). A
// summary it stored is adopted (applyResult).
// Must be called on the loop.
func (c *coordinator) abandon(ls *live, why string) bool {
	if ls.landing {
		ls.waits().on = waitLanding
		return false
	}
	if ls.cancel != nil {
		ls.cancel()
		ls.cancel = nil
	}
	if ls.s.Lease != nil {
		c.p.log.Info().Str("event", "fold_abandoned").Str("session", ls.s.ID).Str("fold_id", ls.s.Lease.FoldID).Str("why", why).Msg("in-flight fold abandoned")
		ls.s.Lease = nil
	}
	if ls.running != "" {
		ls.waits().on = waitFold
		return false
	}
	return true
}

// waitOver reports whether what the session waits for (abandon) is back,
// and if so ends the wait.
// Must be called on the loop.
func (c *coordinator) waitOver(ls *live) bool {
	w := ls.wait
	if w == nil {
		return true
	}
	switch {
	case w.on == waitLanding && ls.landing, w.on == waitFold && ls.running != "", w.on == waitIO:
		return false // waitIO ends when the call's step is back (aside)
	}
	w.on = waitNone
	return true
}

func (c *coordinator) trigger(ls *live) string {
	if cfg := ls.s.Config; cfg != nil && cfg.Trigger != "" {
		return cfg.Trigger
	}
	return c.p.cfg.Trigger
}

func (c *coordinator) profile(ls *live) fold.Profile {
	if cfg := ls.s.Config; cfg != nil && cfg.Profile != "" {
		return fold.Profile(cfg.Profile)
	}
	return c.p.cfg.Profile
}

// resume checks a session that may have fold work left without an event
// of its own: at start (due mark) or when its wake time has come.
// Must be called on the loop.
func (c *coordinator) resume(id, trigger string) {
	if c.p.cons.rewinding() {
		return // the rewind reloads it; its due mark stays for the next start
	}
	c.loop.withSession(id, func(ls *live) {
		if ls.parked() {
			c.wake[id] = c.p.clock.Now() // looked at again once its wait is over
			return
		}
		ls.due = true
		c.evaluate(ls, trigger, false)
		c.settleDue(ls)
	})
}

// settleDue decides, after a check, whether the session needs another one
// without waiting for an event.
// Must be called on the loop.
func (c *coordinator) settleDue(ls *live) {
	s, now := ls.s, c.p.clock.Now()
	switch {
	case s.Lease != nil && s.Lease.Owner == c.p.cfg.InstanceID:
		return // our fold is running; its result settles the session
	case s.Lease.Held(now):
		c.wake[s.ID] = s.Lease.Deadline // another owner's fold: look again when its lease ends
		return
	case now.Before(s.RetryAfter):
		c.wake[s.ID] = s.RetryAfter
		return
	}
	if at, ok := s.IdleAt(c.policy(ls), now, ls.unfoldedTokens); ok {
		c.wake[s.ID] = at
		return
	}
	delete(c.wake, s.ID)
	// The due mark stays until the session leaves memory (evictIdle):
	// clearing it after every fold would cost a KV write per fold.
}

// Must be called on the loop.
func (c *coordinator) wakeDue() {
	now := c.p.clock.Now()
	for id, at := range c.wake {
		if !now.Before(at) {
			delete(c.wake, id)
			c.resume(id, "retry")
		}
	}
}

// evaluate runs the session's trigger check (its mode's policy, with the
// gates every mode shares) and starts a fold or an eviction, or records
// why not. Must be called on the loop.
func (c *coordinator) evaluate(ls *live, trigger string, force bool) {
	c.check(ls, trigger, force, false)
}

// check is evaluate; reconciled says another owner's expired lease was
// reconciled with the outbound stream already. Must be called on the loop.
func (c *coordinator) check(ls *live, trigger string, force, reconciled bool) {
	p := c.p
	now := p.clock.Now()
	s := ls.s
	if s.Lease != nil && !s.Lease.Held(now) && s.Lease.Owner != p.cfg.InstanceID && !reconciled {
		// Another engine's (a crashed instance, a partition's previous
		// owner): it may have published the summary without checkpointing
		// it. The outbound stream says; adopt it rather than fold again.
		// Checked again once the stream has answered.
		again := trigger
		c.reconcile(ls, func() {
			c.check(ls, again, force, true)
			c.settleDue(ls)
		})
		return
	}
	if s.Lease != nil && !s.Lease.Held(now) {
		p.log.Warn().Str("event", "lease_expired").Str("session", s.ID).Str("fold_id", s.Lease.FoldID).Str("owner", s.Lease.Owner).
			Msg("fold lease passed its deadline; the batch will be folded again")
		waited := !c.abandon(ls, "lease expired")
		c.w.markDirty(ls)
		if waited {
			// Checked again once the fold is back.
			if w := ls.waits(); len(w.steps) == 0 {
				// A copy: capturing trigger itself, which is reassigned
				// below, would move it to the heap on every turn's call.
				again := trigger
				w.steps = append(w.steps, func() { c.evaluate(ls, again, force) })
			}
			return
		}
	}
	pol := c.policy(ls)
	if c.heldByRecord(ls) {
		// The batch due is folded already, in the summary awaited: to
		// whoever asks, that fold is in flight.
		if trigger == "generate" || trigger == "compact" {
			c.skip(ls, pol, fold.Decision{Reason: fold.SkipAlreadyInFlight}, trigger)
		}
		return
	}
	if s.Ended {
		c.finish(ls, pol)
		return
	}
	d := pol.Plan(s.Check(pol, now, force, ls.unfoldedTokens))
	if d.Cause == fold.CauseIdle {
		trigger = "idle"
	}
	if !d.Fold {
		c.skip(ls, pol, d, trigger)
		if d.Reason == fold.SkipAlreadyInFlight && s.Lease.Owner != p.cfg.InstanceID {
			c.wake[s.ID] = s.Lease.Deadline // a dead owner's lease: fold when it ends
		}
		return
	}
	ls.lastSkip = ""
	c.startFold(ls, pol, d, trigger)
}

// skip logs every skip (debug for the per-turn below_threshold) and
// publishes it when the reason changes or the check was asked for, so the
// stream explains the session without carrying one event per turn.
// Must be called on the loop.
func (c *coordinator) skip(ls *live, pol fold.Policy, d fold.Decision, trigger string) {
	p := c.p
	p.m.skips.WithLabelValues(string(d.Reason)).Inc()
	explicit := trigger == "generate" || trigger == "compact"
	// below_threshold is a session's normal state between folds: it is
	// logged, and published only when a check was asked for.
	publish := explicit || (d.Reason != ls.lastSkip && d.Reason != fold.SkipBelowThreshold)
	level := zerolog.DebugLevel
	if publish && d.Reason != fold.SkipBelowThreshold {
		level = zerolog.InfoLevel
	}
	p.log.WithLevel(level).Str("event", "context_compaction_skipped").Str("session", ls.s.ID).Str("reason", string(d.Reason)).
		Str("mode", string(pol.Mode)).Str("trigger", trigger).Int64("cursor", ls.s.Cursor).Int64("total_turns", ls.s.Total).
		Int64("recent_start", d.RecentStart).Int64("eligible", d.Eligible).Int("estimate_tokens", d.Estimate).Int("limit_tokens", d.Limit).
		Msg("compaction skipped")
	if !publish {
		return
	}
	ls.lastSkip = d.Reason
	c.rec.lifecycle(ls.s, events.Lifecycle{
		Type: events.EventCompactionSkipped, Reason: string(d.Reason), Trigger: trigger, Mode: string(pol.Mode),
		RecentStart: d.RecentStart, Eligible: d.Eligible, Estimate: d.Estimate, Limit: d.Limit,
	})
}

// Must be called on the loop.
func (c *coordinator) startFold(ls *live, pol fold.Policy, d fold.Decision, trigger string) {
	p := c.p
	s := ls.s
	now := p.clock.Now()
	n := int(d.To - d.From)
	if n > len(s.Turns) {
		p.log.Error().Str("event", "state_inconsistent").Str("session", s.ID).Int("batch", n).Int("held_turns", len(s.Turns)).
			Msg("fewer unfolded turns held than the batch needs; skipping fold")
		return
	}
	// While the summarizer's endpoint refuses every request, no fold calls
	// it: the session backs off (retry_backoff) until a probe is due, and
	// at most RetryBackoffMax, so that it folds soon after the breaker
	// closes. A compact control probes at once. A session past its
	// emergency threshold (mode tokens) folds with the placeholder tier
	// instead (the previous summary kept, the batch noted), which needs no model: its context must not overflow while
	// the endpoint is down.
	ok, probe, retryAt := true, false, time.Time{}
	if d.Model {
		ok, probe, retryAt = p.breaker.Begin(now, d.Cause == fold.CauseForced)
	}
	placeholderOnly := !ok && d.Placeholder
	if !ok && !placeholderOnly {
		d.Fold, d.Action, d.Reason = false, fold.ActionNone, fold.SkipRetryBackoff
		c.skip(ls, pol, d, trigger)
		s.RetryAfter = now.Add(p.cfg.RetryBackoffMax)
		if retryAt.Before(s.RetryAfter) {
			s.RetryAfter = retryAt
		}
		c.w.markDirty(ls)
		c.wake[s.ID] = s.RetryAfter
		return
	}
	if !ls.due {
		if err := p.store.MarkDue(s.ID); err != nil {
			p.log.Warn().Err(err).Str("event", "due_mark_failed").Str("session", s.ID).Msg("could not mark the session due; an interrupted fold resumes on its next event")
		} else {
			ls.due = true
		}
	}
	s.Lease = &state.Lease{
		FoldID: nuid.Next(), Owner: p.cfg.InstanceID, Deadline: now.Add(p.cfg.LeaseTTL),
		From: d.From, To: d.To, Notes: len(s.PendingNotes),
	}
	// The lease goes to KV with the session's next checkpoint, not before
	// the fold: a fold that outlasts a flush shows other owners (and the
	// context service) that it is in flight, and one that is done sooner
	// costs no write of its own. What keeps two owners from both
	// recording version v+1 is the summary's publish, which expects the
	// subject's last sequence (publish.go: sendSummary), not the lease.
	c.w.markDirty(ls)
	job := foldJob{
		session: s.ID, foldID: s.Lease.FoldID, trigger: trigger, profile: c.profile(ls), window: pol.Window, policy: pol, cause: d.Cause,
		exchanges: s.Exchanges, final: trigger == "end",
		// The placeholder tier: a session past its emergency threshold whose
		// folds keep failing gets a placeholder rather than overflowing.
		placeholderOK: d.Placeholder && s.Failures >= 2, model: d.Model,
		evicted:    fold.Eviction{Count: s.Evicted, Tokens: s.EvictedTokens, First: time.UnixMilli(s.FirstEvictedAt).UTC()},
		summarySeq: s.SummarySeq, epoch: s.Epoch, probe: probe, placeholderOnly: placeholderOnly,
		prev: s.Summary, prevState: s.SummaryState, from: d.From, to: d.To, started: now, prevVer: s.Version, compactns: s.Compactions,
		turns: append([]state.TurnRef(nil), s.Turns[:n]...),
		notes: append([]state.NoteRef(nil), s.PendingNotes...),
	}
	if len(ls.payloads) > 0 {
		job.payloads = ls.payloads.of(job.turns, job.notes)
	}
	p.m.folds.WithLabelValues("started").Inc()
	p.m.inFlight.Inc()
	c.rec.lifecycle(ls.s, events.Lifecycle{
		Type: events.EventCompactionStarted, FoldID: job.foldID, Trigger: trigger, Mode: string(pol.Mode), Cause: d.Cause,
		Estimate: d.Estimate, Limit: d.Limit, RecentStart: d.RecentStart, Eligible: d.Eligible, BatchSize: n, BatchFrom: d.From, BatchTo: d.To - 1,
		PendingNoteCount: len(job.notes),
	})
	p.log.Info().Str("event", "context_compaction_started").Str("session", s.ID).Str("fold_id", job.foldID).Str("trigger", trigger).
		Str("mode", string(pol.Mode)).Str("cause", d.Cause).Int("estimate_tokens", d.Estimate).
		Int64("cursor", s.Cursor).Int("batch_size", n).Int64("recent_start", d.RecentStart).Int("pending_note_count", len(job.notes)).
		Int64("total_turns", s.Total).Msg("compaction started")

	ctx, cancel := context.WithTimeout(c.foldCtx, p.cfg.FoldTimeout)
	ls.cancel = cancel
	ls.running = job.foldID
	c.inFlight++
	p.folds.Add(1)
	go func() {
		defer p.folds.Done()
		defer cancel()
		r := c.run.runFold(ctx, job)
		if r.err == nil && ctx.Err() != nil {
			// Abandoned (a reset, an end, shutdown) or past the fold
			// timeout while a summarizer that ignores its context ran:
			// too late to publish.
			r.err, r.model = fmt.Errorf("summary ready after the fold ended: %w", context.Cause(ctx)), false
		}
		if r.err == nil {
			c.rec.sendSummary(&r, job.summarySeq)
		}
		c.results <- r
	}()
	// Let the fold run now, before the rest of the shard's batch: a new
	// goroutine otherwise waits until the shard blocks, and under full
	// ingest that is most of a fold's latency from trigger to summarizer
	// called (cmd/bench's fold section measures it). The fold soon blocks
	// on its model call or its publish, and the shard goes on.
	runtime.Gosched()
}

// resultBack counts a fold result back, before its session is at hand
// (applyResult). Must be called on the loop.
func (c *coordinator) resultBack() {
	c.inFlight--
	c.p.m.inFlight.Dec()
}

// applyResult lands a fold's result on the loop: the summary is on the
// stream (the record), so the cursor moves, the checkpoint follows, and
// the next batch is looked for (catch-up). A failure, a refused publish
// or an abandoned fold are handled here too. An eviction (mode evict) is
// such a fold, its summary the eviction note. ls is the session, reloaded
// if a rewind dropped it. Must be called on the loop.
func (c *coordinator) applyResult(ls *live, r foldResult) {
	p := c.p
	if ls.running == r.job.foldID {
		ls.running = ""
	}
	if r.republished {
		ls.landing = false
	}
	if ls.s.Lease == nil || ls.s.Lease.FoldID != r.job.foldID {
		if r.err == nil && !r.conflict {
			// Abandoned (a reset, an end) or reloaded after a rewind, but
			// its summary is stored: the stream is the record, so take it
			// if the session can, as a new owner would (publishConflict
			// sorts out the rest at the next publish).
			if c.takeRecord(ls, summaryRecord{ev: r.summary, seq: r.seq}, "abandoned_fold_published") == recordAdopted {
				return
			}
		}
		p.m.folds.WithLabelValues("discarded").Inc()
		p.log.Info().Str("event", "fold_result_discarded").Str("session", r.job.session).Str("fold_id", r.job.foldID).
			Msg("fold result arrived after its lease was dropped (reset, end, expiry or shutdown); nothing moved")
		return
	}
	ls.cancel = nil
	s := ls.s
	now := p.clock.Now()
	latency := now.Sub(r.job.started)
	if r.err != nil {
		c.failed(ls, r, latency)
		return
	}
	if r.conflict {
		c.publishConflict(ls, r, latency)
		return
	}
	oldCursor := s.Cursor
	ls.payloads.drop(r.job.turns, r.job.notes)
	s.Land(state.Landing{
		Summary: r.out.Summary, Version: r.job.prevVer + 1, Seq: r.seq, To: r.job.to, Notes: len(r.job.notes), At: now,
		SummaryTokens: r.sumToks, OriginalTokens: r.origToks, Exchanges: r.job.exchanges, State: r.out.State, Note: r.out.Note,
	})
	c.publishMemories(ls, r, s.Version)
	if s.Sealed <= oldCursor && !r.job.final {
		// Checkpointed with the next flush: until then the lease in KV
		// makes any new owner adopt the summary just published.
		c.w.markDirty(ls)
	} else {
		c.w.checkpointThen(ls, c.dropPassed(s, oldCursor))
	}
	p.m.folds.WithLabelValues("completed").Inc()
	p.landed.Add(1)
	p.m.foldLatency.Observe(latency.Seconds())
	p.m.sumTokens.WithLabelValues("input").Add(float64(r.out.InputTokens))
	p.m.sumTokens.WithLabelValues("output").Add(float64(r.out.OutputTokens))
	p.m.foldedToks.Add(float64(r.origToks))
	c.rec.lifecycle(ls.s, events.Lifecycle{
		Type: events.EventCompactionCompleted, FoldID: r.job.foldID, Trigger: r.job.trigger, Mode: string(r.job.policy.Mode), Cause: r.job.cause,
		Chunks: r.out.Chunks, SkippedTurns: r.out.SkippedTurns, MaskedTurns: r.masked, OldCursor: oldCursor, NewCursor: s.Cursor, CoveredThroughTurn: s.CoveredThrough,
		SummaryChars: utf8.RuneCountInString(s.Summary), Version: s.Version, Tier: string(r.out.Tier),
		LatencyMS: latency.Milliseconds(), Model: r.out.Model,
	})
	p.log.Info().Str("event", "context_compaction_completed").Str("session", s.ID).Str("fold_id", r.job.foldID).
		Str("mode", string(r.job.policy.Mode)).Int("chunks", r.out.Chunks).Int("skipped_turns", r.out.SkippedTurns).Int("masked_turns", r.masked).
		Int64("old_cursor", oldCursor).Int64("new_cursor", s.Cursor).Int64("covered_through_turn", s.CoveredThrough).
		Int("summary_chars", utf8.RuneCountInString(s.Summary)).Uint64("version", s.Version).Str("tier", string(r.out.Tier)).
		Str("model", r.out.Model).Int64("latency_ms", latency.Milliseconds()).Msg("compaction completed")
	p.log.Debug().Str("event", "summary_text").Str("session", s.ID).Uint64("version", s.Version).Str("summary", s.Summary).Msg("summary")
	if r.job.final {
		c.archive(ls, "end")
		return
	}
	if c.loop.holds(ls) {
		c.evaluate(ls, "catch_up", false)
		c.settleDue(ls)
	}
}

// publishConflict handles a summary the stream refused because the
// subject's last summary is not the one the session last recorded.
// Must be called on the loop.
func (c *coordinator) publishConflict(ls *live, r foldResult, latency time.Duration) {
	p := c.p
	s := ls.s
	switch c.takeRecord(ls, r.last, "publish_conflict") {
	case recordAdopted:
		// Another owner folded this batch (or more) and published it, then
		// stopped before its checkpoint: its summary stands, this one is
		// dropped, and the session goes on from that summary's cursor.
		p.m.folds.WithLabelValues("superseded").Inc()
		p.log.Info().Str("event", "fold_superseded").Str("session", s.ID).Str("fold_id", r.job.foldID).Uint64("version", s.Version).
			Msg("fold result dropped: the outbound stream already holds a newer summary of the session, adopted instead")
		if c.loop.holds(ls) {
			c.evaluate(ls, "catch_up", false)
			c.settleDue(ls)
		}
		return
	case recordAwaited:
		// This owner's checkpoint is older than what it (or another owner)
		// published since, and the batch is one the record holds: wait for
		// the turns, then take the record (heldByRecord).
		s.Lease = nil
		c.w.markDirty(ls)
		p.m.folds.WithLabelValues("superseded").Inc()
		p.log.Info().Str("event", "fold_superseded").Str("session", s.ID).Str("fold_id", r.job.foldID).Uint64("version", r.last.ev.Version).
			Msg("fold result dropped: the outbound stream already holds a later summary of the session, adopted once its turns are replayed")
		return
	}
	last := r.last
	if r.republished {
		r.err = fmt.Errorf("publish summary-updated: refused twice; the subject's last sequence moved again, to %d", last.seq)
		c.failed(ls, r, latency)
		return
	}
	// The subject's last summary is one the session cannot take: its own
	// version from a checkpoint written before SummarySeq was kept, none
	// (aged out of the stream), or one made before a reset. Publish after
	// it, with a version above it so versions keep increasing.
	p.log.Info().Str("event", "summary_sequence_resynced").Str("session", s.ID).Str("fold_id", r.job.foldID).
		Uint64("expected_seq", s.SummarySeq).Uint64("last_seq", last.seq).Msg("summary subject's last sequence learned from the stream; publishing again")
	s.SummarySeq = last.seq
	if last.ev != nil && last.ev.Version > r.job.prevVer {
		r.job.prevVer = last.ev.Version // the session takes it when this lands
	}
	r.job.summarySeq = last.seq
	r.conflict, r.last, r.republished = false, summaryRecord{}, true
	c.republish(ls, r)
}

// Must be called on the loop.
func (c *coordinator) failed(ls *live, r foldResult, latency time.Duration) {
	p := c.p
	s := ls.s
	re := retry.Classify(r.err)
	canceled := errors.Is(r.err, context.Canceled) || re.Class == retry.Canceled
	why := state.FailTransient
	switch {
	case canceled:
		why = state.FailCanceled
	case r.model && retry.Persistent(re.Class):
		why = state.FailPersistent
	case r.model:
		// A failing model backs off exponentially so it is not hammered.
		// When the whole endpoint refuses, the breaker (runFold reported
		// to it) stops every session's calls.
		why = state.FailModel
	}
	s.Fail(p.clock.Now(), why, p.cfg.RetryBackoff, p.cfg.RetryBackoffMax)
	c.w.markDirty(ls)
	if !canceled {
		c.wake[s.ID] = s.RetryAfter // retried then even if the session stays quiet
	}
	p.m.folds.WithLabelValues("failed").Inc()
	retryable := re.Retryable
	c.rec.lifecycle(ls.s, events.Lifecycle{
		Type: events.EventCompactionFailed, FoldID: r.job.foldID, Trigger: r.job.trigger, Mode: string(r.job.policy.Mode),
		BatchFrom: r.job.from, BatchTo: r.job.to - 1, Model: p.sum.Name(), ErrorClass: string(re.Class),
		Retryable: &retryable, Error: r.err.Error(), LatencyMS: latency.Milliseconds(),
	})
	p.log.Warn().Err(r.err).Str("event", "context_compaction_failed").Str("session", s.ID).Str("fold_id", r.job.foldID).
		Str("model", p.sum.Name()).Str("error_class", string(re.Class)).Bool("retryable", retryable).
		Int64("cursor", s.Cursor).Int("failures", s.Failures).Time("retry_after", s.RetryAfter).
		Int64("latency_ms", latency.Milliseconds()).Msg("compaction failed; summary and cursor unchanged")
}

// dropPassed is the step that drops the sealed chunks a fold from
// oldCursor to s's cursor now has passed, once the checkpoint that moved
// past them is stored; nothing if the session was reset meanwhile.
func (c *coordinator) dropPassed(s *state.Session, oldCursor int64) func() {
	epoch, newCursor := s.Epoch, s.Cursor
	return func() {
		if s.Epoch == epoch {
			c.aside.dropChunks(s, oldCursor, min(newCursor, s.Cursor))
		}
	}
}

// finish runs the end of an ended session: a final fold of
// everything still verbatim (with memory extraction), then archive and
// clear. It is re-entered on every check of the session until the archive
// is written, so a failed final fold or a crash only delays it.
// Must be called on the loop.
func (c *coordinator) finish(ls *live, pol fold.Policy) {
	p := c.p
	s := ls.s
	now := p.clock.Now()
	switch {
	case s.Archived || p.cfg.KeepEnded:
		return
	case s.Lease.Held(now):
		if s.Lease.Owner != p.cfg.InstanceID {
			c.wake[s.ID] = s.Lease.Deadline
		}
		return
	case now.Before(s.RetryAfter):
		c.wake[s.ID] = s.RetryAfter
		return
	}
	if d := pol.PlanEnd(s.Cursor, s.Total, len(s.PendingNotes)); d.Fold {
		c.startFold(ls, pol, d, "end")
		return
	}
	c.archive(ls, "end")
}

// archive writes the session's final state to its archive key and
// replaces the checkpoint with a tombstone that refuses later events. The
// write runs aside, the session waiting for it (its events held); a failed
// write is retried after the backoff (wake). Must be called on the loop.
func (c *coordinator) archive(ls *live, reason string) {
	if w := ls.wait; w != nil && w.on == waitIO {
		return // being written
	}
	p, s := c.p, ls.s
	a, err := s.Archival()
	if err != nil {
		c.archiveFailed(ls, reason, err)
		return
	}
	ls.waits().on = waitIO
	c.aside.run(func(ctx context.Context) func() {
		err := p.store.WriteArchive(ctx, a)
		return func() {
			if w := ls.wait; w != nil {
				w.on = waitNone
			}
			if c.loop.holds(ls) && ls.s == s {
				c.archived(ls, reason, err)
			}
			c.loop.unpark(s.ID)
		}
	})
}

// archiveFailed schedules another try of a failed archive write. Must be
// called on the loop.
func (c *coordinator) archiveFailed(ls *live, reason string, err error) {
	p, s := c.p, ls.s
	s.RetryAfter = p.clock.Now().Add(p.cfg.RetryBackoff)
	c.wake[s.ID] = s.RetryAfter
	c.w.markDirty(ls)
	p.log.Warn().Err(err).Str("event", "archive_failed").Str("session", s.ID).Str("reason", reason).Msg("session not archived yet; retried after the backoff")
}

// archived lands an archive write: the checkpoint becomes the tombstone.
// Must be called on the loop.
func (c *coordinator) archived(ls *live, reason string, err error) {
	p, s := c.p, ls.s
	if err != nil {
		c.archiveFailed(ls, reason, err)
		return
	}
	epoch := s.Epoch
	c.aside.dropChunks(s, s.Cursor, s.Sealed)
	summary, total, version := s.Summary, s.Total, s.Version
	if reason == "end" {
		ls.s = s.Tombstone()
		ls.payloads = nil
		c.w.markDirty(ls)
	}
	c.rec.lifecycle(ls.s, events.Lifecycle{Type: events.EventSessionArchived, Reason: reason, Version: version,
		SummaryChars: utf8.RuneCountInString(summary)})
	p.log.Info().Str("event", "session_archived").Str("session", s.ID).Str("reason", reason).Uint32("epoch", epoch).
		Int64("total_turns", total).Uint64("version", version).Msg("session archived")
}

// autoReset applies the session's reset policy before an event that
// arrives after the policy's boundary: the old life is archived as it is
// (its unfolded turns stay referenced in the archive), then Apply resets
// the session the same way the context service and a replay do.
//
// It reports false if the session must first wait, for its fold (abandon)
// or for the archive write, which runs aside: the caller stops and takes
// the event again once the wait is over. Must be called on the loop.
func (c *coordinator) autoReset(ls *live, why string) bool {
	p := c.p
	if !c.abandon(ls, "session reset ("+why+" policy)") {
		return false
	}
	if !ls.resetArchived && (ls.s.Total > 0 || ls.s.Summary != "") {
		a, err := ls.s.Archival()
		if err == nil {
			id := ls.s.ID
			ls.waits().on = waitIO
			c.aside.run(func(ctx context.Context) func() {
				err := p.store.WriteArchive(ctx, a)
				return func() {
					if w := ls.wait; w != nil {
						w.on = waitNone
					}
					c.resetArchive(id, why, err)
					ls.resetArchived = true
					c.loop.unpark(id)
				}
			})
			return false
		}
		c.resetArchive(ls.s.ID, why, err)
	}
	ls.resetArchived = false
	c.aside.dropChunks(ls.s, ls.s.Cursor, ls.s.Sealed)
	ls.payloads = nil
	ls.lastSkip = ""
	c.rec.lifecycle(ls.s, events.Lifecycle{Type: events.EventSessionReset, Reason: why})
	p.log.Info().Str("event", "session_reset").Str("session", ls.s.ID).Str("reason", why).Int64("total_turns", ls.s.Total).
		Msg("session reset by its reset policy")
	return true
}

// resetArchive logs an archive before a policy reset that failed.
func (c *coordinator) resetArchive(id, why string, err error) {
	if err != nil {
		c.p.log.Warn().Err(err).Str("event", "archive_failed").Str("session", id).Str("reason", why).
			Msg("the session is reset without an archive; its turns stay in the inbound stream")
	}
}
