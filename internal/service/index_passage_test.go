package service

import (
	"math"
	"slices"
	"testing"
)

// A match inside a stretch of matching turns ranks above an isolated
// match that scores as well on its own; the turns that do not match are
// not ranked, and the neighbourhood weighs less the farther it is.
func TestPassagesRankAStretchAboveAnIsolatedMention(t *testing.T) {
	hits := []hit{
		{doc: 200, score: 5}, // isolated
		{doc: 10, score: 5},  // inside a stretch: 8, 9, 11, 13
		{doc: 8, score: 2},
		{doc: 9, score: 2},
		{doc: 11, score: 2},
		{doc: 13, score: 1},
		{doc: 40, score: 2}, // one neighbour at 1, one at 10
		{doc: 41, score: 1},
		{doc: 50, score: 1},
	}
	out := passages(hits)
	if len(out) != len(hits) {
		t.Fatalf("%d ranked, want the %d matches only: %v", len(out), len(hits), out)
	}
	rank := map[int]int{}
	score := map[int]float64{}
	for i, h := range out {
		rank[h.doc], score[h.doc] = i, h.score
	}
	if rank[10] > rank[200] {
		t.Errorf("the match in a stretch ranks %d, below the isolated one (%d): %v", rank[10], rank[200], out)
	}
	if math.Abs(score[200]-5) > 1e-9 {
		t.Errorf("an isolated match's score moved: %v, want 5 (no match within a few passageScale)", score[200])
	}
	// The decaying sums are the neighbourhood's weighted sum.
	for _, h := range hits {
		want := h.score
		for _, o := range hits {
			if o.doc != h.doc {
				d := math.Abs(float64(o.doc - h.doc))
				want += passageWeight / passageScale * o.score * math.Exp(-d/passageScale)
			}
		}
		if math.Abs(score[h.doc]-want) > 1e-9 {
			t.Errorf("doc %d: score %v, want %v", h.doc, score[h.doc], want)
		}
	}
	if !slices.IsSortedFunc(out, byRank) {
		t.Errorf("not in rank order: %v", out)
	}
	if passages(nil) != nil {
		t.Error("no hits: want none ranked")
	}
}
