package service

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/foldstream/foldstream/internal/events"
)

// turnIndex is a BM25 inverted index over the distinct turns of one epoch
// of one session (since its last reset), in transcript order. It only
// grows (add) or starts over (clear); a turn's position in docs is its
// rank among the distinct turns, and docs[i].raw its index as the replay
// counted it (see replay).
//
// An index loaded from the store (index_codec.go) keeps its encoding as
// base and reads from it only what requests ask for: a doc's turn
// (turn) and a term's postings (postingsIn) are decoded at their first
// use and kept until the request is done (forget); the turns added after the load are held as turns, their
// postings appended to their terms' (decoded first). A load then costs
// the doc table, not an allocation per turn and per term, and a loaded
// index holds its compact encoding plus what was asked of it.
//
// Invariants: docs are in increasing raw (and seq) order; every posting
// list is in increasing doc order, with tf > 0. Scoping a search to the
// turns before a raw index is then two binary searches: no per-request
// pass over the turns.
type turnIndex struct {
	an   *analyzer
	docs docTable
	// turns[i] is doc i's turn; nil while a doc of base has not been read
	// (turn reads it). With base, turns is nil until a turn is read or
	// added (fillTurns), and again once forgotten if none was added.
	turns []*events.Turn
	// postings are the terms' posting lists: every term's, or with base,
	// those read from it so far and the terms added since.
	postings map[string][]posting
	// base is the encoding the index was loaded from (nil: built from the
	// stream); it holds docs [0, base.docs).
	base *indexBase
	// bytes estimates the memory the index holds (texts, postings, docs),
	// for the service's byte budget.
	bytes int64
	tf    map[string]int32 // add's scratch space
	// views are the docs' display texts and terms (index_view.go).
	views docViews
}

// indexDoc is one distinct turn (its text: turnIndex.turn), as the doc
// table (docTable) gives it.
type indexDoc struct {
	raw int64
	seq uint64
	len int32 // tokens, speaker and tool included
}

type posting struct {
	doc int32
	tf  int32
}

// Approximate sizes, for the byte budget: a doc (its table's share and
// its turn's slot), a posting, a map entry (key header and slice header),
// and a turn's fixed fields.
const (
	docBytes     = docTableBytes + 8
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
	d := int32(x.docs.n())
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
		pl, ok := x.list(term)
		if !ok {
			x.bytes += termBytes + int64(len(term))
		}
		x.postings[term] = append(pl, posting{doc: d, tf: f})
		x.bytes += postingBytes
	}
	x.docs.add(raw, seq, n)
	x.turns = append(x.turns, t)
	x.bytes += docBytes + turnBytes + int64(len(t.Text)+len(t.Speaker)+len(t.TurnID)+len(t.Tool)+len(t.Role)+len(t.Kind))
}

// turn is doc d's turn, read from base at its first use (readTurn).
func (x *turnIndex) turn(d int) *events.Turn {
	if d < len(x.turns) && x.turns[d] != nil {
		return x.turns[d]
	}
	return x.readTurn(d)
}

// speaker is doc d's speaker: a turn of a loaded index not decoded yet
// is not decoded for it.
func (x *turnIndex) speaker(d int) string {
	if d < len(x.turns) && x.turns[d] != nil {
		return x.turns[d].Speaker
	}
	if x.base != nil && d < x.base.docs {
		return x.base.speaker(d)
	}
	return x.turn(d).Speaker
}

// list is term's postings, read from base at its first use (and kept:
// add appends to it); ok reports whether the index has the term.
func (x *turnIndex) list(term string) (pl []posting, ok bool) {
	if pl, ok = x.postings[term]; ok || x.base == nil {
		return pl, ok
	}
	if pl, ok = x.base.postings(term); ok {
		x.postings[term] = pl
		x.bytes += termBytes + int64(len(term)) + postingBytes*int64(len(pl))
	}
	return pl, ok
}

// count is how many docs hold term, without reading its postings from
// base.
func (x *turnIndex) count(term string) int {
	if pl, ok := x.postings[term]; ok || x.base == nil {
		return len(pl)
	}
	if i, ok := x.base.find(term); ok {
		return x.base.count(i)
	}
	return 0
}

// clear forgets every turn (a reset).
func (x *turnIndex) clear() { *x = *newTurnIndex(x.an) }

// ndocs is how many docs the index holds.
func (x *turnIndex) ndocs() int { return x.docs.n() }

// doc is doc d.
func (x *turnIndex) doc(d int) indexDoc { return x.docs.at(d) }

// below is how many docs have a raw index below raw.
func (x *turnIndex) below(raw int64) int {
	return sort.Search(x.docs.n(), func(i int) bool { return x.docs.raw(i) >= raw })
}

// bySeq returns the doc stored at stream sequence seq, if indexed.
func (x *turnIndex) bySeq(seq uint64) (int, bool) {
	i := sort.Search(x.docs.n(), func(i int) bool { return x.docs.seq(i) >= seq })
	return i, i < x.docs.n() && x.docs.seq(i) == seq
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
	scores := make([]float64, n-lo)
	x.score(scores, terms, nil, lo, n)
	return ranked(scores, lo)
}

// score adds the BM25 scores of docs [lo, n) for terms to scores (indexed
// by doc-lo), each term's times its weight (weights[i] for terms[i]; nil:
// all 1). Scores are dense: a query's common terms touch a good part of
// the docs, and a slice is much cheaper to add to than a map.
func (x *turnIndex) score(scores []float64, terms []string, weights []float64, lo, n int) {
	total := x.docs.lenSum(lo, n)
	docs := float64(n - lo)
	avgLen := max(1, float64(total)/docs)
	lens := x.docs.lens
	for i, term := range terms {
		pl, df := x.postingsIn(term, lo, n)
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (docs-df+0.5)/(df+0.5))
		if weights != nil {
			idf *= weights[i]
		}
		for _, p := range pl {
			tf := float64(p.tf)
			norm := bm25K1 * (1 - bm25B + bm25B*float64(lens[p.doc])/avgLen)
			scores[int(p.doc)-lo] += idf * tf * (bm25K1 + 1) / (tf + norm)
		}
	}
}

// ranked is every doc with a score (all are positive: idf and tf are),
// best first, ties to the later doc.
func ranked(scores []float64, lo int) []hit {
	var out []hit
	for d, s := range scores {
		if s > 0 {
			out = append(out, hit{doc: d + lo, score: s})
		}
	}
	slices.SortFunc(out, byRank)
	return out
}

func byRank(a, b hit) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.doc, a.doc)) }

// best is the k best docs of scores in rank order (ranked(scores)[:k]
// without sorting them all).
func best(scores []float64, lo, k int) []hit {
	out := make([]hit, 0, k+1)
	for d, s := range scores {
		if s <= 0 {
			continue
		}
		h := hit{doc: d + lo, score: s}
		if len(out) == k && byRank(h, out[k-1]) >= 0 {
			continue
		}
		at, _ := slices.BinarySearchFunc(out, h, byRank)
		out = slices.Insert(out, at, h)
		if len(out) > k {
			out = out[:k]
		}
	}
	return out
}

// postingsIn is term's postings among docs [lo, n), and their number.
func (x *turnIndex) postingsIn(term string, lo, n int) ([]posting, float64) {
	pl, _ := x.list(term)
	first := sort.Search(len(pl), func(i int) bool { return int(pl[i].doc) >= lo })
	end := sort.Search(len(pl), func(i int) bool { return int(pl[i].doc) >= n })
	return pl[first:end], float64(end - first)
}

// Pseudo-relevance feedback (RM3's idea, simply): the terms that weigh
// most in the best hits of a first search are added to the query, lightly,
// and the docs ranked again, so that a question finds the turns that use
// the words its best matches use. On the development set (make eval,
// -explore) heavier feedback helps less.
const (
	feedbackHits   = 5   // best hits whose terms are considered
	feedbackTerms  = 10  // terms added
	feedbackWeight = 0.3 // their weight (the query's terms weigh 1)
	// feedbackMaxDF: a term in more than this share of the searched turns
	// is not added (it says little, and scoring it touches most turns).
	feedbackMaxDF = 0.05
)

// expanded ranks docs [lo, n) against terms plus feedbackTerms feedback
// terms from the text of its first ranking's feedbackHits best hits: the
// terms not in the query and not question words (they say what kind of
// answer is wanted, in a turn as in a query), found in more than one doc
// and at most feedbackMaxDF of them, weighed by the hit's score times the
// term's idf for each time it occurs there. Ties go to the term that sorts
// first, so the ranking is deterministic. The feedback terms' scores are
// added to the first ranking's (the query's terms are not scored twice).
func (x *turnIndex) expanded(terms []string, lo, n int) []hit {
	hits, _ := x.expand(terms, lo, n)
	return hits
}

// expand is expanded, and the feedback terms it added.
func (x *turnIndex) expand(terms []string, lo, n int) ([]hit, []string) {
	if n <= lo || len(terms) == 0 {
		return nil, nil
	}
	scores := make([]float64, n-lo)
	x.score(scores, terms, nil, lo, n)
	top := best(scores, lo, feedbackHits)
	inQuery := make(map[string]bool, len(terms))
	for _, t := range terms {
		inQuery[t] = true
	}
	docs := float64(n - lo)
	weight := map[string]float64{}
	idf := map[string]float64{}
	for _, h := range top {
		x.an.each(x.turn(h.doc).Text, func(term string) {
			if term == "" || inQuery[term] || questionStems[term] {
				return
			}
			w, ok := idf[term]
			if !ok {
				// A term of a doc's text is indexed unless the speaker or
				// tool alone held it; then df may be 1 or 0: skipped. A
				// term in more docs than the limit and those outside
				// [lo, n) is too common whatever its df: its postings
				// are not read (a common term's are the longest).
				limit := max(2, docs*feedbackMaxDF)
				if all := x.count(term); all > 1 && float64(all-(x.docs.n()-(n-lo))) <= limit {
					if _, df := x.postingsIn(term, lo, n); df > 1 && df <= limit {
						w = math.Log(docs / df)
					}
				}
				idf[term] = w
			}
			if w > 0 {
				weight[term] += h.score * w
			}
		})
	}
	extra := make([]string, 0, len(weight))
	for t := range weight {
		extra = append(extra, t)
	}
	slices.SortFunc(extra, func(a, b string) int { return cmp.Or(cmp.Compare(weight[b], weight[a]), strings.Compare(a, b)) })
	extra = extra[:min(feedbackTerms, len(extra))]
	weights := make([]float64, len(extra))
	for i := range weights {
		weights[i] = feedbackWeight
	}
	x.score(scores, extra, weights, lo, n)
	return ranked(scores, lo), extra
}

// Passage-level ranking: the question-aware context ranks a turn by its
// own score plus its neighbourhood's, each other turn's score weighed by
// passageWeight/passageScale times e^(-distance/passageScale), so that a
// match inside a stretch of conversation about the question (a question,
// its replies, the exchange that follows: where answers are) ranks above
// an isolated mention of the same words, and an answer split over a
// question and its reply ranks as the exchange does. A stretch of turns
// that all match alike adds about passageWeight times 2 of a turn's own
// score (the weights sum to about 2 passageWeight); beyond a few
// passageScale turns a match weighs nothing.
const (
	passageScale  = 4
	passageWeight = 1.0
)

// passages re-ranks BM25 hits (docs each once) by passage: each hit's
// score plus its neighbourhood's (see above), best first, ties to the
// later turn. Only turns that match themselves are ranked. Cost: two
// passes over the docs from the first hit to the last (a decaying sum
// each way), and a sort.
func passages(hits []hit) []hit {
	if len(hits) == 0 {
		return nil
	}
	first, last := hits[0].doc, hits[0].doc
	for _, h := range hits {
		first, last = min(first, h.doc), max(last, h.doc)
	}
	own := make([]float64, last-first+1)
	for _, h := range hits {
		own[h.doc-first] = h.score
	}
	// near[i]: sum over j != i of own[j] e^(-|i-j|/passageScale), as a
	// decaying sum from the left and one from the right.
	decay := math.Exp(-1.0 / passageScale)
	near := make([]float64, len(own))
	var run float64
	for i := range own {
		near[i] = run
		run = (run + own[i]) * decay
	}
	run = 0
	for i := len(own) - 1; i >= 0; i-- {
		near[i] += run
		run = (run + own[i]) * decay
	}
	out := make([]hit, len(hits))
	for i, h := range hits {
		out[i] = hit{doc: h.doc, score: h.score + passageWeight/passageScale*near[h.doc-first]}
	}
	slices.SortFunc(out, byRank)
	return out
}
