package service

import (
	"sort"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// indexBase is the encoding a turn index was loaded from (index_codec.go):
// the turns and posting lists of its first docs, read where they are when
// a request asks for them (turnIndex.turn, turnIndex.list) and forgotten
// when it is done (turnIndex.forget): between requests a loaded index
// holds its encoding, not what was decoded from it. Its offsets are
// found, and every word, turn and posting list checked, when it is
// decoded: reading from it cannot fail afterwards. Its bytes never change
// (the turns' and terms' strings read from it are slices of them, but
// for texts of more than one word).
type indexBase struct {
	b       []byte
	s       string // b as a string
	session string
	// docs is how many docs of the index are the base's; turnAt.at(i)
	// is where doc i's turn starts, turnAt.at(docs) where the last one
	// ends.
	docs   int
	turnAt offsets
	// wordAt.at(i) is where the i-th word starts, at(len-1) where the
	// last one ends.
	wordAt offsets
	// termAt.at(i) is where the i-th term's entry (the term, its
	// postings) starts, terms in increasing order; at(len-1) is where
	// the last one ends.
	termAt offsets
	// held is the memory b keeps alive when it is a slice of a message
	// read from the store rather than a copy (decodeReplayOwned), else 0.
	held int64
	// decoded are the docs whose turns were read since the index was
	// last forgotten, decodedBytes their estimated size.
	decoded      []int32
	decodedBytes int64
}

// bytes is the memory the base holds between requests: its encoding (or
// the message it is part of) and offsets.
func (b *indexBase) bytes() int64 {
	return max(int64(len(b.b)), b.held) + b.turnAt.bytes() + b.wordAt.bytes() + b.termAt.bytes()
}

// offsets are increasing positions in a base's encoding, in 2 bytes each
// where they can be: a position is its block's first (every offsetBlock)
// plus a 16-bit step. A table with a block that spans 64 KB or more (a
// very long turn or posting list) keeps them whole.
type offsets struct {
	first []uint32
	step  []uint16
	whole []uint32 // all of them, when a block does not fit (step nil)
}

// offsetBlock is how many offsets share a block's first position.
const offsetBlock = 64

// packOffsets packs at.
func packOffsets(at []uint32) offsets {
	o := offsets{first: make([]uint32, (len(at)+offsetBlock-1)/offsetBlock), step: make([]uint16, len(at))}
	for i, a := range at {
		k := i / offsetBlock
		if i%offsetBlock == 0 {
			o.first[k] = a
		}
		if a-o.first[k] > 1<<16-1 {
			return offsets{whole: at}
		}
		o.step[i] = uint16(a - o.first[k])
	}
	return o
}

// at is the i-th offset.
func (o *offsets) at(i int) uint32 {
	if o.whole != nil {
		return o.whole[i]
	}
	return o.first[i/offsetBlock] + uint32(o.step[i])
}

// len is how many offsets o holds.
func (o *offsets) len() int { return max(len(o.whole), len(o.step)) }

// bytes is o's memory.
func (o *offsets) bytes() int64 { return int64(4*cap(o.whole) + 4*cap(o.first) + 2*cap(o.step)) }

// reader reads the base's encoding from off.
func (b *indexBase) reader(off uint32) indexReader {
	return indexReader{b: b.b, s: b.s, off: int(off)}
}

// turn decodes doc d's turn.
func (b *indexBase) turn(d int) *events.Turn {
	r := b.reader(b.turnAt.at(d))
	t := new(events.Turn)
	r.turn(t, b)
	return t
}

// turnBytes are docs [from, to)'s turns as encoded.
func (b *indexBase) turnBytes(from, to int) []byte { return b.b[b.turnAt.at(from):b.turnAt.at(to)] }

// words is how many words the base holds.
func (b *indexBase) words() int { return b.wordAt.len() - 1 }

// word is the i-th word.
func (b *indexBase) word(i int) string {
	off := int(b.wordAt.at(i))
	if n := int(b.b[off]); n < 0x80 { // the common case: a short word
		return b.s[off+1 : off+1+n]
	}
	r := b.reader(uint32(off))
	return r.str()
}

// turnID is doc d's turn_id, without decoding the rest of the turn.
func (b *indexBase) turnID(d int) string {
	r := b.reader(b.turnAt.at(d))
	r.uv() // V
	return r.str()
}

// speaker is doc d's speaker, without decoding the rest of the turn.
func (b *indexBase) speaker(d int) string {
	r := b.reader(b.turnAt.at(d))
	r.int()  // V
	r.skip() // turn_id
	r.time()
	return b.word(r.int())
}

// terms is how many terms the base holds.
func (b *indexBase) terms() int { return b.termAt.len() - 1 }

// term is the i-th term.
func (b *indexBase) term(i int) string {
	r := b.reader(b.termAt.at(i))
	return r.str()
}

// entry is the i-th term's entry as encoded.
func (b *indexBase) entry(i int) []byte { return b.b[b.termAt.at(i):b.termAt.at(i+1)] }

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
	r := b.reader(b.termAt.at(i))
	r.str()
	pl := make([]posting, r.int())
	var doc int32
	for j := range pl {
		d, tf := r.posting()
		doc += int32(d)
		pl[j] = posting{doc: doc, tf: int32(tf)}
	}
	return pl, true
}

// count is how many postings the i-th term has.
func (b *indexBase) count(i int) int {
	r := b.reader(b.termAt.at(i))
	r.str()
	return r.int()
}

// readTurn decodes doc d's turn from base and keeps it until the index is
// forgotten.
func (x *turnIndex) readTurn(d int) *events.Turn {
	b := x.base
	t := b.turn(d)
	x.fillTurns()
	x.turns[d] = t
	b.decoded = append(b.decoded, int32(d))
	n := int64(turnBytes + len(t.Text))
	b.decodedBytes += n
	x.bytes += n
	return t
}

// forget drops what was decoded from base since the last forget: the
// turns, and the posting lists no turn was added to since. A request
// reads a few hundred turns and the postings of a few dozen terms, and
// decodes them again faster than a load reads them; kept, they would
// soon take more memory than the encoding, and the budget would hold
// fewer sessions.
func (x *turnIndex) forget() {
	b := x.base
	if b == nil {
		return
	}
	if x.docs.n() == b.docs {
		x.bytes -= 8 * int64(len(x.turns))
		x.turns = nil // none added since the load
	} else {
		for _, d := range b.decoded {
			x.turns[d] = nil
		}
	}
	b.decoded = nil
	x.bytes -= b.decodedBytes
	b.decodedBytes = 0
	for term, pl := range x.postings {
		if i, ok := b.find(term); ok && b.count(i) == len(pl) {
			delete(x.postings, term)
			x.bytes -= termBytes + int64(len(term)) + postingBytes*int64(len(pl))
		}
	}
	if len(x.postings) == 0 {
		// A map keeps the room its deleted entries took: a new one holds
		// nothing between requests.
		x.postings = map[string][]posting{}
	}
}

// dropViews forgets the docs' views (index_view.go): they are made again
// when a request asks for them.
func (x *turnIndex) dropViews() {
	x.bytes -= x.views.bytes
	x.views = docViews{}
}

// seenIDs is the set of the hashes of the indexed turns' turn_ids (a
// replay's dedup set: every distinct turn is indexed once).
func (x *turnIndex) seenIDs() map[uint64]struct{} {
	seen := make(map[uint64]struct{}, x.docs.n())
	for d := range x.docs.n() {
		id := ""
		if d < len(x.turns) && x.turns[d] != nil {
			id = x.turns[d].TurnID
		} else {
			id = x.base.turnID(d)
		}
		seen[state.HashID(id)] = struct{}{}
	}
	return seen
}

// fillTurns gives turns a slot for every doc (a loaded index holds none
// until a turn is read or added: turn, add).
func (x *turnIndex) fillTurns() {
	if len(x.turns) < x.docs.n() {
		x.bytes += 8 * int64(x.docs.n()-len(x.turns))
		x.turns = append(x.turns, make([]*events.Turn, x.docs.n()-len(x.turns))...)
	}
}
