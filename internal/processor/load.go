package processor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// A shard reads checkpoints of new sessions in batches (state.LoadMany:
// one request per batch), at most maxLoads batches in flight.
const (
	maxLoads     = 4
	maxLoadBatch = 128
)

// A session's checkpoint read that fails for a reason another try may fix
// (the bucket slow to answer under a backlog, its leader moving) is tried
// again for that session, with backoff from loadRetryInitial up to
// loadRetryMax, up to loadRetries more times (Config.loadRetries) before
// the consumer is rewound.
const (
	loadRetries      = 4
	loadRetryInitial = 200 * time.Millisecond
	loadRetryMax     = 2 * time.Second
)

// loadDone is a batch of checkpoints read off the shard goroutine.
type loadDone struct {
	gen   uint64 // the shard's generation when it started (reset bumps it)
	items []state.Loaded
}

// loader reads a shard's sessions from their checkpoints off the loop: a
// session seen for the first time costs a KV read, which done on the loop
// would make every other session of the shard wait for that round trip
// (and, once the shard's queue is full, every shard). Reads are batched
// (state.LoadMany), at most maxLoads batches in flight; a session's events
// and the steps that need it (a fold result, a wake) wait for its read in
// order, and the loop's other sessions go on. A checkpoint that cannot be
// decoded is quarantined: kept on the dead-letter stream and rebuilt from
// the streams (quarantine). It runs on its shard's goroutine; what it needs
// of the loop is loadLoop.
//
// A read that fails for a reason another try may fix holds only its
// session: its events stay parked (neither applied nor acknowledged) and
// the read is tried again after a backoff (retryLater), while the
// batch's other sessions and the loop's go on. Only a session that keeps
// failing rewinds the consumer (failed).
type loader struct {
	// loadMany reads checkpoints (state.Store.LoadMany).
	loadMany func(ctx context.Context, ids []string) []state.Loaded
	loop     loadLoop
	aside    *aside
	rec      *recorder           // the session's last summary, for a rebuild
	cons     *consumers          // rewinds, and the ack floor of the last attach
	js       jetstream.JetStream // the quarantined checkpoint's dead letter
	inStream jetstream.Stream    // a quarantined session's events, for its rebuild
	layout   broker.Layout
	adm      state.Admission
	m        *metrics
	log      zerolog.Logger

	// waiting: sessions whose checkpoint read is queued or in flight,
	// with their parked events.
	waiting map[string][]inMsg
	queue   []string
	reads   int // batches in flight
	done    chan loadDone
	// then: what waits for a session's read besides its events (a fold
	// result, a wake), run once it is installed.
	then map[string][]func(*live)
	gen  uint64 // bumped by reset: reads started before land nowhere
	seen uint64 // highest inbound sequence received since the last reset
	// retrying: sessions whose read failed for a reason another try may
	// fix, with their backoff and when their next try is due (zero once
	// it is queued or in flight); kept until a read lands, the session is
	// given up on, or reset. retryTimer fires at the earliest due try
	// (armed).
	retrying   map[string]*loadRetry
	maxRetries int
	retryTimer *time.Timer
	armed      bool
}

// loadRetry is a session's failed checkpoint read waiting to be tried again.
type loadRetry struct {
	b     backoff.BackOff
	tries int
	due   time.Time
}

// loadLoop is the event loop as the loader sees it.
type loadLoop interface {
	// has reports whether the session is in memory.
	has(id string) bool
	// install makes a checkpoint read the session's live state.
	install(id string, s *state.Session, rev uint64) *live
	// handle applies an event of a session in memory, or reads it again.
	handle(m inMsg)
	// withSession runs fn with the session's live state once at hand.
	withSession(id string, fn func(*live))
	// rebuilt installs a quarantined session's rebuilt state.
	rebuilt(ce *state.CorruptError, s *state.Session, replayed int, rerr error, last summaryRecord, lerr error)
}

func newLoader(p *Processor, loop loadLoop, a *aside, rec *recorder) *loader {
	retries := p.cfg.loadRetries
	if retries <= 0 {
		retries = loadRetries
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &loader{loadMany: p.loadMany, loop: loop, aside: a, rec: rec, cons: p.cons, js: p.js, inStream: p.inStream, layout: p.layout,
		adm: p.adm, m: p.m, log: p.log,
		waiting: make(map[string][]inMsg), done: make(chan loadDone, maxLoads), then: make(map[string][]func(*live)),
		retrying: make(map[string]*loadRetry), maxRetries: retries, retryTimer: t}
}

// saw notes an inbound sequence received. Must be called on the loop.
func (l *loader) saw(seq uint64) { l.seen = max(l.seen, seq) }

// reading reports whether the session's read is queued or in flight.
// Must be called on the loop.
func (l *loader) reading(id string) bool {
	_, ok := l.waiting[id]
	return ok
}

// busy reports whether reads are in flight. Must be called on the loop.
func (l *loader) busy() bool { return l.reads > 0 }

// park holds m behind its session's checkpoint read, started unless one is
// already queued or in flight. Must be called on the loop.
func (l *loader) park(m inMsg) {
	_, reading := l.waiting[m.session]
	l.waiting[m.session] = append(l.waiting[m.session], m)
	if !reading {
		l.queue = append(l.queue, m.session)
		l.start()
	}
}

// after runs fn with the session once its checkpoint is read and
// installed. Must be called on the loop.
func (l *loader) after(id string, fn func(*live)) {
	l.then[id] = append(l.then[id], fn)
	l.read(id)
}

// read reads the session's checkpoint aside unless a read is already
// queued or in flight; what waits for it is in waiting and then.
// Must be called on the loop.
func (l *loader) read(id string) {
	if _, ok := l.waiting[id]; ok {
		return
	}
	l.waiting[id] = nil
	l.queue = append(l.queue, id)
	l.start()
}

// start starts reading queued sessions, in batches.
// Must be called on the loop.
func (l *loader) start() {
	for l.reads < maxLoads && len(l.queue) > 0 {
		n := min(len(l.queue), maxLoadBatch)
		ids := l.queue[:n:n]
		l.queue = l.queue[n:]
		if len(l.queue) == 0 {
			l.queue = nil // let a burst's backing array go
		}
		l.reads++
		gen, loadMany := l.gen, l.loadMany
		go func() {
			ctx, cancel := opCtx()
			defer cancel()
			l.done <- loadDone{gen: gen, items: loadMany(ctx, ids)}
		}()
	}
}

// reset forgets the reads in flight and the events parked behind them
// (they come again after the rewind); steps waiting for a read are read
// again. Must be called on the loop.
func (l *loader) reset() {
	l.gen++ // reads in flight land nowhere; their events come again
	l.seen = 0
	l.waiting = make(map[string][]inMsg)
	l.queue = nil
	clear(l.retrying)
	l.retryTimer.Stop()
	l.armed = false
	for id := range l.then {
		// Fold results waiting for a read: read again, after the rewind.
		l.waiting[id] = nil
		l.queue = append(l.queue, id)
	}
	l.start()
}

// land installs sessions read aside, runs what waited for them and
// applies their parked events. A session whose read failed waits for its
// next try (failed); the batch's others are installed.
// Must be called on the loop.
func (l *loader) land(d loadDone) {
	l.reads--
	defer l.start()
	if d.gen != l.gen {
		return // read before a rewind: their events come again
	}
	var again retried
	defer again.log(l.log)
	for _, r := range d.items {
		if r.Err != nil {
			if !l.loop.has(r.ID) {
				if !l.failed(r.ID, r.Err, &again) {
					return
				}
				continue // quarantined, or tried again later: its events wait
			}
		} else if !l.loop.has(r.ID) {
			if ls := l.loop.install(r.ID, r.S, r.Rev); r.Text != nil {
				ls.text = r.Text // its next checkpoint stores the state as read
			}
		}
		l.landed(r.ID)
	}
}

// retried is what one landing scheduled to be read again, for one log line.
type retried struct {
	n       int
	session string // the first one
	tries   int    // its failed tries so far
	wait    time.Duration
	err     error
}

func (r *retried) add(id string, tries int, wait time.Duration, err error) {
	if r.n == 0 {
		r.session, r.tries, r.wait, r.err = id, tries, wait, err
	}
	r.n++
}

func (r *retried) log(log zerolog.Logger) {
	if r.n == 0 {
		return
	}
	log.Warn().Err(r.err).Str("event", "session_load_retry").Str("session", r.session).Int("sessions", r.n).
		Int("attempt", r.tries).Dur("retry_in", r.wait).
		Msg("could not read the session's checkpoint; its events wait and the read is tried again, other sessions go on")
}

// landed runs what waited for the session's read, now installed: the
// steps first (a fold result, a wake, in the order they came), then its
// parked events. Must be called on the loop.
func (l *loader) landed(id string) {
	queued, then := l.waiting[id], l.then[id]
	delete(l.waiting, id)
	delete(l.then, id)
	delete(l.retrying, id)
	for _, fn := range then {
		l.loop.withSession(id, fn)
	}
	for _, m := range queued {
		l.loop.handle(m) // parked again behind a read if the session left memory meanwhile
	}
}

// failed handles a session whose checkpoint could not be loaded, and
// reports whether the shard goes on. A checkpoint that cannot be read
// back (state.ErrCorrupt) would fail the same way at every try: rewinding
// for it would stop every session, for good. That one session is
// quarantined instead (quarantine), aside, its events waiting for it. Any
// other failure (a read timed out, the bucket unreachable) is worth
// another try: the session's read is tried again after a backoff
// (retryLater), up to maxRetries more times, its events parked meanwhile,
// unacknowledged; then the consumer is rewound, as its events cannot be
// applied without its state.
// Must be called on the loop.
func (l *loader) failed(id string, err error, again *retried) bool {
	var ce *state.CorruptError
	if !errors.As(err, &ce) {
		if l.retryLater(id, err, again) {
			return true
		}
		tries := 1
		if r := l.retrying[id]; r != nil {
			tries = r.tries
		}
		delete(l.retrying, id)
		l.cons.requestRewind("session_load_failed", fmt.Errorf("session %s, %d tries: %w", id, tries, err))
		return false
	}
	delete(l.retrying, id)
	// The session's first inbound sequence this shard has not handled
	// yet: the first parked behind the read, else every event up to the
	// ack floor of the last attach, and every one received since, was
	// handled.
	next := max(l.seen, l.cons.handledFloor()) + 1
	if q := l.waiting[id]; len(q) > 0 {
		next = q[0].seq
	}
	l.quarantine(ce, next)
	return true
}

// retryLater schedules another read of a session whose read failed, and
// reports whether it did: false once its tries are used up. Its events
// and steps stay in waiting and then, so nothing else starts a read of
// it meanwhile. Must be called on the loop.
func (l *loader) retryLater(id string, err error, again *retried) bool {
	r := l.retrying[id]
	if r == nil {
		b := &backoff.ExponentialBackOff{
			InitialInterval:     loadRetryInitial,
			RandomizationFactor: 0.3,
			Multiplier:          2,
			MaxInterval:         loadRetryMax,
			Stop:                backoff.Stop,
			Clock:               backoff.SystemClock,
		}
		b.Reset()
		r = &loadRetry{b: backoff.WithMaxRetries(b, uint64(l.maxRetries))}
		l.retrying[id] = r
	}
	r.tries++
	wait := r.b.NextBackOff()
	if wait == backoff.Stop {
		return false
	}
	r.due = time.Now().Add(wait) // wall time: pacing, not session logic
	l.m.loadRetries.Inc()
	again.add(id, r.tries, wait, err)
	l.arm()
	return true
}

// retryC fires when a session's next read is due (retryDue); nil when
// none waits. Must be called on the loop.
func (l *loader) retryC() <-chan time.Time {
	if !l.armed {
		return nil
	}
	return l.retryTimer.C
}

// retryDue queues the reads whose next try is due. Must be called on the
// loop.
func (l *loader) retryDue() {
	l.armed = false
	now := time.Now()
	for id, r := range l.retrying {
		if !r.due.IsZero() && !r.due.After(now) {
			r.due = time.Time{}
			l.queue = append(l.queue, id)
		}
	}
	l.arm()
	l.start()
}

// arm sets the timer to the earliest try due. Must be called on the loop.
func (l *loader) arm() {
	var next time.Time
	for _, r := range l.retrying {
		if !r.due.IsZero() && (next.IsZero() || r.due.Before(next)) {
			next = r.due
		}
	}
	if next.IsZero() {
		l.retryTimer.Stop()
		l.armed = false
		return
	}
	l.retryTimer.Reset(time.Until(next))
	l.armed = true
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
func (l *loader) quarantine(ce *state.CorruptError, next uint64) {
	id, gen := ce.ID, l.gen
	l.m.quarantined.Inc()
	l.aside.run(func(ctx context.Context) func() {
		l.keepCheckpoint(ce)
		// The read has rebuildSession's own time, not what the dead letter
		// left of ctx's; the summary's read has an aside call's time after it.
		s, replayed, rerr := rebuildSession(context.WithoutCancel(ctx), l.inStream, l.layout, l.adm, id, next, nil)
		lctx, cancel := opCtx()
		defer cancel()
		last, lerr := l.rec.lastSummary(lctx, id)
		return func() {
			if l.gen != gen {
				return // a rewind: read again, and quarantined again, after it
			}
			l.loop.rebuilt(ce, s, replayed, rerr, last, lerr)
			l.landed(id)
		}
	})
}

// rebuildSession applies the session's inbound events before sequence before to a
// new session, under the rules handle applies (validation, clock skew,
// configure checks; rejected events are skipped as they were dead-lettered
// when they came), telling applied (when not nil) of each event applied
// and its effect: an error it returns ends the read with that error. It
// returns what it could rebuild and how many events it applied; an error
// says the stream could not be read to the end (within 30 s).
func rebuildSession(ctx context.Context, in jetstream.Stream, layout broker.Layout, adm state.Admission, id string, before uint64,
	applied func(seq uint64, in events.Inbound, e state.Effect) error) (*state.Session, int, error) {
	s := state.New(id)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n := 0
	// Direct gets under every layout's subjects, as the context service
	// reads a session's tail.
	evs := broker.NewSessionEvents(in, layout.Subjects, id, 1)
	for read := uint64(0); ; {
		msg, err := evs.Next(ctx)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return s, n, fmt.Errorf("read stream %s after sequence %d: %w", layout.In, read, err)
		}
		if msg.Sequence >= before {
			break
		}
		read = msg.Sequence
		session, kind, err := layout.Subjects.ParseIn(msg.Subject)
		if err != nil || session != id {
			continue
		}
		in, _, err := adm.Admit(s, kind, session, msg.Data, msg.Time)
		if err != nil {
			continue
		}
		if e, err := s.Apply(msg.Sequence, in); err == nil {
			n++
			if applied != nil {
				if err := applied(msg.Sequence, in, e); err != nil {
					return s, n, err
				}
			}
		}
	}
	return s, n, nil
}

// keepCheckpoint keeps a checkpoint that cannot be decoded on the session's
// dead-letter subject before it is replaced (quarantine): the
// stored bytes, or their first previewBytes when they do not fit, with
// Foldstream-Dead-Letter "checkpoint", Foldstream-Error-Code
// corrupt_checkpoint, the decode error, and the KV stream and revision it
// was read at. Best effort: the error log of the quarantine names the
// same revision.
func (l *loader) keepCheckpoint(ce *state.CorruptError) {
	msg := nats.NewMsg(l.layout.Subjects.DeadLetter(ce.ID))
	msg.Data = ce.Data
	msg.Header.Set(events.HeaderDeadLetter, keptCheckpoint)
	msg.Header.Set(events.HeaderErrorCode, codeCorruptCheckpoint)
	msg.Header.Set(events.HeaderErrorField, "checkpoint")
	msg.Header.Set(events.HeaderError, headerValue(ce.Err.Error()))
	msg.Header.Set(events.HeaderOriginalStream, "KV_"+l.layout.Bucket)
	msg.Header.Set(events.HeaderOriginalSubject, "$KV."+l.layout.Bucket+"."+ce.ID)
	msg.Header.Set(events.HeaderOriginalSeq, strconv.FormatUint(ce.Revision, 10))
	msg.Header.Set(events.HeaderOriginalSize, strconv.Itoa(len(ce.Data)))
	msgID := "checkpoint:" + ce.ID + ":" + strconv.FormatUint(ce.Revision, 10)
	err := publishDeadLetter(context.Background(), l.js, msg, msgID, deadLetterAttempts, nil)
	if err != nil && !transientPublishError(err) {
		msg.Data = preview(ce.Data)
		err = publishDeadLetter(context.Background(), l.js, msg, msgID, 1, nil)
	}
	if err != nil {
		l.log.Error().Err(err).Str("event", "dead_letter_failed").Str("session", ce.ID).Uint64("revision", ce.Revision).
			Msg("the undecodable checkpoint could not be kept on the dead-letter stream")
	}
}
