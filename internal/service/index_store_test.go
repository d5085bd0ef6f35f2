package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// settledSession publishes 64 turns of s1 and settles them; scan answers
// from the stream (no index), the reference the tests compare with.
func settledSession(t *testing.T) (*servicetest.Env, *service.Direct) {
	t.Helper()
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	return e, direct(t, e, service.IndexBytes(0))
}

// storedSession publishes 64 turns of s1, settles them, and has an
// instance (with opts) build s1's index and persist it.
func storedSession(t *testing.T, opts ...service.Option) (*servicetest.Env, *service.Direct) {
	t.Helper()
	e, scan := settledSession(t)
	a := direct(t, e, opts...)
	sameAnswers(t, "first instance", "s1", scan, a)
	a.PersistIndexes(context.Background())
	if c := a.IndexCounters(); c.Builds != 1 || c.Stores != 1 {
		t.Fatalf("first instance: %+v, expected one build and one store", c)
	}
	// Once stored, the index is kept as it loads (its encoding, read at
	// first use), and answers the same.
	if !a.IndexKeptAsStored("s1") {
		t.Fatal("first instance: the stored index is kept as built")
	}
	sameAnswers(t, "first instance, index kept as stored", "s1", scan, a)
	return e, scan
}

// A restart (a new instance) loads the persisted index instead of
// building it, answers like a fresh scan, extends an entry the stream
// has moved past, and loads it again after an eviction.
func TestStoredIndexIsLoadedAfterARestart(t *testing.T) {
	e, scan := storedSession(t)

	b := direct(t, e)
	sameAnswers(t, "after a restart", "s1", scan, b)
	// Loaded by the preload at start or by the first request (by both
	// when they meet: the preload's is then not kept).
	if c := b.IndexCounters(); c.Builds != 0 || c.Loads < 1 {
		t.Fatalf("after a restart: %+v, expected the stored index loaded, nothing built", c)
	}

	// The stream moves on: the stored entry is behind it and is extended.
	publishWith(t, e, "s1", 64, 90, map[int]string{70: "Who brings the tournament form to Lisbon?"})
	e.Settled("s1", 90, 30)
	c := direct(t, e)
	sameAnswers(t, "a stored index behind the stream", "s1", scan, c)
	if got := c.IndexCounters(); got.Builds != 0 || got.Loads < 1 {
		t.Fatalf("behind the stream: %+v, expected the stored index loaded and extended", got)
	}

	// An eviction: the next request loads it again.
	before := b.IndexCounters().Loads
	b.EvictIndexes()
	sameAnswers(t, "after an eviction", "s1", scan, b)
	if got := b.IndexCounters(); got.Builds != 0 || got.Loads != before+1 {
		t.Fatalf("after an eviction: %+v (%v loads before), expected one more load", got, before)
	}
}

// At start, an instance loads the indexes stored in the last hour into
// memory before any request asks for them.
func TestStoredIndexIsPreloadedAtStart(t *testing.T) {
	e, scan := storedSession(t)
	b := direct(t, e)
	b.WaitPreloaded(t) // no request before: nothing races the preload
	if c := b.IndexCounters(); b.IndexedSessions() != 1 || c.Loads != 1 || c.Preloaded != 1 {
		t.Fatalf("after the preload: %d sessions in memory, %+v; expected s1 loaded", b.IndexedSessions(), c)
	}
	sameAnswers(t, "preloaded", "s1", scan, b)
	if c := b.IndexCounters(); c.Builds != 0 || c.Loads != 1 {
		t.Fatalf("asked after the preload: %+v, expected nothing built or loaded again", c)
	}
}

// An entry written in chunks (one too large for a message, or written
// so by an earlier version) is loaded like an inline one, and left as it
// is; written again (its session moved on), it is inline and its chunks
// are deleted.
func TestChunkedStoredIndexIsLoadedAndWrittenInline(t *testing.T) {
	ctx := context.Background()
	e, scan := storedSession(t, service.StoreChunked())
	kv := recallKV(t, e)
	if _, err := kv.Get(ctx, "c.s1.0"); err != nil {
		t.Fatalf("expected the entry written in chunks: %v", err)
	}
	b := direct(t, e)
	sameAnswers(t, "chunked entry", "s1", scan, b)
	b.PersistIndexes(ctx)
	if c := b.IndexCounters(); c.Builds != 0 || c.Loads < 1 || c.Stores != 0 {
		t.Fatalf("chunked entry: %+v, expected it loaded, nothing built or written", c)
	}
	publishWith(t, e, "s1", 64, 70, queryTexts)
	e.Settled("s1", 70, 10)
	sameAnswers(t, "chunked entry, extended", "s1", scan, b)
	b.PersistIndexes(ctx)
	if c := b.IndexCounters(); c.Stores != 1 {
		t.Fatalf("extended: %+v, expected it written again", c)
	}
	if _, err := kv.Get(ctx, "c.s1.0"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("written again: chunk c.s1.0 %v, expected it deleted", err)
	}
	if m, err := kv.Get(ctx, "m.s1"); err != nil || len(m.Value()) < 1000 {
		t.Fatalf("written again: m.s1 %v, expected the encoding in it", err)
	}
	again := direct(t, e)
	sameAnswers(t, "written again inline", "s1", scan, again)
	if c := again.IndexCounters(); c.Builds != 0 || c.Loads < 1 {
		t.Fatalf("written again inline: %+v, expected it loaded", c)
	}
}

// An entry written unpacked (its encoding as it is, as versions before
// packing wrote it) is loaded, and left as it is until its session moves
// on; the memory keeps a packed form of it.
func TestUnpackedStoredIndexIsLoaded(t *testing.T) {
	ctx := context.Background()
	e, scan := storedSession(t)
	if err := direct(t, e).RewriteStoredPacked(ctx, "s1", true, func(b []byte) []byte { return b }); err != nil {
		t.Fatal(err)
	}
	b := direct(t, e)
	sameAnswers(t, "unpacked entry", "s1", scan, b)
	b.PersistIndexes(ctx)
	if c := b.IndexCounters(); c.Builds != 0 || c.Loads < 1 || c.Stores != 0 || b.PackedBytes() <= 0 {
		t.Fatalf("unpacked entry: %+v, %d bytes packed; expected it loaded, not written, packed in memory", c, b.PackedBytes())
	}
	b.DemoteIndexes()
	sameAnswers(t, "unpacked entry, packed in memory", "s1", scan, b)
	if c := b.IndexCounters(); c.Unpacked != 1 {
		t.Fatalf("unpacked entry, packed in memory: %+v, expected its packed form decoded", c)
	}
}

// A load whose read of the meta fails builds the index from the stream;
// its next write, inline, deletes the chunks of the entry it replaces
// (it did not learn their count from the failed read).
func TestStoredIndexWrittenAfterAFailedReadDeletesItsChunks(t *testing.T) {
	ctx := context.Background()
	e, scan := storedSession(t, service.StoreChunked())
	kv := recallKV(t, e)
	b := direct(t, e)
	b.WaitPreloaded(t)
	b.EvictIndexes()
	restore, err := b.FailMetaReads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, "meta read failed", "s1", scan, b)
	if c := b.IndexCounters(); c.Builds != 1 {
		t.Fatalf("meta read failed: %+v, expected the index built from the stream", c)
	}
	restore()
	b.PersistIndexes(ctx)
	if c := b.IndexCounters(); c.Stores != 1 {
		t.Fatalf("meta read failed: %+v, expected the built index written", c)
	}
	noChunks(t, kv, "s1")
}

// An instance writing a session inline deletes the chunks another
// instance wrote for it since this one last read or wrote its entry.
func TestStoredIndexWrittenInlineDeletesAnotherInstancesChunks(t *testing.T) {
	ctx := context.Background()
	e, scan := settledSession(t)
	a := direct(t, e)
	sameAnswers(t, "first instance", "s1", scan, a)
	a.PersistIndexes(ctx)
	kv := recallKV(t, e)

	// Another instance extends and writes it in chunks.
	publishWith(t, e, "s1", 64, 70, queryTexts)
	e.Settled("s1", 70, 10)
	b := direct(t, e, service.StoreChunked())
	sameAnswers(t, "second instance", "s1", scan, b)
	b.PersistIndexes(ctx)
	if c := b.IndexCounters(); c.Stores != 1 {
		t.Fatalf("second instance: %+v, expected its entry written", c)
	}
	if _, err := kv.Get(ctx, "c.s1.0"); err != nil {
		t.Fatalf("second instance: expected the entry written in chunks: %v", err)
	}

	// The first writes it again, inline.
	publishWith(t, e, "s1", 70, 90, queryTexts)
	e.Settled("s1", 90, 30)
	sameAnswers(t, "first instance again", "s1", scan, a)
	a.PersistIndexes(ctx)
	if c := a.IndexCounters(); c.Stores != 2 {
		t.Fatalf("first instance again: %+v, expected its entry written twice", c)
	}
	if m, err := kv.Get(ctx, "m.s1"); err != nil || len(m.Value()) < 1000 {
		t.Fatalf("first instance again: m.s1 %v, expected the encoding in it", err)
	}
	noChunks(t, kv, "s1")
}

// noChunks fails if the bucket holds a chunk of session.
func noChunks(t *testing.T, kv jetstream.KeyValue, session string) {
	t.Helper()
	keys, err := kv.ListKeysFiltered(context.Background(), "c."+session+".>")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for k := range keys.Keys() {
		left = append(left, k)
	}
	if len(left) > 0 {
		t.Fatalf("chunks %v of %s left behind, expected them deleted", left, session)
	}
}

// A stored index of another version, structure, stream layout or
// admission rules, or one damaged in the store, is never used: the new
// instance rebuilds it from the stream (and answers like a fresh scan),
// counts why, and writes it again so that the next one loads it.
func TestStoredIndexIsRebuiltWhenUnusable(t *testing.T) {
	ctx := context.Background()
	bump := func(at int) func(b []byte) []byte {
		return func(b []byte) []byte { b[at]++; return b }
	}
	for _, tc := range []struct {
		name, reason string
		// chunked: the entry is written in chunks (else inline in its
		// meta, as one this small is).
		chunked bool
		// spoil damages the stored entry; opts configure the new instance.
		spoil func(t *testing.T, e *servicetest.Env, d *service.Direct)
		opts  []service.Option
	}{
		{name: "newer format", reason: "version", spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			if err := d.RewriteStoredIndex(ctx, "s1", bump(service.IndexFormatOffset)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "another structure", reason: "version", spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			if err := d.RewriteStoredIndex(ctx, "s1", bump(service.IndexFormatOffset+3)); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "truncated encoding", reason: "corrupt", spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			if err := d.RewriteStoredIndex(ctx, "s1", func(b []byte) []byte { return b[:len(b)*2/3] }); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a byte flipped in the packed form", reason: "corrupt", spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			if err := d.RewriteStoredPacked(ctx, "s1", false, func(b []byte) []byte { b[len(b)/2] ^= 0x20; return b }); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a packed form cut short", reason: "corrupt", spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			if err := d.RewriteStoredPacked(ctx, "s1", false, func(b []byte) []byte { return b[:len(b)-3] }); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a byte flipped in the store", reason: "corrupt", spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			flipStored(t, e, "m.s1", func(b []byte) int { return len(b) / 2 }, 0x20)
		}},
		{name: "an inline entry cut short", reason: "corrupt", spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			editStored(t, e, "m.s1", func(b []byte) []byte { return b[:len(b)-1] })
		}},
		{name: "a byte flipped in a chunk", reason: "corrupt", chunked: true, spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			flipStored(t, e, "c.s1.0", func(b []byte) int { return len(b) / 2 }, 0x20)
		}},
		{name: "a chunk missing", reason: "corrupt", chunked: true, spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			if err := recallKV(t, e).Delete(ctx, "c.s1.0"); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "a chunk of another write", reason: "corrupt", chunked: true, spoil: func(t *testing.T, e *servicetest.Env, d *service.Direct) {
			flipStored(t, e, "c.s1.0", func([]byte) int { return 0 }, 1) // the write's generation
		}},
		{name: "other admission rules", reason: "stale", opts: []service.Option{
			service.Admission(state.Admission{Limits: state.DefaultAdmission().Limits, MaxClockSkew: 1000 * time.Hour})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first []service.Option
			if tc.chunked {
				first = append(first, service.StoreChunked())
			}
			e, scan := storedSession(t, first...)
			if tc.spoil != nil {
				tc.spoil(t, e, direct(t, e))
			}
			b := direct(t, e, tc.opts...)
			sameAnswers(t, tc.name, "s1", scan, b)
			c := b.IndexCounters()
			// Discarded once by the request, and maybe once more by the
			// preload at start.
			if c.Builds != 1 || c.Loads != 0 || c.Discarded[tc.reason] < 1 {
				t.Fatalf("%s: %+v, expected the stored index discarded as %s and rebuilt", tc.name, c, tc.reason)
			}
			b.PersistIndexes(ctx)
			again := direct(t, e, tc.opts...)
			sameAnswers(t, tc.name+", written again", "s1", scan, again)
			if c := again.IndexCounters(); c.Builds != 0 || c.Loads < 1 {
				t.Fatalf("%s, written again: %+v, expected it loaded", tc.name, c)
			}
		})
	}
}

// SeedIndexes stores the indexes of sessions that interleave in the
// stream in one pass: a new instance then loads each (and answers like
// a fresh scan) instead of building it; seeding again writes nothing,
// and a session with a reset is left to its first request.
func TestSeedIndexes(t *testing.T) {
	ctx := context.Background()
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	sessions := []string{"s1", "s2", "s3"}
	for from := 0; from < 64; from += 16 {
		for _, s := range sessions {
			publishWith(t, e, s, from, from+16, queryTexts)
		}
	}
	pubSeq(t, e, e.Layout.Subjects.In("s3", events.KindControl), events.Control{V: 1, Session: "s3", Op: events.OpReset, At: testenv.T0.Add(2 * time.Hour)})
	publishWith(t, e, "s3", 64, 70, queryTexts)
	for _, s := range sessions[:2] {
		e.Settled(s, 64, 10)
	}
	n, err := service.SeedIndexes(ctx, e.JS, e.Layout, e.Store, sessions, e.Log)
	if err != nil || n != 2 {
		t.Fatalf("seeded %d (%v), expected s1 and s2 (s3 was reset)", n, err)
	}
	scan := direct(t, e, service.IndexBytes(0))
	b := direct(t, e, service.IndexBytes(1)) // keeps nothing: each request loads
	for _, s := range sessions[:2] {
		sameAnswers(t, "seeded "+s, s, scan, b)
	}
	if c := b.IndexCounters(); c.Builds != 0 || c.Loads < 2 {
		t.Fatalf("after seeding: %+v, expected s1 and s2 loaded, nothing built", c)
	}
	r := direct(t, e)
	sameAnswers(t, "not seeded (reset) s3", "s3", scan, r)
	if c := r.IndexCounters(); c.Builds != 1 {
		t.Fatalf("s3 after seeding: %+v, expected it built by its first request", c)
	}
	if n, err := service.SeedIndexes(ctx, e.JS, e.Layout, e.Store, sessions[:2], e.Log); err != nil || n != 0 {
		t.Fatalf("seeding again wrote %d (%v), expected nothing (stored and current)", n, err)
	}
}

// SeedIndexes writes as the service's options say: in chunks with
// StoreChunked; a new instance loads the seeded entry.
func TestSeedIndexesChunked(t *testing.T) {
	ctx := context.Background()
	e, scan := settledSession(t)
	n, err := service.SeedIndexes(ctx, e.JS, e.Layout, e.Store, []string{"s1"}, e.Log, service.StoreChunked())
	if err != nil || n != 1 {
		t.Fatalf("seeded %d (%v), expected s1", n, err)
	}
	if _, err := recallKV(t, e).Get(ctx, "c.s1.0"); err != nil {
		t.Fatalf("expected the seeded entry written in chunks: %v", err)
	}
	b := direct(t, e)
	sameAnswers(t, "seeded in chunks", "s1", scan, b)
	if c := b.IndexCounters(); c.Builds != 0 || c.Loads < 1 {
		t.Fatalf("seeded in chunks: %+v, expected it loaded, nothing built", c)
	}
}

// With the store in the server's memory, the index is written to the
// memory bucket <BASE>_RECALL_MEM (not the file bucket) and a new
// instance loads it from there.
func TestStoredIndexInMemoryIsLoadedAfterARestart(t *testing.T) {
	ctx := context.Background()
	e, scan := settledSession(t)
	a := direct(t, e, service.IndexStoreInMemory(true), service.IndexStoreBytes(64<<20))
	sameAnswers(t, "first instance", "s1", scan, a)
	a.PersistIndexes(ctx)
	if c := a.IndexCounters(); c.Builds != 1 || c.Stores != 1 {
		t.Fatalf("first instance: %+v, expected one build and one store", c)
	}
	base := strings.TrimSuffix(e.Layout.Bucket, "_SESSIONS") + "_RECALL"
	kv, err := e.JS.KeyValue(ctx, base+"_MEM")
	if err != nil {
		t.Fatalf("memory bucket: %v", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info := st.(*jetstream.KeyValueBucketStatus).StreamInfo(); info.Config.Storage != jetstream.MemoryStorage || info.State.Msgs == 0 {
		t.Fatalf("memory bucket: storage %v, %d messages; expected the entry in memory storage", info.Config.Storage, info.State.Msgs)
	}
	if _, err := e.JS.KeyValue(ctx, base); err == nil {
		t.Fatal("file bucket created; expected only the memory bucket")
	}

	b := direct(t, e, service.IndexStoreInMemory(true), service.IndexStoreBytes(64<<20))
	sameAnswers(t, "after a restart", "s1", scan, b)
	if c := b.IndexCounters(); c.Builds != 0 || c.Loads < 1 {
		t.Fatalf("after a restart: %+v, expected the stored index loaded, nothing built", c)
	}

	// The bucket is lost (as when the server restarts): the next load
	// fails and builds from the stream, and the bucket is created again
	// for the next write.
	if err := e.JS.DeleteKeyValue(ctx, base+"_MEM"); err != nil {
		t.Fatal(err)
	}
	b.EvictIndexes()
	sameAnswers(t, "bucket lost", "s1", scan, b)
	b.PersistIndexes(ctx)
	if c := b.IndexCounters(); c.Builds != 1 || c.Stores != 1 {
		t.Fatalf("bucket lost: %+v, expected the index built and stored again", c)
	}
	if kv, err := e.JS.KeyValue(ctx, base+"_MEM"); err != nil {
		t.Fatalf("bucket lost: not created again: %v", err)
	} else if _, err := kv.Get(ctx, "m.s1"); err != nil {
		t.Fatalf("bucket lost: the index not stored again: %v", err)
	}
}

// A memory bucket larger than the server lets an account reserve is
// refused: the service still answers (building from the stream), and its
// warning names the flag to lower and the server's limit.
func TestIndexStoreTooLargeForTheServerNamesTheFlag(t *testing.T) {
	ctx := context.Background()
	e, scan := settledSession(t)
	var logs testlog.Buffer
	d, err := service.NewDirect(t, ctx, e.JS, e.Layout, e.Store, zerolog.New(&logs),
		service.IndexStoreInMemory(true), service.IndexStoreBytes(1<<50))
	if err != nil {
		t.Fatal(err)
	}
	sameAnswers(t, "store refused", "s1", scan, d)
	d.PersistIndexes(ctx)
	if c := d.IndexCounters(); c.Stores != 0 {
		t.Fatalf("%+v: expected nothing stored in a bucket the server refused", c)
	}
	out := logs.String()
	if !strings.Contains(out, `"event":"recall_index_store_unavailable"`) || !strings.Contains(out, "--recall-index-store-bytes") || !strings.Contains(out, "max_mem") {
		t.Fatalf("log %q: expected recall_index_store_unavailable naming --recall-index-store-bytes and max_mem", out)
	}
}

// recallKV opens the env's recall index bucket, <BASE>_RECALL.
func recallKV(t *testing.T, e *servicetest.Env) jetstream.KeyValue {
	t.Helper()
	kv, err := e.JS.KeyValue(context.Background(), strings.TrimSuffix(e.Layout.Bucket, "_SESSIONS")+"_RECALL")
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// flipStored xors mask into one byte (at picks it) of the stored value
// of key.
func flipStored(t *testing.T, e *servicetest.Env, key string, at func([]byte) int, mask byte) {
	t.Helper()
	editStored(t, e, key, func(b []byte) []byte { b[at(b)] ^= mask; return b })
}

// editStored replaces the stored value of key with edit's.
func editStored(t *testing.T, e *servicetest.Env, key string, edit func([]byte) []byte) {
	t.Helper()
	ctx, kv := context.Background(), recallKV(t, e)
	v, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key, edit(v.Value())); err != nil {
		t.Fatal(err)
	}
}
