package processor

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"context"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// machine is a shard's session machine: every decision of a session's
// fold lifecycle, made on the session's state and the time it is given,
// and returned as effects for the coordinator to carry out
// (coordinator.run). It decides whether and what to fold (evaluate: the
// mode's plan, the skips, the final fold of an ended session), what a
// fold's result does (land, fail, a refused publish), what a summary found
// on the outbound stream does (adopt it, or await the turns it covers),
// and when a session must be looked at again (wakes). It makes no NATS or
// KV call, starts no goroutine and reads no clock: it only changes the
// session and logs and counts what it decided. Its methods must be called
// on the loop.
type machine struct {
	cfg     Config      // the deployment's settings (instance, lease, backoffs, defaults)
	deploy  fold.Policy // the deployment's policy; sessions may override it
	plain   fold.Policy // deploy as a session without overrides folds with
	breaker *retry.Breaker
	model   string // the summarizer's name, for failure events
	log     zerolog.Logger
	m       *metrics
	landed  *atomic.Uint64 // folds completed (Processor.Folds)
	// policies: the resolved policy of each configuration in use (policy)
	policies map[*events.SessionConfig]fold.Policy
	// ahead holds, for sessions reloaded behind the outbound stream, the
	// later summary to adopt once their redelivered turns reach its cursor
	// (await).
	ahead map[string]summaryRecord
	// skipped: the skips counter of each reason seen, resolved once (a
	// check skips on most turns, below_threshold).
	skipped map[fold.SkipReason]prometheus.Counter
}

// newMachine is a session machine for cfg (with its defaults) and the
// summarizer named model behind breaker; it counts on m and landed.
func newMachine(cfg Config, breaker *retry.Breaker, model string, log zerolog.Logger, m *metrics, landed *atomic.Uint64) *machine {
	deploy := cfg.policy()
	return &machine{
		cfg: cfg, deploy: deploy, plain: deploy.WithRecall(cfg.RecallEnabled), breaker: breaker, model: model, log: log, m: m,
		landed: landed, policies: make(map[*events.SessionConfig]fold.Policy), ahead: make(map[string]summaryRecord),
		skipped: make(map[fold.SkipReason]prometheus.Counter),
	}
}

// effects are what one step of the machine asks of the loop. The
// coordinator carries them out in the order of the fields.
type effects struct {
	// abandon: the session's fold must be abandoned (why) before the
	// check is taken again (recheck).
	abandon string
	// reconcile: read the subject's last summary (another owner's lease
	// may have published it), hand it to reconciled, then take recheck.
	reconcile bool
	recheck   *recheck
	markDue   bool     // mark the session due (state.Store.MarkDue) before its fold starts
	start     *foldJob // start this fold; the session holds its lease
	// memories: publish the landed fold's new memories (r's), recorded as
	// the session's version.
	memories *foldResult
	events   []events.Lifecycle // publish, in order
	// republish: publish the refused summary of r once more.
	republish *foldResult
	dirty     bool // write the session with the next flush
	// save: write the session now, then drop the sealed chunks from
	// dropFrom to the cursor it was written with.
	save     bool
	dropFrom int64
	drop     *chunkDrop // drop these sealed chunks now (an archive)
	archive  string     // archive the session (the reason)
	wakes    []wakeOp   // changes to when the session is looked at again, in order
	again    bool       // check the session again (catch-up) if it is still the loop's
}

// recheck is a check to take again once what it waited for is back.
type recheck struct {
	trigger string
	force   bool
	// loaded: the check of a session just loaded with a lease (loaded),
	// which only sets its wake.
	loaded bool
}

// chunkDrop is a range of a session's sealed chunks to drop.
type chunkDrop struct {
	s        *state.Session
	from, to int64
}

// wakeOp changes a session's wake: set it to at, or to at if that is
// sooner (earliest), or clear it.
type wakeOp struct {
	at       time.Time
	earliest bool
	clear    bool
}

// event appends a lifecycle event of s, with its cursor and turns as of now.
func (e *effects) event(s *state.Session, ev events.Lifecycle) {
	ev.Cursor, ev.TotalTurns = s.Cursor, s.Total
	e.events = append(e.events, ev)
}

func (e *effects) wake(at time.Time)   { e.wakes = append(e.wakes, wakeOp{at: at}) }
func (e *effects) wakeBy(at time.Time) { e.wakes = append(e.wakes, wakeOp{at: at, earliest: true}) }

// policy is the session's compaction policy: the deployment's, with the
// session's configured overrides. It is resolved once per configuration,
// not per turn: a session without a configure shares the deployment's,
// and a configured one's is kept by its config (a configure installs a
// new one, so a changed configuration is a new key).
func (m *machine) policy(ls *live) fold.Policy {
	cfg := ls.s.Config
	if cfg == nil {
		return m.plain
	}
	if p, ok := m.policies[cfg]; ok {
		return p
	}
	if len(m.policies) >= maxPolicies {
		clear(m.policies) // configs of sessions long gone; resolved again on use
	}
	p := withOverrides(m.deploy, cfg).WithRecall(m.cfg.RecallEnabled)
	m.policies[cfg] = p
	return p
}

// trigger is what the session folds on: every turn, or generate controls.
func (m *machine) trigger(ls *live) string {
	if cfg := ls.s.Config; cfg != nil && cfg.Trigger != "" {
		return cfg.Trigger
	}
	return m.cfg.Trigger
}

func (m *machine) profile(ls *live) fold.Profile {
	if cfg := ls.s.Config; cfg != nil && cfg.Profile != "" {
		return fold.Profile(cfg.Profile)
	}
	return m.cfg.Profile
}

// loaded looks at a session just loaded from its checkpoint: a lease in it
// is reconciled with the outbound stream, and the session is checked again
// without waiting for an event (it may never send another one) once the
// lease or its backoff ends.
func (m *machine) loaded(ls *live, now time.Time) (e effects) {
	s := ls.s
	switch {
	case s.Lease != nil:
		e.reconcile, e.recheck = true, &recheck{loaded: true}
	case now.Before(s.RetryAfter):
		e.wake(s.RetryAfter)
	}
	return e
}

// leaseWake is the wake of a session loaded with a lease, once the lease
// was reconciled: when the lease ends, or now.
func (m *machine) leaseWake(ls *live, now time.Time) (e effects) {
	if ls.s.Lease.Held(now) {
		e.wake(ls.s.Lease.Deadline)
	} else {
		e.wake(now)
	}
	return e
}

// turn is the checks a newly applied turn calls for: the trigger check
// when the session folds on turns, and the idle wake of a mode that folds
// quiet sessions.
func (m *machine) turn(ls *live, now time.Time) effects {
	var e effects
	if m.trigger(ls) == TriggerTurn {
		e = m.evaluate(ls, now, "turn", false, false)
	}
	if at, ok := ls.s.IdleAt(m.policy(ls), now, ls.unfoldedTokens); ok {
		e.wakeBy(at) // a quiet session is folded at the idle threshold
	}
	return e
}

// reconciled takes the subject's last summary read for a session loaded
// with a lease (reconcile).
func (m *machine) reconciled(ls *live, last summaryRecord, err error, now time.Time) (e effects) {
	s := ls.s
	if err != nil {
		m.log.Warn().Err(err).Str("event", "reconcile_failed").Str("session", s.ID).Msg("could not read the last summary; keeping the checkpoint")
		return e
	}
	fate, e := m.takeRecord(ls, last, "lease_found")
	switch fate {
	case recordAdopted:
		return e
	case recordAwaited:
		// The lease's fold is in the record, and more: none of it is
		// folded again.
		s.Lease = nil
		e.dirty = true
		return e
	}
	if s.Lease != nil && !s.Lease.Held(now) {
		m.log.Info().Str("event", "lease_expired").Str("session", s.ID).Str("fold_id", s.Lease.FoldID).
			Str("owner", s.Lease.Owner).Msg("cleared an expired fold lease; the batch will be folded again")
		s.Lease = nil
		e.dirty = true
	}
	return e
}

// takeRecord is what an owner does with the subject's last summary when
// it is not the one the session last recorded: adopt it when the session
// has the turns it covers, await those turns when they are still coming,
// or leave it (another epoch, an older version) for the next publish to go
// after.
func (m *machine) takeRecord(ls *live, last summaryRecord, why string) (recordFate, effects) {
	switch {
	case ls.s.Adoptable(last.ev):
		return recordAdopted, m.adopt(ls, last, why)
	case ls.s.Behind(last.ev):
		m.await(ls, last, why)
		return recordAwaited, effects{}
	}
	return recordNotTheSessions, effects{}
}

// await holds the session's folds until its turns reach last's cursor;
// evaluate then adopts last (heldByRecord).
func (m *machine) await(ls *live, last summaryRecord, why string) {
	s := ls.s
	m.ahead[s.ID] = last
	m.log.Info().Str("event", "summary_ahead").Str("session", s.ID).Str("why", why).Uint64("version", last.ev.Version).
		Int64("cursor", last.ev.Cursor).Uint64("previous_version", s.Version).Int64("total_turns", s.Total).
		Msg("the outbound stream holds a later summary of turns still being redelivered; folding waits for them, then adopts it")
}

// heldByRecord adopts the summary the session awaits once its turns reach
// the summary's cursor, and reports whether the session must still wait.
func (m *machine) heldByRecord(ls *live, e *effects) bool {
	s := ls.s
	last, ok := m.ahead[s.ID]
	if !ok {
		return false
	}
	switch {
	case s.Behind(last.ev):
		return true
	case s.Adoptable(last.ev):
		a := m.adopt(ls, last, "turns_replayed")
		e.dirty = e.dirty || a.dirty
	}
	// Adopted, or no longer the session's (a reset, an end, a newer summary).
	delete(m.ahead, s.ID)
	return false
}

// adopt makes a summary found on the outbound stream the session's own:
// its owner published it and stopped before a checkpoint recorded it (a
// crash, a partition moved on). The stream is the record of what was
// folded, so the batch is not folded again.
func (m *machine) adopt(ls *live, last summaryRecord, why string) effects {
	s, ev := ls.s, last.ev
	m.log.Info().Str("event", "summary_recovered").Str("session", s.ID).Str("why", why).Uint64("version", ev.Version).
		Uint64("previous_version", s.Version).Int64("cursor", ev.Cursor).Int64("previous_cursor", s.Cursor).
		Msg("adopted a summary published before the previous owner checkpointed it")
	m.m.recovered.Inc()
	if n := int(min(ev.Cursor-s.Cursor, int64(len(s.Turns)))); n > 0 {
		ls.payloads.drop(s.Turns[:n], s.PendingNotes[:min(ev.FoldedNotes, len(s.PendingNotes))])
	}
	s.Adopt(ev, last.seq)
	return effects{dirty: true}
}

// abandon drops the session's fold lease: a result of the fold is then
// discarded by fold id, and nothing it would have moved moves. It reports
// whether the fold's goroutine is still out (its result must be waited
// for).
func (m *machine) abandon(ls *live, why string) bool {
	if ls.s.Lease != nil {
		m.log.Info().Str("event", "fold_abandoned").Str("session", ls.s.ID).Str("fold_id", ls.s.Lease.FoldID).Str("why", why).Msg("in-flight fold abandoned")
		ls.s.Lease = nil
	}
	return ls.running != ""
}

// settle decides, after a check, whether the session needs another one
// without waiting for an event.
func (m *machine) settle(ls *live, now time.Time) (e effects) {
	s := ls.s
	switch {
	case s.Lease != nil && s.Lease.Owner == m.cfg.InstanceID:
		return e // our fold is running; its result settles the session
	case s.Lease.Held(now):
		e.wake(s.Lease.Deadline) // another owner's fold: look again when its lease ends
		return e
	case now.Before(s.RetryAfter):
		e.wake(s.RetryAfter)
		return e
	}
	if at, ok := s.IdleAt(m.policy(ls), now, ls.unfoldedTokens); ok {
		e.wake(at)
		return e
	}
	e.wakes = append(e.wakes, wakeOp{clear: true})
	// The due mark stays until the session leaves memory (evictIdle):
	// clearing it after every fold would cost a KV write per fold.
	return e
}

// evaluate runs the session's trigger check (its mode's policy, with the
// gates every mode shares): a fold to start, or why not. reconciled says
// another owner's expired lease was reconciled with the outbound stream
// already.
func (m *machine) evaluate(ls *live, now time.Time, trigger string, force, reconciled bool) (e effects) {
	s := ls.s
	if s.Lease != nil && !s.Lease.Held(now) && s.Lease.Owner != m.cfg.InstanceID && !reconciled {
		// Another engine's (a crashed instance, a partition's previous
		// owner): it may have published the summary without checkpointing
		// it. The outbound stream says; adopt it rather than fold again.
		// Checked again once the stream has answered.
		e.reconcile, e.recheck = true, &recheck{trigger: trigger, force: force}
		return e
	}
	if s.Lease != nil && !s.Lease.Held(now) {
		m.log.Warn().Str("event", "lease_expired").Str("session", s.ID).Str("fold_id", s.Lease.FoldID).Str("owner", s.Lease.Owner).
			Msg("fold lease passed its deadline; the batch will be folded again")
		e.abandon, e.recheck = "lease expired", &recheck{trigger: trigger, force: force}
		return e
	}
	pol := m.policy(ls)
	if m.heldByRecord(ls, &e) {
		// The batch due is folded already, in the summary awaited: to
		// whoever asks, that fold is in flight.
		if trigger == "generate" || trigger == "compact" {
			m.skip(ls, pol, fold.Decision{Reason: fold.SkipAlreadyInFlight}, trigger, &e)
		}
		return e
	}
	if s.Ended {
		m.finish(ls, pol, now, &e)
		return e
	}
	d := pol.Plan(s.Check(pol, now, force, ls.unfoldedTokens))
	if d.Cause == fold.CauseIdle {
		trigger = "idle"
	}
	if !d.Fold {
		m.skip(ls, pol, d, trigger, &e)
		if d.Reason == fold.SkipAlreadyInFlight && s.Lease.Owner != m.cfg.InstanceID {
			e.wake(s.Lease.Deadline) // a dead owner's lease: fold when it ends
		}
		return e
	}
	ls.lastSkip = ""
	m.start(ls, pol, d, trigger, now, &e)
	return e
}

// skip logs every skip (debug for the per-turn below_threshold) and
// publishes it when the reason changes or the check was asked for, so the
// stream explains the session without carrying one event per turn.
func (m *machine) skip(ls *live, pol fold.Policy, d fold.Decision, trigger string, e *effects) {
	c, ok := m.skipped[d.Reason]
	if !ok {
		c = m.m.skips.WithLabelValues(string(d.Reason))
		m.skipped[d.Reason] = c
	}
	c.Inc()
	explicit := trigger == "generate" || trigger == "compact"
	// below_threshold is a session's normal state between folds: it is
	// logged, and published only when a check was asked for.
	publish := explicit || (d.Reason != ls.lastSkip && d.Reason != fold.SkipBelowThreshold)
	level := zerolog.DebugLevel
	if publish && d.Reason != fold.SkipBelowThreshold {
		level = zerolog.InfoLevel
	}
	m.log.WithLevel(level).Str("event", "context_compaction_skipped").Str("session", ls.s.ID).Str("reason", string(d.Reason)).
		Str("mode", string(pol.Mode)).Str("trigger", trigger).Int64("cursor", ls.s.Cursor).Int64("total_turns", ls.s.Total).
		Int64("recent_start", d.RecentStart).Int64("eligible", d.Eligible).Int("estimate_tokens", d.Estimate).Int("limit_tokens", d.Limit).
		Msg("compaction skipped")
	if !publish {
		return
	}
	ls.lastSkip = d.Reason
	e.event(ls.s, events.Lifecycle{
		Type: events.EventCompactionSkipped, Reason: string(d.Reason), Trigger: trigger, Mode: string(pol.Mode),
		RecentStart: d.RecentStart, Eligible: d.Eligible, Estimate: d.Estimate, Limit: d.Limit,
	})
}

// start plans the fold d: the session takes a lease of this owner and the
// fold's job is made from copies of what it folds.
func (m *machine) start(ls *live, pol fold.Policy, d fold.Decision, trigger string, now time.Time, e *effects) {
	s := ls.s
	n := int(d.To - d.From)
	if n > len(s.Turns) {
		m.log.Error().Str("event", "state_inconsistent").Str("session", s.ID).Int("batch", n).Int("held_turns", len(s.Turns)).
			Msg("fewer unfolded turns held than the batch needs; skipping fold")
		return
	}
	// While the summarizer's endpoint refuses every request, no fold calls
	// it: the session backs off (retry_backoff) until a probe is due, and
	// at most RetryBackoffMax, so that it folds soon after the breaker
	// closes. A compact control probes at once. A fold that may land with
	// the placeholder tier (mode tokens, past its emergency threshold)
	// does so instead, which needs no model: its context must not
	// overflow while the endpoint is down.
	ok, probe, retryAt := true, false, time.Time{}
	if d.Model {
		ok, probe, retryAt = m.breaker.Begin(now, d.Cause == fold.CauseForced)
	}
	placeholderOnly := !ok && d.Placeholder
	if !ok && !placeholderOnly {
		d.Fold, d.Action, d.Reason = false, fold.ActionNone, fold.SkipRetryBackoff
		m.skip(ls, pol, d, trigger, e)
		s.RetryAfter = now.Add(m.cfg.RetryBackoffMax)
		if retryAt.Before(s.RetryAfter) {
			s.RetryAfter = retryAt
		}
		e.dirty = true
		e.wake(s.RetryAfter)
		return
	}
	e.markDue = !ls.due
	s.Lease = &state.Lease{
		FoldID: nuid.Next(), Owner: m.cfg.InstanceID, Deadline: now.Add(m.cfg.LeaseTTL),
		From: d.From, To: d.To, Notes: len(s.PendingNotes),
	}
	// The lease goes to KV with the session's next checkpoint, not before
	// the fold: a fold that outlasts a flush shows other owners (and the
	// context service) that it is in flight, and one that is done sooner
	// costs no write of its own. What keeps two owners from both
	// recording version v+1 is the summary's publish, which expects the
	// subject's last sequence (recorder.sendSummary), not the lease.
	e.dirty = true
	job := foldJob{
		session: s.ID, foldID: s.Lease.FoldID, trigger: trigger, profile: m.profile(ls), window: pol.Window, policy: pol, cause: d.Cause,
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
	e.start = &job
	m.m.folds.WithLabelValues("started").Inc()
	e.event(s, events.Lifecycle{
		Type: events.EventCompactionStarted, FoldID: job.foldID, Trigger: trigger, Mode: string(pol.Mode), Cause: d.Cause,
		Estimate: d.Estimate, Limit: d.Limit, RecentStart: d.RecentStart, Eligible: d.Eligible, BatchSize: n, BatchFrom: d.From, BatchTo: d.To - 1,
		PendingNoteCount: len(job.notes),
	})
	m.log.Info().Str("event", "context_compaction_started").Str("session", s.ID).Str("fold_id", job.foldID).Str("trigger", trigger).
		Str("mode", string(pol.Mode)).Str("cause", d.Cause).Int("estimate_tokens", d.Estimate).
		Int64("cursor", s.Cursor).Int("batch_size", n).Int64("recent_start", d.RecentStart).Int("pending_note_count", len(job.notes)).
		Int64("total_turns", s.Total).Msg("compaction started")
}

// finish runs the end of an ended session: a final fold of everything
// still verbatim (with memory extraction), then archive and clear. It is
// taken again on every check of the session until the archive is
// written, so a failed final fold or a crash only delays it.
func (m *machine) finish(ls *live, pol fold.Policy, now time.Time, e *effects) {
	s := ls.s
	switch {
	case s.Archived || m.cfg.KeepEnded:
		return
	case s.Lease.Held(now):
		if s.Lease.Owner != m.cfg.InstanceID {
			e.wake(s.Lease.Deadline)
		}
		return
	case now.Before(s.RetryAfter):
		e.wake(s.RetryAfter)
		return
	}
	if d := pol.PlanEnd(s.Cursor, s.Total, len(s.PendingNotes)); d.Fold {
		m.start(ls, pol, d, "end", now, e)
		return
	}
	e.archive = "end"
}

// land takes a fold's result: the summary is on the stream (the record),
// so the cursor moves, the checkpoint follows, and the next batch is
// looked for (catch-up). A failure, a refused publish or an abandoned fold
// are handled here too. An eviction (mode evict) is such a fold, its
// summary the eviction note. ls is the session, reloaded if a rewind
// dropped it.
func (m *machine) land(ls *live, r foldResult, now time.Time) (e effects) {
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
			// if the session can, as a new owner would (conflict sorts out
			// the rest at the next publish).
			if fate, a := m.takeRecord(ls, summaryRecord{ev: r.summary, seq: r.seq}, "abandoned_fold_published"); fate == recordAdopted {
				return a
			}
		}
		m.m.folds.WithLabelValues("discarded").Inc()
		m.log.Info().Str("event", "fold_result_discarded").Str("session", r.job.session).Str("fold_id", r.job.foldID).
			Msg("fold result arrived after its lease was dropped (reset, end, expiry or shutdown); nothing moved")
		return e
	}
	ls.cancel = nil
	s := ls.s
	latency := now.Sub(r.job.started)
	if r.err != nil {
		return m.failed(ls, r, latency, now)
	}
	if r.conflict {
		return m.conflict(ls, r, latency, now)
	}
	oldCursor := s.Cursor
	ls.payloads.drop(r.job.turns, r.job.notes)
	s.Land(state.Landing{
		Summary: r.out.Summary, Version: r.job.prevVer + 1, Seq: r.seq, To: r.job.to, Notes: len(r.job.notes), At: now,
		SummaryTokens: r.sumToks, OriginalTokens: r.origToks, Exchanges: r.job.exchanges, State: r.out.State, Note: r.out.Note,
	})
	if r.text != nil {
		ls.text = r.text // the state's stored form, made on the fold's goroutine
	}
	if len(r.out.Memories) > 0 {
		e.memories = &r
	}
	if s.Sealed <= oldCursor && !r.job.final {
		// Checkpointed with the next flush: until then the lease in KV
		// makes any new owner adopt the summary just published.
		e.dirty = true
	} else {
		e.save, e.dropFrom = true, oldCursor
	}
	m.m.folds.WithLabelValues("completed").Inc()
	m.landed.Add(1)
	m.m.foldLatency.Observe(latency.Seconds())
	m.m.sumTokens.WithLabelValues("input").Add(float64(r.out.InputTokens))
	m.m.sumTokens.WithLabelValues("output").Add(float64(r.out.OutputTokens))
	m.m.foldedToks.Add(float64(r.origToks))
	e.event(s, events.Lifecycle{
		Type: events.EventCompactionCompleted, FoldID: r.job.foldID, Trigger: r.job.trigger, Mode: string(r.job.policy.Mode), Cause: r.job.cause,
		Chunks: r.out.Chunks, SkippedTurns: r.out.SkippedTurns, MaskedTurns: r.masked, OldCursor: oldCursor, NewCursor: s.Cursor, CoveredThroughTurn: s.CoveredThrough,
		SummaryChars: utf8.RuneCountInString(s.Summary), Version: s.Version, Tier: string(r.out.Tier),
		LatencyMS: latency.Milliseconds(), Model: r.out.Model,
	})
	m.log.Info().Str("event", "context_compaction_completed").Str("session", s.ID).Str("fold_id", r.job.foldID).
		Str("mode", string(r.job.policy.Mode)).Int("chunks", r.out.Chunks).Int("skipped_turns", r.out.SkippedTurns).Int("masked_turns", r.masked).
		Int64("old_cursor", oldCursor).Int64("new_cursor", s.Cursor).Int64("covered_through_turn", s.CoveredThrough).
		Int("summary_chars", utf8.RuneCountInString(s.Summary)).Uint64("version", s.Version).Str("tier", string(r.out.Tier)).
		Str("model", r.out.Model).Int64("latency_ms", latency.Milliseconds()).Msg("compaction completed")
	m.log.Debug().Str("event", "summary_text").Str("session", s.ID).Uint64("version", s.Version).Str("summary", s.Summary).Msg("summary")
	if r.job.final {
		e.archive = "end"
		return e
	}
	e.again = true
	return e
}

// conflict handles a summary the stream refused because the subject's
// last summary is not the one the session last recorded.
func (m *machine) conflict(ls *live, r foldResult, latency time.Duration, now time.Time) effects {
	s := ls.s
	fate, e := m.takeRecord(ls, r.last, "publish_conflict")
	switch fate {
	case recordAdopted:
		// Another owner folded this batch (or more) and published it, then
		// stopped before its checkpoint: its summary stands, this one is
		// dropped, and the session goes on from that summary's cursor.
		m.m.folds.WithLabelValues("superseded").Inc()
		m.log.Info().Str("event", "fold_superseded").Str("session", s.ID).Str("fold_id", r.job.foldID).Uint64("version", s.Version).
			Msg("fold result dropped: the outbound stream already holds a newer summary of the session, adopted instead")
		e.again = true
		return e
	case recordAwaited:
		// This owner's checkpoint is older than what it (or another owner)
		// published since, and the batch is one the record holds: wait for
		// the turns, then take the record (heldByRecord).
		s.Lease = nil
		e.dirty = true
		m.m.folds.WithLabelValues("superseded").Inc()
		m.log.Info().Str("event", "fold_superseded").Str("session", s.ID).Str("fold_id", r.job.foldID).Uint64("version", r.last.ev.Version).
			Msg("fold result dropped: the outbound stream already holds a later summary of the session, adopted once its turns are replayed")
		return e
	}
	last := r.last
	if r.republished {
		r.err = fmt.Errorf("publish summary-updated: refused twice; the subject's last sequence moved again, to %d", last.seq)
		return m.failed(ls, r, latency, now)
	}
	// The subject's last summary is one the session cannot take: its own
	// version from a checkpoint written before SummarySeq was kept, none
	// (aged out of the stream), or one made before a reset. Publish after
	// it, with a version above it so versions keep increasing.
	m.log.Info().Str("event", "summary_sequence_resynced").Str("session", s.ID).Str("fold_id", r.job.foldID).
		Uint64("expected_seq", s.SummarySeq).Uint64("last_seq", last.seq).Msg("summary subject's last sequence learned from the stream; publishing again")
	s.SummarySeq = last.seq
	if last.ev != nil && last.ev.Version > r.job.prevVer {
		r.job.prevVer = last.ev.Version // the session takes it when this lands
	}
	r.job.summarySeq = last.seq
	r.conflict, r.last, r.republished = false, summaryRecord{}, true
	ls.landing = true
	e.republish = &r
	return e
}

// failed records a fold that did not land: nothing moves, and the session
// backs off.
func (m *machine) failed(ls *live, r foldResult, latency time.Duration, now time.Time) (e effects) {
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
	s.Fail(now, why, m.cfg.RetryBackoff, m.cfg.RetryBackoffMax)
	e.dirty = true
	if !canceled {
		e.wake(s.RetryAfter) // retried then even if the session stays quiet
	}
	m.m.folds.WithLabelValues("failed").Inc()
	retryable := re.Retryable
	e.event(s, events.Lifecycle{
		Type: events.EventCompactionFailed, FoldID: r.job.foldID, Trigger: r.job.trigger, Mode: string(r.job.policy.Mode),
		BatchFrom: r.job.from, BatchTo: r.job.to - 1, Model: m.model, ErrorClass: string(re.Class),
		Retryable: &retryable, Error: r.err.Error(), LatencyMS: latency.Milliseconds(),
	})
	m.log.Warn().Err(r.err).Str("event", "context_compaction_failed").Str("session", s.ID).Str("fold_id", r.job.foldID).
		Str("model", m.model).Str("error_class", string(re.Class)).Bool("retryable", retryable).
		Int64("cursor", s.Cursor).Int("failures", s.Failures).Time("retry_after", s.RetryAfter).
		Int64("latency_ms", latency.Milliseconds()).Msg("compaction failed; summary and cursor unchanged")
	return e
}

// archived takes an archive write's outcome: the session's checkpoint
// becomes the tombstone that refuses later events (an end), or the write
// is tried again after the backoff.
func (m *machine) archived(ls *live, reason string, err error, now time.Time) (e effects) {
	s := ls.s
	if err != nil {
		s.RetryAfter = now.Add(m.cfg.RetryBackoff)
		e.wake(s.RetryAfter)
		e.dirty = true
		m.log.Warn().Err(err).Str("event", "archive_failed").Str("session", s.ID).Str("reason", reason).Msg("session not archived yet; retried after the backoff")
		return e
	}
	e.drop = &chunkDrop{s: s, from: s.Cursor, to: s.Sealed}
	summary, version := s.Summary, s.Version
	if reason == "end" {
		ls.s = s.Tombstone()
		ls.payloads = nil
		e.dirty = true
	}
	e.event(ls.s, events.Lifecycle{Type: events.EventSessionArchived, Reason: reason, Version: version,
		SummaryChars: utf8.RuneCountInString(summary)})
	m.log.Info().Str("event", "session_archived").Str("session", s.ID).Str("reason", reason).Uint32("epoch", s.Epoch).
		Int64("total_turns", s.Total).Uint64("version", version).Msg("session archived")
	return e
}
