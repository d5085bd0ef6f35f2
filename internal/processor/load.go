package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
)

// A shard reads checkpoints of new sessions in batches (state.LoadMany:
// one request per batch), at most maxLoads batches in flight.
const (
	maxLoads     = 4
	maxLoadBatch = 128
)

// loadDone is a batch of checkpoints read off the shard goroutine.
type loadDone struct {
	gen   uint64 // the shard's generation when it started (reset bumps it)
	items []state.Loaded
}

// accept applies an event, or parks it behind its session's checkpoint
// read. A session seen for the first time costs a KV read: done on the
// shard goroutine, every other session of the shard would wait for that
// round trip (and, once the shard's queue is full, every shard). So the
// read runs aside and the session's events wait for it, in order, while
// other sessions go on.
// Must be called on the loop.
func (sh *shard) accept(m inMsg) {
	sh.seen = max(sh.seen, m.seq)
	if m.perr != nil {
		sh.handle(m) // rejected without a session
		return
	}
	// Parked events go first: the session's read is queued or in flight.
	if q, ok := sh.loading[m.session]; ok {
		sh.loading[m.session] = append(q, m)
		return
	}
	if _, ok := sh.sessions[m.session]; ok {
		sh.handle(m)
		return
	}
	sh.loading[m.session] = []inMsg{m}
	sh.loadQ = append(sh.loadQ, m.session)
	sh.startLoads()
}

// queueLoad reads the session's checkpoint aside unless a read is already
// queued or in flight; what waits for it is in loading and loadThen.
// Must be called on the loop.
func (sh *shard) queueLoad(id string) {
	if _, ok := sh.loading[id]; ok {
		return
	}
	sh.loading[id] = nil
	sh.loadQ = append(sh.loadQ, id)
	sh.startLoads()
}

// startLoads starts reading queued sessions, in batches.
// Must be called on the loop.
func (sh *shard) startLoads() {
	for sh.loads < maxLoads && len(sh.loadQ) > 0 {
		n := min(len(sh.loadQ), maxLoadBatch)
		ids := sh.loadQ[:n:n]
		sh.loadQ = sh.loadQ[n:]
		if len(sh.loadQ) == 0 {
			sh.loadQ = nil // let a burst's backing array go
		}
		sh.loads++
		gen := sh.gen
		go func() {
			ctx, cancel := opCtx()
			defer cancel()
			sh.loaded <- loadDone{gen: gen, items: sh.p.store.LoadMany(ctx, ids)}
		}()
	}
}

// landLoad installs sessions read aside, runs what waited for them and
// applies their parked events.
// Must be called on the loop.
func (sh *shard) landLoad(d loadDone) {
	sh.loads--
	defer sh.startLoads()
	if d.gen != sh.gen {
		return // read before a rewind: their events come again
	}
	for _, l := range d.items {
		if l.Err != nil {
			if _, ok := sh.sessions[l.ID]; !ok {
				if !sh.loadFailed(l.ID, l.Err) {
					return
				}
				continue // quarantined aside: its events wait for the rebuild
			}
		} else if _, ok := sh.sessions[l.ID]; !ok {
			sh.install(l.ID, l.S, l.Rev)
		}
		sh.loadLanded(l.ID)
	}
}

// loadLanded runs what waited for the session's read, now installed: the
// steps first (a fold result, a wake, in the order they came), then its
// parked events. Must be called on the loop.
func (sh *shard) loadLanded(id string) {
	queued, then := sh.loading[id], sh.loadThen[id]
	delete(sh.loading, id)
	delete(sh.loadThen, id)
	for _, fn := range then {
		sh.withSession(id, fn)
	}
	for _, m := range queued {
		sh.handle(m) // parked again behind a read if the session left memory meanwhile
	}
}

// loadFailed handles a session whose checkpoint could not be loaded, and
// reports whether the shard goes on. A checkpoint that cannot be read
// back (state.ErrCorrupt) would fail the same way at every try: rewinding
// for it would stop every session, for good. That one session is
// quarantined instead (quarantine), aside, its events waiting for it. Any
// other failure (the bucket unreachable) is worth another try: the
// consumer is rewound.
func (sh *shard) loadFailed(id string, err error) bool {
	var ce *state.CorruptError
	if !errors.As(err, &ce) {
		sh.p.cons.requestRewind("session_load_failed", fmt.Errorf("session %s: %w", id, err))
		return false
	}
	// The session's first inbound sequence this shard has not handled
	// yet: the first parked behind the read, else every event up to the
	// ack floor of the last attach, and every one received since, was
	// handled.
	next := max(sh.seen, sh.p.cons.handledFloor()) + 1
	if q := sh.loading[id]; len(q) > 0 {
		next = q[0].seq
	}
	sh.quarantine(ce, next)
	return true
}

// quarantine replaces a checkpoint that cannot be read back with one
// rebuilt from the streams, as far as they still hold the session:
//   - the stored bytes are kept on the session's dead-letter subject (a
//     reference with Foldstream-Dead-Letter "checkpoint", the KV stream
//     and revision, the decode error), for an operator to look at;
//   - the session's inbound events are applied again from the inbound
//     stream, under the same rules, up to the first of its events this
//     shard has not handled yet (those come as usual);
//   - its last summary on the outbound stream is adopted when the rebuilt
//     turns reach it, else later versions go after it;
//   - the rebuilt checkpoint replaces the bad one (compare-and-set on its
//     revision) at the next flush; a checkpoint_quarantined lifecycle
//     event, an error log and foldstream_checkpoints_quarantined_total
//     say it happened.
//
// The reads and the dead letter run aside; the session's events wait in
// loading meanwhile. Events no longer in the inbound stream (max-age) are
// lost to the session: the rebuild counts what is left. Must be called on
// the loop.
func (sh *shard) quarantine(ce *state.CorruptError, next uint64) {
	p, id, gen := sh.p, ce.ID, sh.gen
	p.m.quarantined.Inc()
	sh.aside.run(func(ctx context.Context) func() {
		sh.parkCheckpoint(ce)
		s, replayed, rerr := sh.rebuild(id, next)
		last, lerr := sh.rec.lastSummary(ctx, id)
		return func() {
			if sh.gen != gen {
				return // a rewind: read again, and quarantined again, after it
			}
			sh.rebuilt(ce, s, replayed, rerr, last, lerr)
			sh.loadLanded(id)
		}
	})
}

// rebuilt installs a quarantined session's rebuilt state (quarantine).
// Must be called on the loop.
func (sh *shard) rebuilt(ce *state.CorruptError, s *state.Session, replayed int, rerr error, last summaryRecord, lerr error) {
	p, id := sh.p, ce.ID
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
	ev := p.log.Error().Err(ce.Err).Str("event", "checkpoint_quarantined").Str("session", id).Uint64("revision", ce.Revision).
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

// rebuild applies the session's inbound events before sequence before to a
// new session, under the rules handle applies (validation, clock skew,
// configure checks; rejected events are skipped as they were dead-lettered
// when they came). It returns what it could rebuild and how many events it
// applied; an error says the stream could not be read to the end.
func (sh *shard) rebuild(id string, before uint64) (*state.Session, int, error) {
	p := sh.p
	s := state.New(id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	applied := 0
	adm := p.adm
	// Direct gets under every layout's subjects, as the context service
	// reads a session's tail.
	evs := broker.NewSessionEvents(p.inStream, p.subj, id, 1)
	for read := uint64(0); ; {
		msg, err := evs.Next(ctx)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return s, applied, fmt.Errorf("read stream %s after sequence %d: %w", p.layout.In, read, err)
		}
		if msg.Sequence >= before {
			break
		}
		read = msg.Sequence
		session, kind, err := p.subj.ParseIn(msg.Subject)
		if err != nil || session != id {
			continue
		}
		in, _, err := adm.Admit(s, kind, session, msg.Data, msg.Time)
		if err != nil {
			continue
		}
		if _, err := s.Apply(msg.Sequence, in); err == nil {
			applied++
		}
	}
	return s, applied, nil
}
