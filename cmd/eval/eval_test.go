package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/rs/zerolog"
)

func TestWordsAndContentWords(t *testing.T) {
	got := words("Don't pay $190 a night; the co-operative's ROOM is 2nd-floor.")
	want := []string{"don", "t", "pay", "190", "a", "night", "the", "co", "operative", "s", "room", "is", "2nd", "floor"}
	if !slices.Equal(got, want) {
		t.Fatalf("words = %q, want %q", got, want)
	}
	cw := contentWords("The team decided: the remote is RED, and the remote is round.")
	var keys []string
	for w := range cw {
		keys = append(keys, w)
	}
	slices.Sort(keys)
	if want := []string{"decided", "red", "remote", "round", "team"}; !slices.Equal(keys, want) {
		t.Fatalf("content words = %q, want %q", keys, want)
	}
}

func TestRecall(t *testing.T) {
	answer := contentWords("The team decided on a red, round remote.") // decided red remote round team
	cases := []struct {
		context string
		want    float64
	}{
		{"Marketing: the remote is RED", 2.0 / 5},
		{"the remote remote remote", 1.0 / 5},         // a word counts once
		{"a decision about the reds", 0},              // no stemming
		{"Team: we decided. Round, red remote.", 1.0}, // punctuation and case do not matter
		{"", 0},
	}
	for _, c := range cases {
		got, ok := recall(answer, vocab(c.context))
		if !ok || got != c.want {
			t.Errorf("recall in %q = %v, %v; want %v, true", c.context, got, ok, c.want)
		}
	}
	if _, ok := recall(contentWords("It was what they did, and that is all."), vocab("anything")); ok {
		t.Error("an answer of stop words only was scored; it has nothing to find")
	}
}

// meetingFrom writes a QMSum-shaped file and reads it back.
func meetingFrom(t *testing.T, turns []string, spans ...[][]string) *meeting {
	t.Helper()
	type turn struct {
		Speaker string `json:"speaker"`
		Content string `json:"content"`
	}
	type q struct {
		Query  string     `json:"query"`
		Answer string     `json:"answer"`
		Spans  [][]string `json:"relevant_text_span"`
	}
	var f struct {
		Turns []turn `json:"meeting_transcripts"`
		Qs    []q    `json:"specific_query_list"`
	}
	for i, c := range turns {
		f.Turns = append(f.Turns, turn{Speaker: []string{"A", "B"}[i%2], Content: c})
	}
	for _, s := range spans {
		f.Qs = append(f.Qs, q{Query: "q?", Answer: "the answer", Spans: s})
	}
	data, _ := json.Marshal(f)
	path := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := readMeeting(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSpansSkipEmptyTurns(t *testing.T) {
	// File turns 0..5; turn 2 is empty and never published, so file turn 3
	// is session turn 2.
	m := meetingFrom(t, []string{"zero", "one", "  ", "three", "four", "five"},
		[][]string{{"0", "1"}},             // session 0..1
		[][]string{{"1", "3"}},             // session 1..2
		[][]string{{"2", "2"}},             // only the empty turn: nothing
		[][]string{{"4", "9"}},             // clipped to the last turn
		[][]string{{"3", "1"}},             // end before start: skipped
		[][]string{{"one", "2"}},           // not a number: skipped
		[][]string{{"0", "0"}, {"3", "4"}}, // two spans
	)
	if len(m.Turns) != 5 || m.Turns[2].Text != "three" {
		t.Fatalf("published turns = %+v, want the 5 non-empty ones", m.Turns)
	}
	want := [][][2]int{{{0, 1}}, {{1, 2}}, {{2, 1}}, {{3, 4}}, {{0, 0}, {2, 3}}}
	if m.Skipped != 2 || len(m.Queries) != len(want) {
		t.Fatalf("queries %d (skipped %d), want %d (skipped 2)", len(m.Queries), m.Skipped, len(want))
	}
	for i, q := range m.Queries {
		if !slices.Equal(q.Spans, want[i]) {
			t.Errorf("query %d spans = %v, want %v", i, q.Spans, want[i])
		}
	}
	if got := m.evidence(m.Queries[4]); got != "A: zero\nB: three\nA: four\n" {
		t.Errorf("evidence = %q", got)
	}
	if got := m.evidence(m.Queries[2]); got != "" {
		t.Errorf("evidence of an empty turn = %q, want nothing", got)
	}
}

func TestLeftWindow(t *testing.T) {
	q := query{Spans: [][2]int{{3, 5}, {8, 9}}}
	for start, want := range map[int]bool{9: false, 10: true, 11: true, 5: false, 0: false} {
		if got := q.leftWindow(start); got != want {
			t.Errorf("evidence ending at turn 9, window from %d: left = %v, want %v", start, got, want)
		}
	}
}

func TestSpreadEvidence(t *testing.T) {
	cases := []struct {
		spans [][2]int
		want  bool
	}{
		{[][2]int{{10, 50}}, true},           // 41 turns
		{[][2]int{{10, 49}}, false},          // 40 turns
		{[][2]int{{60, 62}, {10, 12}}, true}, // far apart, in any order: 10..62
		{[][2]int{{10, 12}, {20, 30}}, false},
	}
	for _, c := range cases {
		q := query{Spans: c.spans}
		if got := q.spread(40); got != c.want {
			t.Errorf("evidence %v (from %d, to %d) spread over 40 turns = %v, want %v", c.spans, q.evidenceFrom(), q.evidenceEnd(), got, c.want)
		}
	}
}

func TestPairedQuestions(t *testing.T) {
	m := &meeting{Queries: []query{
		{Query: "q0?", Answer: "a0", Spans: [][2]int{{0, 5}}},
		{Query: "q1?", Answer: "a1", Spans: [][2]int{{10, 12}}},   // 4 turns after q0's: too near
		{Query: "q2?", Answer: "a2", Spans: [][2]int{{46, 50}}},   // 40 turns after q0's
		{Query: "q3?", Answer: "a3", Spans: [][2]int{{80, 90}}},   // no later one far enough
		{Query: "q4?", Answer: "a4", Spans: [][2]int{{100, 101}}}, // nor here
	}, Skipped: 3}
	m.paired(40)
	want := []query{
		{Query: "q0? q2?", Answer: "a0 a2", Spans: [][2]int{{0, 5}, {46, 50}}},
		{Query: "q1? q3?", Answer: "a1 a3", Spans: [][2]int{{10, 12}, {80, 90}}},
		{Query: "q2? q4?", Answer: "a2 a4", Spans: [][2]int{{46, 50}, {100, 101}}},
	}
	if len(m.Queries) != len(want) || m.Skipped != 0 {
		t.Fatalf("paired questions = %+v (skipped %d), want %+v", m.Queries, m.Skipped, want)
	}
	for i, q := range m.Queries {
		if q.Query != want[i].Query || q.Answer != want[i].Answer || !slices.Equal(q.Spans, want[i].Spans) {
			t.Errorf("pair %d = %+v, want %+v", i, q, want[i])
		}
		if !q.spread(40) {
			t.Errorf("pair %d's evidence (%v) is not spread over 40 turns", i, q.Spans)
		}
	}
}

func TestTruncationExactSize(t *testing.T) {
	m := meetingFrom(t, []string{"first turn here", "second", "a much longer third turn", "4", "fifth turn"})
	total := len(m.Turns)
	lines := make([]int, total)
	for i, l := range m.Turns {
		lines[i] = client.LineChars(l.String())
	}
	for chars := 0; chars <= 100; chars++ {
		got := m.truncation(total, chars)
		n := runes(got)
		if n > chars {
			t.Fatalf("truncation to %d chars has %d", chars, n)
		}
		// It is a whole tail of turns, and the turn before it would not fit.
		from := total - strings.Count(got, "\n")
		if got != render(m.Turns[from:]) {
			t.Fatalf("truncation to %d chars = %q, not a tail of whole turns", chars, got)
		}
		if from > 0 && n+lines[from-1] <= chars {
			t.Fatalf("truncation to %d chars stops at turn %d though it fits (%d+%d)", chars, from, n, lines[from-1])
		}
	}
	if got := m.truncation(total, 1<<20); got != m.transcript(total) {
		t.Errorf("a budget above the transcript is the transcript, got %q", got)
	}
	if got := m.truncation(3, 1<<20); got != render(m.Turns[:3]) {
		t.Errorf("truncation before turn 3 = %q", got)
	}
}

func TestSpread(t *testing.T) {
	items := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	for n, want := range map[int][]int{0: items, 1: {0}, 2: {0, 9}, 4: {0, 3, 6, 9}, 10: items, 12: items} {
		if got := spread(items, n); !slices.Equal(got, want) {
			t.Errorf("spread(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestEndToEnd replays a small synthetic meeting through the real
// processor and service on an in-process nats-server and checks what was
// measured, not how well.
func TestEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	o := opts{data: filepath.Join("testdata", "tiny"), budgets: []int{1000, 3000}, budget: 3000, quiet: 5 * time.Second, spread: 4}
	res, err := run(ctx, o, log)
	if err != nil {
		t.Fatal(err)
	}
	// 121 file turns, one empty: 120 published. Window mode folds
	// in tens while more than 60 are unfolded: the cursor stops at 60.
	if res.Meetings != 1 || res.Turns != 120 || len(res.Warnings) != 0 {
		t.Fatalf("meetings %d, turns %d, warnings %v; want 1, 120, none", res.Meetings, res.Turns, res.Warnings)
	}
	m := res.PerMeeting[0]
	tiny, err := readMeeting(filepath.Join(o.data, "tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Cursor != 60 || m.WindowStart != 60 {
		t.Fatalf("cursor %d, window from %d; want 60, 60", m.Cursor, m.WindowStart)
	}
	// Six specific queries, one unparseable; of the five, those whose
	// evidence ends before turn 60 are scored (the ones at 65..71 and 99
	// are still verbatim).
	if res.Queries != 6 || res.Scored != 3 || len(m.Scored) != 3 {
		t.Fatalf("queries %d, scored %d; want 6, 3", res.Queries, res.Scored)
	}
	for _, q := range m.Scored {
		if q.EvidenceEnd > 60 {
			t.Errorf("%q scored with evidence to turn %d, inside the window", q.Query, q.EvidenceEnd)
		}
		// The evidence is part of the transcript: whatever it holds, the
		// transcript holds.
		if q.Recall[mTranscript] < q.Recall[mEvidence] {
			t.Errorf("%q: transcript recall %v below evidence recall %v", q.Query, q.Recall[mTranscript], q.Recall[mEvidence])
		}
		// (a) is the summary line and the 60 verbatim turns; dated
		// truncation of its size is no longer than it.
		if want := runes(client.SummaryPrefix) + q.Chars[mSummary] + 1 + runes(render(tiny.Turns[60:])); q.Chars[mContext] != want {
			t.Errorf("%q: context %d chars, want %d (summary line + 60 turns)", q.Query, q.Chars[mContext], want)
		}
		if q.Chars[mSummary] == 0 || q.Chars[mSummary] > 1200 || q.Chars[mTruncA] > q.Chars[mContext] {
			t.Errorf("%q: summary %d chars (want 1..1200), truncation %d (want <= %d)", q.Query, q.Chars[mSummary], q.Chars[mTruncA], q.Chars[mContext])
		}
		for _, budget := range o.budgets {
			b := budgetKey(mQuery, budget)
			if _, ok := q.Recall[b]; ok != res.QueryAware {
				t.Errorf("%q: (b) at %d measured %v, service query-aware %v", q.Query, budget, ok, res.QueryAware)
			}
			if !res.QueryAware {
				continue
			}
			if q.Chars[b] > budget {
				t.Errorf("%q: query-aware context %d chars over the %d budget", q.Query, q.Chars[b], budget)
			}
			// The baselines are of (b)'s size, or a little less (they
			// hold whole turns).
			for _, k := range []string{mTruncB, mPlain} {
				if n := q.Chars[budgetKey(k, budget)]; n > q.Chars[b] {
					t.Errorf("%q: %s %d chars, more than (b)'s %d", q.Query, k, n, q.Chars[b])
				}
			}
		}
	}
	// The scored questions are split by how far their evidence runs.
	spread := 0
	for _, q := range m.Scored {
		if q.Spread != (q.EvidenceEnd-q.EvidenceFrom > o.spread) {
			t.Errorf("%q: evidence %d..%d marked spread %v over %d turns", q.Query, q.EvidenceFrom, q.EvidenceEnd, q.Spread, o.spread)
		}
		if q.Spread {
			spread++
		}
	}
	// Of the scored evidence (3..5, 8..11, 38..42 in the file), only the
	// two ranges 38..41 and 40..42 run over more than 4 turns.
	if spread != 1 || res.Spread.Queries != spread || res.Rest.Queries != res.Scored-spread {
		t.Errorf("spread %d and rest %d questions, want %d and %d", res.Spread.Queries, res.Rest.Queries, spread, res.Scored-spread)
	}
	var out strings.Builder
	res.print(&out, true)
	for _, want := range []string{"1 meetings, 120 turns", "6 specific, 3 scored", "(f) annotated evidence spans", "(p) plain", "tiny", "evidence spread:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatal(err)
	}
}

func TestScoringStem(t *testing.T) {
	answer := "The team decided on batteries."
	ctx := "we decide about the battery"
	plain, _ := recall(scoring{}.answer(answer), scoring{}.vocab(ctx))
	stemmed, _ := recall(scoring{stem: true}.answer(answer), scoring{stem: true}.vocab(ctx))
	// team decided batteries: none in the plain context; decid and
	// battery are, stemmed.
	if plain != 0 || stemmed != 2.0/3 {
		t.Errorf("recall plain %v, stemmed %v; want 0 and 2/3", plain, stemmed)
	}
}

func TestDatedBaselines(t *testing.T) {
	m := meetingFrom(t, []string{"we picked a red battery case", "hello there", "the battery lasts two days", "lunch?", "fine"})
	total := len(m.Turns)
	day := m.dayLine(0) + "\n"
	if got, want := m.truncationDated(total, 1<<20), day+render(m.Turns); got != want {
		t.Errorf("dated truncation of everything = %q, want %q", got, want)
	}
	if got, want := m.truncationDated(total, runes(day+render(m.Turns[3:]))), day+render(m.Turns[3:]); got != want {
		t.Errorf("dated truncation = %q, want %q", got, want)
	}
	r := newRanker(m.Turns, total, rankOpts{stop: true, stem: true})
	// Room for the date line and the two battery turns, not for more.
	size := runes(day + render([]line{m.Turns[0], m.Turns[2]}))
	if got, want := m.plainRetrieval(r, "which battery?", size), day+render([]line{m.Turns[0], m.Turns[2]}); got != want {
		t.Errorf("plain retrieval = %q, want %q (best turns, transcript order, one date line)", got, want)
	}
	if got := m.plainRetrieval(r, "battery", size-1); runes(got) > size-1 || !strings.Contains(got, "battery") {
		t.Errorf("plain retrieval in %d chars = %q", size-1, got)
	}
}

// A meeting replayed with -sitting says each sitting on the next day: the
// dated baselines then give a date line per day.
func TestSittingsAreDays(t *testing.T) {
	m := meetingFrom(t, []string{"we picked a red battery case", "hello there", "the battery lasts two days", "lunch?", "fine"})
	m.sitting = 2
	if !m.sameDay(0, 1) || m.sameDay(1, 2) || !m.at(2).After(m.at(1)) {
		t.Fatalf("turns 0..2 said at %v, %v, %v: want two a day, in order", m.at(0), m.at(1), m.at(2))
	}
	want := m.dayLine(0) + "\n" + render(m.Turns[:2]) + m.dayLine(2) + "\n" + render(m.Turns[2:4]) + m.dayLine(4) + "\n" + render(m.Turns[4:])
	if got := m.truncationDated(len(m.Turns), 1<<20); got != want {
		t.Errorf("dated truncation over three days = %q, want %q", got, want)
	}
}
