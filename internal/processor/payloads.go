package processor

import (
	"slices"
	"unsafe"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// payloads are the events of a session's unfolded turns and pending notes
// seen by this owner, in stream order: a fold reads its batch from here
// instead of one direct get per turn. A turn is kept as the event loop
// decoded and validated it, so a fold does not decode it again (that
// re-decode was about half of a fold's own CPU, cmd/bench); a note as its
// raw event. A slice, not a map: events arrive in sequence order and a
// fold takes the oldest, so appending and filtering beat hashing every
// turn in and out. Absent after a reload or once packed; capped at
// maxPayloads (a backlog reads the stream).
type payloads []payload

// payload is one kept event: turn for a turn, data for a note. A decoded
// turn is never changed once kept: folds read it from their own
// goroutines.
type payload struct {
	seq  uint64
	data []byte
	turn *events.Turn
}

// heapSize is roughly what p keeps on the heap.
func (p payload) heapSize() int {
	if t := p.turn; t != nil {
		return int(unsafe.Sizeof(*t)) + len(t.Session) + len(t.TurnID) + len(t.Speaker) + len(t.Role) + len(t.Text) + len(t.Kind) + len(t.Tool)
	}
	return cap(p.data) + 48 // the message around the payload
}

// maxPayloads caps the remembered payloads of one session.
const maxPayloads = 1024

func (ps *payloads) add(seq uint64, data []byte) {
	if len(*ps) < maxPayloads {
		*ps = append(*ps, payload{seq: seq, data: data})
	}
}

// addTurn keeps a decoded turn; t must not be changed afterwards.
func (ps *payloads) addTurn(seq uint64, t *events.Turn) {
	if len(*ps) < maxPayloads {
		*ps = append(*ps, payload{seq: seq, turn: t})
	}
}

// at returns what was kept at seq.
func (ps payloads) at(seq uint64) (payload, bool) {
	i, ok := slices.BinarySearchFunc(ps, seq, func(p payload, seq uint64) int { return cmpSeq(p.seq, seq) })
	if !ok {
		return payload{}, false
	}
	return ps[i], true
}

// get returns the raw event kept at seq, nil if none was (or the event was
// kept decoded).
func (ps payloads) get(seq uint64) []byte {
	p, _ := ps.at(seq)
	return p.data
}

// of returns the payloads kept for the given turns and notes (a fold's
// batch), nil if none.
func (ps payloads) of(turns []state.TurnRef, notes []state.NoteRef) payloads {
	var out payloads
	for _, r := range turns {
		if p, ok := ps.at(r.Seq); ok {
			out = append(out, p)
		}
	}
	for _, r := range notes {
		if p, ok := ps.at(r.Seq); ok {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b payload) int { return cmpSeq(a.seq, b.seq) })
	return out
}

// drop forgets the payloads of the given turns and notes (folded, evicted).
func (ps *payloads) drop(turns []state.TurnRef, notes []state.NoteRef) {
	gone := func(seq uint64) bool {
		_, t := slices.BinarySearchFunc(turns, seq, func(r state.TurnRef, seq uint64) int { return cmpSeq(r.Seq, seq) })
		if t {
			return true
		}
		_, n := slices.BinarySearchFunc(notes, seq, func(r state.NoteRef, seq uint64) int { return cmpSeq(r.Seq, seq) })
		return n
	}
	*ps = slices.DeleteFunc(*ps, func(p payload) bool { return gone(p.seq) })
	if len(*ps) == 0 {
		*ps = nil
	}
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
