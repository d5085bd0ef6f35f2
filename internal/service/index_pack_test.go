package service_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/service/servicetest"
)

// Once the budget is full, the least recently used sessions are kept
// packed rather than evicted: a budget that holds four sessions packed
// but only one of them decoded keeps all four, answers like a scan, and
// loads or builds none of them again.
func TestIndexKeepsSessionsPackedBeforeEvicting(t *testing.T) {
	ctx := context.Background()
	e, scan, sessions, total, packed := fourStoredSessions(t)
	if packed <= 0 || packed >= total/2 {
		t.Fatalf("four sessions: %d bytes, %d of them packed", total, packed)
	}
	decoded := (total - packed) / int64(len(sessions))
	budget := packed + decoded + decoded/2 // all packed, one decoded

	small := direct(t, e, service.IndexBytes(budget))
	small.WaitPreloaded(t)
	var first service.IndexCounters
	for round := range 3 {
		for _, s := range sessions {
			sameAnswers(t, fmt.Sprintf("round %d session %s", round, s), s, scan, small)
			if b := small.IndexBytes(); b > budget {
				t.Fatalf("index holds %d bytes, budget %d", b, budget)
			}
			if round == 0 {
				small.PersistIndexes(ctx) // packs it, as the writer does
			}
		}
		if round == 0 {
			first = small.IndexCounters()
		}
	}
	c := small.IndexCounters()
	if c.Builds != 0 || c.Loads != first.Loads || c.Unpacked < first.Unpacked+float64(2*len(sessions)-2) {
		t.Fatalf("after three rounds: %+v (after the first: %+v), expected nothing loaded or built again, packed indexes decoded", c, first)
	}
	if n, p := small.IndexedSessions(), small.PackedSessions(); n != len(sessions) || p < len(sessions)/2 {
		t.Fatalf("%d sessions kept, %d of them packed; want all kept, most packed", n, p)
	}
}

// A packed index is decoded and extended with the events stored since
// it was packed; one that cannot be decoded is never served: the index
// is loaded from the store again.
func TestPackedIndexIsExtendedOrLoadedAgain(t *testing.T) {
	ctx := context.Background()
	e, scan := storedSession(t)
	b := direct(t, e)
	sameAnswers(t, "loaded", "s1", scan, b)
	b.PersistIndexes(ctx)
	b.DemoteIndexes()
	if b.PackedSessions() != 1 {
		t.Fatalf("%d sessions packed, expected s1", b.PackedSessions())
	}
	sameAnswers(t, "packed", "s1", scan, b)
	loads := b.IndexCounters().Loads
	if c := b.IndexCounters(); c.Unpacked != 1 || c.Builds != 0 {
		t.Fatalf("packed: %+v, expected it decoded once, nothing built", c)
	}

	// The stream moves on while it is packed: decoded, then extended.
	b.DemoteIndexes()
	publishWith(t, e, "s1", 64, 90, map[int]string{70: "Who brings the tournament form to Lisbon?"})
	e.Settled("s1", 90, 30)
	sameAnswers(t, "packed, behind the stream", "s1", scan, b)
	if c := b.IndexCounters(); c.Unpacked != 2 || c.Loads != loads || c.Builds != 0 {
		t.Fatalf("behind the stream: %+v, expected it decoded and extended", c)
	}

	// Damaged: loaded from the store instead.
	b.PersistIndexes(ctx)
	b.DemoteIndexes()
	if !b.DamagePacked("s1") {
		t.Fatal("s1 has no packed index")
	}
	sameAnswers(t, "packed, damaged", "s1", scan, b)
	if c := b.IndexCounters(); c.Unpacked != 2 || c.Loads != loads+1 || c.Builds != 0 {
		t.Fatalf("damaged: %+v, expected it loaded from the store", c)
	}
}

// The preload at start keeps packed the indexes it loaded first once the
// decoded ones fill its share of the budget: it loads more sessions than
// fit decoded, and their first requests load nothing.
func TestPreloadKeepsSessionsPacked(t *testing.T) {
	e, scan, sessions, total, packed := fourStoredSessions(t)
	decoded := (total - packed) / int64(len(sessions))
	if packed <= 0 || decoded <= packed/2 {
		t.Fatalf("four sessions: %d bytes, %d of them packed", total, packed)
	}
	// The preload fills 3/4 of it: all four packed and one decoded, not
	// two decoded.
	budget := (packed + decoded + decoded/4) * 4 / 3

	b := direct(t, e, service.IndexBytes(budget))
	b.WaitPreloaded(t)
	if c, n, p := b.IndexCounters(), b.IndexedSessions(), b.PackedSessions(); c.Preloaded != float64(len(sessions)) || n != len(sessions) || p < len(sessions)-2 {
		t.Fatalf("after the preload: %+v, %d sessions in memory, %d packed; expected all four preloaded, most packed", c, n, p)
	}
	for _, s := range sessions {
		sameAnswers(t, "preloaded "+s, s, scan, b)
		if got := b.IndexBytes(); got > budget {
			t.Fatalf("index holds %d bytes, budget %d", got, budget)
		}
	}
	if c := b.IndexCounters(); c.Builds != 0 || c.Loads != float64(len(sessions)) || c.Unpacked < float64(len(sessions)-2) {
		t.Fatalf("asked after the preload: %+v, expected nothing loaded again, the packed ones decoded", c)
	}
}

// fourStoredSessions publishes and settles four sessions of 64 turns, and
// has a first instance answer each (as scan does: scan is returned) and
// store and pack them all; total and packed are that instance's index
// bytes, and those of them packed.
func fourStoredSessions(t *testing.T) (e *servicetest.Env, scan *service.Direct, sessions []string, total, packed int64) {
	t.Helper()
	e = servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	sessions = []string{"a1", "a2", "a3", "a4"}
	for _, s := range sessions {
		publishWith(t, e, s, 0, 64, queryTexts)
	}
	for _, s := range sessions {
		e.Settled(s, 64, 10)
	}
	scan = direct(t, e, service.IndexBytes(0))
	one := direct(t, e)
	for _, s := range sessions {
		sameAnswers(t, "first instance "+s, s, scan, one)
	}
	one.PersistIndexes(context.Background())
	return e, scan, sessions, one.IndexBytes(), one.PackedBytes()
}

// A request to a session held packed only, asked after a pause, decodes
// it for itself and leaves it packed: it answers as its index decoded
// does, and no session is packed, evicted, loaded or built for it, nor
// the index's bytes changed. Asked again soon, it is kept decoded.
func TestPackedHitLeavesSessionsPacked(t *testing.T) {
	ctx := context.Background()
	e, scan, sessions, _, _ := fourStoredSessions(t)
	b := direct(t, e)
	b.WaitPreloaded(t)
	for _, s := range sessions {
		sameAnswers(t, "loaded "+s, s, scan, b)
	}
	b.PersistIndexes(ctx)
	b.DemoteIndexes()
	if p := b.PackedSessions(); p != len(sessions) {
		t.Fatalf("%d sessions packed, want all %d", p, len(sessions))
	}
	before, bytes := b.IndexCounters(), b.IndexBytes()
	b.PromoteWithin(0) // every request comes after a pause
	for round := range 2 {
		for _, s := range sessions {
			sameAnswers(t, fmt.Sprintf("round %d, packed %s", round, s), s, scan, b)
			if p, got := b.PackedSessions(), b.IndexBytes(); p != len(sessions) || got != bytes {
				t.Fatalf("round %d, after %s: %d sessions packed, %d bytes; want all %d packed, %d bytes", round, s, p, got, len(sessions), bytes)
			}
		}
	}
	c := b.IndexCounters()
	if c.Loads != before.Loads || c.Builds != before.Builds || c.Unpacked <= before.Unpacked || b.IndexedSessions() != len(sessions) {
		t.Fatalf("after the packed hits: %+v (before: %+v), expected them decoded, nothing loaded, built or evicted", c, before)
	}
	b.PromoteWithin(time.Hour) // asked again soon
	sameAnswers(t, "asked again soon", sessions[0], scan, b)
	if p := b.PackedSessions(); p != len(sessions)-1 {
		t.Fatalf("asked again soon: %d sessions packed, want %d (it kept decoded)", p, len(sessions)-1)
	}
	if got := b.IndexBytes(); got <= bytes {
		t.Fatalf("asked again soon: %d bytes, want more than the %d held packed", got, bytes)
	}
}
