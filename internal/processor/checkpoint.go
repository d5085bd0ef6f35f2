package processor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// checkpointWriter owns a shard's checkpoint writes: the dirty sessions
// (oldest change first), the acks waiting for the checkpoint that covers
// them, and the pipelined KV writes in flight, whose outcomes come back on
// saves. It runs on its shard's goroutine: the event loop selects on saves
// and hands the outcomes to landSaves; only awaitSaves runs elsewhere, and
// it touches nothing but the futures and the channel. What it needs of the
// loop is sessionOwner: whether a session is still the loop's, and to
// forget one whose write failed.
type checkpointWriter struct {
	conn    *nats.Conn // acks go out on the ingest connection
	store   *state.Store
	cons    *consumers    // a failed write rewinds
	flushIn time.Duration // Config.FlushInterval
	m       *metrics
	log     zerolog.Logger
	owner   sessionOwner
	dirty   []*live
	pending int             // acks waiting
	saves   chan []saveDone // outcomes of pipelined checkpoint writes
	writes  int             // checkpoint writes in flight
}

// sessionOwner is the event loop as the checkpoint writer sees it.
type sessionOwner interface {
	// holds reports whether ls is the loop's live state of its session
	// (not dropped after a conflict or a rewind).
	holds(ls *live) bool
	// drop forgets the session after a failed write: its unacknowledged
	// messages are applied again after the rewind.
	drop(id string)
}

// maxWrites bounds one shard's checkpoint writes in flight: the state
// stream stores writes in arrival order, so a deep queue only delays
// every write (and the acks behind it).
const maxWrites = 16

// newCheckpointWriter is a checkpoint writer on p's connection and
// bucket, for the loop owner.
func newCheckpointWriter(p *Processor, owner sessionOwner) *checkpointWriter {
	return &checkpointWriter{conn: p.js.Conn(), store: p.store, cons: p.cons, flushIn: p.cfg.FlushInterval, m: p.m, log: p.log,
		owner: owner, saves: make(chan []saveDone, 64)}
}

// busy reports whether writes are in flight or sessions wait for one.
func (w *checkpointWriter) busy() bool { return w.writes > 0 || len(w.dirty) > 0 }

// hasDirty reports whether sessions wait for a write.
func (w *checkpointWriter) hasDirty() bool { return len(w.dirty) > 0 }

// inFlight is the number of pipelined writes whose outcome is not back.
func (w *checkpointWriter) inFlight() int { return w.writes }

// acksWaiting is the number of applied messages waiting for a write.
func (w *checkpointWriter) acksWaiting() int { return w.pending }

// reset forgets the dirty sessions and pending acks (a rewind: their
// messages come again). Writes in flight must have landed.
// Must be called on the loop.
func (w *checkpointWriter) reset() {
	w.dirty = nil
	w.pending = 0
}

// Must be called on the loop.
func (w *checkpointWriter) markDirty(ls *live) {
	if !ls.dirty {
		ls.dirty = true
		if ls.dirtyAt.IsZero() {
			ls.dirtyAt = time.Now()
		}
		w.dirty = append(w.dirty, ls)
	}
}

// pendingAck is an applied delivery waiting for the checkpoint that
// covers it: its reply subject, to which acking publishes +ACK (what
// jetstream.Msg.Ack sends). The writer holds the subject, not the message,
// so the message, its payload and headers are garbage once applied: under
// a backlog it holds acks for up to MaxAckPending deliveries, and that peak
// of heap stayed in the RSS of the idle process after the burst (cmd/bench
// memory section, docs/benchmarks.md).
type pendingAck string

var ackBody = []byte("+ACK")

// ack acknowledges a; an error leaves the delivery to be redelivered after
// AckWait, and applying it again is a duplicate.
func (w *checkpointWriter) ack(a pendingAck) { _ = w.conn.Publish(string(a), ackBody) }

// Must be called on the loop.
func (w *checkpointWriter) addAck(ls *live, msg jetstream.Msg) {
	ls.acks = append(ls.acks, pendingAck(msg.Reply()))
	w.pending++
	w.markDirty(ls)
}

// flush writes checkpoints of dirty sessions, oldest change first, then
// acks what each covers: acks go out only after the checkpoint is durable.
// Unless forced (quiet input, shutdown, many acks pending), only sessions
// whose oldest change is FlushInterval old are written, so under load one
// write covers many turns of a session. Writes are pipelined, at most
// maxWrites in flight.
// Must be called on the loop.
func (w *checkpointWriter) flush(force bool) {
	n := len(w.dirty)
	if n == 0 {
		return
	}
	now := time.Now()
	var futures []jetstream.PubAckFuture
	var done []saveDone
	for ; n > 0 && len(w.dirty) > 0 && w.writes+len(futures) < maxWrites; n-- {
		ls := w.dirty[0]
		if !force && now.Sub(ls.dirtyAt) < w.flushIn {
			break
		}
		w.dirty[0] = nil
		w.dirty = w.dirty[1:]
		ls.dirty = false
		if !w.owner.holds(ls) {
			continue // dropped after a conflict
		}
		if ls.writing {
			w.markDirty(ls) // the next write needs the revision this one returns
			continue
		}
		ls.dirtyAt = time.Time{}
		if ls.s.NeedsSeal() {
			w.write(ls, nil) // sealing a backlog: chunks first, then the checkpoint
			continue
		}
		buf := encodeBufs.Get().(*[]byte)
		data, err := ls.s.EncodeReusing((*buf)[:0], ls.stateText())
		if err != nil {
			w.saved(ls, 0, fmt.Errorf("encode checkpoint of session %s: %w", ls.s.ID, err))
			continue
		}
		*buf = data
		f, err := w.store.SaveEncodedAsync(ls.s.ID, data, ls.rev)
		if err != nil {
			w.saved(ls, 0, err)
			continue
		}
		ls.writing = true
		futures = append(futures, f)
		done = append(done, saveDone{ls: ls, id: ls.s.ID, rev: ls.rev, acks: len(ls.acks), buf: buf})
	}
	if len(w.dirty) == 0 {
		w.dirty = nil // let a burst's backing array go
	}
	if len(futures) > 0 {
		// The shard goes on applying events while the writes are stored;
		// their acks go out as the outcomes come back (landSaves).
		w.writes += len(futures)
		go w.awaitSaves(futures, done)
	}
}

// write saves ls (compare-and-set), its full ref chunks sealed first,
// off the loop: the checkpoint and the chunks are encoded here, and the
// outcome comes back on saves as a pipelined write's does; then runs once
// it is stored. No write of ls may be in flight: the save needs the
// revision that write returns (checkpointThen waits for it). Must be
// called on the loop.
func (w *checkpointWriter) write(ls *live, then func()) {
	if !w.owner.holds(ls) {
		return
	}
	s := ls.s
	var chunks state.Chunks
	if s.NeedsSeal() {
		c, err := s.Sealing()
		if err != nil {
			w.saved(ls, 0, err)
			return
		}
		// The checkpoint says the chunks are sealed; it is written after
		// them, and a failure of either drops the session (saved).
		chunks, s.Sealed = c, c.Sealed
	}
	data, err := s.EncodeReusing(nil, ls.stateText())
	if err != nil {
		w.saved(ls, 0, err)
		return
	}
	ls.writing = true
	w.writes++
	d := saveDone{ls: ls, id: s.ID, rev: ls.rev, acks: len(ls.acks), cas: true, then: then}
	store := w.store
	go func() {
		ctx, cancel := opCtx()
		defer cancel()
		if d.err = store.WriteChunks(ctx, chunks); d.err == nil {
			d.seq, d.err = store.SaveEncoded(ctx, d.id, data, d.rev)
		}
		w.saves <- []saveDone{d}
	}()
}

// saved finishes a checkpoint write. On a conflict another owner has moved
// the session: drop ours and let the unacked messages be redelivered and
// re-applied on the newer state.
// Must be called on the loop.
func (w *checkpointWriter) saved(ls *live, rev uint64, err error) bool {
	if err != nil {
		if errors.Is(err, state.ErrConflict) {
			w.m.checkpoints.WithLabelValues("conflict").Inc()
			w.log.Warn().Err(err).Str("event", "checkpoint_conflict").Str("session", ls.s.ID).Msg("another owner changed this session")
		} else {
			w.m.checkpoints.WithLabelValues("error").Inc()
			w.log.Error().Err(err).Str("event", "checkpoint_failed").Str("session", ls.s.ID).Msg("checkpoint failed")
		}
		// Not naked: a nak would be redelivered after later events of the
		// session, out of order. The rewind re-applies them in order.
		w.pending -= len(ls.acks)
		ls.acks = nil
		w.owner.drop(ls.s.ID)
		w.cons.requestRewind("checkpoint_failed", err)
		return false
	}
	w.covered(ls, rev, len(ls.acks))
	return true
}

// covered records a checkpoint written at revision rev and acks the first
// n of the session's acks, which it covers; the rest wait for the next.
// Must be called on the loop.
func (w *checkpointWriter) covered(ls *live, rev uint64, n int) {
	w.m.checkpoints.WithLabelValues("ok").Inc()
	ls.rev = rev
	for _, a := range ls.acks[:n] {
		w.ack(a)
	}
	w.pending -= n
	if rest := ls.acks[n:]; len(rest) > 0 {
		ls.acks = append([]pendingAck(nil), rest...)
	} else {
		ls.acks = nil
	}
}

// encodeBufs holds the buffers pipelined checkpoints are encoded in
// (*[]byte): a checkpoint with an offline summarizer state is ~8 KiB, and
// a new buffer for each write was allocated and cleared (in CPU profiles
// of the ingest bench at 1,000 sessions, half of encoding a checkpoint). A
// buffer goes back once its write is stored (landSaves): the publish has
// been sent and acknowledged, and nothing reads the message again. One
// whose write failed or was not confirmed is left to the collector, as
// the client may still hold its message.
var encodeBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBuf: a larger buffer (a session with a large backlog of refs
// or a large state) is not kept for the next write.
const maxPooledBuf = 64 << 10

// saveDone is the outcome of one pipelined checkpoint write.
type saveDone struct {
	ls   *live
	id   string
	rev  uint64 // the revision it was written on (0: a first write)
	acks int    // how many of ls.acks it covers
	seq  uint64 // the new revision
	err  error
	// cas: a write that waited for the server itself (write), not a
	// pipelined one; then runs once it is stored.
	cas  bool
	then func()
	// buf: the buffer the checkpoint was encoded in (a pipelined write),
	// back to encodeBufs once the write is stored.
	buf *[]byte
}

// awaitSaves waits, off the shard goroutine, for the writes of one flush
// and hands their outcomes back to the shard: the shard keeps applying
// events meanwhile instead of idling for a round trip per flush. Outcomes
// go back as they come, not once the last write of the flush is stored: a
// session waiting for its write (a fold due) waits for its own only.
func (w *checkpointWriter) awaitSaves(futures []jetstream.PubAckFuture, done []saveDone) {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	from := 0 // first outcome not handed back yet
wait:
	for i, f := range futures {
		select {
		case pa := <-f.Ok():
			done[i].seq = pa.Sequence
			continue
		case err := <-f.Err():
			done[i].err = err
			continue
		default:
		}
		if i > from {
			w.saves <- done[from:i]
			from = i
		}
		select {
		case pa := <-f.Ok():
			done[i].seq = pa.Sequence
		case err := <-f.Err():
			done[i].err = err
		case <-deadline.C:
			for j := i; j < len(done); j++ {
				done[j].err = fmt.Errorf("save session %s: no acknowledgement in 10s", done[j].id)
			}
			break wait
		}
	}
	w.saves <- done[from:]
}

// landSaves acks what each confirmed write covers; a failed one drops the
// session and rewinds, as a synchronous checkpoint would.
// Must be called on the loop.
func (w *checkpointWriter) landSaves(done []saveDone) {
	w.writes -= len(done)
	for _, d := range done {
		ls := d.ls
		ls.writing = false
		if !w.owner.holds(ls) {
			continue // dropped meanwhile (rewind, conflict): its messages come again
		}
		if d.err != nil {
			if d.rev == 0 && !d.cas && state.IsConflict(d.err) {
				// The key has history (a deleted session's marker): the
				// create of a compare-and-set write knows how to handle it.
				w.write(ls, nil)
				continue
			}
			err := d.err
			if !d.cas && state.IsConflict(err) {
				err = fmt.Errorf("save session %s at revision %d: %w (%w)", d.id, d.rev, state.ErrConflict, err)
			}
			w.saved(ls, 0, err)
			continue
		}
		if d.buf != nil && cap(*d.buf) <= maxPooledBuf {
			encodeBufs.Put(d.buf)
		}
		w.covered(ls, d.seq, d.acks)
		if d.then != nil {
			d.then()
		}
		if lw := ls.wait; lw != nil && lw.afterWrite != nil {
			// A save waited for this write (checkpointThen).
			fn := lw.afterWrite
			lw.afterWrite = nil
			ls.tidyWait()
			w.write(ls, fn)
		}
	}
}

// checkpointThen saves ls (compare-and-set), acks its covered messages,
// and then runs fn, once the save is stored (write); while a write of ls
// is in flight the save starts once that write is back (landSaves), since
// it needs the revision that write returns. fn does not run if the save
// fails (the session is dropped and the consumer rewound). Must be called
// on the loop.
func (w *checkpointWriter) checkpointThen(ls *live, fn func()) {
	if !ls.writing {
		w.write(ls, fn)
		return
	}
	w2 := ls.waits()
	if prev := w2.afterWrite; prev != nil {
		w2.afterWrite = func() { prev(); fn() }
		return
	}
	w2.afterWrite = fn
}
