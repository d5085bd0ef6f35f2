package processor

import (
	"runtime/debug"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/foldstream/foldstream/internal/state"
	"github.com/rs/zerolog"
)

// The compact idle form: a session's state lives in KV, not in RAM.
//
// A session that has been quiet for IdleCompact (nothing unwritten, no
// write or fold in flight, nothing waiting for an ack) is exactly its last
// checkpoint. Its shard then keeps it packed (state.Pack: a few hundred
// bytes, and the summarizer's state compressed as the checkpoint stores it:
// ~6 KiB for the offline summarizer's 13 KiB) instead of the decoded
// Session, and drops the turn payloads it cached for its next fold; that
// fold reads its batch from the stream instead (a direct get per turn, all
// sent at once: foldRunner.readMissing).
// The next event or wake of the session unpacks it (inflate,
// BenchmarkUnpack in internal/state) without a KV read; IdleEvict later
// drops it from memory entirely.
//
// Invariant: a packed session (ls.s == nil) is quiet, and stays so until
// it is inflated: everything that changes a session reaches it through
// shard.handle or shard.withSession, which inflate. Code that reads a
// session found in shard.sessions otherwise must inflate it first or not
// need ls.s.

// quiet reports whether nothing of ls is pending or in flight: no change
// to write, no checkpoint write, no unacknowledged message, no fold (lease,
// running, landing), no wait and no held event.
func (ls *live) quiet() bool {
	return !ls.dirty && !ls.writing && !ls.landing && len(ls.acks) == 0 && ls.cancel == nil && ls.running == "" &&
		ls.wait == nil && (ls.s == nil || ls.s.Lease == nil)
}

// compactIdle packs every session quiet and untouched for IdleCompact; it
// runs at every sweep (250 ms).
// Must be called on the loop.
func (sh *shard) compactIdle() {
	if sh.idleCompact < 0 {
		return
	}
	now := sh.clock.Now()
	freed := 0
	for id, ls := range sh.sessions {
		if ls.s == nil || !ls.quiet() || now.Sub(ls.touched) < sh.idleCompact {
			continue
		}
		freed += sh.compact(id, ls)
	}
	if freed > 0 {
		sh.mem.compacted(now, freed)
	}
	if sh.mem.due(now) {
		go sh.mem.release(sh.clock, sh.m, sh.log)
	}
}

// compact packs ls and returns an estimate of the heap it frees.
func (sh *shard) compact(id string, ls *live) int {
	buf, err := ls.s.PackReusing(sh.packBuf[:0], ls.text)
	if err != nil {
		sh.log.Warn().Err(err).Str("event", "session_pack_failed").Str("session", id).Msg("idle session kept unpacked")
		return 0
	}
	sh.packBuf = buf
	freed := heapEstimate(ls) - len(buf)
	ls.packed = append([]byte(nil), buf...) // exactly its size, not the scratch buffer's
	ls.s, ls.payloads, ls.acks, ls.text = nil, nil, nil, nil
	sh.nPacked++
	sh.m.packedSess.Inc()
	return freed
}

// inflate unpacks a packed session; false if its packed form does not
// unpack (a bug), in which case the session is dropped from memory and the
// caller reloads it from its checkpoint, which holds the same state.
// Must be called on the loop.
func (sh *shard) inflate(id string, ls *live) bool {
	if ls.s != nil {
		return true
	}
	text := new(state.StateText)
	s, err := state.UnpackReusing(id, ls.packed, text)
	sh.nPacked--
	sh.m.packedSess.Dec()
	if err != nil {
		sh.log.Error().Err(err).Str("event", "session_unpack_failed").Str("session", id).Msg("reloading the session from its checkpoint")
		delete(sh.sessions, id)
		sh.m.liveSess.Dec()
		return false
	}
	ls.s, ls.packed = s, nil
	if len(s.SummaryState) > 0 {
		ls.text = text // its next checkpoint stores the packed state as it is
	}
	sh.m.unpacked.Inc()
	return true
}

// forget drops a session from memory (evictIdle); its state is in KV.
// Must be called on the loop.
func (sh *shard) forget(id string, ls *live) {
	if ls.s == nil {
		sh.nPacked--
		sh.m.packedSess.Dec()
	}
	delete(sh.sessions, id)
	sh.co.forget(id)
	sh.m.liveSess.Dec()
}

// heapEstimate is roughly what an unpacked session holds on the heap: the
// decoded state and its slices (the summarizer's state among them), and the
// cached payloads (a decoded turn, or a note's message buffer).
func heapEstimate(ls *live) int {
	s := ls.s
	n := int(unsafe.Sizeof(*s)) + len(s.Summary) + cap(s.Turns)*int(unsafe.Sizeof(state.TurnRef{})) +
		cap(s.PendingNotes)*int(unsafe.Sizeof(state.NoteRef{})) + (cap(s.RecentIDs)+cap(s.MemoryIDs))*8 + cap(s.SummaryState)
	n += cap(ls.payloads) * int(unsafe.Sizeof(payload{}))
	for _, p := range ls.payloads {
		n += p.heapSize()
	}
	return n
}

// Returning freed memory to the OS.
//
// The Go runtime frees heap lazily: after a burst of sessions goes idle and
// is packed, the decoded sessions, their payloads and the burst's message
// buffers are garbage, but nothing collects them until the process
// allocates again (an idle processor hardly does; the runtime forces a GC
// only every 2 minutes), and the scavenger then returns the pages to the
// OS gradually. RSS would stay near the burst's peak for minutes while the
// live heap is a fraction of it (cmd/bench's memory section: ~1,150 B of
// RSS per packed session with the release, 6,705 B in a run where most of
// the freed heap was not released; docs/benchmarks.md). So once a wave of
// packing is over (a sweep with no session packed, in any shard) and the
// packing since the last release freed at least releaseMinBytes by
// estimate, the processor calls debug.FreeOSMemory: one GC of the now
// small live heap and an immediate scavenge, on its own goroutine (the
// shards go on), tens of milliseconds for 10,000 sessions. Its cost is bounded instead of its rate: the next
// release waits at least releaseCostFactor times as long as the last one
// took (and releaseMinGap), so releases never take more than ~1% of one
// core, even under churn. A fixed interval and a high threshold would
// either allow more than that on a large heap or hold a second wave back:
// with 30 s and 16 MiB, a stall in the middle of an ingest burst let most
// sessions be packed and released, and the rest, packed when the burst
// went on, stayed resident.
//
// A memory limit (GOMEMLIMIT, debug.SetMemoryLimit) would not do this: it
// only makes the GC work harder as the heap approaches the limit, and an
// idle process triggers no GC at all.
const (
	releaseMinBytes   = 4 << 20
	releaseQuiet      = 250 * time.Millisecond // one sweep
	releaseMinGap     = time.Second
	releaseCostFactor = 100
)

// memRelease is shared by the engines of one process (Shared).
type memRelease struct {
	pending     atomic.Int64 // heap freed by packing since the last release, estimated
	lastCompact atomic.Int64 // unix nanoseconds
	lastRelease atomic.Int64
	lastCost    atomic.Int64 // how long the last release took, nanoseconds
	running     atomic.Bool
}

func (m *memRelease) compacted(now time.Time, freed int) {
	m.pending.Add(int64(freed))
	m.lastCompact.Store(now.UnixNano())
}

// due reports whether a release should run now, and if so claims it.
func (m *memRelease) due(now time.Time) bool {
	t := now.UnixNano()
	gap := max(int64(releaseMinGap), releaseCostFactor*m.lastCost.Load())
	if m.pending.Load() < releaseMinBytes || t-m.lastCompact.Load() < int64(releaseQuiet) ||
		t-m.lastRelease.Load() < gap || !m.running.CompareAndSwap(false, true) {
		return false
	}
	m.lastRelease.Store(t)
	return true
}

func (m *memRelease) release(clock Clock, met *metrics, log zerolog.Logger) {
	defer m.running.Store(false)
	freed := m.pending.Swap(0)
	start := clock.Now()
	debug.FreeOSMemory()
	took := clock.Now().Sub(start)
	m.lastCost.Store(int64(took))
	met.memReleases.Inc()
	log.Info().Str("event", "memory_released").Int64("compacted_bytes", freed).
		Dur("took", took).Msg("returned the heap freed by packing idle sessions to the OS")
}
