package offline

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

const maxVocab = 256 // words kept after a prune

// wordCounts counts how many statements said each word (stemmed) so far: a word said again and again is a subject of
// the conversation, which later questions ask about. Kept in the state as "term:count" pairs, a term said once alone
// (state.Voc), in the order the words were first counted; past 2×maxVocab words the least said are forgotten. A fold
// reads the pairs and writes them back with its words counted: nothing is sorted but when words are forgotten.
//
// Every word a fold handles, counted or not, has a number (id), so that what a summary says or names is a set of
// numbers (termSet), not a map.
type wordCounts struct {
	lx                 *lexicon // where a word's number in this fold is kept (known.id, for known.fold == fold)
	fold               uint32
	words              []*known     // by number
	n                  []int32      // how often each word was said; -1: not counted
	size, floor, clean int          // words counted; the least said word's count when words were last forgotten; words numbered by read (none has ':')
	es                 []countEntry // room for sorting
	text               []byte       // room for String
	all                []int32      // room for the statements' termIDs
	back, spare        *knownRead   // what read makes of String's last text; the state's read last, for String to write again
}

// knownRead are the words of s (state.Voc) with their counts and floor as a lexicon knows them, while it knows the same
// words (gen): a held state's next fold on the same scratch numbers them without parsing s nor looking each word up again.
type knownRead struct {
	s     string
	lx    *lexicon
	gen   uint32
	words []*known
	n     []int32
	floor int
}

// read sets v to the counts s holds, in the room v had (as r holds them, when it reads s).
func (v *wordCounts) read(s string, r *knownRead) *wordCounts {
	if v.release(); r != nil && r.lx == v.lx && r.gen == v.lx.gen && r.s == s {
		for i, k := range r.words {
			k.fold, k.id = v.fold, int32(i)
		}
		v.words, v.n, v.size, v.floor, v.clean = append(v.words, r.words...), append(v.n, r.n...), len(r.n), r.floor, len(r.words)
		return v
	}
	for f, wi := nextField(s, 0); f != ""; f, wi = nextField(s, wi) {
		t, c, ok := strings.Cut(f, ":")
		n, err := 1, error(nil) // a word alone: said once
		if ok {
			n, err = strconv.Atoi(c)
		}
		switch {
		case err != nil || n < 0 || n > math.MaxInt32:
		case t == "":
			v.floor = n // ":N" records the floor
		default:
			// a new word's number (a word read twice: the last count holds)
			k := v.lx.known([]byte(t))
			if k.fold == v.fold {
				v.n[k.id], v.size = -1, v.size-1
			}
			k.fold, k.id, v.words, v.n, v.size, v.clean = v.fold, int32(len(v.words)), append(v.words, k), append(v.n, int32(n)), v.size+1, len(v.words)+1
		}
	}
	return v
}

// id is t's number in this fold (after read).
func (v *wordCounts) id(t string) int32 { return v.number(v.lx.known([]byte(t))) }

func (v *wordCounts) number(k *known) int32 {
	if k.fold != v.fold {
		k.fold, k.id, v.words, v.n = v.fold, int32(len(v.words)), append(v.words, k), append(v.n, -1)
	}
	return k.id
}

// release forgets the counts and the words, keeping the room they took.
func (v *wordCounts) release() *wordCounts {
	v.lx.trim()
	if v.fold++; v.fold == 0 { // the stamp wrapped: a word stamped long ago must not read as numbered in this fold
		v.lx.m, v.lx.near, v.lx.gen, v.fold = nil, [len(v.lx.near)]*known{}, v.lx.gen+1, 1
	}
	v.words, v.n, v.size, v.floor, v.all, v.back, v.clean = v.words[:0], v.n[:0], 0, 0, v.all[:0], nil, 0
	return v
}

// termIDs are x's terms by their numbers, found once a fold (in v's room), each looked up: no statement keeps pointers.
func (v *wordCounts) termIDs(x *stmt) []int32 {
	if x.ids == nil {
		n := len(v.all)
		for t, wi := nextField(x.Terms, 0); t != ""; t, wi = nextField(x.Terms, wi) {
			v.all = append(v.all, v.number(v.lx.known([]byte(t))))
		}
		x.ids = v.all[n:len(v.all):len(v.all)]
	}
	return x.ids
}

// add counts the terms of ss (a statement repeated in ss once).
func (v *wordCounts) add(ss []stmt) {
	for i := range ss {
		if x := &ss[i]; x.K == kTool || anyOf(ss[:i], func(y *stmt) bool { return y.K != kTool && y.Terms == x.Terms }) {
			continue // a line said again is not a subject said again
		}
		for _, id := range v.termIDs(&ss[i]) {
			if v.n[id] < 0 {
				v.n[id] = int32(v.floor / 2) // a new word starts at half the floor
				v.size++
			}
			v.n[id]++
		}
	}
	if v.size > 2*maxVocab {
		v.forget(maxVocab)
	}
}

// forget keeps the keep most said words (the last one's count: the floor).
func (v *wordCounts) forget(keep int) {
	es := v.es[:0]
	for id, c := range v.n {
		if c >= 0 {
			es = append(es, countEntry{v.words[id].w, c, int32(id)})
		}
	}
	slices.SortFunc(es, compareCounts)
	v.floor = int(es[keep].c)
	for _, e := range es[keep:] {
		v.n[e.id] = -1
	}
	v.size, v.es = keep, es
}

type countEntry struct {
	t     string
	c, id int32
}

// compareCounts orders the most said first, then by word.
func compareCounts(a, b countEntry) int {
	return cmp.Or(cmp.Compare(b.c, a.c), strings.Compare(a.t, b.t))
}

// String writes the counts for state.Voc, and keeps what read makes of them with v's lexicon (back): in the room of the
// counts read (the state's) when they fit, else in room for half as many words again (up to 2×maxVocab) for the next folds.
func (v *wordCounts) String() string {
	b, r, k, c := v.text[:0], v.spare, 0, max(v.size, min(v.size*3/2, 2*maxVocab))
	if v.spare = nil; r == nil || cap(r.n) < v.size {
		r = &knownRead{words: make([]*known, v.size, c), n: make([]int32, v.size, c)}
	}
	r.lx, r.gen, r.floor, r.words, r.n = v.lx, v.lx.gen, v.floor, r.words[:v.size], r.n[:v.size]
	if v.floor > 0 {
		b = strconv.AppendInt(append(b, ':'), int64(v.floor), 10)
	}
	for id, c := range v.n[:len(v.words)] {
		if c < 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, ' ')
		}
		colon := id >= v.clean && strings.IndexByte(v.words[id].w, ':') >= 0
		if b = append(b, v.words[id].w...); c != 1 || colon {
			b = strconv.AppendInt(append(b, ':'), int64(c), 10)
		}
		if k < len(r.n) && !colon { // (read skips a word with ':': its count is no number)
			r.words[k], r.n[k], k = v.words[id], c, k+1
		}
	}
	v.text, r.s, v.back, r.words, r.n = b, string(b), r, r.words[:k], r.n[:k]
	return r.s
}

// weight is what covering a word is worth: logarithmic in how often it was said (one subject does not crowd out the
// others), little if once.
func (v *wordCounts) weight(id int32) float64 {
	if c := int(v.n[id]); c < len(weights) {
		return weights[max(c, 1)]
	}
	return v.weightOf(id)
}

//go:noinline (weight, inlined, looks up all but the counts of the words said most)
func (v *wordCounts) weightOf(id int32) float64 { return math.Log2(1+float64(v.n[id])) - 0.8 }

var weights = func() (w [64]float64) {
	for c := range w {
		w[c] = math.Log2(1+float64(c)) - 0.8
	}
	return w
}()

// shrink forgets the least said half of the words (state over its bound).
func (v *wordCounts) shrink() bool {
	if v.size < 16 {
		return false
	}
	v.forget(v.size / 2)
	return true
}

// termSet is a set of words by their numbers (wordCounts.id).
type termSet []bool

// counts are the state's word counts, read once (into the fold's scratch).
func (st *state) counts() *wordCounts {
	if st.voc == nil {
		sc := st.scratch()
		sc.voc.lx = &sc.lex
		st.voc, st.counted, sc.voc.spare = sc.voc.read(st.Voc, st.counted), nil, st.counted // (String writes it again)
	}
	return st.voc
}
