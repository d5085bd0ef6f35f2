package processor

import (
	"context"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
)

type inMsg struct {
	msg      jetstream.Msg
	seq      uint64    // inbound stream sequence
	received time.Time // when the stream stored it (skew.go)
	session  string
	kind     string
	perr     error
}

// live is a session held in memory by its shard.
type live struct {
	s        *state.Session
	rev      uint64          // KV revision of the last checkpoint
	acks     []jetstream.Msg // applied, waiting for the checkpoint that covers them
	dirty    bool
	dirtyAt  time.Time       // wall time of the oldest change not yet written (flush pacing)
	lastSkip fold.SkipReason // last skip reason published, to avoid one event per turn
	cancel   context.CancelFunc
	touched  time.Time
	due      bool // the KV due mark is known to be set
	// writing: a pipelined checkpoint write is in flight (checkpoint.go); the
	// next write needs the revision it returns.
	writing bool
	landing bool // a refused summary-updated is being published again (publish.go)
	// running: the fold id of this owner's fold goroutine for the session
	// until its result is back; it may be publishing the summary.
	running  string
	payloads payloads // of unfolded turns and pending notes (payloads.go)
	tokSum   tokenSum // mode tokens: the unfolded turns' tokens (modes.go)
	// packed: the session is idle in its compact form (idle.go); s and
	// payloads are nil until get inflates it.
	packed []byte
}

func (ls *live) remember(seq uint64, data []byte) { ls.payloads.add(seq, data) }

// rememberTurn keeps a turn as decoded (payloads.go); t is not changed after.
func (ls *live) rememberTurn(seq uint64, t *events.Turn) { ls.payloads.addTurn(seq, t) }

// shard owns a subset of sessions: every event and fold result of a session
// is handled on its shard's goroutine, so session state needs no locks.
type shard struct {
	p       *Processor
	id      int
	in      chan inMsg
	results chan foldResult
	ctrl    chan chan struct{} // rewind: drop what is not checkpointed
	wakeCh  chan string        // sessions to resume at start (due marks)
	// wake holds when a session must be checked again without waiting for
	// its next event: a failed fold's backoff, another owner's lease.
	wake map[string]time.Time
	// ahead holds, for sessions reloaded behind the outbound stream, the
	// later summary to adopt once their redelivered turns reach its cursor
	// (awaitRecord).
	ahead    map[string]summaryRecord
	foldCtx  context.Context
	sessions map[string]*live
	// policies: the resolved policy of each configuration in use (modes.go)
	policies         map[*events.SessionConfig]fold.Policy
	checkpointWriter // checkpoint.go
	inFlight         int
	nPacked          int // sessions in their compact idle form (idle.go)
	packBuf          []byte
	// Sessions whose checkpoint is being read aside (load.go), with their
	// parked events; gen tells reads started before a rewind.
	loading map[string][]inMsg
	loadQ   []string
	loads   int
	loaded  chan loadDone
	gen     uint64
	lastIn  time.Time // wall time of the last event received
	seen    uint64    // highest inbound sequence received since the last rewind (load.go)
}

// idleFlush: a shard whose input has been quiet this long writes every
// dirty session at once; under load, sessions are written once their
// oldest change is FlushInterval old, so each write covers many turns.
const idleFlush = 2 * time.Millisecond

// maxWrites bounds one shard's checkpoint writes in flight: the state
// stream stores writes in arrival order, so a deep queue only delays
// every write (and the acks behind it).
const maxWrites = 16

func newShard(p *Processor, id int, foldCtx context.Context) *shard {
	return &shard{
		p: p, id: id, foldCtx: foldCtx,
		in:               make(chan inMsg, 1024),
		results:          make(chan foldResult, 64),
		checkpointWriter: checkpointWriter{saves: make(chan []saveDone, 64)},
		loaded:           make(chan loadDone, maxLoads),
		loading:          make(map[string][]inMsg),
		ctrl:             make(chan chan struct{}),
		wakeCh:           make(chan string),
		wake:             make(map[string]time.Time),
		ahead:            make(map[string]summaryRecord),
		sessions:         make(map[string]*live),
		policies:         make(map[*events.SessionConfig]fold.Policy),
	}
}

func (sh *shard) run() {
	pace := time.NewTimer(time.Hour)
	pace.Stop()
	paced := false
	sweep := time.NewTicker(250 * time.Millisecond)
	defer sweep.Stop()
	sweeps := 0
	in := sh.in
	for in != nil || sh.inFlight > 0 || sh.writes > 0 || sh.loads > 0 {
		if !paced && len(sh.dirty) > 0 {
			pace.Reset(idleFlush)
			paced = true
		}
		// Fold results first: a fold's latency is what prompt builders
		// wait for, and under load the input is never empty.
		select {
		case r := <-sh.results:
			sh.applyResult(r)
			continue
		default:
		}
		select {
		case m, ok := <-in:
			if !ok {
				in = nil // shutting down: keep serving fold results and reads
				sh.flush(true)
				continue
			}
			sh.accept(m)
			if sh.pending >= sh.p.cfg.FlushBatch {
				sh.flush(true)
			}
		case done := <-sh.saves:
			sh.landSaves(done)
			sh.flush(sh.idle()) // writes freed room for more
		case r := <-sh.results:
			sh.applyResult(r)
		case d := <-sh.loaded:
			sh.landLoad(d)
		case done := <-sh.ctrl:
			sh.reset()
			close(done)
		case <-pace.C:
			paced = false
			sh.flush(sh.idle())
		case id := <-sh.wakeCh:
			sh.resume(id, "resume")
		case <-sweep.C:
			sh.wakeDue()
			if sweeps++; sweeps%4 == 0 {
				sh.evictIdle()
			}
			sh.compactIdle()
		}
	}
	sh.flushAll()
}

// idle reports whether the shard's input has been quiet for idleFlush
// with nothing more waiting on the consumer. Under a backlog, a gap in one
// shard's input only means the cores are busy elsewhere (the consumer, the
// server, other shards): writing every dirty session then cost one write
// per session every few milliseconds, most of the server's work at 1,000
// sessions (cmd/bench), where waiting for FlushInterval lets one write
// cover many turns.
func (sh *shard) idle() bool {
	return time.Since(sh.lastIn) >= idleFlush && sh.p.backlog.Load() == 0
}

// reset forgets every session and unacknowledged message; the consumer is
// re-attached at the ack floor and the messages come again, in order. Fold
// goroutines keep running: their results reload the session and land if
// its checkpointed lease is still theirs.
func (sh *shard) reset() {
	for sh.writes > 0 {
		sh.landSaves(<-sh.saves) // so that a reload reads the revision they wrote
	}
	for {
		select {
		case <-sh.in:
			continue // from the old consumer: redelivered after the rewind
		default:
		}
		break
	}
	sh.gen++ // reads in flight land nowhere; their events come again
	sh.seen = 0
	sh.loading = make(map[string][]inMsg)
	sh.loadQ = nil
	sh.p.m.liveSess.Sub(float64(len(sh.sessions)))
	sh.p.m.packedSess.Sub(float64(sh.nPacked))
	sh.nPacked = 0
	sh.sessions = make(map[string]*live)
	sh.wake = make(map[string]time.Time)
	sh.ahead = make(map[string]summaryRecord)
	sh.dirty = nil
	sh.pending = 0
}

// ctx for KV and publish calls made by the shard itself.
func (sh *shard) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

func (sh *shard) get(id string) (*live, error) {
	if ls, ok := sh.sessions[id]; ok && sh.inflate(id, ls) {
		return ls, nil
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	s, rev, err := sh.p.store.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	return sh.install(id, s, rev), nil
}

// install makes a loaded checkpoint the session's live state.
func (sh *shard) install(id string, s *state.Session, rev uint64) *live {
	ls := &live{s: s, rev: rev}
	if s.Lease != nil {
		ctx, cancel := sh.ctx()
		sh.reconcile(ctx, ls)
		cancel()
		// Whatever the lease's fate, look at the session again without
		// waiting for an event: it may never send another one.
		now := sh.p.clock.Now()
		switch {
		case s.Lease.Held(now):
			sh.wake[id] = s.Lease.Deadline
		default:
			sh.wake[id] = now
		}
	} else if sh.p.clock.Now().Before(s.RetryAfter) {
		sh.wake[id] = s.RetryAfter
	}
	sh.sessions[id] = ls
	sh.p.m.liveSess.Inc()
	return ls
}

// reconcile runs when a checkpoint is loaded with a fold lease: the
// previous owner may have published the summary and died before the
// checkpoint that clears the lease. The outbound stream is the record, so
// adopt what it says.
func (sh *shard) reconcile(ctx context.Context, ls *live) {
	s := ls.s
	last, err := sh.p.lastSummary(ctx, s.ID)
	if err != nil {
		sh.p.log.Warn().Err(err).Str("event", "reconcile_failed").Str("session", s.ID).Msg("could not read the last summary; keeping the checkpoint")
		return
	}
	switch sh.takeRecord(ls, last, "lease_found") {
	case recordAdopted:
		return
	case recordAwaited:
		// The lease's fold is in the record, and more: none of it is
		// folded again.
		s.Lease = nil
		sh.markDirty(ls)
		return
	}
	if !s.Lease.Held(sh.p.clock.Now()) {
		sh.p.log.Info().Str("event", "lease_expired").Str("session", s.ID).Str("fold_id", s.Lease.FoldID).
			Str("owner", s.Lease.Owner).Msg("cleared an expired fold lease; the batch will be folded again")
		s.Lease = nil
		sh.markDirty(ls)
	}
}

// adoptable reports whether the subject's last summary is a later one of
// the session as it stands (same reset epoch, a cursor within the turns it
// holds) that it can take as its own. A summary that is not is still the
// subject's last: the next publish goes after it (publishConflict).
func adoptable(s *state.Session, last summaryRecord) bool {
	ev := last.ev
	return ev != nil && ev.Version > s.Version && ev.Epoch == s.Epoch && ev.Cursor >= s.Cursor && ev.Cursor <= s.Total
}

// behind reports whether last is a later summary of the session made from
// turns it has not applied yet: the session was reloaded from a checkpoint
// older than the record (a rewind after failed checkpoints, a new owner)
// and its turns are coming again. Folding them again would record batches
// the stream already holds under new versions. An ended session does not
// wait: no turn is coming, so it folds and publishes after the record.
func behind(s *state.Session, last summaryRecord) bool {
	ev := last.ev
	return ev != nil && ev.Version > s.Version && ev.Epoch == s.Epoch && ev.Cursor > s.Total && !s.Ended
}

// recordFate is what takeRecord did with a later summary on the stream.
type recordFate int

const (
	recordNotTheSessions recordFate = iota // neither: publish after it
	recordAdopted
	recordAwaited
)

// takeRecord is what an owner does with the subject's last summary when
// it is not the one the session last recorded: adopt it when the session
// has the turns it covers, await those turns when they are still coming,
// or leave it (another epoch, an older version) for the next publish to go
// after.
func (sh *shard) takeRecord(ls *live, last summaryRecord, why string) recordFate {
	switch {
	case adoptable(ls.s, last):
		sh.adopt(ls, last, why)
		return recordAdopted
	case behind(ls.s, last):
		sh.awaitRecord(ls, last, why)
		return recordAwaited
	}
	return recordNotTheSessions
}

// awaitRecord holds the session's folds and evictions until its turns
// reach last's cursor; evaluate then adopts last (heldByRecord).
func (sh *shard) awaitRecord(ls *live, last summaryRecord, why string) {
	s := ls.s
	sh.ahead[s.ID] = last
	sh.p.log.Info().Str("event", "summary_ahead").Str("session", s.ID).Str("why", why).Uint64("version", last.ev.Version).
		Int64("cursor", last.ev.Cursor).Uint64("previous_version", s.Version).Int64("total_turns", s.Total).
		Msg("the outbound stream holds a later summary of turns still being redelivered; folding waits for them, then adopts it")
}

// heldByRecord adopts the summary the session awaits once its turns reach
// the summary's cursor, and reports whether the session must still wait.
func (sh *shard) heldByRecord(ls *live) bool {
	s := ls.s
	last, ok := sh.ahead[s.ID]
	if !ok {
		return false
	}
	switch {
	case behind(s, last):
		return true
	case adoptable(s, last):
		sh.adopt(ls, last, "turns_replayed")
	}
	// Adopted, or no longer the session's (a reset, an end, a newer summary).
	delete(sh.ahead, s.ID)
	return false
}

// adopt makes a summary found on the outbound stream the session's own:
// its owner published it and stopped before a checkpoint recorded it (a
// crash, a partition moved on). The stream is the record of what was
// folded, so the batch is not folded again.
func (sh *shard) adopt(ls *live, last summaryRecord, why string) {
	s, ev := ls.s, last.ev
	sh.p.log.Info().Str("event", "summary_recovered").Str("session", s.ID).Str("why", why).Uint64("version", ev.Version).
		Uint64("previous_version", s.Version).Int64("cursor", ev.Cursor).Int64("previous_cursor", s.Cursor).
		Msg("adopted a summary published before the previous owner checkpointed it")
	sh.p.m.recovered.Inc()
	if n := int(min(ev.Cursor-s.Cursor, int64(len(s.Turns)))); n > 0 {
		ls.payloads.drop(s.Turns[:n], s.PendingNotes[:min(ev.FoldedNotes, len(s.PendingNotes))])
		if ev.Mode == string(fold.ModeEvict) {
			s.CountEvicted(s.Turns[:n]) // so the next note counts on from it
		}
	}
	s.Summary, s.Version, s.SummarySeq = ev.Summary, ev.Version, last.seq
	s.SummaryIsNote = ev.Mode == string(fold.ModeEvict)
	s.Compactions = ev.Compactions
	s.Advance(ev.Cursor, ev.FoldedNotes)
	s.LastFoldAt = ev.At
	s.SummaryToks = ev.SummaryTokens
	s.Lease = nil
	sh.markDirty(ls)
}

func (sh *shard) handle(m inMsg) {
	p := sh.p
	if p.rewind.Load() {
		return // not acked: redelivered, in order, after the rewind
	}
	if m.perr != nil {
		sh.reject(m, m.perr)
		return
	}
	seq := m.seq
	ls, err := sh.get(m.session)
	if err != nil {
		if ls = sh.loadFailed(m.session, err, m.seq); ls == nil {
			return
		}
	}
	ls.touched = p.clock.Now()
	if seq <= ls.s.LastSeq {
		// Applied before (redelivery after a crash or a slow ack): no-op.
		p.m.redelivered.Inc()
		sh.addAck(ls, m.msg)
		return
	}
	from := ls.s.LastEventAt
	in, repaired, err := p.adm.Admit(ls.s, m.kind, m.session, m.msg.Data(), m.received)
	if repaired {
		sh.timeRepaired(ls, from)
	}
	if err != nil {
		sh.reject(m, err)
		return
	}
	if !ls.s.Ended {
		if why := ls.s.ResetDue(state.EventTime(in)); why != "" {
			sh.autoReset(ls, why) // Apply then resets the session
		}
	}
	if c := in.Control; c != nil && (c.Op == events.OpReset || c.Op == events.OpEnd && !ls.s.Ended) {
		// Before Apply clears the lease: stop this owner's fold and drop
		// the sealed chunks of the transcript being forgotten.
		if c.Op == events.OpEnd {
			sh.abandon(ls, "session ended")
		} else {
			sh.abandon(ls, "session reset")
			sh.dropChunks(ls.s, ls.s.Cursor, ls.s.Sealed)
		}
	}
	effect, err := ls.s.Apply(seq, in)
	if err != nil {
		sh.reject(m, err)
		return
	}
	ls.s.LastActivity = ls.touched
	sh.markDirty(ls)
	sh.addAck(ls, m.msg)
	p.applied.Add(1)
	p.m.applied[m.kind].Inc() // kind is turn, note or control once decoded

	switch effect {
	case state.EffectDuplicate:
		p.m.duplicates.Inc()
		p.log.Debug().Str("event", "turn_duplicate").Str("session", m.session).Str("turn_id", in.Turn.TurnID).Msg("turn already applied; ignored")
	case state.EffectTurn:
		ls.rememberTurn(seq, in.Turn)
		if sh.trigger(ls) == TriggerTurn {
			sh.evaluate(ls, "turn", false)
		}
		if at, ok := sh.idleWake(ls, sh.policy(ls)); ok {
			if cur, has := sh.wake[ls.s.ID]; !has || at.Before(cur) {
				sh.wake[ls.s.ID] = at // a quiet session is folded at the idle threshold
			}
		}
	case state.EffectNote:
		ls.remember(seq, m.msg.Data())
	case state.EffectControl:
		sh.control(ls, in.Control)
	}
}

func (sh *shard) control(ls *live, c *events.Control) {
	p := sh.p
	switch c.Op {
	case events.OpGenerate:
		sh.evaluate(ls, "generate", false)
	case events.OpCompact:
		sh.evaluate(ls, "compact", true)
	case events.OpEnd:
		sh.publishLifecycle(ls, events.Lifecycle{Type: events.EventSessionEnded})
		p.log.Info().Str("event", "session_ended").Str("session", ls.s.ID).Int64("total_turns", ls.s.Total).Msg("session ended")
		sh.evaluate(ls, "end", false) // the final fold, then the archive
	case events.OpReset:
		ls.payloads = nil
		ls.lastSkip = ""
		sh.publishLifecycle(ls, events.Lifecycle{Type: events.EventSessionReset})
		p.log.Info().Str("event", "session_reset").Str("session", ls.s.ID).Msg("session reset")
	case events.OpConfigure:
		pol := sh.policy(ls)
		sh.publishLifecycle(ls, events.Lifecycle{Type: events.EventSessionConfigured, Mode: string(pol.Mode)})
		if c.Config != nil && c.Config.Mode == events.ModeEvict && pol.Mode != fold.ModeEvict {
			p.log.Warn().Str("event", "evict_fallback").Str("session", ls.s.ID).
				Msg("mode evict needs recall (the context service) to find evicted turns; without it eviction is amnesia, so this session folds in mode tokens")
		}
		w := pol.Window
		p.log.Info().Str("event", "session_configured").Str("session", ls.s.ID).Str("mode", string(pol.Mode)).Int("recent_window", w.Recent).
			Int("batch_size", w.Batch).Int("max_summary_chars", w.MaxSummaryChars).Str("trigger", sh.trigger(ls)).
			Int("context_window", pol.Tokens.ContextWindow).Int("reserve_tokens", pol.Tokens.Reserve()).Msg("session configured")
	}
}

// abandon drops an in-flight fold of this owner: its result is discarded
// by fold id, and nothing it would have moved moves.
func (sh *shard) abandon(ls *live, why string) {
	sh.awaitLanding(ls) // a summary on its way to the stream lands first
	if ls.cancel != nil {
		ls.cancel()
		ls.cancel = nil
	}
	if ls.s.Lease != nil {
		sh.p.log.Info().Str("event", "fold_abandoned").Str("session", ls.s.ID).Str("fold_id", ls.s.Lease.FoldID).Str("why", why).Msg("in-flight fold abandoned")
		ls.s.Lease = nil
	}
	// The canceled fold may have been publishing its summary: wait for its
	// result, so that nothing of it reaches the stream after what comes
	// next (a reset, the end). A summary it stored is adopted (applyResult).
	for ls.running != "" {
		sh.applyResult(<-sh.results)
	}
}

func (sh *shard) trigger(ls *live) string {
	if c := ls.s.Config; c != nil && c.Trigger != "" {
		return c.Trigger
	}
	return sh.p.cfg.Trigger
}

func (sh *shard) profile(ls *live) fold.Profile {
	if c := ls.s.Config; c != nil && c.Profile != "" {
		return fold.Profile(c.Profile)
	}
	return sh.p.cfg.Profile
}

// dropChunks removes sealed ref chunks the cursor has passed; failures
// leave only garbage, so they are logged, not fatal.
func (sh *shard) dropChunks(s *state.Session, oldCursor, newCursor int64) {
	if s.Sealed <= oldCursor {
		return
	}
	ctx, cancel := sh.ctx()
	defer cancel()
	if err := sh.p.store.DropChunks(ctx, s.ID, s.Epoch, oldCursor, newCursor, s.Sealed); err != nil {
		sh.p.log.Warn().Err(err).Str("event", "chunk_cleanup_failed").Str("session", s.ID).Msg("could not remove folded ref chunks")
	}
}

// resume checks a session that may have fold work left without an event
// of its own: at start (due mark) or when its wake time has come.
func (sh *shard) resume(id, trigger string) {
	if sh.p.rewind.Load() {
		return // the rewind reloads it; its due mark stays for the next start
	}
	ls, err := sh.get(id)
	if err != nil {
		if ls = sh.loadFailed(id, err, 0); ls == nil {
			return
		}
	}
	ls.due = true
	sh.evaluate(ls, trigger, false)
	sh.settleDue(ls)
}

// settleDue decides, after a check, whether the session needs another one
// without waiting for an event.
func (sh *shard) settleDue(ls *live) {
	s, now := ls.s, sh.p.clock.Now()
	switch {
	case s.Lease != nil && s.Lease.Owner == sh.p.cfg.InstanceID:
		return // our fold is running; its result settles the session
	case s.Lease.Held(now):
		sh.wake[s.ID] = s.Lease.Deadline // another owner's fold: look again when its lease ends
		return
	case now.Before(s.RetryAfter):
		sh.wake[s.ID] = s.RetryAfter
		return
	}
	if at, ok := sh.idleWake(ls, sh.policy(ls)); ok {
		sh.wake[s.ID] = at
		return
	}
	delete(sh.wake, s.ID)
	// The due mark stays until the session leaves memory (evictIdle):
	// clearing it after every fold would cost a KV write per fold.
}

func (sh *shard) wakeDue() {
	now := sh.p.clock.Now()
	for id, at := range sh.wake {
		if !now.Before(at) {
			delete(sh.wake, id)
			sh.resume(id, "retry")
		}
	}
}

// evictIdle drops clean, idle sessions from memory: their state is in KV.
func (sh *shard) evictIdle() {
	now := sh.p.clock.Now()
	for id, ls := range sh.sessions {
		_, waking := sh.wake[id]
		if !waking && ls.quiet() && now.Sub(ls.touched) > sh.p.cfg.IdleEvict {
			if ls.due {
				// Idle with nothing pending (else it would be waking).
				if err := sh.p.store.ClearDue(id); err != nil {
					sh.p.log.Warn().Err(err).Str("event", "due_clear_failed").Str("session", id).Msg("due mark left; the session is checked once at the next start")
				}
			}
			sh.forget(id, ls)
		}
	}
}
