package service

import (
	"testing"

	"github.com/foldstream/foldstream/internal/events"
)

// Feedback finds the turns that share the best match's words without the
// query's, and keeps the turns with the query's own words first.
func TestExpandedAddsTheBestHitsTermsLightly(t *testing.T) {
	x := newTurnIndex(newAnalyzer())
	for i, text := range []string{
		"the battery uses lithium cells",              // 0: the best match
		"lithium cells are cheaper than kinetic ones", // 1: its words, not the query's
		"kinetic cells last longer",                   // 2: one of its words
		"we talked about the weather",                 // 3
		"the weather is nice and sunny",               // 4
		"the battery",                                 // 5: the query's word only
	} {
		x.add(int64(i), uint64(i+1), &events.Turn{Speaker: "A", Text: text})
	}
	docs := func(hits []hit) []int {
		out := make([]int, len(hits))
		for i, h := range hits {
			out[i] = h.doc
		}
		return out
	}
	terms := x.an.queryTerms("Which battery did they choose?")
	plain := docs(x.search(terms, 0, 6))
	if len(plain) != 2 {
		t.Fatalf("search finds %v, want the two turns that say battery", plain)
	}
	got := docs(x.expanded(terms, 0, 6))
	if len(got) != 4 || got[0] == got[1] || got[0]+got[1] != 5 || got[2] != 1 || got[3] != 2 {
		t.Fatalf("expanded finds %v, want the battery turns (0, 5) first, then 1 and 2 by the best match's words, and no weather", got)
	}
	// Scoped: feedback only from, and only to, the docs searched.
	if got := docs(x.expanded(terms, 1, 6)); len(got) != 1 || got[0] != 5 {
		t.Fatalf("expanded over docs 1..5 finds %v, want 5 alone (its text has no term but the query's)", got)
	}
}
