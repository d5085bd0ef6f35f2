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
// later questions ask about. Kept in the state as "term:count" pairs
// (state.Voc); past 2×maxVocab words the least said are forgotten.
type wordCounts struct {
	n     map[string]int
	floor int
}

// countsOf reads state.Voc.
func countsOf(s string) *wordCounts {
	v := &wordCounts{n: map[string]int{}}
	for _, f := range strings.Fields(s) {
		t, c, ok := strings.Cut(f, ":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			continue
		}
		if t == "" {
			v.floor = n // ":N" records the floor
			continue
		}
		v.n[t] = n
	}
	return v
}

// add counts the terms of ss (a statement repeated in ss once).
func (v *wordCounts) add(ss []stmt) {
	seen := map[string]bool{}
	for _, x := range ss {
		if x.K == kTool || seen[x.Terms] {
			continue // a line said again is not a subject said again
		}
		seen[x.Terms] = true
		for _, t := range strings.Fields(x.Terms) {
			if _, ok := v.n[t]; !ok {
				v.n[t] = v.floor / 2 // a new word starts at half the floor
			}
			v.n[t]++
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
}

type countEntry struct {
	t string
	c int
}

func (v *wordCounts) sorted() []countEntry {
	es := make([]countEntry, 0, len(v.n))
	for t, c := range v.n {
		es = append(es, countEntry{t, c})
	}
	slices.SortFunc(es, func(a, b countEntry) int {
		if c := cmp.Compare(b.c, a.c); c != 0 {
			return c
		}
		return strings.Compare(a.t, b.t)
	})
	return es
}

// String writes the counts for state.Voc.
func (v *wordCounts) String() string {
	var b strings.Builder
	if v.floor > 0 {
		b.WriteString(":" + strconv.Itoa(v.floor))
	}
	for _, e := range v.sorted() {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(e.t + ":" + strconv.Itoa(e.c))
	}
	return b.String()
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

// counts are the state's word counts, read once.
func (st *state) counts() *wordCounts {
	if st.voc == nil {
		st.voc = countsOf(st.Voc)
	}
	return st.voc
}
