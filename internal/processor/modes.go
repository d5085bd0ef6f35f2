package processor

import (
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// policy is the session's compaction policy: the deployment's, with the
// session's configured overrides. It is resolved once per configuration,
// not per turn: a session without a configure shares the deployment's,
// and a configured one's is kept by its config (a configure installs a
// new one, so a changed configuration is a new key).
func (c *coordinator) policy(ls *live) fold.Policy {
	cfg := ls.s.Config
	if cfg == nil {
		return c.p.sessionPolicy
	}
	if p, ok := c.policies[cfg]; ok {
		return p
	}
	if len(c.policies) >= maxPolicies {
		clear(c.policies) // configs of sessions long gone; resolved again on use
	}
	p := c.p.resolve(withOverrides(c.p.policy, cfg))
	c.policies[cfg] = p
	return p
}

// maxPolicies bounds a shard's resolved per-session policies.
const maxPolicies = 4096

// resolve applies what the deployment imposes on every policy: without
// recall, a mode that needs it (evict) folds in the mode it names instead
// (tokens; warned at start and at configure).
func (p *Processor) resolve(pol fold.Policy) fold.Policy {
	if fb := pol.Engine().WithoutRecall(); fb != "" && !p.cfg.RecallEnabled {
		pol.Mode = fb
	}
	return pol
}

// evicted reports whether a summary record of mode is an eviction note
// (its mode evicts instead of summarizing).
func evicted(mode string) bool {
	e, ok := fold.Lookup(fold.Mode(mode))
	return ok && !e.Summarizes()
}

// withOverrides applies a session's configure op to the policy: each
// declared setting (events.Settings) the config sets, to its field.
func withOverrides(p fold.Policy, c *events.SessionConfig) fold.Policy {
	if c.Mode != "" {
		p.Mode = fold.Mode(c.Mode)
	}
	if c.ContextWindow > 0 {
		// A reserve set for the deployment's window is not one for this
		// window: unless the session sets its own, it follows the window.
		p.Tokens.ReserveTokens = 0
	}
	for _, s := range events.Settings {
		if v, set := s.Value(c); set {
			p.Apply(s.Key, v)
		}
	}
	return p
}

// checkConfigure refuses a configure op whose settings, merged with the
// deployment's policy pol, cannot work (e.g. a reserve above a smaller
// window).
func checkConfigure(pol fold.Policy, c *events.SessionConfig) error {
	if err := withOverrides(pol, c).Validate(); err != nil {
		return &events.ValidationError{Code: events.CodeInvalidField, Field: "config", Reason: err.Error() + " (with the deployment's defaults for the fields not set)"}
	}
	return nil
}

// tokenSum memoizes the unfolded turns' tokens for mode tokens, which
// needs them on every turn (the trigger check and the idle wake): a window
// of 128k tokens holds thousands of unfolded turns, and summing them all
// twice per turn would make a long session's ingest quadratic. The sum
// covers s.Turns[:n] while the head is unchanged (same cursor, epoch and
// first turn); turns appended since are added, anything else recounts.
type tokenSum struct {
	cursor int64
	epoch  uint32
	first  uint64 // sequence of s.Turns[0]
	n, sum int
}

func (ls *live) unfoldedTokens() int {
	s, m := ls.s, &ls.tokSum
	if m.n > len(s.Turns) || m.cursor != s.Cursor || m.epoch != s.Epoch || (m.n > 0 && s.Turns[0].Seq != m.first) {
		*m = tokenSum{cursor: s.Cursor, epoch: s.Epoch}
	}
	for _, t := range s.Turns[m.n:] {
		m.sum += t.Tokens
	}
	m.n = len(s.Turns)
	if m.n > 0 {
		m.first = s.Turns[0].Seq
	}
	return m.sum
}

// idleWake is when a quiet session is due for its idle fold (mode
// tokens: Engine.Idle), if it will be.
func (c *coordinator) idleWake(ls *live, pol fold.Policy) (time.Time, bool) {
	s := ls.s
	after, above, ok := pol.Engine().Idle(pol)
	if !ok || s.Ended || s.LastActivity.IsZero() {
		return time.Time{}, false
	}
	at := s.LastActivity.Add(after)
	if !c.p.clock.Now().Before(at) {
		return time.Time{}, false // checked already at or after that time
	}
	if max(s.SummaryToks+ls.unfoldedTokens(), s.ContextTokens) <= above {
		return time.Time{}, false
	}
	return at, true
}

// evict runs an eviction (ActionEvict, mode evict): no model call, so
// only its record to wait for. The record (summary-updated carrying the
// mode's eviction note, and the evicted event) is published off the loop
// (recordEviction), before the checkpoint, with message ids by version, so
// a crash in between replays into the same outcome; the eviction lands
// when its result comes back (landEviction). Until then the session counts
// as evicting: it starts nothing else, and a reset or an end waits for it
// (abandon).
// Must be called on the loop.
func (c *coordinator) evict(ls *live, pol fold.Policy, d fold.Decision, trigger string) {
	p := c.p
	s := ls.s
	n := int(d.To - d.From)
	if n > len(s.Turns) {
		p.log.Error().Str("event", "state_inconsistent").Str("session", s.ID).Int("evict", n).Int("held_turns", len(s.Turns)).
			Msg("fewer unfolded turns held than the eviction needs; skipping")
		return
	}
	now := p.clock.Now()
	refs := s.Turns[:n]
	toks := 0
	for _, r := range refs {
		toks += r.Tokens
	}
	first, last := time.UnixMilli(refs[0].At).UTC(), time.UnixMilli(refs[n-1].At).UTC()
	totalEvicted := s.Evicted + int64(n)
	totalToks := s.EvictedTokens + int64(toks)
	firstEver := first
	if s.Evicted > 0 {
		firstEver = time.UnixMilli(s.FirstEvictedAt).UTC()
	}
	note := pol.Engine().Note(fold.Eviction{Count: totalEvicted, Tokens: totalToks, First: firstEver, Last: last})
	version := s.Version + 1
	foldID := nuid.Next()
	c.rec.lifecycle(ls.s, events.Lifecycle{
		Type: events.EventCompactionStarted, FoldID: foldID, Trigger: trigger, Mode: string(pol.Mode), Cause: d.Cause,
		Estimate: d.Estimate, Limit: d.Limit, RecentStart: d.RecentStart, Eligible: d.Eligible, BatchSize: n, BatchFrom: d.From, BatchTo: d.To - 1,
	})
	p.log.Info().Str("event", "context_compaction_started").Str("session", s.ID).Str("fold_id", foldID).Str("mode", string(pol.Mode)).
		Str("trigger", trigger).Str("cause", d.Cause).Int("estimate_tokens", d.Estimate).Int("limit_tokens", d.Limit).
		Int64("cursor", s.Cursor).Int("batch_size", n).Int64("total_turns", s.Total).Msg("compaction started")

	sum := events.SummaryUpdated{
		V: events.Version, Session: s.ID, Version: version, Summary: note, Cursor: d.To, CoveredThroughTurn: d.To - 1,
		From: first, To: last, FoldedTurns: n, FoldedNotes: len(s.PendingNotes), SummaryChars: utf8.RuneCountInString(note),
		SummaryTokens: p.tokens.Count(note), OriginalTokens: toks, Mode: string(pol.Mode), Tier: "evicted",
		Compactions: s.Compactions + 1, Epoch: s.Epoch, Model: "none", At: now.UTC(),
	}
	ev := events.Evicted{
		V: events.Version, Session: s.ID, Version: version, Count: n, Tokens: toks, First: first, Last: last,
		FromTurn: d.From, ToTurn: d.To - 1, Cursor: d.To, TotalEvicted: totalEvicted, Note: note, At: now.UTC(),
	}
	c.recordEviction(ls, &evictJob{
		sum: sum, ev: ev, d: d, trigger: trigger, foldID: foldID, n: n, toks: toks,
		notes: len(s.PendingNotes), cursor: s.Cursor, expect: s.SummarySeq,
	})
}

// evictJob is an eviction being recorded off the loop, and its outcome.
type evictJob struct {
	sum     events.SummaryUpdated
	ev      events.Evicted
	d       fold.Decision
	trigger string
	foldID  string
	n, toks int
	notes   int    // pending notes evicted with the turns
	cursor  int64  // the session's cursor when it started
	expect  uint64 // the subject's last sequence the publish expects
	retried bool   // published once more after a refused publish
	// Outcome: the sequence the summary was stored at, or a refusal and
	// what the subject held then, or an error.
	seq      uint64
	conflict bool
	last     summaryRecord
	err      error
}

// recordEviction publishes j's record on a goroutine of its own; its
// outcome comes back to the loop as a fold result.
// Must be called on the loop.
func (c *coordinator) recordEviction(ls *live, j *evictJob) {
	p, id := c.p, ls.s.ID
	ls.running, ls.evicting = j.foldID, true
	c.inFlight++
	p.m.inFlight.Inc()
	p.folds.Add(1)
	go func() {
		defer p.folds.Done()
		c.rec.publishEviction(id, j)
		c.results <- foldResult{job: foldJob{session: id, foldID: j.foldID}, evict: j}
	}()
}

// landEviction moves the session past the turns an eviction recorded, or
// handles its refusal or failure. ours is false when the session was
// reloaded meanwhile (a rewind): a record it stored is then taken as a new
// owner would take it.
// Must be called on the loop.
func (c *coordinator) landEviction(ls *live, j *evictJob, ours bool) {
	p := c.p
	s := ls.s
	now := p.clock.Now()
	d, trigger, foldID, n, toks, sum := j.d, j.trigger, j.foldID, j.n, j.toks, &j.sum
	note := sum.Summary
	if !ours || s.Cursor != j.cursor || s.Epoch != sum.Epoch {
		if ours || j.err != nil || j.conflict || c.takeRecord(ls, summaryRecord{ev: sum, seq: j.seq}, "abandoned_fold_published") != recordAdopted {
			p.m.folds.WithLabelValues("discarded").Inc()
			p.log.Info().Str("event", "fold_result_discarded").Str("session", s.ID).Str("fold_id", foldID).
				Msg("eviction result arrived after the session was reloaded or moved; nothing moved")
		}
		return
	}
	if j.conflict {
		switch c.takeRecord(ls, j.last, "publish_conflict") {
		case recordAdopted:
			c.wake[s.ID] = now // look again from the adopted summary
			return
		case recordAwaited:
			return // the next turns bring the session to the record
		}
		// Not the session's: publish once more after it, with a version
		// above it.
		last := j.last
		j.conflict, j.last, j.retried, j.expect = false, summaryRecord{}, true, last.seq
		if last.ev != nil && last.ev.Version >= sum.Version {
			sum.Version, j.ev.Version = last.ev.Version+1, last.ev.Version+1
		}
		c.recordEviction(ls, j)
		return
	}
	err := j.err
	if err != nil {
		s.Fail(now, state.FailTransient, p.cfg.RetryBackoff, p.cfg.RetryBackoffMax)
		c.wake[s.ID] = s.RetryAfter
		c.w.markDirty(ls)
		p.m.folds.WithLabelValues("failed").Inc()
		retryable := true
		c.rec.lifecycle(ls.s, events.Lifecycle{
			Type: events.EventCompactionFailed, FoldID: foldID, Trigger: trigger, Mode: sum.Mode,
			BatchFrom: d.From, BatchTo: d.To - 1, ErrorClass: string(retry.Classify(err).Class), Retryable: &retryable, Error: err.Error(),
		})
		p.log.Warn().Err(err).Str("event", "context_compaction_failed").Str("session", s.ID).Str("fold_id", foldID).
			Str("mode", sum.Mode).Msg("eviction not recorded; cursor unchanged, retried after the backoff")
		return
	}
	oldCursor := s.Cursor
	refs := s.Turns[:n]
	ls.payloads.drop(refs, s.PendingNotes[:j.notes])
	// Notes have no summary to go into in this mode: they leave with the
	// turns they were evicted among.
	s.Land(state.Landing{
		Summary: note, Version: sum.Version, Seq: j.seq, To: d.To, Notes: j.notes, At: now,
		SummaryTokens: sum.SummaryTokens, Note: true,
	})
	c.w.checkpointThen(ls, c.dropPassed(s, oldCursor))
	p.m.folds.WithLabelValues("completed").Inc()
	p.landed.Add(1)
	c.rec.lifecycle(ls.s, events.Lifecycle{
		Type: events.EventCompactionCompleted, FoldID: foldID, Trigger: trigger, Mode: sum.Mode, Cause: d.Cause,
		OldCursor: oldCursor, NewCursor: s.Cursor, CoveredThroughTurn: s.CoveredThrough, SummaryChars: sum.SummaryChars,
		Version: s.Version, Tier: "evicted", Model: "none",
	})
	p.log.Info().Str("event", "context_compaction_completed").Str("session", s.ID).Str("fold_id", foldID).Str("mode", sum.Mode).
		Int64("old_cursor", oldCursor).Int64("new_cursor", s.Cursor).Int("evicted", n).Int("evicted_tokens", toks).
		Uint64("version", s.Version).Str("tier", "evicted").Msg("compaction completed")
	if c.loop.holds(ls) {
		c.evaluate(ls, "catch_up", false)
		c.settleDue(ls)
	}
}

// publishEviction publishes an eviction's summary-updated, expecting the
// session's last summary (j.expect) as the subject's last message (as
// sendSummary does for a fold's summary, publish.go), then its evicted
// event. A refused publish reads what the subject holds (j.conflict,
// j.last) for the loop to decide; a second refusal is an error. It runs
// off the loop and touches no session state.
func (p *recorder) publishEviction(session string, j *evictJob) {
	pa, err := p.publishRecord(session, events.KindSummary, j.sum.Version, &j.sum, jetstream.WithExpectLastSequencePerSubject(j.expect))
	if err == nil && !pa.Duplicate {
		j.seq = pa.Sequence
		_, j.err = p.publishRecord(session, events.KindEvicted, j.ev.Version, &j.ev)
		return
	}
	if err != nil && !state.IsConflict(err) || j.retried {
		if err == nil {
			err = fmt.Errorf("publish summary-updated v%d: refused twice, another summary took its version", j.sum.Version)
		}
		j.err = err
		return
	}
	ctx, cancel := opCtx()
	last, lerr := p.lastSummary(ctx, session)
	cancel()
	if lerr != nil {
		j.err = fmt.Errorf("publish summary-updated v%d: refused as a conflict, then reading the last summary: %w", j.sum.Version, lerr)
		return
	}
	j.conflict, j.last = true, last
}
