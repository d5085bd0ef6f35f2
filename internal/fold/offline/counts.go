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
// forgotten. A fold counts few words: the pairs read keep their order and
// only the words counted since are sorted in.
type wordCounts struct {
	n     map[string]int
	floor int
	order []countEntry // the pairs read, with the counts read
	moved []string     // words counted since (or new), maybe twice
	buf   []countEntry // room for the next order
	text  []byte       // room for String
}

// read sets v to the counts s holds, in the room v had.
func (v *wordCounts) read(s string) *wordCounts {
	if v.n == nil {
		v.n = map[string]int{}
	}
	v.release()
	sorted := true
	for f := range strings.FieldsSeq(s) {
		t, c, _ := strings.Cut(f, ":")
		n, err := strconv.Atoi(c)
		switch _, dup := v.n[t]; {
		case err != nil || n < 0:
		case t == "":
			v.floor = n // ":N" records the floor
		default:
			sorted = sorted && !dup
			v.n[t] = n
			v.order = append(v.order, countEntry{t, n})
		}
	}
	if !sorted || !slices.IsSortedFunc(v.order, compareCounts) {
		v.order = v.order[:0] // (not as String writes it: all of it moves)
		for t := range v.n {
			v.moved = append(v.moved, t)
		}
	}
	return v
}

// release forgets the counts, keeping the room they took.
func (v *wordCounts) release() *wordCounts {
	clear(v.n)
	clear(v.order[:cap(v.order)])
	clear(v.buf[:cap(v.buf)])
	clear(v.moved[:cap(v.moved)])
	v.order, v.buf, v.moved, v.floor = v.order[:0], v.buf[:0], v.moved[:0], 0
	return v
}

// add counts the terms of ss (a statement repeated in ss once).
func (v *wordCounts) add(ss []stmt) {
	seen := make(map[string]bool, len(ss))
	for _, x := range ss {
		if x.K == kTool || seen[x.Terms] {
			continue // a line said again is not a subject said again
		}
		seen[x.Terms] = true
		for t := range strings.FieldsSeq(x.Terms) {
			if _, ok := v.n[t]; !ok {
				v.n[t] = v.floor / 2 // a new word starts at half the floor
			}
			v.n[t]++
			v.moved = append(v.moved, t)
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
	v.settle(es[:keep])
}

// settle makes es the order, as written.
func (v *wordCounts) settle(es []countEntry) {
	clear(v.order[:cap(v.order)])
	v.order, v.buf, v.moved = es, v.order[:0], v.moved[:0]
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

// sorted merges the pairs read whose count did not change with the moved.
func (v *wordCounts) sorted() []countEntry {
	ms := make([]countEntry, 0, len(v.moved))
	for _, t := range v.moved {
		ms = append(ms, countEntry{t, v.n[t]})
	}
	slices.SortFunc(ms, compareCounts)
	ms = slices.Compact(ms)
	es := v.buf[:0]
	for _, e := range v.order {
		if v.n[e.t] != e.c {
			continue
		}
		for len(ms) > 0 && compareCounts(ms[0], e) < 0 {
			es, ms = append(es, ms[0]), ms[1:]
		}
		es = append(es, e)
	}
	return append(es, ms...)
}

// String writes the counts for state.Voc.
func (v *wordCounts) String() string {
	es := v.sorted()
	v.settle(es)
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
	return string(b)
}

// weight is what covering t is worth: logarithmic in how often it was
// said (one subject does not crowd out the others), little if once.
func (v *wordCounts) weight(t string) float64 {
	return math.Log2(1+float64(max(v.n[t], 1))) - 0.8
}

// shrink forgets the least said half of the words (state over its bound).
func (v *wordCounts) shrink() bool {
	if len(v.n) < 16 {
		return false
	}
	v.forget(len(v.n) / 2)
	return true
}

// counts are the state's word counts, read once (into st.spare).
func (st *state) counts() *wordCounts {
	if st.voc == nil {
		if st.spare == nil {
			st.spare = new(wordCounts)
		}
		st.voc = st.spare.read(st.Voc)
	}
	return st.voc
}
