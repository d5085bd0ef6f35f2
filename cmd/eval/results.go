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
const (
	mContext    = "a_context"
	mQuery      = "b_query_context"
	mSummary    = "c_summary"
	mTruncA     = "d_truncation_a"
	mTruncB     = "d_truncation_b"
	mTranscript = "e_transcript"
	mEvidence   = "f_evidence"
	// mNoMemories is (b) without its memory lines: what the memories add.
	mNoMemories = "b_without_memories"
)

var measureKeys = []string{mContext, mQuery, mSummary, mTruncA, mTruncB, mTranscript, mEvidence}

func measureLabel(key string, budget int) string {
	switch key {
	case mContext:
		return "(a) context, no query (today's builder)"
	case mQuery:
		return fmt.Sprintf("(b) context with the query, budget %d chars", budget)
	case mSummary:
		return "(c) summary alone"
	case mTruncA:
		return "(d) plain truncation, size of (a)"
	case mTruncB:
		return "(d) plain truncation, size of (b)"
	case mTranscript:
		return "(e) whole transcript (ceiling)"
	case mEvidence:
		return "(f) annotated evidence spans"
	}
	return key
}

// results is what a run measured.
type results struct {
	Data        string   `json:"data"`
	Budget      int      `json:"budget_chars"`
	RecallTurns int      `json:"recall_turns,omitempty"`
	ScoreStem   bool     `json:"score_stem,omitempty"`
	Recent      int      `json:"recent_window"`
	Batch       int      `json:"batch"`
	SummaryMax  int      `json:"max_summary_chars"`
	Summarizer  string   `json:"summarizer"`
	Meetings    int      `json:"meetings"`
	Turns       int      `json:"turns"`
	Queries     int      `json:"specific_queries"`
	Scored      int      `json:"scored_queries"`
	QueryAware  bool     `json:"query_aware"`
	Warnings    []string `json:"warnings,omitempty"`
	// Recall and Chars are means over the scored queries, per measure.
	Recall map[string]float64 `json:"recall"`
	Chars  map[string]float64 `json:"chars"`
	// Latency of the context requests, ms.
	LatencyMS      map[string]latency `json:"latency_ms"`
	PublishSeconds float64            `json:"publish_seconds"`
	SettleSeconds  float64            `json:"settle_seconds"`
	TookSeconds    float64            `json:"took_seconds"`
	PerMeeting     []*meetingResult   `json:"per_meeting"`

	took    map[string][]time.Duration
	explore *exploration // -explore
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
	Query        string             `json:"query"`
	AnswerWords  int                `json:"answer_words"`
	EvidenceFrom int                `json:"evidence_from"`
	EvidenceEnd  int                `json:"evidence_end"`
	Recall       map[string]float64 `json:"recall"`
	Chars        map[string]int     `json:"chars"`
	// What (b) recalled: matching turns, their neighbours, memories; and
	// how many best matches did not fit.
	RecalledTurns      int `json:"recalled_turns,omitempty"`
	RecalledNeighbours int `json:"recalled_neighbours,omitempty"`
	RecalledMemories   int `json:"recalled_memories,omitempty"`
	RecallDropped      int `json:"recall_dropped,omitempty"`
}

func newResults(o opts, w fold.Window) *results {
	res := &results{Data: o.data, Budget: o.budget, RecallTurns: o.recallTurns, ScoreStem: o.scoring.stem, Recent: w.Recent, Batch: w.Batch, SummaryMax: w.MaxSummaryChars,
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
	transcript := m.transcript(total)
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
		texts[mTruncA] = m.truncation(total, runes(texts[mContext]))
		qr := queryResult{Query: q.Query, AnswerWords: len(answer), EvidenceFrom: q.Spans[0][0], EvidenceEnd: q.evidenceEnd(),
			Recall: map[string]float64{}, Chars: map[string]int{}}
		if res.QueryAware {
			b, err := r.context(ctx, client.ContextRequest{Session: s, BudgetChars: o.budget, Query: q.Query, RecallTurns: o.recallTurns})
			if err != nil {
				return err
			}
			// The first question of a session may build its index (cold);
			// the others find it (warm).
			key := mQuery + "_warm"
			if len(mr.Scored) == 0 {
				key = mQuery + "_first"
			}
			res.took[key] = append(res.took[key], b.took)
			texts[mQuery] = b.ctx.Prompt()
			texts[mTruncB] = m.truncation(total, runes(texts[mQuery]))
			qr.RecallDropped = b.ctx.RecallDropped
			without := *b.ctx
			without.Recalled = slices.DeleteFunc(slices.Clone(b.ctx.Recalled), func(it client.RecalledItem) bool { return it.Kind == client.RecalledMemory })
			texts[mNoMemories] = without.Prompt()
			for _, it := range b.ctx.Recalled {
				switch {
				case it.Kind == client.RecalledMemory:
					qr.RecalledMemories++
				case it.Neighbour:
					qr.RecalledNeighbours++
				default:
					qr.RecalledTurns++
				}
			}
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
			res.explore.explore(m, texts[mContext], texts[mQuery], texts[mSummary], int(base.ctx.Cursor), q, answer, o.scoring)
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
	writeln(w, "questions: %d specific, %d scored (evidence entirely before the verbatim window)", res.Queries, res.Scored)
	stemming := "no stemming"
	if res.ScoreStem {
		stemming = "words light-stemmed (-score-stem)"
	}
	writeln(w, "answer-word recall: share of the reference answer's distinct content words (lower-cased, NLTK stop words removed, %s) found in the context", stemming)
	writeln(w, "")
	writeln(w, "%-48s %8s %10s", "context", "recall", "chars")
	for _, k := range measureKeys {
		label := measureLabel(k, res.Budget)
		if v, ok := res.Recall[k]; ok {
			writeln(w, "%-48s %8.3f %10.0f", label, v, res.Chars[k])
		} else {
			writeln(w, "%-48s %8s %10s", label, "n/a", "n/a")
		}
	}
	if b, ok := res.Recall[mQuery]; ok && res.Recall[mTruncB] > 0 {
		writeln(w, "%-48s %8.2f", "(b) / (d) of the same size", b/res.Recall[mTruncB])
	}
	if res.QueryAware && res.Scored > 0 {
		var t, nb, mem, drop int
		for _, m := range res.PerMeeting {
			for _, q := range m.Scored {
				t, nb, mem, drop = t+q.RecalledTurns, nb+q.RecalledNeighbours, mem+q.RecalledMemories, drop+q.RecallDropped
			}
		}
		n := float64(res.Scored)
		writeln(w, "(b) recalled per question: %.1f matching turns, %.1f neighbours, %.1f memories; %.1f matches did not fit",
			float64(t)/n, float64(nb)/n, float64(mem)/n, float64(drop)/n)
		if v, ok := res.Recall[mNoMemories]; ok && mem > 0 {
			writeln(w, "(b) without its memory lines: recall %.3f, %.0f chars (the memories add %+.3f for %.0f chars)",
				v, res.Chars[mNoMemories], res.Recall[mQuery]-v, res.Chars[mQuery]-res.Chars[mNoMemories])
		}
	}
	if !res.QueryAware {
		writeln(w, "(b): n/a, the service ignores the \"query\" field (no query-aware packing yet)")
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
	writeln(w, "%-14s %6s %6s %7s %6s | %6s %6s %6s %6s %6s %6s %6s", "meeting", "turns", "window", "scored", "", "(a)", "(b)", "(c)", "(d)a", "(d)b", "(e)", "(f)")
	for _, m := range res.PerMeeting {
		row := fmt.Sprintf("%-14s %6d %6d %4d/%-2d %6s |", m.Name, m.Turns, m.WindowStart, len(m.Scored), m.Queries, "")
		for _, k := range measureKeys {
			if v, ok := m.Recall[k]; ok {
				row += fmt.Sprintf(" %6.3f", v)
			} else {
				row += fmt.Sprintf(" %6s", "-")
			}
		}
		writeln(w, "%s", row)
	}
}
