package service

import (
	"cmp"
	"math"
	"slices"
	"sort"

	"github.com/foldstream/foldstream/internal/events"
)

// turnIndex is a BM25 inverted index over the distinct turns of one epoch
// of one session (since its last reset), in transcript order. It only
// grows (add) or starts over (clear); a turn's position in docs is its
// rank among the distinct turns, and docs[i].raw its index as the replay
// counted it (see replay).
//
// Invariants: docs are in increasing raw (and seq) order; every posting
// list is in increasing doc order, with tf > 0; cumLen[i] is the sum of
// the lengths of docs[:i+1]. Scoping a search to the turns before a raw
// index is then two binary searches: no per-request pass over the turns.
type turnIndex struct {
	an       *analyzer
	docs     []indexDoc
	cumLen   []int64
	postings map[string][]posting
	// bytes estimates the memory the index holds (texts, postings, docs),
	// for the service's byte budget.
	bytes int64
	tf    map[string]int32 // add's scratch space
}

// indexDoc is one distinct turn.
type indexDoc struct {
	raw  int64
	seq  uint64
	turn *events.Turn
	len  int32 // tokens, speaker and tool included
}

type posting struct {
	doc int32
	tf  int32
}

// Approximate sizes, for the byte budget: a doc, a posting, a map entry
// (key header and slice header), and a turn's fixed fields.
const (
	docBytes     = 48
	postingBytes = 8
	termBytes    = 64
	turnBytes    = 200
)

func newTurnIndex(an *analyzer) *turnIndex {
	return &turnIndex{an: an, postings: map[string][]posting{}}
}

// add indexes a distinct turn; raw and seq must exceed every earlier
// doc's.
func (x *turnIndex) add(raw int64, seq uint64, t *events.Turn) {
	d := int32(len(x.docs))
	if x.tf == nil {
		x.tf = map[string]int32{}
	}
	tf := x.tf
	clear(tf)
	var n int32
	x.an.each(t.Speaker+" "+t.Tool+" "+t.Text, func(term string) {
		n++
		if term != "" {
			tf[term]++
		}
	})
	for term, f := range tf {
		pl, ok := x.postings[term]
		if !ok {
			x.bytes += termBytes + int64(len(term))
		}
		x.postings[term] = append(pl, posting{doc: d, tf: f})
		x.bytes += postingBytes
	}
	var prev int64
	if len(x.cumLen) > 0 {
		prev = x.cumLen[len(x.cumLen)-1]
	}
	x.docs = append(x.docs, indexDoc{raw: raw, seq: seq, turn: t, len: n})
	x.cumLen = append(x.cumLen, prev+int64(n))
	x.bytes += docBytes + turnBytes + int64(len(t.Text)+len(t.Speaker)+len(t.TurnID)+len(t.Tool)+len(t.Role)+len(t.Kind))
}

// clear forgets every turn (a reset).
func (x *turnIndex) clear() { *x = *newTurnIndex(x.an) }

// below is how many docs have a raw index below raw.
func (x *turnIndex) below(raw int64) int {
	return sort.Search(len(x.docs), func(i int) bool { return x.docs[i].raw >= raw })
}

// bySeq returns the doc stored at stream sequence seq, if indexed.
func (x *turnIndex) bySeq(seq uint64) (int, bool) {
	i := sort.Search(len(x.docs), func(i int) bool { return x.docs[i].seq >= seq })
	return i, i < len(x.docs) && x.docs[i].seq == seq
}

// hit is a doc and its BM25 score for a query.
type hit struct {
	doc   int
	score float64
}

// search ranks docs [lo, n) against the query terms with BM25 (document
// frequencies and lengths over those docs only) and returns every doc
// that contains a term, best first (ties: the later turn first). Terms
// are scored in their given order, so the sum, and the ranking, is
// deterministic.
func (x *turnIndex) search(terms []string, lo, n int) []hit {
	if n <= lo || len(terms) == 0 {
		return nil
	}
	total := x.cumLen[n-1]
	if lo > 0 {
		total -= x.cumLen[lo-1]
	}
	docs := float64(n - lo)
	avgLen := max(1, float64(total)/docs)
	scores := map[int]float64{}
	for _, term := range terms {
		pl := x.postings[term]
		first := sort.Search(len(pl), func(i int) bool { return int(pl[i].doc) >= lo })
		end := sort.Search(len(pl), func(i int) bool { return int(pl[i].doc) >= n })
		df := float64(end - first)
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (docs-df+0.5)/(df+0.5))
		for _, p := range pl[first:end] {
			tf := float64(p.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*float64(x.docs[p.doc].len)/avgLen)
			scores[int(p.doc)] += idf * tf * (bm25K1 + 1) / (tf + norm)
		}
	}
	out := make([]hit, 0, len(scores))
	for d, s := range scores {
		out = append(out, hit{doc: d, score: s})
	}
	slices.SortFunc(out, func(a, b hit) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.doc, a.doc))
	})
	return out
}
