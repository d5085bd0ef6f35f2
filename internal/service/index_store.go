package service

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// indexStore persists sessions' replays (the recall index, encoded by
// index_codec.go) in the KV bucket <BASE>_RECALL (<BASE>_RECALL_MEM in
// the server's memory with IndexStoreInMemory), so that the first
// question after a restart, an eviction or on another service instance
// loads the index and reads only the events stored since it was written,
// instead of scanning the session's stream and analyzing every turn.
//
//   - Preloaded: at start, the indexes written in the last hour are loaded
//     into memory in the background, most recent first (preload).
//   - Off the request path: one goroutine encodes and writes. A replay is
//     queued after it is built, after it has applied persistEvery events
//     since it was last written, when the cache evicts it, and, for those
//     still in memory, when the service stops.
//   - Never served wrong: an entry is used only if its format and
//     structure fingerprint are this binary's, its key names this
//     session, stream (by creation time), subject layout and admission
//     rules, its chunks are all of one write and match their checksum,
//     and the stream still holds its position. It is then extended with
//     the events stored after it (as a warm index is). Anything else is
//     discarded (foldstream_recall_index_discarded_total, by reason) and
//     the index rebuilt from the stream, which writes it again.
//   - Bounded: the bucket holds at most --recall-index-store-bytes (puts
//     fail beyond it: those sessions are rebuilt from the stream as
//     without a store) and entries expire after indexStoreTTL without a
//     write; a replay whose packed form exceeds an eighth of the bucket
//     is not written.
//
// What is stored is the replay's packed form (index_pack.go: the
// encoding, zstd-compressed), which the memory keeps too; an entry
// written unpacked by an earlier version is read as it is (and packed
// for the memory by the writer, not rewritten for that alone).
//
// An entry is the key m.<session>: its length and CRC-32C, then the
// stored value itself when it fits one message (inline: below the server's
// max_payload, with room to spare), so that a load is one get. A larger
// one is written in chunks c.<session>.<i> (the write's generation, then
// at most indexChunk bytes), which m.<session> counts (with the
// generation): two instances writing the same session at once leave
// chunks of two generations, which a reader discards. An entry's chunks
// are deleted when it is written again inline, or with fewer chunks. A
// chunked entry that would fit one message (written by an earlier
// version) is read as it is until the session's index is written again:
// it is not rewritten for its layout alone, so that a store stays
// readable by the version that wrote it.
//
// A load costs the server a read of the file-store block holding the
// entry (the whole block, 8 MiB in a bucket over 32 MiB, unless it still
// holds it: see IndexStoreInMemory), then the value's copies on its way,
// then its decompression into memory the index keeps
// (decodeReplayOwned).
type indexStore struct {
	js       jetstream.JetStream
	bucket   string
	maxBytes int64
	storage  jetstream.StorageType
	log      zerolog.Logger

	mu       sync.Mutex
	kv       jetstream.KeyValue // opened on first use
	failedAt time.Time          // last failure to open the bucket

	queue chan *cacheEntry
	// forceInline, when >= 0, is the inline limit instead of the one the
	// server's max_payload gives (tests write chunked entries with 0).
	forceInline int

	loads, stores, failures, preloaded prometheus.Counter
	discarded                          *prometheus.CounterVec
	preloading                         prometheus.Gauge
}

const (
	// DefaultIndexStoreBytes bounds the KV bucket of persisted recall
	// indexes.
	DefaultIndexStoreBytes = 4 << 30
	// indexStoreTTL: an entry not written for this long expires.
	indexStoreTTL = 7 * 24 * time.Hour
	// indexChunk is the largest chunk of an entry too large for one
	// message (an inline entry goes up to the server's max_payload less
	// inlineRoom).
	indexChunk = 256 << 10
	// persistEvery: a replay in memory is written again once it has read
	// this many events since its last write, so that a load is extended
	// with at most this many (the warm path's direct gets).
	persistEvery = warmGets
	// indexStoreRetry: after the bucket could not be opened, requests do
	// not try again for this long (they build from the stream).
	indexStoreRetry = 30 * time.Second
	// indexFlushTimeout bounds the writes when the service stops.
	indexFlushTimeout = 5 * time.Second
	// inlineRoom is left of the server's max_payload when an entry is
	// written as one message (the subject and headers travel with it).
	inlineRoom = 16 << 10
)

// inlineLimit is the largest m.<session> value written for a server
// whose max_payload is maxPayload; forced (>= 0) overrides it (tests).
func inlineLimit(maxPayload int64, forced int) int {
	if forced >= 0 {
		return forced
	}
	return int(max(0, maxPayload-inlineRoom))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// readBuffers hold the encodings loads read (restored), those of up to
// maxReadBuffer bytes: a larger one is not kept for the next load.
var readBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxReadBuffer = 8 << 20

func newIndexStore(js jetstream.JetStream, bucket string, maxBytes int64, storage jetstream.StorageType, log zerolog.Logger, reg prometheus.Registerer) *indexStore {
	st := &indexStore{js: js, bucket: bucket, maxBytes: maxBytes, storage: storage, log: log, queue: make(chan *cacheEntry, 1024), forceInline: -1,
		loads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_loads_total",
			Help: "Sessions' recall indexes loaded from the store (" + bucket + ") and extended, instead of built from the inbound stream."}),
		stores: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_stores_total",
			Help: "Sessions' recall indexes written to the store."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_store_failures_total",
			Help: "Reads or writes of the recall index store that failed (the index was built from the stream, or not written)."}),
		preloaded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_preloaded_total",
			Help: "Sessions' recall indexes loaded from the store into memory at start (written within the last hour, most recent first, up to 3/4 of the budget)."}),
		preloading: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "recall_index_preloading",
			Help: "1 while the recall indexes of recently active sessions are being loaded at start, then 0."}),
		discarded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_index_discarded_total",
			Help: "Stored recall indexes not used and rebuilt from the stream, by reason: version (another format or structure), corrupt (undecodable, torn or failing its checksum), stale (another stream, layout or admission rules, or ahead of the stream)."},
			[]string{"reason"}),
	}
	if reg != nil {
		reg.MustRegister(st.loads, st.stores, st.failures, st.discarded, st.preloaded, st.preloading)
	}
	return st
}

// open returns the bucket, created if needed; after a failure it answers
// the error again for indexStoreRetry.
func (st *indexStore) open(ctx context.Context) (jetstream.KeyValue, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.kv != nil {
		return st.kv, nil
	}
	if !st.failedAt.IsZero() && time.Since(st.failedAt) < indexStoreRetry {
		return nil, fmt.Errorf("recall index store %s: unavailable since %s", st.bucket, st.failedAt.Format(time.RFC3339))
	}
	kv, err := st.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: st.bucket, History: 1, MaxBytes: st.maxBytes,
		Storage: st.storage, TTL: indexStoreTTL, Description: "foldstream: sessions' recall indexes (m.<session>, c.<session>.<chunk>), rebuilt from the inbound stream when missing"})
	if err != nil {
		st.failedAt = time.Now()
		st.failures.Inc()
		if limit := reservationRefused(err); limit != "" {
			err = fmt.Errorf("%w: --recall-index-store-bytes (%d) does not fit the server's or the account's %s (the shipped configs allow 256MB a server, 64MB an account): lower it", err, st.maxBytes, limit)
		}
		st.log.Warn().Str("event", "recall_index_store_unavailable").Str("bucket", st.bucket).Err(err).
			Msg("recall indexes are built from the stream and not persisted until the bucket can be opened")
		return nil, fmt.Errorf("recall index store %s: %w", st.bucket, err)
	}
	st.kv = kv
	return kv, nil
}

// reservationRefused names the server limit behind err when the server
// refused to reserve the bucket's MaxBytes (max_mem for a memory bucket,
// max_file for a file one), or returns "".
func reservationRefused(err error) string {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return ""
	}
	switch apiErr.ErrorCode {
	case 10028: // JSMemoryResourcesExceededErr
		return "max_mem"
	case 10047: // JSStorageResourcesExceededErr
		return "max_file"
	case 10023: // JSInsufficientResourcesErr
		return "max_mem or max_file"
	}
	return ""
}

// gone forgets the bucket if err says its stream is gone (deleted, or a
// memory bucket lost when the server restarted): the next use creates it
// again (open) instead of failing until the service restarts.
func (st *indexStore) gone(err error) {
	if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, jetstream.ErrNoStreamResponse) &&
		!errors.Is(err, jetstream.ErrStreamNotFound) && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return
	}
	st.mu.Lock()
	st.kv = nil
	st.mu.Unlock()
}

// recallBucket is the index store's bucket: <BASE>_RECALL beside the
// checkpoints' <BASE>_SESSIONS, or <BASE>_RECALL_MEM kept in the
// server's memory (IndexStoreInMemory): a stream's storage cannot be
// changed, so each storage has its bucket, and switching leaves the
// other's entries to expire (indexStoreTTL).
func recallBucket(l broker.Layout, storage jetstream.StorageType) string {
	b := strings.TrimSuffix(l.Bucket, "_SESSIONS") + "_RECALL"
	if storage == jetstream.MemoryStorage {
		b += "_MEM"
	}
	return b
}

func metaKey(session string) string          { return "m." + session }
func chunkKey(session string, i int) string  { return "c." + session + "." + strconv.Itoa(i) }
func (st *indexStore) discard(reason string) { st.discarded.WithLabelValues(reason).Inc() }

// storeMeta is an entry's m.<session> value: the generation of its
// chunks (0 inline), their count (0: the encoding is inline, after the
// checksum), the encoding's length and CRC-32C.
type storeMeta struct {
	gen    uint64
	chunks int
	length int
	crc    uint32
	inline []byte // the encoding, when chunks is 0
}

// encode appends m's value to b (inline: with the encoding).
func (m storeMeta) encode(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, m.gen)
	b = binary.AppendUvarint(b, uint64(m.chunks))
	b = binary.AppendUvarint(b, uint64(m.length))
	b = binary.LittleEndian.AppendUint32(b, m.crc)
	return append(b, m.inline...)
}

// metaBytes bounds an encoded storeMeta without its inline encoding.
const metaBytes = 8 + 2*binary.MaxVarintLen64 + 4

func decodeMeta(b []byte) (storeMeta, bool) {
	var m storeMeta
	if len(b) < 8 {
		return m, false
	}
	m.gen = binary.LittleEndian.Uint64(b)
	b = b[8:]
	c, n := binary.Uvarint(b)
	if n <= 0 {
		return m, false
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || len(b[n:]) < 4 || c > 1<<20 || c > 0 && l > uint64(c)*indexChunk {
		return m, false
	}
	rest := b[n+4:]
	if c == 0 && uint64(len(rest)) != l || c > 0 && len(rest) != 0 {
		return m, false
	}
	m.chunks, m.length, m.crc = int(c), int(l), binary.LittleEndian.Uint32(b[n:])
	if c == 0 {
		m.inline = rest
	}
	return m, true
}

// storedEntry is what read found of a session's entry.
type storedEntry struct {
	// blob is the encoding; nil if there is none, or it is torn or
	// damaged (counted as corrupt).
	blob []byte
	// held > 0: blob is the inline value's memory, held bytes of it,
	// which nothing else uses (decodeReplayOwned may keep it); else blob
	// is in the buffer read was given.
	held int
	// chunks is how many chunks the entry's meta names (0: inline or
	// none); -1 if the meta could not be read or decoded.
	chunks int
}

// read returns the session's stored encoding: the inline value's own
// memory, or its chunks in buf's memory if it holds them.
func (st *indexStore) read(ctx context.Context, kv jetstream.KeyValue, session string, buf []byte) (storedEntry, error) {
	me, err := kv.Get(ctx, metaKey(session))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return storedEntry{}, nil
	}
	if err != nil {
		return storedEntry{chunks: -1}, err // unknown: the writer reads the meta
	}
	meta, ok := decodeMeta(me.Value())
	if !ok {
		st.discard("corrupt")
		return storedEntry{chunks: -1}, nil
	}
	found := storedEntry{chunks: meta.chunks}
	if meta.chunks == 0 {
		if crc32.Checksum(meta.inline, castagnoli) != meta.crc {
			st.discard("corrupt")
			return found, nil
		}
		found.blob, found.held = meta.inline, cap(me.Value())
		return found, nil
	}
	parts := make([][]byte, meta.chunks)
	errs := make([]error, meta.chunks)
	var wg sync.WaitGroup
	for i := range parts {
		get := func() {
			e, err := kv.Get(ctx, chunkKey(session, i))
			if err != nil {
				errs[i] = err
				return
			}
			parts[i] = e.Value()
		}
		if i == len(parts)-1 {
			get() // the last on this goroutine
			continue
		}
		wg.Go(get)
	}
	wg.Wait()
	blob := slices.Grow(buf[:0], meta.length)
	for i, p := range parts {
		switch {
		case errors.Is(errs[i], jetstream.ErrKeyNotFound):
			st.discard("corrupt")
			return found, nil
		case errs[i] != nil:
			return found, errs[i]
		case len(p) < 8 || binary.LittleEndian.Uint64(p) != meta.gen:
			st.discard("corrupt") // torn: another write's chunk
			return found, nil
		}
		blob = append(blob, p[8:]...)
	}
	if len(blob) != meta.length || crc32.Checksum(blob, castagnoli) != meta.crc {
		st.discard("corrupt")
		return found, nil
	}
	found.blob = blob
	return found, nil
}

// write stores blob as the session's entry and returns its chunk count
// (0: inline): the meta with blob in it if it fits one message, else the
// chunks, then the meta that names them; then it deletes the chunks the
// previous entry had beyond the new one's. That count is the previous
// meta's, read again (another instance may have written the session
// since the caller learned it), or prev (the caller's, -1 if unknown)
// if that is more: chunks a failed delete left.
func (st *indexStore) write(ctx context.Context, session string, blob []byte, prev int) (int, error) {
	if int64(len(blob)) > st.maxBytes/8 {
		return prev, nil // bounded: not worth an eighth of the bucket
	}
	kv, err := st.open(ctx)
	if err != nil {
		return prev, err
	}
	// One get, in the writer: off the request path. A meta that cannot
	// be read fails the write (the next one reads it again).
	e, err := kv.Get(ctx, metaKey(session))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return prev, err
	default:
		if m, ok := decodeMeta(e.Value()); ok {
			prev = max(prev, m.chunks)
		}
	}
	prev = max(prev, 0)
	meta := storeMeta{length: len(blob), crc: crc32.Checksum(blob, castagnoli)}
	if st.fitsInline(len(blob)) {
		meta.inline = blob
		if _, err := kv.Put(ctx, metaKey(session), meta.encode(make([]byte, 0, metaBytes+len(blob)))); err != nil {
			return prev, err
		}
		if err := st.deleteChunks(ctx, kv, session, 0, prev); err != nil {
			return prev, err // deleted by the next write
		}
		return 0, nil
	}
	meta.gen = rand.Uint64()
	for off := 0; off < len(blob); off += indexChunk {
		part := blob[off:min(len(blob), off+indexChunk)]
		v := binary.LittleEndian.AppendUint64(make([]byte, 0, 8+len(part)), meta.gen)
		if _, err := kv.Put(ctx, chunkKey(session, meta.chunks), append(v, part...)); err != nil {
			return prev, err
		}
		meta.chunks++
	}
	if _, err := kv.Put(ctx, metaKey(session), meta.encode(nil)); err != nil {
		return prev, err
	}
	if err := st.deleteChunks(ctx, kv, session, meta.chunks, prev); err != nil {
		return max(meta.chunks, prev), err // deleted by the next write
	}
	return meta.chunks, nil
}

// fitsInline reports whether an encoding of n bytes is written inline:
// below the max_payload of the server the connection is on now (it may
// have reconnected to another since the bucket was opened).
func (st *indexStore) fitsInline(n int) bool {
	return metaBytes+n <= inlineLimit(st.js.Conn().MaxPayload(), st.forceInline)
}

// deleteChunks deletes the session's chunks [from, to).
func (st *indexStore) deleteChunks(ctx context.Context, kv jetstream.KeyValue, session string, from, to int) error {
	for i := from; i < to; i++ {
		if err := kv.Delete(ctx, chunkKey(session, i)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			return err
		}
	}
	return nil
}

// indexKey names what a replay of session is built from: an entry with
// another key is not used.
func (s *server) indexKey(session string, created time.Time) string {
	return fmt.Sprintf("%s\n%s@%d\n%s/%d\n%+v/%d", session, s.layout.In, created.UnixNano(), s.subj.Prefix, s.subj.Partitions,
		s.adm.Limits, s.adm.MaxClockSkew)
}

// restored is the session's stored replay, extended with the events
// stored after it, with e's key and stored position set; nil (and no
// error) when there is no usable entry: the caller builds from the
// stream. Must be called with e.mu held.
func (s *server) restored(ctx context.Context, e *cacheEntry) (*replay, error) {
	st := s.istore
	e.storedRead, e.storedChunks = -1, -1
	if st == nil {
		return nil, nil
	}
	// The stream's info (the key names the stream's creation, and an
	// entry must not be ahead of it) is read while the entry is: one
	// round trip less on the request path.
	var (
		info    *jetstream.StreamInfo
		infoErr error
		got     = make(chan struct{})
	)
	go func() {
		defer close(got)
		info, infoErr = s.in.Info(ctx)
	}()
	kv, openErr := st.open(ctx)
	var (
		found storedEntry
		err   error
	)
	// Chunks are read into a buffer used again by the next load: a
	// load keeps a copy of what it reads from (decodeReplay), and a
	// buffer of the entry's size, made for each load, would be cleared
	// and faulted in each time. An inline entry is kept where it was
	// read (decodeReplayOwned).
	buf := readBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxReadBuffer {
			readBuffers.Put(buf)
		}
	}()
	if openErr == nil {
		if found, err = st.read(ctx, kv, e.session, *buf); found.blob != nil && found.held == 0 {
			*buf = found.blob
		}
		e.storedChunks = found.chunks
	}
	<-got
	if infoErr != nil {
		return nil, internal(infoErr, "reading stream %s info", s.layout.In)
	}
	e.key = s.indexKey(e.session, info.Created)
	if openErr != nil {
		return nil, nil // built from the stream; open warned
	}
	if err != nil {
		st.failures.Inc()
		st.gone(err)
		s.log.Warn().Str("event", "recall_index_load_failed").Str("session", e.session).Err(err).
			Msg("stored recall index not read; building it from the stream")
		return nil, nil
	}
	blob, held := found.blob, found.held
	if blob == nil {
		return nil, nil
	}
	var packed []byte
	if isPacked(blob) {
		// Kept for the memory (index_pack.go) as read: the message's own
		// memory, or a copy of the chunks, which are in a buffer used
		// again.
		if packed = blob; held == 0 {
			packed = slices.Clone(blob)
		}
		if blob, err = s.pack.unpack(blob); err != nil {
			st.discard("corrupt")
			s.log.Warn().Str("event", "recall_index_discarded").Str("session", e.session).Err(err).
				Msg("stored recall index undecodable; rebuilding it from the stream")
			return nil, nil
		}
		held = cap(blob)
	}
	key, body, err := indexHeader(blob)
	switch {
	case errors.Is(err, errIndexVersion):
		st.discard("version")
		return nil, nil
	case err != nil:
		st.discard("corrupt")
		return nil, nil
	case key != e.key:
		st.discard("stale")
		return nil, nil
	}
	// The catch-up's first get (the events stored after the entry) while
	// the entry is decoded, and the memories' first, which the caller
	// reads (e.mems); SeedIndexes, which keeps no cache, reads none.
	var next *nextEvent
	if at, memAt, ok := replayNext(body); ok {
		next = s.prefetchEvent(ctx, e.session, at)
		if s.index != nil {
			e.mems = s.prefetchMemory(ctx, e.session, memAt)
		}
	}
	var rp *replay
	if held > 0 {
		rp, err = decodeReplayOwned(body, held, s.an, s.adm, e.session)
	} else {
		rp, err = decodeReplay(body, s.an, s.adm, e.session)
	}
	if err != nil {
		st.discard("corrupt")
		s.log.Warn().Str("event", "recall_index_discarded").Str("session", e.session).Err(err).
			Msg("stored recall index undecodable; rebuilding it from the stream")
		return nil, nil
	}
	if info.State.LastSeq+1 < rp.next {
		st.discard("stale") // the stream is behind it: not the stream it was built from
		return nil, nil
	}
	rp.firstSeq = info.State.FirstSeq
	stored := rp.read
	if _, err := s.catchUpWarm(ctx, rp, next); err != nil {
		return nil, err
	}
	e.storedRead = stored
	e.packed = packed
	st.loads.Inc()
	return rp, nil
}

// persistLater queues e's replay for writing if it was never written or
// has read persistEvery events since, or for packing (index_pack.go) if
// it has no packed form. Must be called with e.mu held.
func (s *server) persistLater(e *cacheEntry) {
	if s.istore != nil && e.r != nil && (e.storedRead < 0 || e.r.read-e.storedRead >= persistEvery || s.index != nil && e.packed == nil) {
		s.istore.enqueue(e)
	}
}

// enqueue hands e to the writer unless it is already queued or the
// queue is full (then the next request, or the next load's extension,
// makes up for it).
func (st *indexStore) enqueue(e *cacheEntry) {
	if !e.queued.CompareAndSwap(false, true) {
		return
	}
	select {
	case st.queue <- e:
	default:
		e.queued.Store(false)
	}
}

// persist writes e's replay, packed (index_pack.go), if it read events
// since its last write; with pack, it packs it for the memory too when
// it has no packed form (loaded from an entry written unpacked by an
// earlier version, which is not written again for that alone).
func (s *server) persist(ctx context.Context, e *cacheEntry, pack bool) {
	e.queued.Store(false)
	e.writing.Lock()
	defer e.writing.Unlock()
	e.mu.Lock()
	rp := e.r
	write := rp != nil && rp.read != e.storedRead && e.key != ""
	keep := s.index != nil && rp != nil && e.key != "" && (write || pack && e.packed == nil) && s.index.holds(e)
	if !write && !keep {
		e.mu.Unlock()
		return
	}
	read, prev := rp.read, e.storedChunks
	blob, err := encodeReplay(make([]byte, 0, encodedSize(rp)), e.key, rp)
	e.mu.Unlock()
	var packed []byte
	if err == nil {
		packed = s.pack.pack(blob)
	}
	if err == nil && write {
		prev, err = s.istore.write(ctx, e.session, packed, prev)
		e.mu.Lock()
		e.storedChunks = prev
		e.mu.Unlock()
	}
	if err != nil {
		s.istore.failures.Inc()
		s.istore.gone(err)
		s.log.Warn().Str("event", "recall_index_store_failed").Str("session", e.session).Err(err).
			Msg("recall index not persisted; the next load builds or extends it from the stream")
		return
	}
	if write {
		s.istore.stores.Inc()
	}
	// The replay is kept as it now loads: its encoding, read when a
	// request asks (indexBase), takes a fraction of the memory of a
	// replay built from the stream, or of the turns added to a loaded one
	// since.
	var compact *replay
	if keep && write {
		if _, body, err := indexHeader(blob); err == nil {
			compact, _ = decodeOwn(body, 0, nil, s.an, s.adm, e.session)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.r != rp {
		return // rebuilt, or packed meanwhile
	}
	if write {
		e.storedRead = read
	}
	if !keep {
		return
	}
	if compact != nil && rp.read == read {
		compact.firstSeq, compact.vecs, compact.vecBytes = rp.firstSeq, rp.vecs, rp.vecBytes
		e.r = compact
	}
	e.packed = packed
	s.index.account(e)
}

// encodedSize estimates the length of rp's encoding.
func encodedSize(rp *replay) int {
	n := rp.bytes() / 2
	if b := rp.idx.base; b != nil {
		n = max(n, int64(len(b.b))+int64(rp.idx.ndocs())*8+4096)
	}
	return int(n)
}

// When the writer has nothing else queued, it packs and writes a replay
// once its session's requests pause for writePause, or writeWait after
// it took it: the work (~16 ms of CPU at 10,000 turns: encoding, zstd,
// the check that it unpacks) then does not run beside the session's next
// prompts, the requests a bot makes back to back. With more queued (many
// sessions asked, or evicted), it writes at once.
const (
	writePause = 500 * time.Millisecond
	writeWait  = 5 * time.Second
	// pausePoll is how often a wait looks for more work queued.
	pausePoll = 50 * time.Millisecond
)

// afterPause returns true once e's requests have paused for writePause,
// more is queued, or writeWait after it was called; false if ctx ended
// first.
func afterPause(ctx context.Context, e *cacheEntry, queue chan *cacheEntry) bool {
	deadline := time.Now().Add(writeWait)
	for {
		now := time.Now()
		quiet := now.Sub(time.Unix(0, e.asked.Load()))
		if quiet >= writePause || !now.Before(deadline) || len(queue) > 0 {
			return true
		}
		t := time.NewTimer(min(writePause-quiet, deadline.Sub(now), pausePoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// runIndexWriter writes queued replays until ctx ends, then those still
// queued and those in memory that read events since their last write
// (bounded by indexFlushTimeout), so that a restart loads them.
func (s *server) runIndexWriter(ctx context.Context) {
	var waited []*cacheEntry // taken from the queue when ctx ended during their pause
	for {
		select {
		case e := <-s.istore.queue:
			if !afterPause(ctx, e, s.istore.queue) {
				waited = append(waited, e)
				continue
			}
			s.persist(ctx, e, true)
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), indexFlushTimeout)
			defer cancel()
			// The queued (evicted ones among them), then those in memory.
			flush := waited
			for len(s.istore.queue) > 0 {
				flush = append(flush, <-s.istore.queue)
			}
			for _, e := range append(flush, s.index.all()...) {
				if fctx.Err() != nil {
					return
				}
				s.persist(fctx, e, false)
			}
			return
		}
	}
}

// IndexStoreBytes bounds the KV bucket <BASE>_RECALL in which the recall
// index of each session is persisted (DefaultIndexStoreBytes when not
// set); 0 persists nothing, so the first question after a restart or an
// eviction builds the session's index from the stream.
func IndexStoreBytes(n int64) Option { return func(s *server) { s.storeBytes = n } }

// IndexStoreInMemory keeps the index store in the server's memory, in
// the bucket <BASE>_RECALL_MEM, instead of in its files: a load then
// reads no file-store block (a server reads a whole block, 8 MiB in a
// bucket of more than 32 MiB, the first time one of its entries is read,
// and again once it has not been read for 10 s or the server's process
// has collected garbage: it holds a block it read only weakly), at the price
// of the server's memory, up to IndexStoreBytes. The entries are lost
// when the server restarts: the sessions' indexes are then built from
// the stream again, as without a store, and stored.
func IndexStoreInMemory(on bool) Option {
	return func(s *server) {
		s.storeKind = jetstream.FileStorage
		if on {
			s.storeKind = jetstream.MemoryStorage
		}
	}
}

const (
	// preloadWindow: at start, the indexes written within it (sessions
	// active recently) are loaded into memory in the background.
	preloadWindow = time.Hour
	// preloadShare is the part of the memory budget preloading may fill.
	preloadShare = 0.75
)

// preload loads into memory, in the background after start, the stored
// indexes written within preloadWindow, most recent first, until they
// hold preloadShare of the memory budget, those loaded first kept packed
// (index_pack.go) once the decoded ones fill it: the first question to a
// session active before a restart (or on a new instance) then finds its
// index in memory. A request for a session being preloaded waits for it on the
// session's entry; one for a session not preloaded loads it itself.
func (s *server) preload(ctx context.Context) {
	st, c := s.istore, s.index
	defer st.preloading.Set(0)
	began := time.Now()
	kv, err := st.open(ctx)
	if err != nil {
		return
	}
	w, err := kv.WatchFiltered(ctx, []string{"m.>"}, jetstream.IgnoreDeletes(), jetstream.MetaOnly())
	if err != nil {
		s.log.Warn().Str("event", "recall_index_preload_failed").Err(err).Msg("stored recall indexes not preloaded")
		return
	}
	type stored struct {
		session string
		at      time.Time
	}
	var recent []stored
	for e := range w.Updates() {
		if e == nil {
			break // every stored entry delivered
		}
		if time.Since(e.Created()) <= preloadWindow {
			recent = append(recent, stored{strings.TrimPrefix(e.Key(), "m."), e.Created()})
		}
	}
	_ = w.Stop()
	slices.SortFunc(recent, func(a, b stored) int { return b.at.Compare(a.at) })
	n := 0
	for _, r := range recent {
		c.mu.Lock()
		for float64(c.bytes) >= preloadShare*float64(c.budget) && c.demote(nil) {
		}
		full := float64(c.bytes) >= preloadShare*float64(c.budget)
		_, held := c.entries[r.session]
		c.mu.Unlock()
		if full || ctx.Err() != nil {
			break
		}
		if held {
			continue // asked for meanwhile
		}
		// Loaded on an entry of its own, added to the cache only if no
		// request made one meanwhile (and locked until it is ready).
		e := &cacheEntry{session: r.session}
		rctx, cancel := context.WithTimeout(ctx, requestTimeout)
		rp, err := s.restored(rctx, e)
		if rp == nil || err != nil {
			cancel()
			continue
		}
		e.mu.Lock()
		e.r = rp
		if !c.adopt(e) {
			e.mu.Unlock()
			cancel()
			continue
		}
		s.memoriesOf(rctx, rp, e.takeMems())
		cancel()
		c.account(e)
		s.persistLater(e)
		e.mu.Unlock()
		st.preloaded.Inc()
		n++
	}
	s.log.Info().Str("event", "recall_index_preloaded").Int("sessions", n).Int("recent", len(recent)).
		Dur("took", time.Since(began)).Msg("recall indexes of recently active sessions loaded into memory")
}

// adopt adds e to the cache as the most recently used entry of its
// session, unless the session has one; it reports whether it did.
func (c *indexCache) adopt(e *cacheEntry) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[e.session]; ok {
		return false
	}
	e.elem = c.lru.PushFront(e)
	c.entries[e.session] = e
	c.m.sessions.Set(float64(len(c.entries)))
	return true
}
