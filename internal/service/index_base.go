package service

import (
	"sort"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// indexBase is the encoding a turn index was loaded from (index_codec.go):
// the turns and posting lists of its first docs, read where they are when
// a request first asks for them (turnIndex.turn, turnIndex.list). Its
// offsets are found, and every turn and posting list checked, when it is
// decoded: reading from it cannot fail afterwards. Its bytes never change
// (the turns' and terms' strings read from it are slices of them).
type indexBase struct {
	b       []byte
	s       string // b as a string
	session string
	// docs is how many docs of the index are the base's; turnAt[i] is
	// where doc i's turn starts, turnAt[docs] where the last one ends.
	docs   int
	turnAt []uint32
	// termAt[i] is where the i-th term's entry (the term, its postings)
	// starts, terms in increasing order; termAt[len-1] is where the last
	// one ends.
	termAt []uint32
}

// reader reads the base's encoding from off.
func (b *indexBase) reader(off uint32) indexReader {
	return indexReader{b: b.b, s: b.s, off: int(off)}
}

// turn decodes doc d's turn.
func (b *indexBase) turn(d int) *events.Turn {
	r := b.reader(b.turnAt[d])
	t := new(events.Turn)
	r.turn(t, b.session)
	return t
}

// turnBytes is doc d's turn as encoded.
func (b *indexBase) turnBytes(d int) []byte { return b.b[b.turnAt[d]:b.turnAt[d+1]] }

// turnID is doc d's turn_id, without decoding the rest of the turn.
func (b *indexBase) turnID(d int) string {
	r := b.reader(b.turnAt[d])
	r.uv() // V
	return r.str()
}

// terms is how many terms the base holds.
func (b *indexBase) terms() int { return len(b.termAt) - 1 }

// term is the i-th term.
func (b *indexBase) term(i int) string {
	r := b.reader(b.termAt[i])
	return r.str()
}

// entry is the i-th term's entry as encoded.
func (b *indexBase) entry(i int) []byte { return b.b[b.termAt[i]:b.termAt[i+1]] }

// find is the index of term, if the base holds it.
func (b *indexBase) find(term string) (int, bool) {
	i := sort.Search(b.terms(), func(i int) bool { return b.term(i) >= term })
	return i, i < b.terms() && b.term(i) == term
}

// postings decodes term's posting list, if the base holds the term: a new
// slice, which the caller may append to.
func (b *indexBase) postings(term string) ([]posting, bool) {
	i, ok := b.find(term)
	if !ok {
		return nil, false
	}
	r := b.reader(b.termAt[i])
	r.str()
	pl := make([]posting, r.int())
	var doc int32
	for j := range pl {
		doc += int32(r.uv())
		pl[j] = posting{doc: doc, tf: int32(r.uv())}
	}
	return pl, true
}

// seenIDs is the set of the hashes of the indexed turns' turn_ids (a
// replay's dedup set: every distinct turn is indexed once).
func (x *turnIndex) seenIDs() map[uint64]struct{} {
	seen := make(map[uint64]struct{}, len(x.docs))
	for d, t := range x.turns {
		id := ""
		if t != nil {
			id = t.TurnID
		} else {
			id = x.base.turnID(d)
		}
		seen[state.HashID(id)] = struct{}{}
	}
	return seen
}
