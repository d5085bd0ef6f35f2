package offline

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

const maxVocab = 256 // words kept after a prune

// wordCounts counts how many statements said each word (stemmed) so far:
// a word said again and again is a subject of the conversation, which
// later questions ask about. Kept in the state as "term:count" pairs, the
// most said first (state.Voc); past 2×maxVocab words the least said are
// forgotten. A fold changes the counts of few words: the pairs read stay
// in their order and only the words counted since are sorted in again.
type wordCounts struct {
	n     map[string]wordCount
	floor int
	order []countEntry // the pairs read, in order, with the counts read
	moved []string     // words counted since they were read (or new)
	src   string       // what was read, when nothing moved since
	buf   []countEntry // room for the next order
	text  []byte       // room for String
}

type wordCount struct {
	c     int
	moved bool // in wordCounts.moved
}

// read sets v to the counts s holds, reusing v's map and slices.
func (v *wordCounts) read(s string) *wordCounts {
	if v.n == nil {
		v.n = make(map[string]wordCount, strings.Count(s, " ")+64)
	}
	v.release()
	v.src = s
	sorted := true
	for f := range strings.FieldsSeq(s) {
		t, c, ok := strings.Cut(f, ":")
		if !ok {
			sorted = false
			continue
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			sorted = false
			continue
		}
		if t == "" {
			v.floor = n // ":N" records the floor
			continue
		}
		e := countEntry{t, n}
		if _, dup := v.n[t]; dup || len(v.order) > 0 && compareCounts(v.order[len(v.order)-1], e) >= 0 {
			sorted = false // (not as String writes it: sort it all)
		}
		v.order = append(v.order, e)
		v.n[t] = wordCount{c: n}
	}
	if !sorted {
		v.order = v.sortAll()
		v.src = ""
	}
	return v
}

// release forgets the counts, keeping the room they took (and nothing
// they pointed to).
func (v *wordCounts) release() {
	clear(v.n)
	clear(v.order[:cap(v.order)])
	clear(v.buf[:cap(v.buf)])
	clear(v.moved[:cap(v.moved)])
	v.order, v.moved, v.floor, v.src = v.order[:0], v.moved[:0], 0, ""
}

// add counts the terms of ss (a statement repeated in ss once).
func (v *wordCounts) add(ss []stmt) {
	seen := map[string]bool{}
	for _, x := range ss {
		if x.K == kTool || seen[x.Terms] {
			continue // a line said again is not a subject said again
		}
		seen[x.Terms] = true
		for t := range strings.FieldsSeq(x.Terms) {
			w, ok := v.n[t]
			if !ok {
				w.c = v.floor / 2 // a new word starts at half the floor
			}
			w.c++
			if !w.moved {
				w.moved = true
				v.moved = append(v.moved, t)
			}
			v.n[t] = w
		}
	}
	if len(v.n) > 2*maxVocab {
		v.forget(maxVocab)
	}
}

// forget keeps the keep most said words (the last one's count: the floor).
func (v *wordCounts) forget(keep int) {
	es := v.sorted()
	v.floor = es[keep].c
	for _, e := range es[keep:] {
		delete(v.n, e.t)
	}
	v.newOrder(es[:keep])
}

// newOrder makes es the pairs as written, every count settled.
func (v *wordCounts) newOrder(es []countEntry) {
	clear(v.order[:cap(v.order)])
	v.order, v.buf, v.src = es, v.order[:0], ""
	v.settle()
}

// settle marks every count as written.
func (v *wordCounts) settle() {
	for _, t := range v.moved {
		if w, ok := v.n[t]; ok {
			v.n[t] = wordCount{c: w.c}
		}
	}
	v.moved = v.moved[:0]
}

type countEntry struct {
	t string
	c int
}

// compareCounts orders the most said first, then by word.
func compareCounts(a, b countEntry) int {
	if c := cmp.Compare(b.c, a.c); c != 0 {
		return c
	}
	return strings.Compare(a.t, b.t)
}

func (v *wordCounts) sortAll() []countEntry {
	es := make([]countEntry, 0, len(v.n))
	for t, w := range v.n {
		es = append(es, countEntry{t, w.c})
	}
	slices.SortFunc(es, compareCounts)
	return es
}

// sorted are the counts, the most said first: the pairs read that did
// not move, merged with the words that did.
func (v *wordCounts) sorted() []countEntry {
	es := v.buf[:0]
	if len(v.moved) == 0 {
		return append(es, v.order...)
	}
	ms := make([]countEntry, 0, len(v.moved))
	for _, t := range v.moved {
		ms = append(ms, countEntry{t, v.n[t].c})
	}
	slices.SortFunc(ms, compareCounts)
	for _, e := range v.order {
		if v.n[e.t].moved {
			continue
		}
		for len(ms) > 0 && compareCounts(ms[0], e) < 0 {
			es = append(es, ms[0])
			ms = ms[1:]
		}
		es = append(es, e)
	}
	return append(es, ms...)
}

// String writes the counts for state.Voc.
func (v *wordCounts) String() string {
	if len(v.moved) == 0 && v.src != "" {
		return v.src
	}
	es := v.sorted()
	v.newOrder(es)
	b := v.text[:0]
	if v.floor > 0 {
		b = strconv.AppendInt(append(b, ':'), int64(v.floor), 10)
	}
	for _, e := range es {
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(append(append(b, e.t...), ':'), int64(e.c), 10)
	}
	v.text = b
	v.src = string(b)
	return v.src
}

// weight is what covering t is worth: logarithmic in how often it was
// said (one subject does not crowd out the others), little if once.
func (v *wordCounts) weight(t string) float64 {
	return math.Log2(1+float64(max(v.n[t].c, 1))) - 0.8
}

// shrink forgets the least said half of the words (state over its bound).
func (v *wordCounts) shrink() bool {
	if len(v.n) < 16 {
		return false
	}
	v.forget(len(v.n) / 2)
	return true
}

// counts are the state's word counts, read once (into st.spare, when the
// summarizer lent one).
func (st *state) counts() *wordCounts {
	if st.voc == nil {
		if st.spare == nil {
			st.spare = new(wordCounts)
		}
		st.voc = st.spare.read(st.Voc)
	}
	return st.voc
}
