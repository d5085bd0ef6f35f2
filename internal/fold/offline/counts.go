package offline

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxVocab bounds the word counts: they keep at most maxVocab words after
// a prune and are pruned when they hold twice as many.
const maxVocab = 256

// wordCounts counts, for the words of the conversation (stemmed terms), how
// many statements have said them so far. A word said again and again is
// a subject of the conversation, which is what later questions ask
// about; the summary prefers statements that cover such words, each once.
// It is kept in the state as "term:count" pairs (state.Voc), most said
// first; when it grows past twice maxVocab the least said words are
// forgotten and the count of the last one forgotten becomes the floor; a
// new word starts at half of it (a new subject is not outweighed by every
// old one merely for being new).
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

// add counts the terms of the statements ss, each term once a statement,
// a statement repeated in ss once.
func (v *wordCounts) add(ss []stmt) {
	seen := map[string]bool{}
	for _, x := range ss {
		if x.K == kTool || seen[x.Terms] {
			continue // a line said again is not a subject said again
		}
		seen[x.Terms] = true
		for _, t := range strings.Fields(x.Terms) {
			if c, ok := v.n[t]; ok {
				v.n[t] = c + 1
			} else {
				v.n[t] = v.floor/2 + 1
			}
		}
	}
	if len(v.n) > 2*maxVocab {
		es := v.sorted()
		v.floor = es[maxVocab].c
		for _, e := range es[maxVocab:] {
			delete(v.n, e.t)
		}
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
		b.WriteString(e.t)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.c))
	}
	return b.String()
}

// weight is what covering the term t is worth in a summary: more for a
// word said in many statements (logarithmically, so that one subject does
// not crowd out the others), little for a word said once.
func (v *wordCounts) weight(t string) float64 {
	c := v.n[t]
	if c == 0 {
		c = 1
	}
	return math.Log2(1+float64(c)) - 0.8
}

// shrink forgets the least said half of the words (the state is over
// its byte bound).
func (v *wordCounts) shrink() bool {
	if len(v.n) < 16 {
		return false
	}
	es := v.sorted()
	keep := len(es) / 2
	v.floor = es[keep].c
	for _, e := range es[keep:] {
		delete(v.n, e.t)
	}
	return true
}

// counts are the state's word counts, read once.
func (st *state) counts() *wordCounts {
	if st.voc == nil {
		st.voc = countsOf(st.Voc)
	}
	return st.voc
}
