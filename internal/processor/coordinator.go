package processor

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/rs/zerolog"
)

// coordinator carries out a shard's session machine (machine.go): it
// takes each session's steps to the machine (a turn, a check asked for, a
// fold's result, a wake) and does what the machine returns (run): starts
// the fold goroutines and counts them, hands publishes to the recorder and
// writes to the checkpoint writer, makes the outbound stream reads and
// archive writes aside, and keeps when each session must be looked at
// again without an event of its own (wake: a failed fold's backoff,
// another owner's lease, the idle threshold). It runs on its shard's
// goroutine; fold goroutines hand their results back on results, which
// the loop selects on and lands here. What it needs of the loop is
// foldLoop; of the checkpoint writer, markDirty and checkpointThen.
type coordinator struct {
	p        *coordParts
	sm       *machine // the session machine: every decision (machine.go)
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

// coordParts is what a coordinator uses of its engine: the configuration,
// the KV bucket, the summarizer's breaker, the logger, clock and metrics,
// the consumer manager (whether a rewind is under way) and the engine's
// fold counters.
type coordParts struct {
	cfg     Config
	store   *state.Store
	breaker *retry.Breaker
	log     zerolog.Logger
	clock   Clock
	m       *metrics
	cons    *consumers
	folds   *sync.WaitGroup // every fold goroutine, waited for at shutdown
	landed  *atomic.Uint64  // folds completed (Processor.Folds)
}

// newCoordinator is a coordinator of p's folds, for the loop's sessions.
func newCoordinator(p *Processor, w *checkpointWriter, loop foldLoop, a *aside, rec *recorder, foldCtx context.Context) *coordinator {
	parts := &coordParts{cfg: p.cfg, store: p.store, breaker: p.breaker, log: p.log, clock: p.clock, m: p.m, cons: p.cons,
		folds: &p.folds, landed: &p.landed}
	return &coordinator{
		p: parts, sm: newMachine(p.cfg, p.breaker, p.sum.Name(), p.log, p.m, &p.landed), w: w, loop: loop, aside: a, rec: rec, run: p.newFoldRunner(), foldCtx: foldCtx,
		results: make(chan foldResult, 64),
		wake:    make(map[string]time.Time),
	}
}

// reset forgets the wakes and awaited records of the sessions a rewind
// drops. Folds in flight keep running: their results reload the session
// and land if its checkpointed lease is still theirs.
// Must be called on the loop.
func (c *coordinator) reset() {
	c.wake = make(map[string]time.Time)
	c.sm.ahead = make(map[string]summaryRecord)
}

// forget drops what the coordinator holds of a session leaving memory; a
// record it awaited is learned again, by a refused publish, if still so.
// Must be called on the loop.
func (c *coordinator) forget(id string) { delete(c.sm.ahead, id) }

// waking reports whether the session has a wake time set.
// Must be called on the loop.
func (c *coordinator) waking(id string) bool {
	_, ok := c.wake[id]
	return ok
}

// loaded looks at a session just loaded from its checkpoint (machine.loaded).
// Must be called on the loop.
func (c *coordinator) loaded(ls *live) { c.do(ls, c.sm.loaded(ls, c.p.clock.Now())) }

// turn runs the checks a newly applied turn calls for (machine.turn).
// Must be called on the loop.
func (c *coordinator) turn(ls *live) { c.do(ls, c.sm.turn(ls, c.p.clock.Now())) }

// evaluate runs the session's trigger check (machine.evaluate) and does
// what it decides. Must be called on the loop.
func (c *coordinator) evaluate(ls *live, trigger string, force bool) {
	c.do(ls, c.sm.evaluate(ls, c.p.clock.Now(), trigger, force, false))
}

// settle sets whether the session needs another check without waiting
// for an event (machine.settle). Must be called on the loop.
func (c *coordinator) settle(ls *live) { c.do(ls, c.sm.settle(ls, c.p.clock.Now())) }

// takeRecord adopts or awaits the subject's last summary when the session
// can (machine.takeRecord). Must be called on the loop.
func (c *coordinator) takeRecord(ls *live, last summaryRecord, why string) recordFate {
	fate, e := c.sm.takeRecord(ls, last, why)
	c.do(ls, e)
	return fate
}

// do carries out a step's effects, in the order effects lists them.
// Must be called on the loop.
func (c *coordinator) do(ls *live, e effects) {
	p, s := c.p, ls.s
	if e.abandon != "" {
		// Our lease expired: the fold is abandoned first, and the check
		// taken again once it is over.
		waited := !c.abandon(ls, e.abandon)
		c.w.markDirty(ls)
		rc := *e.recheck
		if !waited {
			c.evaluate(ls, rc.trigger, rc.force)
		} else if w := ls.waits(); len(w.steps) == 0 {
			w.steps = append(w.steps, func() { c.evaluate(ls, rc.trigger, rc.force) })
		}
	}
	if e.reconcile {
		rc := *e.recheck
		c.reconcile(ls, func() {
			if rc.loaded {
				c.do(ls, c.sm.leaseWake(ls, c.p.clock.Now()))
				return
			}
			c.do(ls, c.sm.evaluate(ls, c.p.clock.Now(), rc.trigger, rc.force, true))
			c.settle(ls)
		})
	}
	if e.markDue {
		if err := p.store.MarkDue(s.ID); err != nil {
			p.log.Warn().Err(err).Str("event", "due_mark_failed").Str("session", s.ID).Msg("could not mark the session due; an interrupted fold resumes on its next event")
		} else {
			ls.due = true
		}
	}
	if e.memories != nil {
		c.publishMemories(ls, *e.memories, s.Version)
	}
	for _, ev := range e.events {
		c.rec.event(ls.s.ID, ev)
	}
	if e.start != nil {
		c.startFold(ls, *e.start)
	}
	if e.republish != nil {
		c.republish(*e.republish)
	}
	if e.dirty {
		c.w.markDirty(ls)
	}
	if e.save {
		c.w.checkpointThen(ls, c.dropPassed(s, e.dropFrom))
	}
	if e.drop != nil {
		c.aside.dropChunks(e.drop.s, e.drop.from, e.drop.to)
	}
	if e.archive != "" {
		c.archive(ls, e.archive)
	}
	for _, w := range e.wakes {
		switch cur, has := c.wake[s.ID]; {
		case w.clear:
			delete(c.wake, s.ID)
		case !w.earliest || !has || w.at.Before(cur):
			c.wake[s.ID] = w.at
		}
	}
	if e.again && c.loop.holds(ls) {
		c.evaluate(ls, "catch_up", false)
		c.settle(ls)
	}
}

// reconcile runs when a checkpoint is loaded with a fold lease, or a check
// finds another owner's lease expired: that owner may have published the
// summary and died before the checkpoint that clears the lease. The
// outbound stream is the record, so adopt what it says. The read runs
// aside: the session waits for it (its events held), then the machine
// takes its answer and then runs on the loop. Must be called on the loop.
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
				c.do(ls, c.sm.reconciled(ls, last, err, c.p.clock.Now()))
				then()
			}
			c.loop.unpark(id)
		}
	})
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
// summary it stored is adopted (machine.land).
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
	if c.sm.abandon(ls, why) {
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
		c.settle(ls)
	})
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

// startFold runs job on a goroutine of its own: the fold runner's work,
// then the summary's publish (recorder.sendSummary); the result comes back
// on results. Must be called on the loop.
func (c *coordinator) startFold(ls *live, job foldJob) {
	p := c.p
	p.m.inFlight.Inc()
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

// applyResult lands a fold's result on the loop (machine.land). ls is the
// session, reloaded if a rewind dropped it. Must be called on the loop.
func (c *coordinator) applyResult(ls *live, r foldResult) {
	c.do(ls, c.sm.land(ls, r, c.p.clock.Now()))
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

// archive writes the session's final state to its archive key; the
// machine then replaces the checkpoint with a tombstone that refuses later
// events (machine.archived). The write runs aside, the session waiting for
// it (its events held); a failed write is retried after the backoff
// (wake). Must be called on the loop.
func (c *coordinator) archive(ls *live, reason string) {
	if w := ls.wait; w != nil && w.on == waitIO {
		return // being written
	}
	p, s := c.p, ls.s
	a, err := s.Archival()
	if err != nil {
		c.do(ls, c.sm.archived(ls, reason, err, p.clock.Now()))
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
				c.do(ls, c.sm.archived(ls, reason, err, p.clock.Now()))
			}
			c.loop.unpark(s.ID)
		}
	})
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
