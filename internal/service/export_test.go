package service

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"
)

// Direct is a service instance that is not registered on NATS, so that a
// test can run several side by side (one with the recall index, one
// without) on the same streams and compare their answers.
type Direct struct{ s *server }

// NewDirect builds a Direct like Start builds the service. When tb's test
// ends, its index writer and preload end too, and the cleanup waits for
// them (as Service.Stop does), so that nothing logs after the test.
func NewDirect(tb testing.TB, ctx context.Context, js jetstream.JetStream, layout broker.Layout, store *state.Store, log zerolog.Logger, opts ...Option) (*Direct, error) {
	ctx, cancel := context.WithCancel(ctx)
	s, err := newServer(ctx, js, layout, store, nil, log, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	tb.Cleanup(func() {
		cancel()
		s.bg.Wait()
	})
	return &Direct{s: s}, nil
}

// Context answers a context request as the endpoint would (checked the
// same way).
func (d *Direct) Context(ctx context.Context, r client.ContextRequest) (*client.Context, error) {
	if err := client.CheckContext(&r); err != nil {
		return nil, err
	}
	return d.s.assemble(ctx, r)
}

// Recall answers a recall request as the endpoint would.
func (d *Direct) Recall(ctx context.Context, r client.RecallRequest) (*client.Recall, error) {
	if err := client.CheckRecall(&r); err != nil {
		return nil, err
	}
	return d.s.recall(ctx, r)
}

// IndexBytes is the recall index's accounted size (0 without an index).
func (d *Direct) IndexBytes() int64 {
	if d.s.index == nil {
		return 0
	}
	d.s.index.mu.Lock()
	defer d.s.index.mu.Unlock()
	return d.s.index.bytes
}

// ViewBytes is the part of IndexBytes the indexes' views hold (their
// cleaned texts and terms).
func (d *Direct) ViewBytes() int64 {
	if d.s.index == nil {
		return 0
	}
	var n int64
	for _, e := range d.s.index.all() {
		e.mu.Lock()
		if e.r != nil {
			n += e.r.idx.views.bytes
		}
		e.mu.Unlock()
	}
	return n
}

// IndexedSessions are the sessions whose index is in memory.
func (d *Direct) IndexedSessions() int {
	if d.s.index == nil {
		return 0
	}
	d.s.index.mu.Lock()
	defer d.s.index.mu.Unlock()
	return len(d.s.index.entries)
}

// ReplayStart builds the session's replay from the stream as a cold
// request does and says where it started reading and how many events it
// read.
func (d *Direct) ReplayStart(ctx context.Context, session string) (from uint64, read int, err error) {
	rp, err := d.s.scanReplay(ctx, session)
	if err != nil {
		return 0, 0, err
	}
	return rp.from, rp.read, nil
}

// IndexCounters are the recall index's build and store counters of one
// instance.
type IndexCounters struct {
	Builds, Loads, Stores, Preloaded float64
	// Unpacked: requests that decoded a packed index.
	Unpacked float64
	// Discarded by reason: version, corrupt, stale.
	Discarded map[string]float64
}

// IndexCounters reads the instance's counters.
func (d *Direct) IndexCounters() IndexCounters {
	c := IndexCounters{Discarded: map[string]float64{}}
	if d.s.index != nil {
		c.Builds = testutil.ToFloat64(d.s.index.m.builds)
		c.Unpacked = testutil.ToFloat64(d.s.index.m.unpacked)
	}
	if st := d.s.istore; st != nil {
		c.Loads, c.Stores = testutil.ToFloat64(st.loads), testutil.ToFloat64(st.stores)
		c.Preloaded = testutil.ToFloat64(st.preloaded)
		for _, r := range []string{"version", "corrupt", "stale"} {
			c.Discarded[r] = testutil.ToFloat64(st.discarded.WithLabelValues(r))
		}
	}
	return c
}

// WaitPreloaded waits until the instance has preloaded the stored
// indexes (foldstream_recall_index_preloading back to 0).
func (d *Direct) WaitPreloaded(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for testutil.ToFloat64(d.s.istore.preloading) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("stored indexes not preloaded within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// PersistIndexes writes every index in memory that read events since
// its last write, as the writer does, and returns when they are stored.
func (d *Direct) PersistIndexes(ctx context.Context) {
	for _, e := range d.s.index.all() {
		d.s.persist(ctx, e, true)
	}
}

// entry is the session's entry in the index (nil if none).
func (d *Direct) entry(session string) *cacheEntry {
	d.s.index.mu.Lock()
	defer d.s.index.mu.Unlock()
	return d.s.index.entries[session]
}

// IndexKeptAsStored reports whether the session's index in memory is its
// stored encoding, read at first use (indexBase), rather than as built.
func (d *Direct) IndexKeptAsStored(session string) bool {
	e := d.entry(session)
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.r != nil && e.r.idx.base != nil
}

// PackedBytes is the memory the packed forms of the indexes in memory
// take.
func (d *Direct) PackedBytes() int64 {
	var n int64
	for _, e := range d.s.index.all() {
		e.mu.Lock()
		n += int64(cap(e.packed))
		e.mu.Unlock()
	}
	return n
}

// PackedSessions is how many sessions are held packed only (the
// foldstream_recall_index_packed_sessions gauge).
func (d *Direct) PackedSessions() int {
	return int(testutil.ToFloat64(d.s.index.m.packed))
}

// DemoteIndexes keeps every index in memory that has a packed form
// packed only, as a full budget does.
func (d *Direct) DemoteIndexes() {
	c := d.s.index
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.demote(nil) {
	}
}

// DamagePacked changes a byte in the middle of the session's packed
// index; false if it has none.
func (d *Direct) DamagePacked(session string) bool {
	e := d.entry(session)
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.packed) == 0 {
		return false
	}
	e.packed = slices.Clone(e.packed)
	e.packed[len(e.packed)/2] ^= 0x5a
	return true
}

// EvictIndexes forgets every index in memory (as evictions do, without
// writing them).
func (d *Direct) EvictIndexes() {
	for _, e := range d.s.index.all() {
		d.s.index.drop(e)
	}
}

// RewriteStoredIndex stores the session's persisted index after edit
// changed its encoding (well-formed chunks and checksum: only the
// encoding is wrong).
func (d *Direct) RewriteStoredIndex(ctx context.Context, session string, edit func([]byte) []byte) error {
	kv, err := d.s.istore.open(ctx)
	if err != nil {
		return err
	}
	found, err := d.s.istore.read(ctx, kv, session, nil)
	if err != nil || found.blob == nil {
		return fmt.Errorf("no stored index of %s: %v", session, err)
	}
	blob := found.blob
	if isPacked(blob) {
		if blob, err = d.s.pack.unpack(blob); err != nil {
			return err
		}
	}
	_, err = d.s.istore.write(ctx, session, d.s.pack.pack(edit(blob)), found.chunks)
	return err
}

// RewriteStoredPacked stores the session's persisted index after edit
// changed its packed form (well-formed chunks and checksum: only the
// packed form is wrong), or, with unpacked, stores its encoding as it
// is, as versions before packing wrote it.
func (d *Direct) RewriteStoredPacked(ctx context.Context, session string, unpacked bool, edit func([]byte) []byte) error {
	kv, err := d.s.istore.open(ctx)
	if err != nil {
		return err
	}
	found, err := d.s.istore.read(ctx, kv, session, nil)
	if err != nil || found.blob == nil || !isPacked(found.blob) {
		return fmt.Errorf("no packed stored index of %s: %v", session, err)
	}
	blob := slices.Clone(found.blob)
	if unpacked {
		if blob, err = d.s.pack.unpack(blob); err != nil {
			return err
		}
	}
	_, err = d.s.istore.write(ctx, session, edit(blob), found.chunks)
	return err
}

// StoreChunked has the instance write every stored index in chunks
// (c.<session>.<i>, named by m.<session>) rather than inline in
// m.<session>, as it writes one too large for a message.
func StoreChunked() Option {
	return func(s *server) { s.storeChunked = true }
}

// IndexFormatOffset is where the format version is in an encoding.
const IndexFormatOffset = len(indexMagic)

// LastExchange is how many of the newest turns a budget always keeps.
const LastExchange = lastExchange

// LastTurnShare: a turn of the last exchange costs at most 1/LastTurnShare
// of a question-aware budget.
const LastTurnShare = lastTurnShare

// TrimShare: a matching turn longer than 1/TrimShare of the budget (and
// than trimChars) is cut to its matching sentences.
const TrimShare = trimShare

// TailText is tailText: text cut to its last sentences within limit.
func TailText(text string, limit int) (string, bool) { return tailText(text, limit) }

// PromoteWithin sets how soon a session held packed only must be asked
// again to be kept decoded (promoteAfter by default).
func (d *Direct) PromoteWithin(within time.Duration) {
	d.s.index.promoteWithin.Store(int64(within))
}
