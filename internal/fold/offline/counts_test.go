package offline

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// naiveCounts writes n as wordCounts.String does, sorting every pair.
func naiveCounts(n map[string]int, floor int) string {
	var es []countEntry
	for t, c := range n {
		es = append(es, countEntry{t: t, c: c})
	}
	slices.SortFunc(es, compareCounts)
	var parts []string
	if floor > 0 {
		parts = append(parts, ":"+strconv.Itoa(floor))
	}
	for _, e := range es {
		parts = append(parts, e.t+":"+strconv.Itoa(e.c))
	}
	return strings.Join(parts, " ")
}

// The word counts sort in only the words a fold counted; what they write
// is what sorting all of them writes, fold after fold, past the prune and
// from pairs read in any order (or twice), and a reused wordCounts keeps
// nothing of the state it read before.
func TestWordCountsWriteAsSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string { return "w" + strconv.Itoa(rng.IntN(900)) }
	spare := new(wordCounts)
	voc := ""
	model := map[string]int{}
	floor := 0
	for fold := range 60 {
		v := spare.read(voc)
		var ss []stmt
		for range rng.IntN(12) {
			var ts []string
			for range 1 + rng.IntN(6) {
				if w := word(); !slices.Contains(ts, w) {
					ts = append(ts, w)
				}
			}
			ss = append(ss, stmt{Terms: strings.Join(ts, " ")})
		}
		seen := map[string]bool{}
		for _, x := range ss {
			if seen[x.Terms] {
				continue
			}
			seen[x.Terms] = true
			for _, w := range strings.Fields(x.Terms) {
				if _, ok := model[w]; !ok {
					model[w] = floor / 2
				}
				model[w]++
			}
		}
		v.add(ss)
		if len(model) > 2*maxVocab {
			es := []countEntry{}
			for w, c := range model {
				es = append(es, countEntry{t: w, c: c})
			}
			slices.SortFunc(es, compareCounts)
			floor = es[maxVocab].c
			for _, e := range es[maxVocab:] {
				delete(model, e.t)
			}
		}
		got := v.String()
		if want := naiveCounts(model, floor); got != want {
			t.Fatalf("fold %d: counts written\n%s\nwant\n%s", fold, got, want)
		}
		for w, c := range model {
			if v.weight(v.id(w)) != math.Log2(1+float64(max(c, 1)))-0.8 {
				t.Fatalf("fold %d: weight of %s differs", fold, w)
			}
		}
		voc = got
		spare = v.release()
	}
	// Pairs out of order, and a word twice (the last count holds).
	v := new(wordCounts).read("b:1 a:5 :4 c:2 b:3")
	if got, want := v.String(), ":4 a:5 b:3 c:2"; got != want {
		t.Errorf("unsorted pairs written as %q, want %q", got, want)
	}
}
