package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nuid"
	"github.com/rs/zerolog"
)

// foldJob is what a fold goroutine needs; it holds copies, never the live
// session, so the shard keeps sole ownership of state.
type foldJob struct {
	session  string
	foldID   string
	trigger  string
	profile  fold.Profile
	window   fold.Window
	prev     string
	from, to int64
	turns    []state.TurnRef
	notes    []state.NoteRef
	payloads payloads  // of the batch, when this owner saw them
	started  time.Time // the check that found the fold due
	cursor   int64
	prevVer  uint64
	// summarySeq: the outbound sequence of version prevVer, which the
	// publish expects as the subject's last (0: none, or not known).
	summarySeq uint64
	epoch      uint32
	compactns  int
	policy     fold.Policy
	cause      string
	exchanges  int  // the session's exchange count when the fold started
	final      bool // the end-of-session fold: archive once it lands
	// placeholderOK allows seed 004's tier 3 if the summarizer fails.
	placeholderOK bool
	// probe: this fold's model call is the summarizer breaker's probe.
	probe bool
	// placeholderOnly: the breaker is open and the session is past its
	// emergency threshold: tier 3 without calling the model.
	placeholderOnly bool
}

type foldResult struct {
	job     foldJob
	out     fold.Outcome
	err     error
	summary *events.SummaryUpdated // what was published (set once sent)
	seq     uint64                 // the outbound sequence it was stored at
	// conflict: the publish found the subject's last summary elsewhere
	// than the session's SummarySeq (another owner's, or one this
	// checkpoint never recorded); last is what the subject holds now.
	// republished: the result was published again after that.
	conflict    bool
	last        summaryRecord
	republished bool
	summarized  time.Time // wall time the summarizer returned (bench timing)
	sent        time.Time // wall time the publish left (bench timing)
	// model is set when the summarizer failed, as opposed to reading the
	// batch or recording the summary on NATS.
	model    bool
	origToks int
	sumToks  int
	nTurns   int
	nNotes   int
	fromT    time.Time
	toT      time.Time
	masked   int // tool turns masked before summarizing
}

// evaluate runs the session's trigger check (its mode's policy, seed 000's
// gates) and starts a fold or an eviction, or records why not.
func (sh *shard) evaluate(ls *live, trigger string, force bool) {
	p := sh.p
	now := p.clock.Now()
	s := ls.s
	if s.Lease != nil && !s.Lease.Held(now) && s.Lease.Owner != p.cfg.InstanceID {
		// Another engine's (a crashed instance, a partition's previous
		// owner): it may have published the summary without checkpointing
		// it. The outbound stream says; adopt it rather than fold again.
		ctx, cancel := sh.ctx()
		sh.reconcile(ctx, ls)
		cancel()
	}
	if s.Lease != nil && !s.Lease.Held(now) {
		p.log.Warn().Str("event", "lease_expired").Str("session", s.ID).Str("fold_id", s.Lease.FoldID).Str("owner", s.Lease.Owner).
			Msg("fold lease passed its deadline; the batch will be folded again")
		sh.abandon(ls, "lease expired")
		sh.markDirty(ls)
	}
	pol := sh.policy(ls)
	if sh.heldByRecord(ls) {
		// The batch due is folded already, in the summary awaited: to
		// whoever asks, that fold is in flight.
		if trigger == "generate" || trigger == "compact" {
			sh.skip(ls, pol, fold.Decision{Reason: fold.SkipAlreadyInFlight}, trigger)
		}
		return
	}
	if s.Ended {
		sh.finish(ls, pol)
		return
	}
	disabled := s.Config != nil && s.Config.Disabled != nil && *s.Config.Disabled
	chk := fold.Check{
		Cursor: s.Cursor, Total: s.Total, InFlight: s.Lease.Held(now),
		Backoff: now.Before(s.RetryAfter), Ending: s.Ended, Disabled: disabled, Force: force,
		Exchanges: s.Exchanges - s.ExchangesFolded,
	}
	if amortized := pol.Mode == fold.ModeWindow && pol.Window.MinFoldTokens > 0; amortized || pol.CountsTokens() {
		// Sizes as applied: the bot's tokens, else chars/4×1.2 (state.Apply).
		turns := s.Turns
		chk.TurnTokens = func(i int) int { return turns[i].Tokens }
	}
	if s.Tools != nil {
		// No fold ends inside a tool exchange (fold.ToolExchange).
		cursor := s.Cursor
		chk.Joined = func(i int) bool { return s.Joined(cursor + int64(i)) }
	}
	if pol.CountsTokens() {
		chk.UnfoldedTokens = ls.unfoldedTokens()
		chk.SummaryTokens = s.SummaryToks
		chk.ReportedContext = s.ContextTokens
		chk.Idle = pol.Tokens.IdleAfter > 0 && !s.LastActivity.IsZero() && now.Sub(s.LastActivity) >= pol.Tokens.IdleAfter
	}
	d := pol.Plan(chk)
	if d.Cause == fold.CauseIdle {
		trigger = "idle"
	}
	if !d.Fold {
		sh.skip(ls, pol, d, trigger)
		if d.Reason == fold.SkipAlreadyInFlight && s.Lease.Owner != p.cfg.InstanceID {
			sh.wake[s.ID] = s.Lease.Deadline // a dead owner's lease: fold when it ends
		}
		return
	}
	ls.lastSkip = ""
	if d.Action == fold.ActionEvict {
		sh.evict(ls, pol, d, trigger)
		return
	}
	sh.startFold(ls, pol, d, trigger)
}

// skip logs every skip (debug for the per-turn below_threshold) and
// publishes it when the reason changes or the check was asked for, so the
// stream explains the session without carrying one event per turn.
func (sh *shard) skip(ls *live, pol fold.Policy, d fold.Decision, trigger string) {
	p := sh.p
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
	sh.publishLifecycle(ls, events.Lifecycle{
		Type: events.EventCompactionSkipped, Reason: string(d.Reason), Trigger: trigger, Mode: string(pol.Mode),
		RecentStart: d.RecentStart, Eligible: d.Eligible, Estimate: d.Estimate, Limit: d.Limit,
	})
}

func (sh *shard) startFold(ls *live, pol fold.Policy, d fold.Decision, trigger string) {
	p := sh.p
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
	// emergency threshold (mode tokens) folds with seed 004's placeholder
	// instead, which needs no model: its context must not overflow while
	// the endpoint is down.
	ok, probe, retryAt := p.breaker.Begin(now, d.Cause == fold.CauseForced)
	placeholderOnly := !ok && pol.Mode == fold.ModeTokens && d.Cause == fold.CauseEmergency
	if !ok && !placeholderOnly {
		d.Fold, d.Action, d.Reason = false, fold.ActionNone, fold.SkipRetryBackoff
		sh.skip(ls, pol, d, trigger)
		s.RetryAfter = now.Add(p.cfg.RetryBackoffMax)
		if retryAt.Before(s.RetryAfter) {
			s.RetryAfter = retryAt
		}
		sh.markDirty(ls)
		sh.wake[s.ID] = s.RetryAfter
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
	// subject's last sequence (publish.go), not the lease.
	sh.markDirty(ls)
	job := foldJob{
		session: s.ID, foldID: s.Lease.FoldID, trigger: trigger, profile: sh.profile(ls), window: pol.Window, policy: pol, cause: d.Cause,
		exchanges: s.Exchanges, final: trigger == "end",
		// Seed 004's tier 3: a session past its emergency threshold whose
		// folds keep failing gets a placeholder rather than overflowing.
		placeholderOK: pol.Mode == fold.ModeTokens && d.Cause == fold.CauseEmergency && s.Failures >= 2,
		summarySeq:    s.SummarySeq, epoch: s.Epoch, probe: probe, placeholderOnly: placeholderOnly,
		prev: s.Summary, from: d.From, to: d.To, started: now, cursor: s.Cursor, prevVer: s.Version, compactns: s.Compactions,
		turns: append([]state.TurnRef(nil), s.Turns[:n]...),
		notes: append([]state.NoteRef(nil), s.PendingNotes...),
	}
	if len(ls.payloads) > 0 {
		job.payloads = ls.payloads.of(job.turns, job.notes)
	}
	p.m.folds.WithLabelValues("started").Inc()
	p.m.inFlight.Inc()
	sh.publishLifecycle(ls, events.Lifecycle{
		Type: events.EventCompactionStarted, FoldID: job.foldID, Trigger: trigger, Mode: string(pol.Mode), Cause: d.Cause,
		Estimate: d.Estimate, Limit: d.Limit, RecentStart: d.RecentStart, Eligible: d.Eligible, BatchSize: n, BatchFrom: d.From, BatchTo: d.To - 1,
		PendingNoteCount: len(job.notes),
	})
	p.log.Info().Str("event", "context_compaction_started").Str("session", s.ID).Str("fold_id", job.foldID).Str("trigger", trigger).
		Str("mode", string(pol.Mode)).Str("cause", d.Cause).Int("estimate_tokens", d.Estimate).
		Int64("cursor", s.Cursor).Int("batch_size", n).Int64("recent_start", d.RecentStart).Int("pending_note_count", len(job.notes)).
		Int64("total_turns", s.Total).Msg("compaction started")

	ctx, cancel := context.WithTimeout(sh.foldCtx, p.cfg.FoldTimeout)
	ls.cancel = cancel
	ls.running = job.foldID
	sh.inFlight++
	p.folds.Add(1)
	go func() {
		defer p.folds.Done()
		defer cancel()
		r := p.runFold(ctx, job)
		if r.err == nil && ctx.Err() != nil {
			// Abandoned (a reset, an end, shutdown) or past the fold
			// timeout while a summarizer that ignores its context ran:
			// too late to publish.
			r.err, r.model = fmt.Errorf("summary ready after the fold ended: %w", context.Cause(ctx)), false
		}
		if r.err == nil {
			p.sendSummary(&r, job.summarySeq)
		}
		sh.results <- r
	}()
	// Let the fold run now, before the rest of the shard's batch: a new
	// goroutine otherwise waits until the shard blocks, and under full
	// ingest that is most of a fold's latency (bench: p50 ~1 ms to ~0.02
	// ms from trigger to summarizer called). The fold soon blocks on its
	// model call or its publish, and the shard goes on.
	runtime.Gosched()
}

// runFold reads the batch from the stream and calls the summarizer under
// the engine's budget policy. It touches no session state.
func (p *Processor) runFold(ctx context.Context, job foldJob) foldResult {
	r := foldResult{job: job}
	called := false // the summarizer was called, and the breaker told
	defer func() {
		if job.probe && !called {
			p.breaker.Release() // the next fold probes instead
		}
	}()
	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	case <-ctx.Done():
		r.err = fmt.Errorf("waiting for one of %d fold slots: %w", cap(p.slots), ctx.Err())
		return r
	}
	req := fold.Request{Session: job.session, Profile: job.profile, PreviousSummary: job.prev, MaxChars: job.window.MaxSummaryChars,
		Turns: make([]fold.Turn, 0, len(job.turns))}
	for i, ref := range job.turns {
		kept, _ := job.payloads.at(ref.Seq)
		t := kept.turn // as the event loop decoded it, when this owner did
		if t == nil {
			t = new(events.Turn)
			if err := p.readEvent(ctx, ref.Seq, kept.data, t); err != nil {
				r.err = err
				return r
			}
		}
		tokens := t.Tokens
		if tokens == 0 {
			tokens = p.tokens.Count(t.Text)
		}
		r.origToks += tokens
		req.Turns = append(req.Turns, fold.Turn{
			Index: job.from + int64(i), TurnID: t.TurnID, At: t.At, Speaker: t.Speaker, Role: t.Role,
			Text: t.Text, Kind: t.Kind, Tool: t.Tool, Tokens: tokens,
		})
	}
	for _, ref := range job.notes {
		var n events.Note
		if err := p.readEvent(ctx, ref.Seq, job.payloads.get(ref.Seq), &n); err != nil {
			r.err = err
			return r
		}
		text := truncateRunes(n.Text, job.window.MaxNoteChars)
		r.origToks += p.tokens.Count(text)
		req.Notes = append(req.Notes, fold.Note{NoteID: n.NoteID, At: n.At, Source: n.Source, Text: text})
	}
	req.From, req.To = foldSpan(req)
	r.fromT, r.toT = req.From, req.To
	r.nTurns, r.nNotes = len(req.Turns), len(req.Notes)
	pol := job.policy
	if pol.MaskToolOutputsAfter > 0 {
		// Masked before summarizing (seed 003): an old tool output costs
		// the model tokens and rarely matters once its call is answered.
		req.Turns, r.masked = fold.MaskToolOutputs(req.Turns, fold.MaskOptions{OlderThan: pol.MaskToolOutputsAfter, Now: p.clock.Now()})
	}
	var answers []contextsource.Answer
	if pol.Mode == fold.ModeInterval {
		// Seed 002: the model condenses only the conversation part; the
		// source lines are asked afresh for this window and merged after.
		req.PreviousSummary, _ = splitConversation(req.PreviousSummary)
		if len(p.cfg.ContextSources) > 0 {
			answers = p.asker.Ask(ctx, job.session, req.From, req.To, p.cfg.ContextSources)
		}
	}
	if job.placeholderOnly {
		p.log.Warn().Str("event", "compaction_placeholder").Str("session", job.session).Str("fold_id", job.foldID).
			Msg("summarizer unavailable (breaker open) past the emergency threshold; folding with a placeholder (seed 004 tier 3)")
		r.out = fold.Placeholder(req.PreviousSummary, req.Turns, req.Notes, job.window.MaxSummaryChars)
		r.sumToks = p.tokens.Count(r.out.Summary)
		r.summarized = time.Now()
		return r
	}
	switch pol.Mode {
	case fold.ModeTokens:
		r.out, r.err = fold.SummarizeChunked(ctx, p.sum, req, fold.ChunkOptions{
			ChunkTokens: pol.Tokens.ChunkTokens(), OversizedTokens: pol.Tokens.OversizedTokens(), Count: p.tokens.Count,
		})
	default:
		r.out, r.err = fold.Summarize(ctx, p.sum, req)
	}
	called = true
	p.breaker.Record(p.clock.Now(), r.err, job.probe)
	if r.err != nil && job.placeholderOK && ctx.Err() == nil {
		p.log.Warn().Err(r.err).Str("event", "compaction_placeholder").Str("session", job.session).Str("fold_id", job.foldID).
			Msg("summarizer failed again past the emergency threshold; folding with a placeholder (seed 004 tier 3)")
		r.out, r.err = fold.Placeholder(req.PreviousSummary, req.Turns, req.Notes, job.window.MaxSummaryChars), nil
	}
	r.model = r.err != nil
	if r.err == nil {
		if pol.Mode == fold.ModeInterval {
			r.out.Summary = contextsource.Block(req.From, req.To, r.out.Summary, answers, job.window.MaxSummaryChars+sourceAllowance(len(answers)))
		}
		r.sumToks = p.tokens.Count(r.out.Summary)
	}
	r.summarized = time.Now()
	return r
}

// sourceAllowance is the room context-source lines get on top of the
// conversation summary's budget in mode interval.
func sourceAllowance(sources int) int {
	if sources == 0 {
		return 80 // the header line
	}
	return 80 + sources*(contextsource.MaxAnswerChars/2)
}

// splitConversation returns the conversation part of an interval block.
func splitConversation(summary string) (string, bool) {
	b, ok := contextsource.SplitBlock(summary)
	return b.Conversation, ok
}

// readEvent decodes the inbound event at seq from data when the owner kept
// it, else from the stream.
func (p *Processor) readEvent(ctx context.Context, seq uint64, data []byte, v any) error {
	if data == nil {
		raw, err := p.inStream.GetMsg(ctx, seq)
		if err != nil {
			return fmt.Errorf("read inbound event at sequence %d (expired from the stream? check max_age): %w", seq, err)
		}
		data = raw.Data
	}
	var err error
	if t, ok := v.(*events.Turn); ok {
		err = events.DecodeTurn(data, t) // the common case: the fast decoder
	} else {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		return fmt.Errorf("decode inbound event at sequence %d: %w", seq, err)
	}
	return nil
}

func foldSpan(req fold.Request) (from, to time.Time) {
	for _, t := range req.Turns {
		if from.IsZero() || t.At.Before(from) {
			from = t.At
		}
		if t.At.After(to) {
			to = t.At
		}
	}
	for _, n := range req.Notes {
		if from.IsZero() || n.At.Before(from) {
			from = n.At
		}
		if n.At.After(to) {
			to = n.At
		}
	}
	return from, to
}

func truncateRunes(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// applyResult lands a fold on its shard: publish the summary (the record),
// then checkpoint, then look for the next batch (catch-up).
func (sh *shard) applyResult(r foldResult) {
	p := sh.p
	sh.inFlight--
	p.m.inFlight.Dec()
	ls, err := sh.get(r.job.session) // reloads it after a rewind
	if err != nil {
		if ls = sh.loadFailed(r.job.session, err, 0); ls == nil {
			return
		}
	}
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
			if sh.takeRecord(ls, summaryRecord{ev: r.summary, seq: r.seq}, "abandoned_fold_published") == recordAdopted {
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
		sh.failed(ls, r, latency)
		return
	}
	if r.conflict {
		sh.publishConflict(ls, r, latency)
		return
	}
	oldCursor := s.Cursor
	ls.payloads.drop(r.job.turns, r.job.notes)
	s.Summary = r.out.Summary
	s.SummaryIsNote = false
	s.Version = r.job.prevVer + 1
	s.SummarySeq = r.seq
	s.Advance(r.job.to, len(r.job.notes))
	s.LastFoldAt = now
	s.Compactions++
	s.Lease = nil
	s.Failures = 0
	s.RetryAfter = time.Time{}
	s.OriginalToks += r.origToks
	s.SummaryToks = r.sumToks
	s.ExchangesFolded = r.job.exchanges
	s.ContextTokens = 0 // the bot's next prompt is smaller; its old report no longer holds
	sh.publishMemories(ls, r, s.Version)
	if s.Sealed <= oldCursor && !r.job.final {
		// Checkpointed with the next flush: until then the lease in KV
		// makes any new owner adopt the summary just published.
		sh.markDirty(ls)
	} else if sh.checkpoint(ls) {
		sh.dropChunks(s, oldCursor, s.Cursor)
	}
	p.m.folds.WithLabelValues("completed").Inc()
	p.landed.Add(1)
	p.m.foldLatency.Observe(latency.Seconds())
	p.m.sumTokens.WithLabelValues("input").Add(float64(r.out.InputTokens))
	p.m.sumTokens.WithLabelValues("output").Add(float64(r.out.OutputTokens))
	p.m.foldedToks.Add(float64(r.origToks))
	sh.publishLifecycle(ls, events.Lifecycle{
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
		sh.archive(ls, "end")
		return
	}
	if _, ok := sh.sessions[s.ID]; ok {
		sh.evaluate(ls, "catch_up", false)
		sh.settleDue(ls)
	}
}

// publishConflict handles a summary the stream refused because the
// subject's last summary is not the one the session last recorded.
func (sh *shard) publishConflict(ls *live, r foldResult, latency time.Duration) {
	p := sh.p
	s := ls.s
	switch sh.takeRecord(ls, r.last, "publish_conflict") {
	case recordAdopted:
		// Another owner folded this batch (or more) and published it, then
		// stopped before its checkpoint: its summary stands, this one is
		// dropped, and the session goes on from that summary's cursor.
		p.m.folds.WithLabelValues("superseded").Inc()
		p.log.Info().Str("event", "fold_superseded").Str("session", s.ID).Str("fold_id", r.job.foldID).Uint64("version", s.Version).
			Msg("fold result dropped: the outbound stream already holds a newer summary of the session, adopted instead")
		if _, ok := sh.sessions[s.ID]; ok {
			sh.evaluate(ls, "catch_up", false)
			sh.settleDue(ls)
		}
		return
	case recordAwaited:
		// This owner's checkpoint is older than what it (or another owner)
		// published since, and the batch is one the record holds: wait for
		// the turns, then take the record (heldByRecord).
		s.Lease = nil
		sh.markDirty(ls)
		p.m.folds.WithLabelValues("superseded").Inc()
		p.log.Info().Str("event", "fold_superseded").Str("session", s.ID).Str("fold_id", r.job.foldID).Uint64("version", r.last.ev.Version).
			Msg("fold result dropped: the outbound stream already holds a later summary of the session, adopted once its turns are replayed")
		return
	}
	last := r.last
	if r.republished {
		r.err = fmt.Errorf("publish summary-updated: refused twice; the subject's last sequence moved again, to %d", last.seq)
		sh.failed(ls, r, latency)
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
	sh.republish(ls, r)
}

func (sh *shard) failed(ls *live, r foldResult, latency time.Duration) {
	p := sh.p
	s := ls.s
	s.Lease = nil
	re := retry.Classify(r.err)
	canceled := errors.Is(r.err, context.Canceled) || re.Class == retry.Canceled
	switch {
	case canceled:
	case r.model:
		// A failing model backs off exponentially so it is not hammered;
		// an error that repeats until someone changes something (auth, bad
		// request, not found) waits the longest at once. When the whole
		// endpoint refuses, the breaker (runFold reported to it) stops
		// every session's calls.
		s.Failures++
		backoff := p.cfg.RetryBackoff << min(s.Failures-1, 16)
		if retry.Persistent(re.Class) {
			backoff = p.cfg.RetryBackoffMax
		}
		s.RetryAfter = p.clock.Now().Add(min(backoff, p.cfg.RetryBackoffMax))
	default:
		// NATS trouble (a leader election, a lost route) is short-lived:
		// retry soon, without escalating.
		s.RetryAfter = p.clock.Now().Add(p.cfg.RetryBackoff)
	}
	sh.markDirty(ls)
	if !canceled {
		sh.wake[s.ID] = s.RetryAfter // retried then even if the session stays quiet
	}
	p.m.folds.WithLabelValues("failed").Inc()
	retryable := re.Retryable
	sh.publishLifecycle(ls, events.Lifecycle{
		Type: events.EventCompactionFailed, FoldID: r.job.foldID, Trigger: r.job.trigger, Mode: string(r.job.policy.Mode),
		BatchFrom: r.job.from, BatchTo: r.job.to - 1, Model: p.sum.Name(), ErrorClass: string(re.Class),
		Retryable: &retryable, Error: r.err.Error(), LatencyMS: latency.Milliseconds(),
	})
	p.log.Warn().Err(r.err).Str("event", "context_compaction_failed").Str("session", s.ID).Str("fold_id", r.job.foldID).
		Str("model", p.sum.Name()).Str("error_class", string(re.Class)).Bool("retryable", retryable).
		Int64("cursor", s.Cursor).Int("failures", s.Failures).Time("retry_after", s.RetryAfter).
		Int64("latency_ms", latency.Milliseconds()).Msg("compaction failed; summary and cursor unchanged")
}
