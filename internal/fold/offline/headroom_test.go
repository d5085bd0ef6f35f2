package offline

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/foldstream/foldstream/internal/fold"
)

// BenchmarkQMSumHeadroom is a measurement (run it once: -run xxx -bench QMSumHeadroom -benchtime 1x): with
// FOLDSTREAM_QMSUM set to a directory of QMSum meetings it replays each as BenchmarkQMSumRecall does and logs, with cmd/eval's measure (NLTK stop words, no stemming), where the
// answer words of the questions scored are lost on the way to the summary alone: in the transcript folded, in any
// statement a fold extracted, in the statements the final state keeps (the render's candidates, with the opening and
// the period lines), in the summary. Then what a selection of those candidates chosen knowing the answers would score
// in the summary's room (the head-room of selection), the same from every statement ever extracted, and the same
// without knowing the answers: a greedy coverage of content words weighted by how many statements said them, with
// hindsight (every statement of the meeting counted). Then the final state rendered again, as it is and with every
// stop word deleted from its statements (what compressing them, no content word lost, could reach). Last, where the
// summary's runes go. The budget is 1,200 runes,
// or FOLDSTREAM_QMSUM_CHARS.
func BenchmarkQMSumHeadroom(b *testing.B) {
	dir := os.Getenv("FOLDSTREAM_QMSUM")
	if dir == "" {
		b.Skip("FOLDSTREAM_QMSUM not set")
	}
	budget := 1200 // or FOLDSTREAM_QMSUM_CHARS
	if n, err := strconv.Atoi(os.Getenv("FOLDSTREAM_QMSUM_CHARS")); err == nil && n > 0 {
		budget = n
	}
	var sum struct {
		n                                                        float64
		trans, extracted, kept, lines, summary                   float64
		oracleKept, oracleKeptNoLines, oracleAll, oracleAllNoLns float64
		generic, genericKept, again, stripped                    float64
		runes, lead, periodLines, topics, stmts, taken, attrib   float64
	}
	for _, m := range loadQMSum(b, dir) {
		var extracted []string // every statement a fold extracted
		summary, state, cursor := foldQMSum(b, m.turns, budget, func(out fold.Outcome) {
			st, err := decodeState(out.State)
			if err != nil {
				b.Fatal(err)
			}
			for _, x := range st.Open {
				if x.Batch {
					extracted = append(extracted, x.Text)
				}
			}
		})
		var answers []map[string]bool
		for _, q := range m.qs {
			if aw := evalWords(q.Answer, true); q.leftWindow(len(m.turns)) && len(aw) > 0 {
				answers = append(answers, aw)
			}
		}
		if len(answers) == 0 {
			continue
		}
		recall := func(have map[string]bool) float64 {
			r := 0.0
			for _, a := range answers {
				h := 0
				for w := range a {
					if have[w] {
						h++
					}
				}
				r += float64(h) / float64(len(a))
			}
			return r
		}
		// The final state rendered again, for its candidates and the lines written.
		st, err := decodeState(state)
		if err != nil {
			b.Fatal(err)
		}
		st.sc = new(scratch)
		sum.again += recall(evalWords(st.render(budget, 5, 2), false))
		lead := st.lead(5, 2)
		lines := lead
		var kept []string
		for _, c := range st.sc.cands {
			kept = append(kept, c.x.Text)
			if c.taken {
				sum.taken += float64(len(answers))
				sum.stmts += float64(c.size * len(answers))
				if v, _, ok := strings.Cut(strings.TrimPrefix(c.x.Text, c.x.Sp+" "), " "); ok && c.x.Sp != "" && strings.HasPrefix(c.x.Text, c.x.Sp+" ") &&
					(v == "said" || v == "asked" || v == "thought" || v == "suggested") {
					sum.attrib += float64((runeLen(c.x.Sp) + len(v) + 2) * len(answers))
				}
			}
		}
		for _, sent := range splitSentences(strings.TrimPrefix(summary, lead)) {
			if !strings.HasPrefix(sent, "From ") && !strings.HasPrefix(sent, "Between ") && !strings.HasPrefix(sent, "At ") && !strings.HasPrefix(sent, "On ") && !strings.HasPrefix(sent, "Earlier, ") {
				continue
			}
			_, topics, ok := strings.Cut(sent, " talked about ")
			if !ok {
				_, topics, ok = strings.Cut(sent, " discussed ")
			}
			if ok || strings.HasSuffix(sent, " spoke.") {
				lines += " " + sent
				sum.periodLines += float64((runeLen(sent) + 1) * len(answers))
				sum.topics += float64(runeLen(topics) * len(answers))
			}
		}
		room := budget - runeLen(lines)
		var transcript strings.Builder
		for _, tu := range m.turns[:cursor] {
			transcript.WriteString(tu.Text + "\n")
		}
		// how many statements said each content word: the weight of a generic coverage
		said := map[string]int{}
		for _, x := range extracted {
			for w := range evalWords(x, true) {
				said[w]++
			}
		}
		// pick takes, greedily, the text that adds most for its length: of the answers (oracle), or of the words
		// weighted by how many statements said them (generic), while any adds anything.
		pick := func(base string, texts []string, room int, oracle bool) float64 {
			have := evalWords(base, false)
			used := make([]bool, len(texts))
			for {
				best, bv := -1, 0.0
				for i, x := range texts {
					size := runeLen(x) + 1
					if used[i] || size > room {
						continue
					}
					v, ws := 0.0, evalWords(x, !oracle)
					for _, a := range answers {
						h := 0
						for w := range a {
							if oracle && ws[w] && !have[w] {
								h++
							}
						}
						v += float64(h) / float64(len(a))
					}
					for w := range ws {
						if !oracle && !have[w] {
							v += max(0, math.Log2(1+float64(said[w]))-0.8)
						}
					}
					if v /= float64(size + 30); v > bv {
						best, bv = i, v
					}
				}
				if best < 0 {
					return recall(have)
				}
				used[best], room = true, room-runeLen(texts[best])-1
				for w := range evalWords(texts[best], false) {
					have[w] = true
				}
			}
		}
		n := float64(len(answers))
		sum.n += n
		sum.trans += recall(evalWords(transcript.String(), false))
		sum.extracted += recall(evalWords(lead+" "+strings.Join(extracted, " "), false))
		sum.kept += recall(evalWords(lines+" "+strings.Join(kept, " "), false))
		sum.lines += recall(evalWords(lines, false))
		sum.summary += recall(evalWords(summary, false))
		sum.oracleKept += pick(lines, kept, room, true)
		sum.oracleKeptNoLines += pick(lead, kept, budget-runeLen(lead), true)
		sum.oracleAll += pick(lines, extracted, room, true)
		sum.oracleAllNoLns += pick(lead, extracted, budget-runeLen(lead), true)
		sum.generic += pick(lines, extracted, room, false)
		sum.genericKept += pick(lines, kept, room, false)
		// The final state rendered again with every stop word deleted from its statements: what compressing the
		// statements, nothing of their content lost, could reach.
		if st, err = decodeState(state); err != nil {
			b.Fatal(err)
		}
		strip := func(ss []stmt) {
			for i := range ss {
				ss[i].Text = strings.Join(slices.DeleteFunc(strings.Fields(ss[i].Text), func(f string) bool {
					return nltkStop[strings.ToLower(strings.Trim(f, `.,!?;:"'`))]
				}), " ")
			}
		}
		for i := range st.Periods {
			strip(st.Periods[i].Stmts)
		}
		strip(st.Open)
		st.sc = new(scratch)
		sum.stripped += recall(evalWords(st.render(budget, 5, 2), false))
		sum.runes += float64(runeLen(summary)) * n
		sum.lead += float64(runeLen(lead)) * n
	}
	n := sum.n
	b.Logf("%.0f questions; answer-word recall of: the transcript folded %.3f, every statement extracted %.3f, the statements the final state keeps (and its lines) %.3f, the opening and period lines %.3f, the summary %.3f",
		n, sum.trans/n, sum.extracted/n, sum.kept/n, sum.lines/n, sum.summary/n)
	b.Logf("selection knowing the answers, in the room the lines leave: of the statements kept %.3f (%.3f without period lines), of every statement extracted %.3f (%.3f without period lines)",
		sum.oracleKept/n, sum.oracleKeptNoLines/n, sum.oracleAll/n, sum.oracleAllNoLns/n)
	b.Logf("selection by coverage of words weighted by how many statements said them, with hindsight: of every statement extracted %.3f, of the statements kept %.3f",
		sum.generic/n, sum.genericKept/n)
	b.Logf("the final state rendered again %.3f, with every stop word deleted from its statements %.3f", sum.again/n, sum.stripped/n)
	b.Logf("runes: %.0f, of which the opening %.0f, period lines %.0f (their topics %.0f), statements %.0f (%.1f; their attribution %.0f)",
		sum.runes/n, sum.lead/n, sum.periodLines/n, sum.topics/n, sum.stmts/n, sum.taken/n, sum.attrib/n)
}

// evalWords are the lower-cased runs of letters and digits of s (cmd/eval's words), without NLTK's stop words when
// content.
func evalWords(s string, content bool) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !content || !nltkStop[w] {
			out[w] = true
		}
	}
	return out
}

// nltkStop is NLTK's English stop list, as cmd/eval scores with it.
var nltkStop = toSet(strings.Fields(`i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their theirs
themselves what which who whom this that that'll these those am is are was were be been being have
has had having do does did doing a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down in out on off
over under again further then once here there when where why how all any both each few more most
other some such no nor not only own same so than too very s t can will just don don't should
should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't
hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't
shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't`))
