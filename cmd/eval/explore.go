package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/foldstream/foldstream/client"
)

// exploration measures choices for ranking, packing and what a summary
// keeps (-explore), on the same questions as the main table, with the
// evaluation's reference ranker and packer (rank.go, pack.go) and the
// processor's real summary. Every row is shown per corpus of the
// development set (product design, academic, parliamentary committee)
// and per question kind, because a choice that helps only one of them is
// a choice tuned to it.
type exploration struct {
	budget int
	order  []string
	rows   map[string]*exploreRow
	vs     map[string]string // row → the row its Δ is against
}

// exploreRow sums one experiment's recall by column.
type exploreRow struct {
	sum   map[string]float64
	n     map[string]int
	chars float64
	// per is the recall of each question, in the order they were asked
	// (the same for every row), with its corpus: for paired differences.
	per    []float64
	corpus []string
}

// exploreRef is the row the others are compared with, question by
// question: the reference packing (summary, as many hits ±1 as fit, 2,000
// chars of newest turns, stop words and light stemming).
const exploreRef = "rank: + stop words + light stemming"

// offlineSummaryRow is what the other summaries are compared with.
const offlineSummaryRow = "summary: the offline summarizer's"

// Columns of the exploration table.
var exploreCols = []string{"all", "product", "academic", "committee", "summarize-q", "other-q"}

// corpus names a QMSum meeting's source by its file name.
func corpus(name string) string {
	switch {
	case strings.HasPrefix(name, "ES"), strings.HasPrefix(name, "IS"), strings.HasPrefix(name, "TS"):
		return "product"
	case strings.HasPrefix(name, "B"):
		return "academic"
	case strings.HasPrefix(name, "covid"), strings.HasPrefix(name, "education"):
		return "committee"
	}
	return "other"
}

// queryKind separates "summarize the discussion about X" from pointed
// questions (what, why, how, did).
func queryKind(q string) string {
	l := strings.ToLower(strings.TrimSpace(q))
	if strings.HasPrefix(l, "summar") {
		return "summarize-q"
	}
	return "other-q"
}

func newExploration(budget int) *exploration {
	return &exploration{budget: budget, rows: map[string]*exploreRow{}, vs: map[string]string{}}
}

func (x *exploration) add(name, meetingName, q string, r float64, chars int) {
	row, ok := x.rows[name]
	if !ok {
		row = &exploreRow{sum: map[string]float64{}, n: map[string]int{}}
		x.rows[name] = row
		x.order = append(x.order, name)
	}
	for _, col := range []string{"all", corpus(meetingName), queryKind(q)} {
		row.sum[col] += r
		row.n[col]++
	}
	row.chars += float64(chars)
	row.per = append(row.per, r)
	row.corpus = append(row.corpus, corpus(meetingName))
}

// delta is the mean paired difference of row over ref, its standard
// error, and in how many of the corpora the mean difference has the
// overall sign.
func delta(row, ref *exploreRow) (mean, se float64, agree, corpora int) {
	n := len(row.per)
	if n == 0 || n != len(ref.per) {
		return 0, 0, 0, 0
	}
	by := map[string][2]float64{}
	var sum, sq float64
	for i := range n {
		d := row.per[i] - ref.per[i]
		sum += d
		sq += d * d
		c := by[row.corpus[i]]
		by[row.corpus[i]] = [2]float64{c[0] + d, c[1] + 1}
	}
	mean = sum / float64(n)
	if n > 1 {
		se = math.Sqrt((sq/float64(n) - mean*mean) / float64(n-1))
	}
	for _, c := range by {
		corpora++
		if cm := c[0] / c[1]; cm*mean > 0 || cm == 0 && mean == 0 {
			agree++
		}
	}
	return mean, se, agree, corpora
}

// experiment is one context built for a question.
type experiment struct {
	name string
	text func(q query) string
	// vs is the row its Δ is against; empty: exploreRef.
	vs string
}

// explore scores every experiment on one question.
func (x *exploration) explore(m *meeting, aText, bText, summary string, cursor int, q query, answer map[string]bool, sc scoring) {
	total := len(m.Turns)
	B := x.budget
	rankers := map[rankOpts]*ranker{}
	hits := func(o rankOpts, query string) []hit {
		r, ok := rankers[o]
		if !ok {
			r = newRanker(m.Turns, cursor, o)
			rankers[o] = r
		}
		return r.rank(query)
	}
	best := rankOpts{stop: true, stem: true}
	packed := func(ro rankOpts, po packOpts) func(query) string {
		return func(q query) string {
			if po.clip > 0 {
				po.stem = ro
				po.terms = map[string]bool{}
				for _, t := range ro.terms(q.Query) {
					po.terms[t] = true
				}
			}
			return pack(m, summary, cursor, hits(ro, q.Query), po)
		}
	}
	base := packOpts{budget: B, summary: true, neighbours: 1, windowMin: 2000}
	with := func(f func(*packOpts)) packOpts { p := base; f(&p); return p }
	exps := []experiment{
		{fmt.Sprintf("truncation, %d chars", B), func(query) string { return m.truncation(total, B) }, ""},
		{fmt.Sprintf("summary + newest turns, %d chars", B), packed(best, with(func(p *packOpts) { p.excerpts = -1 })), ""},
		{"today's context (a) + 5 BM25 turns, no budget", func(q query) string {
			return aText + excerptBlock(m, hits(rankOpts{}, q.Query), 5)
		}, ""},
		{"today's context (a) + 10 BM25 turns ±1, no budget", func(q query) string {
			return aText + excerptBlock(m, widen(hits(best, q.Query), 10, 1, cursor), 0)
		}, ""},
		// Ranking, packed the same way (neighbours ±1, 2,000 chars of window).
		{"rank: plain BM25 (words)", packed(rankOpts{}, base), ""},
		{"rank: + stop words", packed(rankOpts{stop: true}, base), ""},
		{"rank: + stop words + light stemming", packed(best, base), ""},
		{"rank: + stemming + speaker names indexed", packed(rankOpts{stop: true, stem: true, speaker: true}, base), ""},
		{"rank: stemming, 3-turn passages", packed(rankOpts{stop: true, stem: true, passage: 3}, with(func(p *packOpts) { p.neighbours = 0 })), ""},
		{"rank: stemming, 5-turn passages", packed(rankOpts{stop: true, stem: true, passage: 5}, with(func(p *packOpts) { p.neighbours = 0 })), ""},
		// Neighbours.
		{"neighbours: none", packed(best, with(func(p *packOpts) { p.neighbours = 0 })), ""},
		{"neighbours: ±1", packed(best, base), ""},
		{"neighbours: ±2", packed(best, with(func(p *packOpts) { p.neighbours = 2 })), ""},
		{"neighbours: 1 before", packed(best, with(func(p *packOpts) { p.prevOnly = true })), ""},
		{"neighbours: 2 before", packed(best, with(func(p *packOpts) { p.neighbours, p.prevOnly = 2, true })), ""},
		// How many excerpts.
		{"excerpts: 3 hits ±1", packed(best, with(func(p *packOpts) { p.excerpts = 3 })), ""},
		{"excerpts: 5 hits ±1", packed(best, with(func(p *packOpts) { p.excerpts = 5 })), ""},
		{"excerpts: 10 hits ±1", packed(best, with(func(p *packOpts) { p.excerpts = 10 })), ""},
		{"excerpts: 20 hits ±1", packed(best, with(func(p *packOpts) { p.excerpts = 20 })), ""},
		{"excerpts: as many as fit", packed(best, base), ""},
		// How much of the budget the newest turns keep.
		{"window kept: 0 chars", packed(best, with(func(p *packOpts) { p.windowMin = 0 })), ""},
		{"window kept: 1,000 chars", packed(best, with(func(p *packOpts) { p.windowMin = 1000 })), ""},
		{"window kept: 2,000 chars", packed(best, base), ""},
		{"window kept: 4,000 chars", packed(best, with(func(p *packOpts) { p.windowMin = 4000 })), ""},
		{"window kept: 6,000 chars", packed(best, with(func(p *packOpts) { p.windowMin = 6000 })), ""},
		// Long turns and labels.
		{"excerpt turns clipped to 300 chars around the match", packed(best, with(func(p *packOpts) { p.clip = 300 })), ""},
		{"excerpt turns clipped to 600 chars around the match", packed(best, with(func(p *packOpts) { p.clip = 600 })), ""},
		{"labels: one per run of consecutive turns", packed(best, with(func(p *packOpts) { p.groupLabels = true })), ""},
		{"labels: the service's date and time on every turn", packed(best, with(func(p *packOpts) { p.dateLabels = true })), ""},
		{"labels: the service's, one per run of consecutive turns", packed(best, with(func(p *packOpts) { p.dateLabels, p.groupLabels = true, true })), ""},
		{"labels: none (what the time labels cost)", packed(best, with(func(p *packOpts) { p.noLabels = true })), ""},
		{"query: + 10 feedback terms of the top 5 hits (w 0.3)", func(q query) string {
			rankers[best] = cmp.Or(rankers[best], newRanker(m.Turns, cursor, best))
			return pack(m, summary, cursor, rankers[best].expanded(q.Query, 5, 10, 0.3), base)
		}, ""},
		{"query: + 20 feedback terms of the top 10 hits (w 0.5)", func(q query) string {
			rankers[best] = cmp.Or(rankers[best], newRanker(m.Turns, cursor, best))
			return pack(m, summary, cursor, rankers[best].expanded(q.Query, 10, 20, 0.5), base)
		}, ""},
		{"diversity: MMR over the top 100 hits (λ 0.5)", func(q query) string {
			h := hits(best, q.Query)
			return pack(m, summary, cursor, rankers[best].diversified(h, 0.5, 100), base)
		}, ""},
		{"query: question meta-words dropped", func(q query) string {
			return pack(m, summary, cursor, hits(best, stripMeta(q.Query)), base)
		}, ""},
		// The ceiling of packing: the annotated evidence as the excerpts.
		{"oracle: evidence turns as excerpts, as many as fit", func(q query) string {
			var ev []hit
			for _, sp := range q.Spans {
				for i := sp[0]; i <= sp[1]; i++ {
					ev = append(ev, hit{from: i, to: i})
				}
			}
			return pack(m, summary, cursor, ev, with(func(p *packOpts) { p.neighbours = 0 }))
		}, ""},
		// The findings together.
		{"combined: 3-turn passages, feedback terms, run labels", func(q query) string {
			return combined(m, summary, cursor, q.Query, base, rankers)
		}, ""},
		{"combined, window kept 1,000 chars", func(q query) string {
			return combined(m, summary, cursor, q.Query, with(func(p *packOpts) { p.windowMin = 1000 }), rankers)
		}, ""},
		{"no summary (its room to excerpts)", packed(best, with(func(p *packOpts) { p.summary = false })), ""},
		// Budget.
		{"budget 5,000: truncation", func(query) string { return m.truncation(total, 5000) }, ""},
		{"budget 5,000: packed", packed(best, with(func(p *packOpts) { p.budget = 5000; p.windowMin = 1000 })), "budget 5,000: truncation"},
		{"budget 20,000: truncation", func(query) string { return m.truncation(total, 20000) }, ""},
		{"budget 20,000: packed", packed(best, with(func(p *packOpts) { p.budget = 20000; p.windowMin = 4000 })), "budget 20,000: truncation"},
		// What a query-independent 1,200-char summary of the folded turns
		// can hold.
		{offlineSummaryRow, func(query) string { return summary }, "none"},
		{"summary: first 1,200 chars (lead)", func(query) string { return capChars(render(m.Turns[:cursor]), 1200) }, offlineSummaryRow},
		{"summary: evenly spaced turns", func(query) string { return sampled(m.Turns[:cursor], 1200) }, offlineSummaryRow},
		{"summary: turns covering the most rare words", func(query) string { return salient(m.Turns[:cursor], 1200) }, offlineSummaryRow},
		{"summary: the offline one cut to 900 + top words (300)", func(query) string {
			return capChars(summary, 900) + "\n" + keywords(m.Turns[:cursor], 300)
		}, offlineSummaryRow},
		{"summary: the offline one cut to 600 + top words (600)", func(query) string {
			return capChars(summary, 600) + "\n" + keywords(m.Turns[:cursor], 600)
		}, offlineSummaryRow},
		{"summary: the meeting's top words (tf-idf list)", func(query) string { return keywords(m.Turns[:cursor], 1200) }, offlineSummaryRow},
	}
	if bText != "" {
		// The service's own, beside the reference packings.
		exps = append([]experiment{{"the service's query-aware context (b)", func(query) string { return bText }, ""}}, exps...)
	}
	for _, e := range exps {
		text := e.text(q)
		r, _ := recall(answer, sc.vocab(text))
		x.add(e.name, m.Name, q.Query, r, runes(text))
		if e.vs != "" {
			x.vs[e.name] = e.vs
		}
	}
}

// excerptBlock renders the first k hits (all when k is 0) as excerpt
// lines in transcript order.
func excerptBlock(m *meeting, hits []hit, k int) string {
	if k > 0 && len(hits) > k {
		hits = hits[:k]
	}
	var idx []int
	seen := map[int]bool{}
	for _, h := range hits {
		for i := h.from; i <= h.to; i++ {
			if !seen[i] {
				seen[i] = true
				idx = append(idx, i)
			}
		}
	}
	slices.Sort(idx)
	var b strings.Builder
	b.WriteString(excerptsHeader + "\n")
	for _, i := range idx {
		b.WriteString(m.excerptLine(i, m.Turns[i]) + "\n")
	}
	return b.String()
}

// widen keeps the first k hits, each with n neighbours on either side
// within [0, end).
func widen(hits []hit, k, n, end int) []hit {
	hits = hits[:min(k, len(hits))]
	out := make([]hit, len(hits))
	for i, h := range hits {
		out[i] = hit{from: max(0, h.from-n), to: min(end-1, h.to+n), score: h.score}
	}
	return out
}

// capChars cuts s to at most n runes.
func capChars(s string, n int) string {
	r := []rune(s)
	return string(r[:min(n, len(r))])
}

// sampled takes turns evenly spaced over turns, in order, while they fit.
func sampled(turns []line, chars int) string {
	if len(turns) == 0 {
		return ""
	}
	var b strings.Builder
	used := 0
	var keep []int
	for _, i := range spreadIndices(len(turns)) {
		c := client.LineChars(turns[i].String())
		if used+c <= chars {
			used += c
			keep = append(keep, i)
		}
	}
	slices.Sort(keep)
	for _, i := range keep {
		b.WriteString(turns[i].String() + "\n")
	}
	return b.String()
}

// spreadIndices orders 0..n-1 so that every prefix is spread over the
// range (bit-reversal order of a power-of-two cover).
func spreadIndices(n int) []int {
	size := 1
	for size < n {
		size <<= 1
	}
	bits := 0
	for 1<<bits < size {
		bits++
	}
	var out []int
	for i := range size {
		rev := 0
		for b := range bits {
			if i&(1<<b) != 0 {
				rev |= 1 << (bits - 1 - b)
			}
		}
		if rev < n {
			out = append(out, rev)
		}
	}
	return out
}

// idfOf is each content word's inverse document frequency over turns.
func idfOf(turns []line) map[string]float64 {
	df := map[string]int{}
	for _, t := range turns {
		for w := range contentWords(t.Text) {
			df[w]++
		}
	}
	idf := map[string]float64{}
	for w, n := range df {
		idf[w] = math.Log(float64(len(turns)+1) / float64(n))
	}
	return idf
}

// salient greedily picks the turns that add the most not-yet-covered
// word weight (idf) per character, then prints them in order: an
// extractive, query-independent summary.
func salient(turns []line, chars int) string {
	idf := idfOf(turns)
	covered := map[string]bool{}
	picked := map[int]bool{}
	used := 0
	for {
		bi, bs := -1, 0.0
		for i, t := range turns {
			c := client.LineChars(t.String())
			if picked[i] || used+c > chars {
				continue
			}
			var s float64
			for w := range contentWords(t.Text) {
				if !covered[w] {
					s += idf[w]
				}
			}
			if s /= float64(c); s > bs {
				bi, bs = i, s
			}
		}
		if bi < 0 {
			break
		}
		picked[bi] = true
		used += client.LineChars(turns[bi].String())
		for w := range contentWords(turns[bi].Text) {
			covered[w] = true
		}
	}
	var b strings.Builder
	for i, t := range turns {
		if picked[i] {
			b.WriteString(t.String() + "\n")
		}
	}
	return b.String()
}

// keywords lists the meeting's words by tf·idf, to chars: not a summary
// anyone would read, but the most this measure can credit per character.
func keywords(turns []line, chars int) string {
	idf := idfOf(turns)
	tf := map[string]int{}
	for _, t := range turns {
		for _, w := range words(t.Text) {
			if !stopWords[w] {
				tf[w]++
			}
		}
	}
	ws := make([]string, 0, len(tf))
	for w := range tf {
		ws = append(ws, w)
	}
	slices.SortFunc(ws, func(a, b string) int {
		return cmp.Or(cmp.Compare(float64(tf[b])*idf[b], float64(tf[a])*idf[a]), strings.Compare(a, b))
	})
	var b strings.Builder
	for _, w := range ws {
		if b.Len()+len(w)+1 > chars {
			break
		}
		b.WriteString(w + " ")
	}
	return b.String()
}

// shortName is a row name as the Δ column names it.
func shortName(name string) string {
	switch name {
	case exploreRef:
		return "ref"
	case offlineSummaryRow:
		return "offline summary"
	}
	return name
}

// print writes the exploration table.
func (x *exploration) print(w io.Writer) {
	writeln(w, "")
	writeln(w, "exploration: answer-word recall of reference contexts (cmd/eval/rank.go, pack.go), budget %d chars unless named;", x.budget)
	writeln(w, "ref: %q = summary, as many BM25 hits ±1 turn as fit, 2,000 chars of newest turns;", exploreRef)
	writeln(w, "Δ: mean paired difference per question, with its standard error and the corpora whose mean difference has the same sign")
	head := fmt.Sprintf("%-52s", "context")
	for _, c := range exploreCols {
		head += fmt.Sprintf(" %11s", c)
	}
	writeln(w, "%s %8s  %s", head, "chars", "Δ all ± s.e. (corpora agreeing) vs")
	for _, name := range x.order {
		row := x.rows[name]
		line := fmt.Sprintf("%-52s", name)
		for _, c := range exploreCols {
			if row.n[c] == 0 {
				line += fmt.Sprintf(" %11s", "-")
				continue
			}
			line += fmt.Sprintf(" %11.3f", row.sum[c]/float64(row.n[c]))
		}
		line += fmt.Sprintf(" %8.0f", row.chars/float64(row.n["all"]))
		vs := cmp.Or(x.vs[name], exploreRef)
		if ref := x.rows[vs]; ref != nil && name != vs {
			if d, se, agree, corpora := delta(row, ref); d == 0 && se == 0 {
				line += "  = " + shortName(vs) // the same context
			} else {
				line += fmt.Sprintf("  %+.3f ± %.3f (%d/%d) %s", d, se, agree, corpora, shortName(vs))
			}
		}
		writeln(w, "%s", line)
	}
	if r := x.rows[x.order[0]]; r != nil {
		counts := "questions:"
		for _, c := range exploreCols {
			counts += fmt.Sprintf(" %s %d,", c, r.n[c])
		}
		writeln(w, "%s", strings.TrimSuffix(counts, ","))
	}
}

// metaWords are words of how people ask about a conversation rather than
// what it was about ("summarize the discussion about …", "what did X
// think of …"): generic to questions about any conversation, not to
// this data set.
var metaWords = map[string]bool{
	"summarize": true, "summarise": true, "summary": true, "discussion": true, "discussions": true, "discuss": true,
	"discussed": true, "talk": true, "talked": true, "think": true, "thought": true, "opinion": true, "opinions": true,
	"say": true, "said": true, "mention": true, "mentioned": true, "meeting": true, "conversation": true,
}

// stripMeta drops the meta-words from a question.
func stripMeta(q string) string {
	var kept []string
	for _, w := range words(q) {
		if !metaWords[w] {
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " ")
}

// combined packs with the choices that helped in every corpus: 3-turn
// passages as the ranking unit, a few feedback terms, one label per run of
// consecutive turns.
func combined(m *meeting, summary string, cursor int, query string, po packOpts, rankers map[rankOpts]*ranker) string {
	ro := rankOpts{stop: true, stem: true, passage: 3}
	r, ok := rankers[ro]
	if !ok {
		r = newRanker(m.Turns, cursor, ro)
		rankers[ro] = r
	}
	po.neighbours, po.groupLabels = 0, true
	return pack(m, summary, cursor, r.expanded(query, 5, 10, 0.3), po)
}
