package processor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
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
	acks     []pendingAck    // applied, waiting for the checkpoint that covers them (checkpoint.go)
	dirtyAt  time.Time       // wall time of the oldest change not yet written (flush pacing)
	lastSkip fold.SkipReason // last skip reason published, to avoid one event per turn
	cancel   context.CancelFunc
	touched  time.Time
	// running: the fold id of this owner's fold goroutine for the session
	// until its result is back; it may be publishing the summary.
	running  string
	payloads payloads       // of unfolded turns and pending notes (payloads.go)
	tokSum   state.TokenSum // the unfolded turns' tokens, for the modes that estimate
	// packed: the session is idle in its compact form (idle.go); s and
	// payloads are nil until get inflates it.
	packed []byte
	// wait: what the session waits for, if anything (nil: nothing; kept
	// out of line, as few sessions ever wait).
	wait  *sessionWait
	dirty bool
	due   bool // the KV due mark is known to be set
	// writing: a pipelined checkpoint write is in flight (checkpoint.go); the
	// next write needs the revision it returns.
	writing bool
	landing bool // a refused summary-updated is being published again (publish.go)
	// resetArchived: the life a policy reset ends is archived (autoReset).
	resetArchived bool
	// text: the summarizer state as the last checkpoint stored it, for the
	// next (stateText); nil until the session has a state.
	text *state.StateText
}

// stateText is what the session's checkpoints keep of its summarizer state
// from one write to the next (state.Session.EncodeReusing).
// Must be called on the loop.
func (ls *live) stateText() *state.StateText {
	if ls.text == nil && len(ls.s.SummaryState) > 0 {
		ls.text = new(state.StateText)
	}
	return ls.text
}

// sessionWait is what a session waits for before its next step, and
// what waits with it.
type sessionWait struct {
	// on: abandon's wait for the fold's result, for a summary being
	// published again, or for a call made off the loop (aside); held are
	// the session's events meanwhile, and steps what waited with them (a
	// check to take again, a fold result that came back meanwhile): unpark
	// takes the steps, then the events, once the wait is over.
	on    waitFor
	held  []inMsg
	steps []func()
	// afterWrite: what a synchronous save waits to do until the pipelined
	// write in flight is back (checkpointThen).
	afterWrite func()
}

// waitFor is what a session waits for (sessionWait.on).
type waitFor uint8

const (
	waitNone    waitFor = iota
	waitLanding         // a refused summary being published again (landing)
	waitFold            // its fold's result (running)
	waitIO              // a call made off the loop for it (aside)
)

// waits returns the session's wait, made if it has none.
func (ls *live) waits() *sessionWait {
	if ls.wait == nil {
		ls.wait = new(sessionWait)
	}
	return ls.wait
}

// parked reports whether the session's events must be held: it waits,
// or has a step or events to take once its wait is over.
func (ls *live) parked() bool {
	w := ls.wait
	return w != nil && (w.on != waitNone || len(w.steps) > 0 || len(w.held) > 0)
}

// tidyWait drops the session's wait once nothing is left in it.
func (ls *live) tidyWait() {
	if w := ls.wait; w != nil && !ls.parked() && w.afterWrite == nil {
		ls.wait = nil
	}
}

func (ls *live) remember(seq uint64, data []byte) { ls.payloads.add(seq, data) }

// rememberTurn keeps a turn as decoded (payloads.go); t is not changed after.
func (ls *live) rememberTurn(seq uint64, t *events.Turn) { ls.payloads.addTurn(seq, t) }

// reapplied holds the sessions dropped from memory with events applied
// that no checkpoint covers, and the last such sequence: those events come
// again (a rewind) and are applied again, but counted once. Loop only.
type reapplied map[string]uint64

// note records that session id's events up to seq were applied and are
// forgotten uncheckpointed: when they come again, they are not counted
// again.
func (r *reapplied) note(id string, seq uint64) {
	if *r == nil {
		*r = make(map[string]uint64)
	}
	(*r)[id] = max((*r)[id], seq)
}

// first reports whether an event applied at seq is applied for the first
// time, not again after its session was forgotten (note). Events of a
// session are applied in stream order, so the mark is passed once the
// event at it was applied again.
func (r reapplied) first(id string, seq uint64) bool {
	if len(r) == 0 {
		return true
	}
	mark, ok := r[id]
	if !ok {
		return true
	}
	if seq >= mark {
		delete(r, id)
	}
	return seq > mark
}

// covered forgets the mark of a session whose checkpoint, read at
// lastSeq, covers it: another owner wrote those events, and they are
// no-ops here.
func (r reapplied) covered(id string, lastSeq uint64) {
	if mark, ok := r[id]; ok && lastSeq >= mark {
		delete(r, id)
	}
}

// shard is a subset of sessions and their event loop: every event and
// fold result of a session is handled on its shard's goroutine, so session
// state needs no locks. The loop (run) accepts events, applies them in
// order and handles control ops; it owns the sessions in memory and their
// idle forms (idle.go). It makes no call that waits for the server: reads,
// writes and deletes run aside (aside.go, load.go, checkpoint.go) and come
// back to it as events, the session concerned waiting meanwhile. Three
// owners work on its goroutine with state of their own: the loader
// (checkpoint reads and quarantines; load.go), the checkpoint writer
// (dirty sessions, pipelined writes, acks; checkpoint.go) and the fold
// coordinator (trigger checks, leases, folds in flight, wakes, records
// found on the outbound stream; coordinator.go).
type shard struct {
	id       int
	in       chan inMsg
	ctrl     chan chan struct{} // rewind: drop what is not checkpointed
	wakeCh   chan string        // sessions to resume at start (due marks)
	sessions map[string]*live
	w        *checkpointWriter // checkpoint.go: dirty sessions, pipelined writes, acks
	co       *coordinator      // coordinator.go: folds, leases, wakes
	ld       *loader           // load.go: checkpoint reads, quarantines
	// aside runs the loop's KV and stream calls off it (aside.go).
	aside *aside
	rec   *recorder     // every publish of the outbound stream (recorder.go)
	dl    *deadLetterer // rejected events (deadletter.go)
	cons  *consumers    // rewinds, and the consumer's backlog (idle)

	js      jetstream.JetStream // the event_rejected lifecycle events (reject)
	subj    events.Subjects
	store   *state.Store // due marks of evicted sessions (evictIdle)
	adm     state.Admission
	m       *metrics
	log     zerolog.Logger
	clock   Clock
	mem     *memRelease    // returns memory freed by idle compaction (idle.go)
	applied *atomic.Uint64 // events applied, each counted once (Processor.Applied)
	// Config values: FlushBatch, MaxAckPending, IdleCompact, IdleEvict,
	// and the engine's shard count.
	flushBatch, maxAckPending, shards int
	idleCompact, idleEvict            time.Duration

	nPacked int // sessions in their compact idle form (idle.go)
	packBuf []byte
	lastIn  time.Time // wall time the last batch of events was taken in (drain)
	// reapply: sessions dropped with events applied that no checkpoint
	// covers, and the last such sequence. Those events come again (a
	// rewind) and are applied again, but counted once.
	reapply reapplied
}

// idleFlush: a shard whose input has been quiet this long writes every
// dirty session at once; under load, sessions are written once their
// oldest change is FlushInterval old, so each write covers many turns.
const idleFlush = 2 * time.Millisecond

// newShard is shard id of p, its folds under foldCtx.
func newShard(p *Processor, id int, foldCtx context.Context) *shard {
	sh := &shard{
		id:       id,
		in:       make(chan inMsg, 1024),
		ctrl:     make(chan chan struct{}),
		wakeCh:   make(chan string),
		sessions: make(map[string]*live),
		aside:    newAside(p.store, p.log),
		dl:       p.dl, cons: p.cons, js: p.js, subj: p.subj, store: p.store, adm: p.adm, m: p.m, log: p.log, clock: p.clock, mem: p.mem,
		applied: &p.applied, flushBatch: p.cfg.FlushBatch, maxAckPending: p.cfg.MaxAckPending, shards: len(p.shards),
		idleCompact: p.cfg.IdleCompact, idleEvict: p.cfg.IdleEvict,
	}
	sh.w = newCheckpointWriter(p, sh)
	sh.rec = p.newRecorder()
	sh.co = newCoordinator(p, sh.w, sh, sh.aside, sh.rec, foldCtx)
	sh.ld = newLoader(p, sh, sh.aside, sh.rec)
	return sh
}

// run is the event loop. Everything a session waits for comes back here,
// on the loop's own select: its checkpoint read (loaded), its checkpoint
// writes (saves), its fold's result (results), the other calls made for
// it off the loop (aside.done). Nothing on the loop
// receives from those channels elsewhere: a session that must wait for
// its fold holds its events meanwhile (live.wait, unpark), and a rewind
// waits for the writes in flight in a state of its own (rewinding).
func (sh *shard) run() {
	pace := time.NewTimer(time.Hour)
	pace.Stop()
	paced := false
	sweep := time.NewTicker(250 * time.Millisecond)
	defer sweep.Stop()
	sweeps := 0
	in := sh.in
	// rewinding: a rewind asked for (ctrl) waits until the writes in
	// flight are back, so that a reload reads the revision they wrote,
	// and the events queued from the old consumer are dropped (they come
	// again after the rewind); then the shard resets and says so.
	var rewinding chan struct{}
	for in != nil || sh.co.inFlight > 0 || sh.w.busy() || sh.ld.busy() || sh.aside.busy() || rewinding != nil {
		if rewinding != nil {
			if sh.w.inFlight() == 0 && len(sh.in) == 0 {
				sh.reset()
				close(rewinding)
				rewinding = nil
				continue
			}
			select {
			case done := <-sh.w.saves:
				sh.w.landSaves(done)
			case _, ok := <-in:
				if !ok {
					in = nil
				}
			}
			continue
		}
		if !paced && sh.w.hasDirty() {
			pace.Reset(idleFlush)
			paced = true
		}
		// Fold results first: a fold's latency is what prompt builders
		// wait for, and under load the input is never empty.
		select {
		case r := <-sh.co.results:
			sh.land(r)
			continue
		default:
		}
		select {
		case m, ok := <-in:
			if !ok {
				in = nil // shutting down: keep serving fold results, reads and writes
				sh.w.flush(true)
				continue
			}
			sh.accept(m)
			if sh.w.acksWaiting() >= sh.flushBatch {
				sh.w.flush(true)
			}
			sh.drain()
			sh.lastIn = time.Now() // wall time: flush pacing, not session logic
		case done := <-sh.w.saves:
			sh.w.landSaves(done)
			sh.w.flush(in == nil || sh.idle()) // writes freed room for more
		case r := <-sh.co.results:
			sh.land(r)
		case d := <-sh.ld.done:
			sh.ld.land(d)
		case <-sh.ld.retryC():
			sh.ld.retryDue()
		case step := <-sh.aside.done:
			sh.aside.land(step)
		case rewinding = <-sh.ctrl:
		case <-pace.C:
			paced = false
			sh.w.flush(in == nil || sh.idle())
		case id := <-sh.wakeCh:
			sh.co.resume(id, "resume")
		case <-sweep.C:
			sh.co.wakeDue()
			sh.rec.sent.check(time.Now())
			if sweeps++; sweeps%4 == 0 {
				sh.evictIdle()
			}
			sh.compactIdle()
		}
	}
}

// drainBatch bounds the events drain takes before the loop's select looks
// at its other inputs again (writes landed, reads, the pace timer).
const drainBatch = 64

// drain accepts the events already queued on the shard's input, up to
// drainBatch, without going back to the loop's select: under load the
// input is never empty, and the select locks every channel it watches on
// each round, a cost cmd/bench's ingest section sees at 1,000 sessions.
// It stops as soon as a fold result waits, which the loop takes first.
// Only this goroutine receives from sh.in, so a non-empty queue cannot
// block the receive; a closed input is left to the select, which shuts
// the loop's intake down.
// Must be called on the loop.
func (sh *shard) drain() {
	for range drainBatch {
		if len(sh.in) == 0 || len(sh.co.results) > 0 {
			return
		}
		m, ok := <-sh.in
		if !ok {
			return
		}
		sh.accept(m)
		if sh.w.acksWaiting() >= sh.flushBatch {
			sh.w.flush(true)
		}
	}
}

// idle reports whether the shard's input has been quiet for idleFlush
// with nothing more waiting on the consumer. Under a backlog, a gap in one
// shard's input only means the cores are busy elsewhere (the consumer, the
// server, other shards): writing every dirty session then cost one write
// per session every few milliseconds, most of the server's work at 1,000
// sessions (cmd/bench), where waiting for FlushInterval lets one write
// cover many turns.
//
// A backlog the consumer cannot deliver does not count: once this shard's
// unacknowledged messages could be filling the consumer's window (the
// shards together near MaxAckPending, by this one's share), the consumer
// waits for these acks, and waiting for FlushInterval would stall it.
func (sh *shard) idle() bool {
	if time.Since(sh.lastIn) < idleFlush {
		return false
	}
	return !sh.cons.backlogged() || sh.w.pending*sh.shards >= sh.maxAckPending/2
}

// reset forgets every session and unacknowledged message; the consumer is
// re-attached at the ack floor and the messages come again, in order. Fold
// goroutines keep running: their results reload the session and land if
// its checkpointed lease is still theirs. No write may be in flight.
// Must be called on the loop.
func (sh *shard) reset() {
	for id, ls := range sh.sessions {
		if ls.s != nil && len(ls.acks) > 0 {
			sh.reapply.note(id, ls.s.LastSeq)
		}
	}
	sh.m.liveSess.Sub(float64(len(sh.sessions)))
	sh.m.packedSess.Sub(float64(sh.nPacked))
	sh.nPacked = 0
	sh.sessions = make(map[string]*live)
	sh.co.reset()
	sh.w.reset()
	sh.ld.reset()
}

// land hands a fold result to the coordinator, then resumes its session
// if it was waiting for it. A session not in memory (a rewind dropped it)
// is read first; one waiting for a call made off the loop takes the
// result once that call is back.
// Must be called on the loop.
func (sh *shard) land(r foldResult) {
	sh.co.resultBack()
	sh.withSession(r.job.session, func(ls *live) {
		sh.co.applyResult(ls, r)
		sh.unpark(r.job.session)
	})
}

// withSession runs fn with the session's live state: at once if it is in
// memory and not waiting for a call made off the loop; else after its
// checkpoint read (load.go) or that call. Must be called on the loop.
func (sh *shard) withSession(id string, fn func(*live)) {
	if ls, ok := sh.sessions[id]; ok && sh.inflate(id, ls) {
		if w := ls.wait; w != nil && w.on == waitIO {
			w.steps = append(w.steps, func() { fn(ls) })
			return
		}
		fn(ls)
		return
	}
	sh.ld.after(id, fn)
}

// unpark resumes a session whose wait is over: the step that waited is
// taken again (live.then), then its held events are applied, in order,
// until one makes it wait again.
// Must be called on the loop.
func (sh *shard) unpark(id string) {
	ls, ok := sh.sessions[id]
	if !ok || ls.s == nil {
		return // dropped (a rewind, a conflict): its held events come again
	}
	defer ls.tidyWait()
	for ls.parked() {
		if !sh.co.waitOver(ls) {
			return
		}
		w := ls.wait
		if len(w.steps) > 0 {
			step := w.steps[0]
			w.steps = w.steps[1:]
			step()
			continue
		}
		m := w.held[0]
		w.held = w.held[1:]
		if len(w.held) == 0 {
			w.held = nil
		}
		sh.apply(ls, m)
	}
}

// opCtx bounds one KV or publish call made off a shard's loop (aside).
func opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// holds reports whether ls is the shard's live state of its session.
// Must be called on the loop.
func (sh *shard) holds(ls *live) bool { return sh.sessions[ls.s.ID] == ls }

// accept applies an event, or parks it behind its session's checkpoint
// read (loader): a session seen for the first time is read aside, its
// events waiting for it in order, while other sessions go on.
// Must be called on the loop.
func (sh *shard) accept(m inMsg) {
	sh.ld.saw(m.seq)
	if m.perr != nil {
		sh.handle(m) // rejected without a session
		return
	}
	// Parked events go first: the session's read is queued or in flight.
	if _, ok := sh.sessions[m.session]; ok && !sh.ld.reading(m.session) {
		sh.handle(m)
		return
	}
	sh.ld.park(m)
}

// has reports whether the session is in memory. Must be called on the
// loop.
func (sh *shard) has(id string) bool {
	_, ok := sh.sessions[id]
	return ok
}

// rebuilt installs a quarantined session's rebuilt state (loader.quarantine).
// Must be called on the loop.
func (sh *shard) rebuilt(ce *state.CorruptError, s *state.Session, replayed int, rerr error, last summaryRecord, lerr error) {
	id := ce.ID
	if _, ok := sh.sessions[id]; ok {
		return
	}
	ls := sh.install(id, s, ce.Revision)
	if lerr == nil && last.ev != nil && sh.co.takeRecord(ls, last, "checkpoint_rebuilt") == recordNotTheSessions && last.ev.Version > s.Version {
		// Not adoptable (its turns are gone from the stream, or another
		// life of the session): the next summary goes after it.
		s.Version, s.SummarySeq = last.ev.Version, last.seq
		s.Epoch = max(s.Epoch, last.ev.Epoch)
	}
	sh.w.markDirty(ls)
	ev := sh.log.Error().Err(ce.Err).Str("event", "checkpoint_quarantined").Str("session", id).Uint64("revision", ce.Revision).
		Int("size", len(ce.Data)).Int("events_replayed", replayed).Int64("total_turns", s.Total).Int64("cursor", s.Cursor).Uint64("version", s.Version)
	if rerr != nil {
		ev = ev.AnErr("rebuild_error", rerr)
	}
	if lerr != nil {
		ev = ev.AnErr("summary_error", lerr)
	}
	ev.Msg("the session's checkpoint cannot be decoded; kept on the dead-letter stream and rebuilt from the streams, other sessions go on")
	why := ce.Error()
	if rerr != nil {
		why += "; rebuilt only in part: " + rerr.Error()
	}
	sh.rec.lifecycle(ls.s, events.Lifecycle{Type: events.EventCheckpointQuarantined, Reason: "corrupt_checkpoint", Version: s.Version, Error: why})
}

// drop forgets a session whose checkpoint write failed (checkpointWriter).
// Must be called on the loop.
func (sh *shard) drop(id string) {
	if ls, ok := sh.sessions[id]; ok {
		if ls.s != nil {
			sh.reapply.note(id, ls.s.LastSeq)
		}
		delete(sh.sessions, id)
		sh.m.liveSess.Dec()
	}
}

// install makes a loaded checkpoint the session's live state.
// Must be called on the loop.
func (sh *shard) install(id string, s *state.Session, rev uint64) *live {
	sh.reapply.covered(id, s.LastSeq)
	ls := &live{s: s, rev: rev}
	sh.co.loaded(ls)
	sh.sessions[id] = ls
	sh.m.liveSess.Inc()
	return ls
}

// recordFate is what takeRecord did with a later summary on the stream.
type recordFate int

const (
	recordNotTheSessions recordFate = iota // neither: publish after it
	recordAdopted
	recordAwaited
)

// Must be called on the loop.
func (sh *shard) handle(m inMsg) {
	if sh.cons.rewinding() {
		return // not acked: redelivered, in order, after the rewind
	}
	if m.perr != nil {
		sh.reject(m, m.perr)
		return
	}
	ls, ok := sh.sessions[m.session]
	if !ok || !sh.inflate(m.session, ls) {
		// Gone from memory since it was accepted (a packed form that did
		// not unpack): read again, its events after the read.
		sh.ld.park(m)
		return
	}
	if ls.parked() {
		ls.wait.held = append(ls.wait.held, m) // after what the session waits for (unpark)
		return
	}
	sh.apply(ls, m)
}

// apply applies an event to its session's live state, or holds it (first
// of the held) when the session must first wait for its fold (abandon).
// Must be called on the loop.
func (sh *shard) apply(ls *live, m inMsg) {
	if sh.cons.rewinding() {
		return // not acked: redelivered, in order, after the rewind
	}
	seq := m.seq
	ls.touched = sh.clock.Now()
	if seq <= ls.s.LastSeq {
		// Applied before (redelivery after a crash or a slow ack): no-op.
		// Unless it does not decode: then it was rejected, and its dead
		// letter may not be kept yet (the worker held it when the process
		// stopped); rejected again, it is kept once (msg id dlq:<seq>, within
		// the dead-letter stream's duplicate window). Decoded with today's
		// limits: lowered since, an event applied before is rejected now.
		if _, err := events.DecodeInbound(m.kind, m.session, m.msg.Data(), sh.adm.Limits); err != nil {
			sh.reject(m, err)
			return
		}
		sh.m.redelivered.Inc()
		sh.w.addAck(ls, m.msg)
		return
	}
	from := ls.s.LastEventAt
	in, repaired, err := sh.adm.Admit(ls.s, m.kind, m.session, m.msg.Data(), m.received)
	if repaired {
		sh.timeRepaired(ls, from)
	}
	if err != nil {
		sh.reject(m, err)
		return
	}
	if !ls.s.Ended {
		if why := ls.s.ResetDue(state.EventTime(in)); why != "" {
			if !sh.co.autoReset(ls, why) { // Apply then resets the session
				sh.hold(ls, m)
				return
			}
		}
	}
	if c := in.Control; c != nil && (c.Op == events.OpReset || c.Op == events.OpEnd && !ls.s.Ended) {
		// Before Apply clears the lease: stop this owner's fold and drop
		// the sealed chunks of the transcript being forgotten.
		why := "session reset"
		if c.Op == events.OpEnd {
			why = "session ended"
		}
		if !sh.co.abandon(ls, why) {
			sh.hold(ls, m)
			return
		}
		if c.Op == events.OpReset {
			sh.aside.dropChunks(ls.s, ls.s.Cursor, ls.s.Sealed)
		}
	}
	effect, err := ls.s.Apply(seq, in)
	if err != nil {
		sh.reject(m, err)
		return
	}
	ls.s.LastActivity = ls.touched
	sh.w.addAck(ls, m.msg) // and marks the session dirty
	if sh.reapply.first(m.session, seq) {
		sh.applied.Add(1)
		sh.m.applied[m.kind].Inc() // kind is turn, note or control once decoded
	}

	switch effect {
	case state.EffectDuplicate:
		sh.m.duplicates.Inc()
		sh.log.Debug().Str("event", "turn_duplicate").Str("session", m.session).Str("turn_id", in.Turn.TurnID).Msg("turn already applied; ignored")
	case state.EffectTurn:
		ls.rememberTurn(seq, in.Turn)
		sh.co.turn(ls)
	case state.EffectNote:
		ls.remember(seq, m.msg.Data())
	case state.EffectControl:
		sh.control(ls, in.Control)
	}
}

// hold puts m first among the session's held events: it is applied again
// once the session's wait is over (unpark).
// Must be called on the loop.
func (sh *shard) hold(ls *live, m inMsg) {
	w := ls.waits()
	w.held = append([]inMsg{m}, w.held...)
}

// Must be called on the loop.
func (sh *shard) control(ls *live, c *events.Control) {
	switch c.Op {
	case events.OpGenerate:
		sh.co.evaluate(ls, "generate", false)
	case events.OpCompact:
		sh.co.evaluate(ls, "compact", true)
	case events.OpEnd:
		sh.rec.lifecycle(ls.s, events.Lifecycle{Type: events.EventSessionEnded})
		sh.log.Info().Str("event", "session_ended").Str("session", ls.s.ID).Int64("total_turns", ls.s.Total).Msg("session ended")
		sh.co.evaluate(ls, "end", false) // the final fold, then the archive
	case events.OpReset:
		ls.payloads = nil
		ls.lastSkip = ""
		sh.rec.lifecycle(ls.s, events.Lifecycle{Type: events.EventSessionReset})
		sh.log.Info().Str("event", "session_reset").Str("session", ls.s.ID).Msg("session reset")
	case events.OpConfigure:
		pol := sh.co.sm.policy(ls)
		sh.rec.lifecycle(ls.s, events.Lifecycle{Type: events.EventSessionConfigured, Mode: string(pol.Mode)})
		if c.Config != nil && c.Config.Mode != "" && pol.Mode != fold.Mode(c.Config.Mode) {
			sh.log.Warn().Str("event", "evict_fallback").Str("session", ls.s.ID).Str("configured_mode", c.Config.Mode).Str("mode", string(pol.Mode)).
				Msg("the configured mode needs recall (the context service) to find the turns it drops; without it that is amnesia, so this session folds in the mode it falls back to")
		}
		w := pol.Window
		sh.log.Info().Str("event", "session_configured").Str("session", ls.s.ID).Str("mode", string(pol.Mode)).Int("recent_window", w.Recent).
			Int("batch_size", w.Batch).Int("max_summary_chars", w.MaxSummaryChars).Str("trigger", sh.co.sm.trigger(ls)).
			Int("context_window", pol.Tokens.ContextWindow).Int("reserve_tokens", pol.Tokens.Reserve()).Msg("session configured")
	}
}

// evictIdle drops clean, idle sessions from memory: their state is in KV.
// Must be called on the loop.
func (sh *shard) evictIdle() {
	now := sh.clock.Now()
	for id, ls := range sh.sessions {
		waking := sh.co.waking(id)
		if !waking && ls.quiet() && now.Sub(ls.touched) > sh.idleEvict {
			if ls.due {
				// Idle with nothing pending (else it would be waking).
				if err := sh.store.ClearDue(id); err != nil {
					sh.log.Warn().Err(err).Str("event", "due_clear_failed").Str("session", id).Msg("due mark left; the session is checked once at the next start")
				}
			}
			sh.forget(id, ls)
		}
	}
}
