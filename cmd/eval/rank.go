package main

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strings"
)

// ranker is a reference BM25 over a meeting's folded turns, local to the
// evaluation (-explore): it measures which ranking choices carry the
// answer into a packed context, independently of the service's own
// implementation.
type ranker struct {
	opts rankOpts
	// docs are the term lists of the units (turns or passages), in
	// transcript order; units[i] is the first and last turn of unit i.
	docs  [][]string
	units [][2]int
	df    map[string]int
	avg   float64
}

// rankOpts are the choices measured.
type rankOpts struct {
	stop    bool // drop stop words from query and turns
	stem    bool // light suffix stemming (stem)
	speaker bool // index the speaker's name with the turn ("Speaker: text")
	passage int  // index runs of this many turns (stride 1) instead of single turns; 0 or 1 = turns
}

// terms normalises text the way o says.
func (o rankOpts) terms(text string) []string {
	ws := words(text)
	out := ws[:0]
	for _, w := range ws {
		if o.stop && stopWords[w] {
			continue
		}
		if o.stem {
			w = stem(w)
		}
		out = append(out, w)
	}
	return out
}

// newRanker indexes turns[:end].
func newRanker(turns []line, end int, o rankOpts) *ranker {
	r := &ranker{opts: o, df: map[string]int{}}
	size := max(1, o.passage)
	per := make([][]string, end)
	for i := range end {
		text := turns[i].Text
		if o.speaker {
			text = turns[i].String()
		}
		per[i] = o.terms(text)
	}
	total := 0
	for i := 0; i < end; i++ {
		last := min(end-1, i+size-1)
		var doc []string
		for j := i; j <= last; j++ {
			doc = append(doc, per[j]...)
		}
		r.docs = append(r.docs, doc)
		r.units = append(r.units, [2]int{i, last})
		total += len(doc)
		seen := map[string]bool{}
		for _, t := range doc {
			if !seen[t] {
				seen[t] = true
				r.df[t]++
			}
		}
		if last == end-1 {
			break
		}
	}
	if len(r.docs) > 0 {
		r.avg = float64(total) / float64(len(r.docs))
	}
	return r
}

// hit is a ranked unit: turns [from, to].
type hit struct {
	from, to int
	score    float64
}

// rank returns the units that share a term with query, best first (ties:
// later first, as the service breaks them).
func (r *ranker) rank(query string) []hit {
	q := map[string]float64{}
	for _, t := range r.opts.terms(query) {
		q[t] = 1
	}
	return r.rankWeighted(q)
}

// rankWeighted ranks by BM25 with a weight per query term.
func (r *ranker) rankWeighted(q map[string]float64) []hit {
	n := float64(len(r.docs))
	var hits []hit
	for i, doc := range r.docs {
		tf := map[string]int{}
		for _, t := range doc {
			if q[t] > 0 {
				tf[t]++
			}
		}
		if len(tf) == 0 {
			continue
		}
		norm := 1.2 * (1 - 0.75 + 0.75*float64(len(doc))/r.avg)
		// Summed in term order: a float sum in map order differs between
		// runs, and so would ties between units.
		var s float64
		for _, t := range slices.Sorted(maps.Keys(tf)) {
			f := tf[t]
			df := float64(r.df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			s += q[t] * idf * float64(f) * 2.2 / (float64(f) + norm)
		}
		hits = append(hits, hit{from: r.units[i][0], to: r.units[i][1], score: s})
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.from, a.from)) })
	return hits
}

// stem is a light English suffix stripper (plural, -ing, -ed, -ly and a
// few derivational endings), enough to meet "decided"/"decide",
// "batteries"/"battery", "designing"/"design". It is not Porter's: it is
// the measurement's question whether stemming helps, not its answer.
func stem(w string) string {
	if len(w) <= 3 || w[0] >= '0' && w[0] <= '9' {
		return w
	}
	for _, s := range []struct{ suf, rep string }{
		{"ational", "ate"}, {"ations", "ate"}, {"ation", "ate"}, {"nesses", ""}, {"ness", ""}, {"ments", ""}, {"ment", ""},
		{"ingly", ""}, {"edly", ""}, {"ies", "y"}, {"ied", "y"}, {"ing", ""}, {"ed", ""}, {"ly", ""}, {"es", "e"}, {"s", ""},
	} {
		if strings.HasSuffix(w, s.suf) && len(w)-len(s.suf)+len(s.rep) >= 3 {
			if s.suf == "s" && (strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "us") || strings.HasSuffix(w, "is")) {
				return w
			}
			w = w[:len(w)-len(s.suf)] + s.rep
			// "designing" → "design", "stopped" → "stop": undouble.
			if n := len(w); (s.suf == "ing" || s.suf == "ed") && n >= 2 && w[n-1] == w[n-2] && !strings.ContainsRune("lsz", rune(w[n-1])) {
				w = w[:n-1]
			}
			// "decided" → "decid", "decide" → "decid": a final e goes.
			return strings.TrimSuffix(w, "e")
		}
	}
	return strings.TrimSuffix(w, "e")
}

// expanded is pseudo-relevance feedback (RM3's idea, simply): the query's
// terms at weight 1 plus the terms that weigh most in the top k hits
// (tf·idf, by hit score), n of them at weight w.
func (r *ranker) expanded(query string, k, n int, w float64) []hit {
	first := r.rank(query)
	q := map[string]float64{}
	for _, t := range r.opts.terms(query) {
		q[t] = 1
	}
	docs := float64(len(r.docs))
	weight := map[string]float64{}
	for _, h := range first[:min(k, len(first))] {
		// The hit's unit is the doc starting at h.from (units are in
		// transcript order, one per start).
		for _, t := range r.docs[r.unitAt(h.from)] {
			if q[t] == 0 && r.df[t] > 1 {
				weight[t] += h.score * math.Log(docs/float64(r.df[t]))
			}
		}
	}
	terms := make([]string, 0, len(weight))
	for t := range weight {
		terms = append(terms, t)
	}
	slices.SortFunc(terms, func(a, b string) int { return cmp.Or(cmp.Compare(weight[b], weight[a]), strings.Compare(a, b)) })
	for _, t := range terms[:min(n, len(terms))] {
		q[t] = w
	}
	return r.rankWeighted(q)
}

// unitAt is the index of the unit that starts at turn i.
func (r *ranker) unitAt(i int) int {
	j, _ := slices.BinarySearchFunc(r.units, i, func(u [2]int, i int) int { return cmp.Compare(u[0], i) })
	return j
}

// diversified reorders hits by maximal marginal relevance: each next hit
// is the one whose score, less lambda times its word overlap (Jaccard)
// with the hits already taken, is highest.
func (r *ranker) diversified(hits []hit, lambda float64, top int) []hit {
	hits = hits[:min(top, len(hits))]
	if len(hits) == 0 {
		return hits
	}
	maxScore := hits[0].score
	sets := make([]map[string]bool, len(hits))
	for i, h := range hits {
		sets[i] = map[string]bool{}
		for _, t := range r.docs[r.unitAt(h.from)] {
			sets[i][t] = true
		}
	}
	taken := make([]bool, len(hits))
	var out []hit
	for range hits {
		bi, bs := -1, math.Inf(-1)
		for i, h := range hits {
			if taken[i] {
				continue
			}
			sim := 0.0
			for j := range hits {
				if taken[j] {
					sim = max(sim, jaccard(sets[i], sets[j]))
				}
			}
			if s := h.score/maxScore - lambda*sim; s > bs {
				bi, bs = i, s
			}
		}
		taken[bi] = true
		out = append(out, hits[bi])
	}
	return out
}

func jaccard(a, b map[string]bool) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	in := 0
	for t := range a {
		if b[t] {
			in++
		}
	}
	return float64(in) / float64(len(a)+len(b)-in)
}
