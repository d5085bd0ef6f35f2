package service

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// The recall index: each session's replay (index_replay.go) is kept in
// memory between requests and brought up to date at the start of each,
// so that a request costs the events stored since the previous one, not
// the session's history.
//
//   - Current: a request first applies every event the inbound stream
//     stored for the session after the replay's position (catchUpWarm),
//     with the processor's rules. A reset control, or a reset policy's
//     boundary, clears the index as it is applied, so no request answers
//     from an index older than a reset stored before it.
//   - Rebuilt from the stream (scanReplay) when it is not in memory: at
//     the first request after a start, a restart, or an eviction.
//   - Bounded: the replays' estimated bytes stay within the budget
//     (--recall-index-bytes). Once it is full, the least recently used
//     sessions are kept packed (index_pack.go) while any session held
//     decoded has a packed form, and only then evicted, least recently
//     used first. A request to a session held packed decodes it for
//     itself and leaves it packed, unless it is asked again soon
//     (promoteAfter) or has events to apply. A session larger than the whole budget is built for its
//     request and not kept. Once the budget is full, a request drops its
//     index's views (index_view.go) rather than evict another session. A
//     budget of 0 keeps nothing: every request scans the session's
//     stream.
//   - Isolated: a replay reads only its session's subjects, and is found
//     by session id; nothing of one session can reach another's reply.
//
// Requests for one session are serialised on its entry; requests for
// different sessions run in parallel.
type indexCache struct {
	mu      sync.Mutex
	budget  int64
	entries map[string]*cacheEntry
	lru     list.List // of *cacheEntry, most recently used first
	bytes   int64
	m       *indexMetrics
	// evicted, if set, is told of each entry evicted (index_store.go
	// writes it).
	evicted func(*cacheEntry)
	// demotable counts the entries whose demotable is set, packedOnly
	// those whose packedOnly is.
	demotable, packedOnly int
	// promoteWithin (ns): a session held packed only is kept decoded
	// after a request if its previous request came within it
	// (promoteAfter); else the request decodes it for itself and leaves
	// it packed.
	promoteWithin atomic.Int64
}

// promoteAfter is the cache's promoteWithin: a session asked again
// within it is kept decoded (a bot's back-to-back prompts), one asked
// after a longer pause (most of a budget's packed sessions, asked at
// random) is decoded for its request only.
const promoteAfter = time.Second

type cacheEntry struct {
	session string
	mu      sync.Mutex // held while the replay is caught up and read
	r       *replay    // nil until built; guarded by mu
	elem    *list.Element
	bytes   int64 // as last accounted; guarded by indexCache.mu
	// key names what r is built from, storedRead is r.read when it was
	// last persisted (-1: never), storedChunks the chunks of the session's
	// stored entry as last read or written (0: inline or none; -1:
	// unknown), those the next write deletes at least (it reads the meta
	// again); all guarded by mu. queued: waiting for the index store's
	// writer (index_store.go); writing is held while r is written, so
	// that one write of it is under way at a time.
	key          string
	storedRead   int
	storedChunks int
	queued       atomic.Bool
	writing      sync.Mutex
	// mems is the first get of r's memories, under way since r was
	// loaded (restored), for the request to finish; guarded by mu.
	mems *nextMemory
	// packed is a packed form of the replay (index_pack.go): the one
	// loaded from or written to the store, or made by the store's writer
	// (nil until then); vecs and vecBytes are the replay's embeddings
	// while r is nil and the packed form is kept (demote). All guarded by
	// mu.
	packed   []byte
	vecs     map[uint64]turnVector
	vecBytes int64
	// demotable: r was held beside a packed form when last accounted;
	// packedOnly: only the packed form is held (r dropped by demote).
	// Both guarded by indexCache.mu.
	demotable, packedOnly bool
	// asked is when a request last used r (Unix ns, wall clock): the
	// store's writer waits for a pause in them (afterPause).
	asked atomic.Int64
}

// held is the memory e holds (its replay, its packed form and the
// embeddings kept beside it) and whether the budget may drop its replay
// (demote): it has a packed form. Must be called with e.mu held.
func (e *cacheEntry) held() (bytes int64, demotable bool) {
	bytes = int64(cap(e.packed)) + e.vecBytes
	if e.r != nil {
		bytes += e.r.bytes()
	}
	return bytes, e.r != nil && e.packed != nil
}

// warmGets is how many events a warm catch-up reads with direct gets
// before it switches to a consumer: a few events since the last request
// are the usual case, and a direct get is one round trip with no
// consumer to create and delete.
const warmGets = 32

// DefaultIndexBytes is the recall index's default memory budget.
const DefaultIndexBytes = 256 << 20

type indexMetrics struct {
	bytes, sessions, budget, packed prometheus.Gauge
	builds, evictions, unpacked     prometheus.Counter
	caughtUp                        prometheus.Counter
}

func newIndexMetrics(reg prometheus.Registerer) *indexMetrics {
	m := &indexMetrics{
		bytes:     prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "recall_index_bytes", Help: "Estimated memory held by the recall index (the sessions' replays, texts, postings and memories)."}),
		sessions:  prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "recall_index_sessions", Help: "Sessions whose recall index is held in memory."}),
		budget:    prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "recall_index_budget_bytes", Help: "The recall index's memory budget (--recall-index-bytes)."}),
		builds:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_builds_total", Help: "Sessions' recall indexes built from the inbound stream (first request, after a restart or an eviction)."}),
		evictions: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_evictions_total", Help: "Sessions' recall indexes evicted to stay within the budget."}),
		caughtUp:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_events_total", Help: "Inbound events applied to recall indexes kept in memory (catch-up at each request)."}),
		packed:    prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "recall_index_packed_sessions", Help: "Sessions whose recall index is held in memory packed (compressed) only, once the budget is full; decoded when asked."}),
		unpacked:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_unpacked_total", Help: "Sessions' recall indexes decoded from their packed form in memory for a request (instead of loaded from the store or built)."}),
	}
	if reg != nil {
		reg.MustRegister(m.bytes, m.sessions, m.budget, m.builds, m.evictions, m.caughtUp, m.packed, m.unpacked)
	}
	return m
}

func newIndexCache(budget int64, reg prometheus.Registerer) *indexCache {
	c := &indexCache{budget: budget, entries: map[string]*cacheEntry{}, m: newIndexMetrics(reg)}
	c.promoteWithin.Store(int64(promoteAfter))
	c.m.budget.Set(float64(budget))
	return c
}

// entry returns the session's entry, created if needed, as the most
// recently used.
func (c *indexCache) entry(session string) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[session]
	if !ok {
		e = &cacheEntry{session: session}
		e.elem = c.lru.PushFront(e)
		c.entries[session] = e
		c.m.sessions.Set(float64(len(c.entries)))
		return e
	}
	c.lru.MoveToFront(e.elem)
	return e
}

// account records the entry's new size (held, with its replay) and,
// until the budget holds, keeps the least recently used entries other
// than this one packed (demote), then evicts the least recently used
// (this one last). Must be called with e.mu held.
func (c *indexCache) account(e *cacheEntry) {
	bytes, demotable := e.held()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.session] != e {
		return // evicted meanwhile: not counted any more
	}
	c.bytes += bytes - e.bytes
	e.bytes = bytes
	c.mark(e, demotable, e.r == nil && e.packed != nil)
	for c.bytes > c.budget && c.lru.Len() > 0 {
		if c.demote(e) {
			continue
		}
		victim := c.lru.Back().Value.(*cacheEntry)
		c.remove(victim)
		c.m.evictions.Inc()
		if c.evicted != nil {
			c.evicted(victim)
		}
	}
	c.m.bytes.Set(float64(c.bytes))
	c.m.sessions.Set(float64(len(c.entries)))
}

// mark records whether e's replay may be dropped and whether only its
// packed form is held. Must be called with c.mu held.
func (c *indexCache) mark(e *cacheEntry, demotable, packedOnly bool) {
	if e.demotable != demotable {
		e.demotable = demotable
		c.demotable += step(demotable)
	}
	if e.packedOnly != packedOnly {
		e.packedOnly = packedOnly
		c.packedOnly += step(packedOnly)
		c.m.packed.Set(float64(c.packedOnly))
	}
}

// step is 1 for a flag set, -1 for one cleared.
func step(set bool) int {
	if set {
		return 1
	}
	return -1
}

// remove forgets e. Must be called with c.mu held.
func (c *indexCache) remove(e *cacheEntry) {
	c.lru.Remove(e.elem)
	delete(c.entries, e.session)
	c.bytes -= e.bytes
	c.mark(e, false, false)
}

// demote drops the replay of the least recently used entry, other than
// except and those in use, that holds one beside its packed form: the
// next request decodes it again (unpacked). It reports whether it did.
// Must be called with c.mu held (an entry's mu is only tried: a request
// holds its entry's mu while it waits for c.mu).
func (c *indexCache) demote(except *cacheEntry) bool {
	if c.demotable == 0 {
		return false
	}
	for el := c.lru.Back(); el != nil; el = el.Prev() {
		v := el.Value.(*cacheEntry)
		if v == except || !v.demotable || !v.mu.TryLock() {
			continue
		}
		done := c.packOnly(v)
		v.mu.Unlock()
		if done {
			return true
		}
	}
	return false
}

// packOnly drops e's replay if it has a packed form, and reports whether
// it did. Must be called with e.mu and c.mu held, e in the cache.
func (c *indexCache) packOnly(e *cacheEntry) bool {
	done := e.r != nil && e.packed != nil
	if done {
		e.vecs, e.vecBytes = e.r.vecs, e.r.vecBytes
		e.r = nil
		bytes, _ := e.held()
		c.bytes += bytes - e.bytes
		e.bytes = bytes
		c.m.bytes.Set(float64(c.bytes))
	}
	c.mark(e, false, done)
	return done
}

// room reports whether the budget holds the entry at its new size
// without packing or evicting another. Must be called with e.mu held.
func (c *indexCache) room(e *cacheEntry) bool {
	bytes, _ := e.held()
	c.mu.Lock()
	defer c.mu.Unlock()
	held := int64(0)
	if c.entries[e.session] == e {
		held = e.bytes
	}
	return c.bytes-held+bytes <= c.budget
}

// drop forgets the entry (its replay could not be brought up to date).
func (c *indexCache) drop(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.session] != e {
		return
	}
	c.remove(e)
	c.m.bytes.Set(float64(c.bytes))
	c.m.sessions.Set(float64(len(c.entries)))
}

// holds reports whether e is in memory (not evicted).
func (c *indexCache) holds(e *cacheEntry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[e.session] == e
}

// all are the entries in memory.
func (c *indexCache) all() []*cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*cacheEntry, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e)
	}
	return out
}

// indexHandle is a session's replay, current as of the request, held for
// the request's use until release.
type indexHandle struct {
	r      *replay
	unlock func()
}

func (h *indexHandle) release() {
	if h.unlock != nil {
		h.unlock()
	}
}

// recallIndex returns the session's replay, current with the inbound
// stream as of the call: from memory, caught up, or built from the
// stream; early, if not nil, is its packed form's unpacking started
// when the request arrived (unpackEarly). The caller must release it.
func (s *server) recallIndex(ctx context.Context, session string, early *earlyUnpack) (*indexHandle, error) {
	c := s.index
	if c == nil || c.budget <= 0 {
		rp, err := s.scanReplay(ctx, session)
		if err == nil {
			err = s.prune(ctx, rp)
		}
		if err != nil {
			return nil, err
		}
		s.memoriesOf(ctx, rp, nil)
		s.vectorsOf(ctx, rp)
		return &indexHandle{r: rp}, nil
	}
	e := c.entry(session)
	e.mu.Lock()
	var (
		first uint64
		next  *nextEvent
		mems  *nextMemory
		// transient: e's replay was decoded from its packed form for
		// this request alone (see promoteAfter), at read and memNext.
		transient bool
		read      int
		memNext   uint64
	)
	var info func() (*jetstream.StreamInfo, error)
	if e.r == nil && e.packed != nil {
		// Packed once the budget was full: decoded, with the stream's
		// info, the catch-up's and the memories' first gets under way
		// meanwhile.
		info = s.prefetchInfo(ctx)
		if e.r, next, mems = s.unpacked(ctx, e, early); e.r != nil {
			c.m.unpacked.Inc()
			transient = time.Since(time.Unix(0, e.asked.Load())) > time.Duration(c.promoteWithin.Load())
			read, memNext = e.r.read, e.r.memNext
		}
	}
	if e.r != nil {
		// The catch-up's first get, the memories' and the stream's info,
		// at once.
		if next == nil {
			next = s.prefetchEvent(ctx, session, e.r.next)
			mems = s.prefetchMemory(ctx, session, e.r.memNext)
		}
		if info == nil {
			info = s.prefetchInfo(ctx)
		}
		si, err := info()
		if err != nil {
			if transient {
				e.leavePacked()
			}
			c.account(e) // as it is now: perhaps decoded above
			e.mu.Unlock()
			return nil, internal(err, "reading stream %s info", s.layout.In)
		}
		first = si.State.FirstSeq
		if si.State.LastSeq+1 < e.r.next {
			// The stream is behind the index (deleted and created again,
			// or restored from a backup): nothing in memory can be trusted.
			s.log.Warn().Str("event", "recall_index_rebuilt").Str("session", session).Uint64("stream_last_seq", si.State.LastSeq).
				Uint64("index_next_seq", e.r.next).Msg("inbound stream is behind the recall index; rebuilding it")
			e.r, e.packed, transient = nil, nil, false
		}
	}
	if e.r == nil {
		// Loaded from the index store (index_store.go), else built.
		rp, err := s.restored(ctx, e)
		if rp == nil && err == nil {
			if rp, err = s.scanReplay(ctx, session); err == nil {
				err = s.prune(ctx, rp)
			}
			if err == nil {
				c.m.builds.Inc()
			}
		}
		if err != nil {
			e.mu.Unlock()
			c.drop(e)
			return nil, err
		}
		e.r = rp
		mems = e.takeMems()
	} else {
		n, err := s.catchUpWarm(ctx, e.r, next)
		if err != nil {
			// The replay is half applied: never answer from it, nor keep it.
			e.r = nil
			e.mu.Unlock()
			c.drop(e)
			return nil, err
		}
		c.m.caughtUp.Add(float64(n))
		e.r.firstSeq = first
	}
	s.memoriesOf(ctx, e.r, mems)
	s.vectorsOf(ctx, e.r)
	e.asked.Store(time.Now().UnixNano())
	rp := e.r
	if transient && rp.read == read && rp.memNext == memNext {
		// Left packed: not counted in the budget, so no other session is
		// packed or evicted for it, and dropped when the request is done
		// (its packed form says all it holds).
		return &indexHandle{r: rp, unlock: func() {
			e.leavePacked()
			c.account(e) // its embeddings, if the request added some
			e.mu.Unlock()
		}}, nil
	}
	// Kept decoded: built, loaded, held so already, asked again soon, or
	// changed since it was packed (the writer packs it again).
	c.account(e)
	s.persistLater(e)
	return &indexHandle{r: rp, unlock: func() {
		// What the request decoded from a loaded index is not kept, nor
		// the views it made when keeping them would evict a session: a
		// view is remade from its turn in microseconds, an index evicted
		// is loaded again in milliseconds.
		rp.idx.forget()
		if !c.room(e) {
			rp.idx.dropViews()
		}
		c.account(e)
		e.mu.Unlock()
	}}, nil
}

// leavePacked drops e's replay, decoded from its packed form, and keeps
// its embeddings beside the packed form (as demote does). Must be called
// with e.mu held.
func (e *cacheEntry) leavePacked() {
	e.vecs, e.vecBytes = e.r.vecs, e.r.vecBytes
	e.r = nil
}

// prune leaves out of the replay's searches the turns that expired from
// the inbound stream since they were indexed (max-age): an index kept in
// memory answers as one built now would. It costs one stream info.
func (s *server) prune(ctx context.Context, rp *replay) error {
	info, err := s.in.Info(ctx)
	if err != nil {
		return internal(err, "reading stream %s info", s.layout.In)
	}
	rp.firstSeq = info.State.FirstSeq
	return nil
}

// vectorsOf gives the replay's turns their embeddings (hybrid ranking
// only); a failure leaves BM25 to rank them, with a warning and a metric.
func (s *server) vectorsOf(ctx context.Context, rp *replay) {
	if s.vec == nil {
		return
	}
	if err := s.vec.sync(ctx, s.js, rp); err != nil {
		s.vec.failures.Inc()
		s.log.Warn().Str("event", "recall_embeddings_failed").Str("session", rp.session).Err(err).
			Msg("turns not embedded; ranked by BM25 until the embeddings endpoint answers")
	}
}

// takeMems returns the memories' first get started when e's replay was
// loaded, if any, and forgets it. Must be called with e.mu held.
func (e *cacheEntry) takeMems() *nextMemory {
	m := e.mems
	e.mems = nil
	return m
}

// memoriesOf brings the replay's memories up to date (first, if not nil,
// is the first get, already under way); a failure only leaves the newest
// out, with a warning.
func (s *server) memoriesOf(ctx context.Context, rp *replay, first *nextMemory) {
	if err := s.catchUpMemories(ctx, rp, first); err != nil {
		s.memoryFailures.Inc()
		s.log.Warn().Str("event", "recall_memories_failed").Str("session", rp.session).Err(err).
			Msg("memories not read; the context is packed without the newest")
	}
}

// nextEvent is the first get of a catch-up (the session's next event
// after a replay's position), started before the replay is ready for it
// so that its round trip overlaps other work: the stream's info on a
// warm index, the decoding of a loaded one.
type nextEvent struct {
	evs  *broker.SessionEvents
	from uint64
	msg  *jetstream.RawStreamMsg
	err  error
	done chan struct{}
}

// prefetchEvent starts reading the session's next event at or after
// from.
func (s *server) prefetchEvent(ctx context.Context, session string, from uint64) *nextEvent {
	f := &nextEvent{evs: broker.NewSessionEvents(s.in, s.subj, session, from), from: from, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.msg, f.err = f.evs.Next(ctx)
	}()
	return f
}

// prefetchInfo starts reading the inbound stream's info and returns
// the wait for it.
func (s *server) prefetchInfo(ctx context.Context) func() (*jetstream.StreamInfo, error) {
	var (
		info *jetstream.StreamInfo
		err  error
	)
	done := make(chan struct{})
	go func() {
		defer close(done)
		info, err = s.in.Info(ctx)
	}()
	return func() (*jetstream.StreamInfo, error) {
		<-done
		return info, err
	}
}

// catchUpWarm applies the session's events stored after the replay's
// position and returns how many it read: up to warmGets with direct gets
// ("the next message at or after rp.next on the session's subjects"),
// the rest through a consumer. next, if not nil and from the replay's
// position, is its first get, already under way (prefetchEvent).
func (s *server) catchUpWarm(ctx context.Context, rp *replay, next *nextEvent) (int, error) {
	read := rp.read
	evs := broker.NewSessionEvents(s.in, s.subj, rp.session, rp.next)
	if next != nil && next.from == rp.next {
		evs = next.evs
	} else {
		next = nil
	}
	for n := 0; ; n++ {
		if n == warmGets {
			_, last, err := broker.SessionStored(ctx, s.in, s.subj, rp.session)
			if err != nil {
				return rp.read - read, internal(err, "reading stream %s info", s.layout.In)
			}
			err = s.catchUp(ctx, rp, last)
			return rp.read - read, err
		}
		var (
			msg *jetstream.RawStreamMsg
			err error
		)
		if n == 0 && next != nil {
			<-next.done
			msg, err = next.msg, next.err
		} else {
			msg, err = evs.Next(ctx)
		}
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return rp.read - read, nil
		}
		if err != nil {
			return rp.read - read, internal(err, "reading stream %s after sequence %d", s.layout.In, rp.next-1)
		}
		_, kind, err := s.subj.ParseIn(msg.Subject)
		if err != nil {
			rp.next = msg.Sequence + 1
			continue // dead-lettered by the processor
		}
		rp.apply(msg.Sequence, msg.Time, kind, msg.Data)
	}
}

// Option configures the service (Start).
type Option func(*server)

// IndexBytes sets the recall index's memory budget in bytes
// (DefaultIndexBytes when not set); 0 keeps no index, so every recall and
// question-aware context scans the session's stream.
func IndexBytes(n int64) Option { return func(s *server) { s.indexBytes = n } }

// Registerer registers the service's metrics (the recall index's) with
// reg; without it they are not exported.
func Registerer(reg prometheus.Registerer) Option { return func(s *server) { s.reg = reg } }

// Admission sets the rules by which the service applies the inbound
// events the processor has not checkpointed yet and replays a session for
// the recall index: the processor's own (Processor.Admission), so a
// context never holds an event the processor dead-lettered (e.g. one
// dated beyond --max-clock-skew). state.DefaultAdmission when not set.
func Admission(a state.Admission) Option { return func(s *server) { s.adm = a } }

// Clock sets the service's clock (time.Now when not set).
func Clock(now func() time.Time) Option { return func(s *server) { s.now = now } }
