package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/fold"
)

// The measures, in the order they are printed. Keys name them in -json.
// Those of each budget are keyed by the budget too (mQuery etc.,
// budgetKey).
const (
	mContext    = "a_context"
	mSummary    = "c_summary"
	mTruncA     = "d_truncation_a"
	mTranscript = "e_transcript"
	mEvidence   = "f_evidence"
	// Per budget: the query-aware context (b), dated truncation (d) and
	// plain retrieval (p) of (b)'s size, and (b) without its memory lines
	// (what the memories add).
	mQuery      = "b_query_context"
	mTruncB     = "d_truncation"
	mPlain      = "p_plain_retrieval"
	mNoMemories = "b_without_memories"
)

// budgetKey is measure key's key at budget.
func budgetKey(key string, budget int) string { return fmt.Sprintf("%s_%d", key, budget) }

var measureKeys = []string{mContext, mSummary, mTruncA, mTranscript, mEvidence}

func measureLabel(key string) string {
	switch key {
	case mContext:
		return "(a) context, no query (today's builder)"
	case mSummary:
		return "(c) summary alone"
	case mTruncA:
		return "(d) dated truncation, size of (a)"
	case mTranscript:
		return "(e) whole transcript with dates (ceiling)"
	case mEvidence:
		return "(f) annotated evidence spans"
	}
	return key
}

// results is what a run measured.
type results struct {
	Data        string `json:"data"`
	Budgets     []int  `json:"budgets_chars"`
	RecallTurns int    `json:"recall_turns,omitempty"`
	// Sitting is -sitting: turns a day (0: one sitting).
	Sitting    int      `json:"sitting,omitempty"`
	ScoreStem  bool     `json:"score_stem,omitempty"`
	Recent     int      `json:"recent_window"`
	Batch      int      `json:"batch"`
	SummaryMax int      `json:"max_summary_chars"`
	Summarizer string   `json:"summarizer"`
	Meetings   int      `json:"meetings"`
	Turns      int      `json:"turns"`
	Queries    int      `json:"specific_queries"`
	Scored     int      `json:"scored_queries"`
	QueryAware bool     `json:"query_aware"`
	Warnings   []string `json:"warnings,omitempty"`
	// Recall and Chars are means over the scored queries, per measure.
	Recall map[string]float64 `json:"recall"`
	Chars  map[string]float64 `json:"chars"`
	// SpreadTurns is -spread; Spread and Rest are the means over the
	// scored queries whose evidence runs over more turns than that, and
	// over the others (query.spread), with their numbers.
	SpreadTurns int `json:"spread_turns"`
	// Pairs: the questions were asked two at a time (-pairs).
	Pairs  bool            `json:"pairs,omitempty"`
	Spread *questionSubset `json:"spread"`
	Rest   *questionSubset `json:"rest"`
	// Latency of the context requests, ms.
	LatencyMS      map[string]latency `json:"latency_ms"`
	PublishSeconds float64            `json:"publish_seconds"`
	SettleSeconds  float64            `json:"settle_seconds"`
	TookSeconds    float64            `json:"took_seconds"`
	PerMeeting     []*meetingResult   `json:"per_meeting"`

	took    map[string][]time.Duration
	explore *exploration // -explore
}

// questionSubset is the mean recall of some of the scored queries, per measure.
type questionSubset struct {
	Queries int                `json:"queries"`
	Recall  map[string]float64 `json:"recall"`
}

type latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
	N   int     `json:"n"`
}

// meetingResult is one meeting's figures.
type meetingResult struct {
	Name    string `json:"name"`
	Turns   int    `json:"turns"`
	Queries int    `json:"specific_queries"`
	// Cursor is the first unfolded turn, WindowStart the first verbatim
	// turn of the no-query context: a question counts when its evidence
	// ends before WindowStart.
	Cursor      int64 `json:"cursor"`
	WindowStart int64 `json:"window_start"`
	// Summary is the summary of the no-query context.
	Summary string             `json:"summary"`
	Recall  map[string]float64 `json:"recall"`
	Chars   map[string]float64 `json:"chars"`
	Scored  []queryResult      `json:"scored"`
}

// queryResult is one scored question.
type queryResult struct {
	Query        string `json:"query"`
	AnswerWords  int    `json:"answer_words"`
	EvidenceFrom int    `json:"evidence_from"`
	EvidenceEnd  int    `json:"evidence_end"`
	// Spread: the evidence runs over more than -spread turns.
	Spread bool               `json:"spread,omitempty"`
	Recall map[string]float64 `json:"recall"`
	Chars  map[string]int     `json:"chars"`
	// What (b) recalled at each budget.
	Recalled map[int]recalled `json:"recalled,omitempty"`
}

// recalled is what a query-aware context recalled: matching turns, their
// neighbours, memories; how many best matches did not fit; whether it
// kept the summary.
type recalled struct {
	Turns      int `json:"turns,omitempty"`
	Neighbours int `json:"neighbours,omitempty"`
	Memories   int `json:"memories,omitempty"`
	// Restated: memories that restate a turn the reply also shows as an
	// excerpt (its turn, or every content word of it in one excerpt).
	Restated int  `json:"restated,omitempty"`
	Dropped  int  `json:"dropped,omitempty"`
	Summary  bool `json:"summary,omitempty"`
}

func newResults(o opts, w fold.Window) *results {
	res := &results{Data: o.data, Budgets: o.budgets, RecallTurns: o.recallTurns, Sitting: o.sitting, SpreadTurns: o.spread, Pairs: o.pairs, ScoreStem: o.scoring.stem, Recent: w.Recent, Batch: w.Batch, SummaryMax: w.MaxSummaryChars,
		Summarizer: "offline", took: map[string][]time.Duration{}}
	if o.explore {
		res.explore = newExploration(o.budget)
	}
	return res
}

// measure scores every question of m whose evidence left the window.
func measure(ctx context.Context, r *rig, m *meeting, o opts, res *results) error {
	s := sessionID(m)
	base, err := r.context(ctx, client.ContextRequest{Session: s})
	if err != nil {
		return err
	}
	mr := &meetingResult{Name: m.Name, Turns: len(m.Turns), Queries: len(m.Queries) + m.Skipped,
		Cursor: base.ctx.Cursor, WindowStart: base.ctx.TotalTurns, Scored: []queryResult{}}
	if len(base.ctx.Turns) > 0 {
		mr.WindowStart = base.ctx.Turns[0].Index
	}
	if base.ctx.Summary != nil {
		mr.Summary = base.ctx.Summary.Summary
	}
	res.Meetings++
	res.Queries += mr.Queries
	res.PerMeeting = append(res.PerMeeting, mr)
	total := len(m.Turns)
	transcript := m.transcriptDated(total)
	plain := newRanker(m.Turns, total, rankOpts{stop: true, stem: true})
	for _, q := range m.Queries {
		if !q.leftWindow(int(mr.WindowStart)) || runes(q.Query) > client.MaxContextQueryChars {
			continue
		}
		answer := o.scoring.answer(q.Answer)
		if len(answer) == 0 {
			continue
		}
		texts := map[string]string{}
		a, err := r.context(ctx, client.ContextRequest{Session: s})
		if err != nil {
			return err
		}
		res.took[mContext] = append(res.took[mContext], a.took)
		texts[mContext] = a.ctx.Prompt()
		texts[mTruncA] = m.truncationDated(total, runes(texts[mContext]))
		qr := queryResult{Query: q.Query, AnswerWords: len(answer), EvidenceFrom: q.evidenceFrom(), EvidenceEnd: q.evidenceEnd(), Spread: q.spread(o.spread),
			Recall: map[string]float64{}, Chars: map[string]int{}, Recalled: map[int]recalled{}}
		for _, budget := range o.budgets {
			if !res.QueryAware {
				break
			}
			b, err := r.context(ctx, client.ContextRequest{Session: s, BudgetChars: budget, Query: q.Query, RecallTurns: o.recallTurns})
			if err != nil {
				return err
			}
			// The first question of a session may build its index (cold);
			// the others find it (warm).
			key := mQuery + "_warm"
			if len(mr.Scored) == 0 && budget == o.budgets[0] {
				key = mQuery + "_first"
			}
			res.took[key] = append(res.took[key], b.took)
			text := b.ctx.Prompt()
			texts[budgetKey(mQuery, budget)] = text
			texts[budgetKey(mTruncB, budget)] = m.truncationDated(total, runes(text))
			texts[budgetKey(mPlain, budget)] = m.plainRetrieval(plain, q.Query, runes(text))
			without := *b.ctx
			without.Recalled = slices.DeleteFunc(slices.Clone(b.ctx.Recalled), func(it client.RecalledItem) bool { return it.Kind == client.RecalledMemory })
			texts[budgetKey(mNoMemories, budget)] = without.Prompt()
			rc := recalled{Dropped: b.ctx.RecallDropped, Summary: b.ctx.Summary != nil}
			for _, it := range b.ctx.Recalled {
				switch {
				case it.Kind == client.RecalledMemory:
					rc.Memories++
				case it.Neighbour:
					rc.Neighbours++
				default:
					rc.Turns++
				}
			}
			rc.Restated = restated(b.ctx.Recalled)
			qr.Recalled[budget] = rc
		}
		texts[mSummary] = ""
		if a.ctx.Summary != nil {
			texts[mSummary] = a.ctx.Summary.Summary
		}
		texts[mTranscript] = transcript
		texts[mEvidence] = m.evidence(q)
		for k, text := range texts {
			qr.Recall[k], _ = recall(answer, o.scoring.vocab(text))
			qr.Chars[k] = runes(text)
		}
		mr.Scored = append(mr.Scored, qr)
		if res.explore != nil {
			res.explore.explore(m, texts[mContext], texts[budgetKey(mQuery, o.budget)], texts[mSummary], int(base.ctx.Cursor), q, answer, o.scoring)
		}
	}
	res.Scored += len(mr.Scored)
	mr.Recall, mr.Chars = means(mr.Scored)
	return nil
}

// means averages recall and chars per measure over qs.
func means(qs []queryResult) (map[string]float64, map[string]float64) {
	rec, chars := map[string]float64{}, map[string]float64{}
	n := map[string]int{}
	for _, q := range qs {
		for k, v := range q.Recall {
			rec[k] += v
			chars[k] += float64(q.Chars[k])
			n[k]++
		}
	}
	for k := range rec {
		rec[k] /= float64(n[k])
		chars[k] /= float64(n[k])
	}
	return rec, chars
}

func (res *results) finish(took time.Duration) {
	var all []queryResult
	for _, m := range res.PerMeeting {
		all = append(all, m.Scored...)
	}
	res.Recall, res.Chars = means(all)
	var spread, rest []queryResult
	for _, q := range all {
		if q.Spread {
			spread = append(spread, q)
		} else {
			rest = append(rest, q)
		}
	}
	res.Spread, res.Rest = &questionSubset{Queries: len(spread)}, &questionSubset{Queries: len(rest)}
	res.Spread.Recall, _ = means(spread)
	res.Rest.Recall, _ = means(rest)
	res.LatencyMS = map[string]latency{}
	for k, ds := range res.took {
		slices.Sort(ds)
		res.LatencyMS[k] = latency{P50: ms(quantile(ds, 0.5)), P99: ms(quantile(ds, 0.99)), Max: ms(ds[len(ds)-1]), N: len(ds)}
	}
	res.TookSeconds = took.Seconds()
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// print writes the summary table (and, verbose, a row per meeting).
func (res *results) print(w io.Writer, verbose bool) {
	writeln(w, "foldstream continuity eval: %d meetings, %d turns, from %s", res.Meetings, res.Turns, res.Data)
	writeln(w, "processor defaults: mode window, %d recent turns, batches of %d, summary <= %d chars, %s summarizer",
		res.Recent, res.Batch, res.SummaryMax, res.Summarizer)
	if res.RecallTurns > 0 {
		writeln(w, "query-aware context: recall_turns %d", res.RecallTurns)
	}
	if res.Sitting > 0 {
		writeln(w, "replayed as chats of many days: %d turns a day (-sitting)", res.Sitting)
	}
	if res.Pairs {
		writeln(w, "questions asked two at a time, their evidence at least %d turns apart (-pairs)", res.SpreadTurns)
	}
	writeln(w, "questions: %d specific, %d scored (evidence entirely before the verbatim window)", res.Queries, res.Scored)
	stemming := "no stemming"
	if res.ScoreStem {
		stemming = "words light-stemmed (-score-stem)"
	}
	writeln(w, "answer-word recall: share of the reference answer's distinct content words (lower-cased, NLTK stop words removed, %s) found in the context", stemming)
	writeln(w, "")
	writeln(w, "%-48s %8s %10s", "context", "recall", "chars")
	for _, k := range measureKeys {
		if v, ok := res.Recall[k]; ok {
			writeln(w, "%-48s %8.3f %10.0f", measureLabel(k), v, res.Chars[k])
		}
	}
	if !res.QueryAware {
		writeln(w, "(b): n/a, the service ignores the \"query\" field (no query-aware packing yet)")
	} else if res.Scored > 0 {
		writeln(w, "")
		writeln(w, "each budget: (b) the context with the query; of (b)'s size: (d) dated truncation, (p) plain retrieval (BM25 over every turn, best first, transcript order, a date line per day)")
		writeln(w, "%-7s %15s %15s %15s %8s %8s %8s", "budget", "(b) query-aware", "(d) truncation", "(p) plain", "(b)/(p)", "(b)/(d)", "(b)/(e)")
		for _, budget := range res.Budgets {
			b, d, p := res.Recall[budgetKey(mQuery, budget)], res.Recall[budgetKey(mTruncB, budget)], res.Recall[budgetKey(mPlain, budget)]
			writeln(w, "%-7d %7.3f %7.0f %7.3f %7.0f %7.3f %7.0f %8.2f %8.2f %8.2f", budget,
				b, res.Chars[budgetKey(mQuery, budget)], d, res.Chars[budgetKey(mTruncB, budget)], p, res.Chars[budgetKey(mPlain, budget)],
				ratio(b, p), ratio(b, d), ratio(b, res.Recall[mTranscript]))
		}
		res.printSpread(w)
		writeln(w, "")
		n := float64(res.Scored)
		for _, budget := range res.Budgets {
			var sum recalled
			summaries := 0
			for _, m := range res.PerMeeting {
				for _, q := range m.Scored {
					rc := q.Recalled[budget]
					sum.Turns, sum.Neighbours, sum.Memories, sum.Dropped = sum.Turns+rc.Turns, sum.Neighbours+rc.Neighbours, sum.Memories+rc.Memories, sum.Dropped+rc.Dropped
					sum.Restated += rc.Restated
					if rc.Summary {
						summaries++
					}
				}
			}
			line := fmt.Sprintf("(b) at %d recalled per question: %.1f matching turns, %.1f neighbours, %.1f memories (%d of %d restating an excerpt); %.1f matches did not fit; summary in %.0f%%",
				budget, float64(sum.Turns)/n, float64(sum.Neighbours)/n, float64(sum.Memories)/n, sum.Restated, sum.Memories, float64(sum.Dropped)/n, 100*float64(summaries)/n)
			if v, ok := res.Recall[budgetKey(mNoMemories, budget)]; ok && sum.Memories > 0 {
				line += fmt.Sprintf("; without its memory lines %+.3f", v-res.Recall[budgetKey(mQuery, budget)])
			}
			writeln(w, "%s", line)
		}
	}
	writeln(w, "")
	for _, k := range []struct{ key, label string }{
		{mContext, "(a) context request"},
		{mQuery + "_first", "(b) first of a session (index cold)"},
		{mQuery + "_warm", "(b) later ones (index warm)"},
	} {
		if l, ok := res.LatencyMS[k.key]; ok {
			writeln(w, "latency %-40s p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d requests)", k.label, l.P50, l.P99, l.Max, l.N)
		}
	}
	writeln(w, "replay: published in %.1fs, every meeting folded and settled after %.1fs; eval took %.1fs", res.PublishSeconds, res.SettleSeconds, res.TookSeconds)
	for _, warn := range res.Warnings {
		writeln(w, "warning: %s", warn)
	}
	if !verbose {
		return
	}
	writeln(w, "")
	keys := slices.Clone(measureKeys)
	head := fmt.Sprintf("%-14s %6s %6s %7s |%7s%7s%7s%7s%7s", "meeting", "turns", "window", "scored", "(a)", "(c)", "(d)a", "(e)", "(f)")
	for _, budget := range res.Budgets {
		keys = append(keys, budgetKey(mQuery, budget), budgetKey(mPlain, budget))
		head += fmt.Sprintf("%7s%7s", fmt.Sprintf("b%d", budget/1000), fmt.Sprintf("p%d", budget/1000))
	}
	writeln(w, "%s", head)
	for _, m := range res.PerMeeting {
		row := fmt.Sprintf("%-14s %6d %6d %4d/%-2d |", m.Name, m.Turns, m.WindowStart, len(m.Scored), m.Queries)
		for _, k := range keys {
			if v, ok := m.Recall[k]; ok {
				row += fmt.Sprintf(" %6.3f", v)
			} else {
				row += fmt.Sprintf(" %6s", "-")
			}
		}
		writeln(w, "%s", row)
	}
}

// printSpread writes each budget's row for the questions whose evidence
// is spread (query.spread) and for the rest: (b), (p) and (e), and (b)'s
// ratios to (p) and (e).
func (res *results) printSpread(w io.Writer) {
	if res.Spread == nil || res.Rest == nil {
		return
	}
	writeln(w, "")
	writeln(w, "evidence spread: %d questions whose evidence runs over more than %d turns, first to last (-spread); the rest: %d", res.Spread.Queries, res.SpreadTurns, res.Rest.Queries)
	head := fmt.Sprintf("%-7s", "budget")
	for _, name := range []string{"spread:", "rest:"} {
		head += fmt.Sprintf(" | %-7s%4s %6s %6s %7s %7s", name, "(b)", "(p)", "(e)", "(b)/(p)", "(b)/(e)")
	}
	writeln(w, "%s", head)
	for _, budget := range res.Budgets {
		row := fmt.Sprintf("%-7d", budget)
		for _, s := range []*questionSubset{res.Spread, res.Rest} {
			b, p, e := s.Recall[budgetKey(mQuery, budget)], s.Recall[budgetKey(mPlain, budget)], s.Recall[mTranscript]
			if s.Queries == 0 {
				row += fmt.Sprintf(" | %41s", "-")
				continue
			}
			row += fmt.Sprintf(" | %11.3f %6.3f %6.3f %7.2f %7.2f", b, p, e, ratio(b, p), ratio(b, e))
		}
		writeln(w, "%s", row)
	}
}

// ratio is a/b, 0 when b is.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// restated counts the memories among items that restate a turn the same
// reply shows as an excerpt: the memory's turn is one of them, or every
// content word of the memory is in one of them.
func restated(items []client.RecalledItem) int {
	var turns []map[string]bool
	ids := map[string]bool{}
	for _, it := range items {
		if it.Kind == client.RecalledTurn {
			turns = append(turns, contentWords(it.Text))
			ids[it.TurnID] = true
		}
	}
	n := 0
	for _, it := range items {
		if it.Kind != client.RecalledMemory {
			continue
		}
		if it.TurnID != "" && ids[it.TurnID] {
			n++
			continue
		}
		words := contentWords(it.Text)
		for _, t := range turns {
			if len(words) > 0 && subset(words, t) {
				n++
				break
			}
		}
	}
	return n
}

func subset(a, b map[string]bool) bool {
	for w := range a {
		if !b[w] {
			return false
		}
	}
	return true
}
