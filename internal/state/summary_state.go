package state

import (
	"bytes"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/s2"
)

// The summarizer's state in the checkpoint.
//
// A backend's state (Session.SummaryState; the offline summarizer's
// statements, periods and word counts, up to 16 KiB of JSON) is rewritten
// with every checkpoint of its session (compressed once per state: the
// processor keeps its stored form, StateText), and the KV stream's cost of a
// write grows with its bytes: at 1,000 sessions a checkpoint carrying a
// 13.5 KiB state cost ~150 µs of process CPU against ~40 µs without one,
// most of it the server storing the value and reading the subject's last
// one back for the compare-and-set. So Encode stores a state of
// compressMin bytes or more s2-compressed (the offline state shrinks
// ~1.8×; compressing costs ~20 µs, against ~70 µs saved a write), behind
// stateMagic, right after the checkpoint's JSON rather than in it (base64
// would add a third to its bytes), and Decode expands it: in memory, to
// the summarizer, the inspector and replay, SummaryState is always the
// backend's own bytes. A smaller state is its bytes in the JSON's
// summary_state, in base64, as a state of any size was before.
//
// stateMagic starts with a NUL byte, which no backend's state has begun
// with (the offline summarizer's is JSON) and JSON text never holds, so
// the first NUL of a checkpoint is where its JSON ends (splitTail); a
// state that does begin with the magic is always stored compressed, so
// that it reads back as itself.
var stateMagic = []byte("\x00fs\x00")

const (
	// compressMin: smaller states are stored as they are (compressing
	// them saves too few bytes to pay for itself).
	compressMin = 512
	// maxStateExpanded bounds what a stored state may expand to: no
	// checkpoint value can make Decode allocate more. Larger states are
	// stored as they are.
	maxStateExpanded = 16 << 20
)

// statePool holds scratch for a compressed state (storedState).
var statePool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// StateText is a summarizer state as a checkpoint stores it (storedState),
// kept for the next checkpoint of the same state (EncodeReusing). A state
// changes only when a fold lands, while its session may be checkpointed
// several times in between (every flush that covers new turns, the lease
// of the next fold): compressing a 13 KiB offline state costs ~20 µs a
// write. It holds the stored bytes (~6 KiB for that state) while its
// session is live, on top of the state itself; the processor drops it when
// it packs an idle session (idle.go: the packed form holds the same stored
// bytes, PackReusing) and makes it again from them when it unpacks the
// session (UnpackReusing). The zero value holds nothing. It is not safe
// for concurrent use.
type StateText struct {
	// Of which state stored is the stored form: its bytes' address and
	// length, and their hash, so that a state changed in place is not
	// taken for the one encoded (the address is not kept as a pointer: it
	// would keep a replaced state's bytes alive).
	addr   uintptr
	n      int
	sum    uint64
	stored []byte
}

// stateSeed keys StateText's hashes (the process's own).
var stateSeed = maphash.MakeSeed()

// of returns raw's stored form (storedState), made unless it is the one
// held. It is valid until the next call.
func (t *StateText) of(raw []byte) []byte {
	addr, sum := uintptr(unsafe.Pointer(unsafe.SliceData(raw))), maphash.Bytes(stateSeed, raw)
	if t.stored != nil && t.addr == addr && t.n == len(raw) && t.sum == sum {
		return t.stored
	}
	sp := statePool.Get().(*[]byte)
	t.keep(storedState(sp, raw))
	statePool.Put(sp)
	t.addr, t.n, t.sum = addr, len(raw), sum
	return t.stored
}

// StoredText is raw's stored form (storedState) made now: a fold's new state,
// prepared on the fold's goroutine so that the loop that checkpoints its
// session finds it made (EncodeReusing) rather than compressing it there.
func StoredText(raw []byte) *StateText {
	t := new(StateText)
	t.of(raw)
	return t
}

// keep copies stored into t's own bytes.
func (t *StateText) keep(stored []byte) {
	if cap(t.stored) < len(stored) || cap(t.stored) > 2*len(stored) {
		t.stored = make([]byte, 0, len(stored))
	}
	t.stored = append(t.stored[:0], stored...)
}

// set makes t hold raw's stored form (storedState), stored.
func (t *StateText) set(raw, stored []byte) {
	t.keep(stored)
	t.addr, t.n, t.sum = uintptr(unsafe.Pointer(unsafe.SliceData(raw))), len(raw), maphash.Bytes(stateSeed, raw)
}

// storedState is the state as Encode stores it: stateMagic and the s2
// block of raw when that is shorter than raw (or raw begins with the
// magic), else raw itself. A compressed state is written in *scratch
// (grown if needed), valid until its next use.
func storedState(scratch *[]byte, raw []byte) []byte {
	magic := bytes.HasPrefix(raw, stateMagic)
	if (len(raw) < compressMin && !magic) || len(raw) > maxStateExpanded {
		return raw
	}
	n := len(stateMagic) + s2.MaxEncodedLen(len(raw))
	if cap(*scratch) < n {
		*scratch = make([]byte, 0, n)
	}
	out := append((*scratch)[:0], stateMagic...)
	out = out[:len(out)+len(s2.Encode(out[len(out):n], raw))]
	if len(out) >= len(raw) && !magic {
		return raw
	}
	return out
}

// expandState undoes storedState. A block that expands to nothing is an
// error: storedState never compresses an empty state, and an empty state
// written back is no state at all, so it would not read back the same.
func expandState(stored []byte) ([]byte, error) {
	if !bytes.HasPrefix(stored, stateMagic) {
		return stored, nil
	}
	block := stored[len(stateMagic):]
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("summary_state: compressed block: %w", err)
	}
	if n == 0 {
		return nil, errors.New("summary_state: compressed block expands to 0 bytes, expected a state")
	}
	if n > maxStateExpanded {
		return nil, fmt.Errorf("summary_state: expands to %d bytes, expected at most %d", n, maxStateExpanded)
	}
	raw, err := s2.Decode(make([]byte, n), block)
	if err != nil {
		return nil, fmt.Errorf("summary_state: compressed block: %w", err)
	}
	return raw, nil
}
