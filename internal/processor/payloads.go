package processor

import (
	"slices"

	"github.com/foldstream/foldstream/internal/state"
)

// payloads are the raw events of a session's unfolded turns and pending
// notes seen by this owner, in stream order: a fold reads its batch from
// here instead of one direct get per turn. A slice, not a map: events
// arrive in sequence order and a fold takes the oldest, so appending and
// filtering beat hashing every turn in and out. Absent after a reload or
// once packed; capped at maxPayloads (a backlog reads the stream).
type payloads []payload

type payload struct {
	seq  uint64
	data []byte
}

// maxPayloads caps the remembered payloads of one session.
const maxPayloads = 1024

func (ps *payloads) add(seq uint64, data []byte) {
	if len(*ps) < maxPayloads {
		*ps = append(*ps, payload{seq: seq, data: data})
	}
}

// get returns the payload at seq, nil if it was not kept.
func (ps payloads) get(seq uint64) []byte {
	i, ok := slices.BinarySearchFunc(ps, seq, func(p payload, seq uint64) int { return cmpSeq(p.seq, seq) })
	if !ok {
		return nil
	}
	return ps[i].data
}

// of returns the payloads kept for the given turns and notes (a fold's
// batch), nil if none.
func (ps payloads) of(turns []state.TurnRef, notes []state.NoteRef) payloads {
	var out payloads
	for _, r := range turns {
		if data := ps.get(r.Seq); data != nil {
			out = append(out, payload{r.Seq, data})
		}
	}
	for _, r := range notes {
		if data := ps.get(r.Seq); data != nil {
			out = append(out, payload{r.Seq, data})
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
