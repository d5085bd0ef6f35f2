package offline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/foldstream/foldstream/internal/fold"
)

// BenchmarkQMSumRecall is a measurement (run it once, and -v for more
// than ten lines: -v -run xxx -bench QMSumRecall -benchtime 1x): with FOLDSTREAM_QMSUM set to a directory of
// QMSum meetings (e.g. ../shared/data/qmsum/val) it replays each meeting through the offline summarizer as the processor
// would (50 recent turns, folds of 10, max-summary-chars 1200 with the
// engine's tiers) and logs the answer-word recall of the final summary
// alone for the questions whose evidence left the window. It asserts
// nothing about the score (scores move with the summarizer).
// FOLDSTREAM_QMSUM_REF scores another text instead of the final summary:
// union (every summary), tail (the last turns, as long as the summary),
// all (every turn folded), pool (every statement the final state holds),
// heads (its opening sentence and period lines).
func BenchmarkQMSumRecall(b *testing.B) {
	dir := os.Getenv("FOLDSTREAM_QMSUM")
	if dir == "" {
		b.Skip("FOLDSTREAM_QMSUM not set")
	}
	budget := 1200
	if n, err := strconv.Atoi(os.Getenv("FOLDSTREAM_QMSUM_CHARS")); err == nil && n > 0 {
		budget = n
	}
	var sum float64
	var nq int
	var hit, tot int
	for _, m := range loadQMSum(b, dir) {
		f, turns := m.file, m.turns
		everything := ""
		summary, state, cursor := foldQMSum(b, turns, budget, func(out fold.Outcome) { everything += " " + out.Summary })
		if os.Getenv("FOLDSTREAM_QMSUM_SIZE") != "" {
			st, _ := decodeState(state)
			pb, _ := json.Marshal(st.People)
			b.Logf("%s: state %d bytes, people %d bytes, open %d, periods %d", filepath.Base(f), len(state), len(pb), len(st.Open), len(st.Periods))
		}
		sw := wordSet(summary)
		switch os.Getenv("FOLDSTREAM_QMSUM_REF") {
		case "union":
			sw = wordSet(everything)
		case "tail":
			var sb strings.Builder
			for i := cursor - 1; i >= 0 && sb.Len() < budget; i-- {
				sb.WriteString(" " + turns[i].Text)
			}
			sw = wordSet(sb.String())
		case "pool", "heads":
			st, _ := decodeState(state)
			var sb strings.Builder
			sb.WriteString(st.lead(5, 2))
			for _, p := range st.Periods {
				sb.WriteString(" " + p.header(false, true, false))
				if os.Getenv("FOLDSTREAM_QMSUM_REF") == "pool" {
					for _, x := range p.Stmts {
						sb.WriteString(" " + x.Text)
					}
				}
			}
			if os.Getenv("FOLDSTREAM_QMSUM_REF") == "pool" {
				for _, x := range st.Open {
					sb.WriteString(" " + x.Text)
				}
			}
			b.Logf("%s: %d chars", filepath.Base(f), sb.Len())
			sw = wordSet(sb.String())
		case "all":
			var sb strings.Builder
			for i := 0; i < cursor; i++ {
				sb.WriteString(" " + turns[i].Text)
			}
			sw = wordSet(sb.String())
		}
		var msum float64
		mq := 0
		for _, q := range m.qs {
			if !q.leftWindow(len(turns)) {
				continue
			}
			aw := wordSet(q.Answer)
			if len(aw) == 0 {
				continue
			}
			h := 0
			for w := range aw {
				if sw[w] {
					h++
				}
			}
			r := float64(h) / float64(len(aw))
			msum += r
			mq++
			hit += h
			tot += len(aw)
		}
		sum += msum
		nq += mq
		if d := os.Getenv("FOLDSTREAM_QMSUM_DUMP"); d != "" {
			if err := os.WriteFile(filepath.Join(d, filepath.Base(f)+".txt"), []byte(summary), 0o644); err != nil {
				b.Fatal(err)
			}
		}
		if os.Getenv("FOLDSTREAM_QMSUM_V") != "" {
			b.Logf("%s: %d turns, %d questions, recall %.3f\n%s", filepath.Base(f), len(turns), mq, msum/float64(max(mq, 1)), summary)
		}
	}
	b.Logf("QMSUM summary-alone recall @%d chars: macro %.4f micro %.4f over %d questions", budget, sum/float64(max(nq, 1)), float64(hit)/float64(max(tot, 1)), nq)
}

var qmStop = toSet(strings.Fields(`a about above after again against all am an and any are aren't as at be because been before being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during each few for from further had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor not of off on once only or other ought our ours ourselves out over own same shan't she she'd she'll she's should shouldn't so some such than that that's the their theirs them themselves then there there's these they they'd they'll they're they've this those through to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where where's which while who who's whom why why's with won't would wouldn't you you'd you'll you're you've your yours yourself yourselves also s t will just`))

func wordSet(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' }) {
		w = strings.Trim(w, "'")
		if w == "" || qmStop[w] {
			continue
		}
		out[w] = true
	}
	return out
}

// qmsumMeeting is a QMSum meeting as the offline tests replay it: its
// turns, 6 s apart from a fixed start, and its questions.
type qmsumMeeting struct {
	file  string
	turns []fold.Turn
	qs    []qmsumQuery
}

type qmsumQuery struct {
	Query  string     `json:"query"`
	Answer string     `json:"answer"`
	Spans  [][]string `json:"relevant_text_span"`
}

// foldQMSum replays turns through a new offline summarizer as the
// processor folds them (the default window: 50 recent turns, folds of
// 10), calling after with each fold's outcome, and returns the final
// summary and state and the cursor.
func foldQMSum(tb testing.TB, turns []fold.Turn, budget int, after func(fold.Outcome)) (summary string, state []byte, cursor int) {
	tb.Helper()
	s, w := New(), fold.DefaultWindow()
	for total := 1; total <= len(turns); total++ {
		d := w.Evaluate(fold.Check{Cursor: int64(cursor), Total: int64(total)})
		if !d.Fold {
			continue
		}
		batch := turns[d.From:d.To]
		out, err := fold.Summarize(context.Background(), s, fold.Request{Session: "q", Profile: fold.ProfileVoice,
			PreviousSummary: summary, PreviousState: state, Turns: batch, MaxChars: budget, From: batch[0].At, To: batch[len(batch)-1].At})
		if err != nil {
			tb.Fatal(err)
		}
		summary, state, cursor = out.Summary, out.State, int(d.To)
		after(out)
	}
	return summary, state, cursor
}

// leftWindow reports whether the question's evidence, its last span's
// end, lies before the default window's recent turns of a meeting of n
// turns: a question that only the summary can answer.
func (q qmsumQuery) leftWindow(n int) bool {
	last := 0
	for _, sp := range q.Spans {
		if len(sp) == 2 {
			e, _ := strconv.Atoi(sp[1])
			last = max(last, e)
		}
	}
	return last < n-fold.DefaultWindow().Recent
}

// loadQMSum reads every meeting in dir (*.json), in file name order.
func loadQMSum(t testing.TB, dir string) []qmsumMeeting {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	sort.Strings(files)
	var out []qmsumMeeting
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Turns []struct {
				Speaker string `json:"speaker"`
				Content string `json:"content"`
			} `json:"meeting_transcripts"`
			Qs []qmsumQuery `json:"specific_query_list"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		base := time.Date(2026, 3, 2, 14, 0, 0, 0, time.UTC)
		turns := make([]fold.Turn, len(m.Turns))
		for i, tt := range m.Turns {
			turns[i] = fold.Turn{Index: int64(i), TurnID: fmt.Sprintf("t%d", i), At: base.Add(time.Duration(i) * 6 * time.Second),
				Speaker: tt.Speaker, Role: "user", Text: tt.Content, Kind: "speech"}
		}
		out = append(out, qmsumMeeting{file: f, turns: turns, qs: m.Qs})
	}
	return out
}
