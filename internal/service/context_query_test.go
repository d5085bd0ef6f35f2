package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// queryTexts are the turns a question-aware context should find: a
// question (3) with its short answer (4), and a later mention (6).
var queryTexts = map[int]string{
	3: "Can someone remind me to send the tournament form by Friday?",
	4: "Yes, I will.", // no word of its own to match, even by feedback
	6: "The tournament itself is on Saturday in Lisbon.",
}

// checkQueryContext asserts the mechanics every question-aware context
// keeps, whatever the budget: the layers in priority order in Prompt, its
// length exactly Chars within the budget, recalled turns labelled and in
// transcript order, all before the verbatim window, and the window a
// contiguous run that ends at the newest turn.
func checkQueryContext(t *testing.T, c *client.Context, budget int) {
	t.Helper()
	p := c.Prompt()
	if n := utf8.RuneCountInString(p); n != c.Chars || budget > 0 && n > budget {
		t.Fatalf("prompt is %d chars, context says %d, budget %d", n, c.Chars, budget)
	}
	// Sections in priority order.
	var order []int
	for _, marker := range []string{client.SummaryPrefix, client.MemoriesHeader, client.ExcerptsHeader, client.RecentHeader} {
		if i := strings.Index(p, marker); i >= 0 {
			order = append(order, i)
		}
	}
	if !slices.IsSorted(order) {
		t.Fatalf("sections out of order:\n%s", p)
	}
	firstWindow := c.TotalTurns
	if len(c.Turns) > 0 {
		firstWindow = c.Turns[0].Index
		if last := c.Turns[len(c.Turns)-1].Index; last != c.TotalTurns-1 {
			t.Fatalf("window ends at %d, total %d", last, c.TotalTurns)
		}
		for i, turn := range c.Turns {
			if turn.Index != firstWindow+int64(i) {
				t.Fatalf("window not contiguous: %v", indices(c))
			}
		}
		if int64(c.DroppedTurns) != firstWindow-c.Cursor {
			t.Fatalf("dropped %d, window starts at %d, cursor %d", c.DroppedTurns, firstWindow, c.Cursor)
		}
	}
	// Every excerpt line has its speaker; the first of each day its day
	// too, and no other line has one.
	prev := int64(-1)
	day := ""
	rest := p
	for _, r := range c.Recalled {
		if r.Kind != client.RecalledTurn {
			continue
		}
		if r.Index <= prev || r.Index >= firstWindow {
			t.Fatalf("recalled turn %d: not in transcript order or not before the window (%d)", r.Index, firstWindow)
		}
		want := testenv.Turn(c.Session, int(r.Index))
		if !r.At.Equal(want.At) {
			t.Fatalf("recalled turn %d: at %v, said at %v", r.Index, r.At, want.At)
		}
		line := want.Speaker + ": " + r.Text + "\n"
		if d := want.At.UTC().Format(client.RecallTimeLayout); d != day {
			day = d
			line = "[" + d + "] " + line
		}
		i := strings.Index(rest, "\n"+line)
		if r.TurnID != want.TurnID || i < 0 || utf8.RuneCountInString(line) != r.Chars {
			t.Fatalf("recalled turn %+v: no line %q (%d chars) after the previous one in the prompt:\n%s", r, line, r.Chars, p)
		}
		rest = rest[i+len(line):]
		prev = r.Index
	}
}

// shownTurns are the turn ids a context recalls, as excerpts or as the
// turns memories were stated in, sorted; a turn shown both ways is there
// twice.
func shownTurns(c *client.Context) []string {
	var out []string
	for _, r := range c.Recalled {
		if r.TurnID != "" {
			out = append(out, r.TurnID)
		}
	}
	slices.Sort(out)
	return out
}

func recalledIndices(c *client.Context) []int64 {
	var out []int64
	for _, r := range c.Recalled {
		if r.Kind == client.RecalledTurn {
			out = append(out, r.Index)
		}
	}
	return out
}

func TestQueryContextRecallsEarlierTurnsWithNeighbours(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)

	plain := getContext(t, e.NC, client.ContextRequest{Session: "s1"})
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "When is the tournament form due?"})
	checkQueryContext(t, c, 0)
	if c.Query != "When is the tournament form due?" || c.Summary == nil || c.RecallSearched != 10 {
		t.Fatalf("reply header: query %q, summary %v, searched %d", c.Query, c.Summary != nil, c.RecallSearched)
	}
	// The question (3) is a match; its answer (4) comes as its neighbour
	// only because it follows a question; 6 matches on its own, shown
	// once: as an excerpt, or as the memory the fold kept of it.
	if got := shownTurns(c); !slices.Equal(got, []string{"t003", "t004", "t006"}) {
		t.Fatalf("recalled %v, want t003 t004 t006, each once", got)
	}
	for _, r := range c.Recalled {
		if r.Neighbour != (r.Index == 4) || r.Neighbour != (r.Score == 0) {
			t.Fatalf("recalled %d: neighbour %v, score %v", r.Index, r.Neighbour, r.Score)
		}
	}
	// Unlimited: the window is the same as without a query.
	if !slices.Equal(indices(c), indices(plain)) || plain.Recalled != nil || plain.Query != "" {
		t.Fatalf("window %v, without a query %v (recalled %v)", indices(c), indices(plain), plain.Recalled)
	}

	// A short answer that matches brings the question before it.
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "friday", RecallTurns: 1})
	checkQueryContext(t, c, 0)
	if got := recalledIndices(c); !slices.Equal(got, []int64{3, 4}) {
		t.Fatalf("recall_turns 1: recalled %v, want [3 4] (one match with its neighbour)", got)
	}
	// Nothing matches: no recalled layer, no headers.
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "zeppelin"})
	checkQueryContext(t, c, 0)
	if len(c.Recalled) != 0 || strings.Contains(c.Prompt(), client.RecentHeader) {
		t.Fatalf("no match: %+v\n%s", c.Recalled, c.Prompt())
	}
}

func TestQueryContextNeverExceedsTheBudget(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	full := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form friday"})
	// A budget that holds nothing of the session: 400 naming it and the
	// smallest that would.
	for _, req := range []client.ContextRequest{{BudgetChars: 10}, {BudgetTokens: 2}} {
		req.Session, req.Query = "s1", "tournament form friday"
		m := ask(t, e.NC, client.EndpointContext, req)
		code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader)
		field := `"budget_chars"`
		if req.BudgetTokens != 0 {
			field = `"budget_tokens"`
		}
		if code != "400" || !strings.Contains(desc, field+": expected at least ") {
			t.Fatalf("budget %+v: %q %q", req, code, desc)
		}
	}
	for budget := 100; budget <= full.Chars+50; budget += 37 {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form friday", BudgetChars: budget})
		checkQueryContext(t, c, budget)
		// The summary is there whole, or as some of its sentences.
		if c.Summary != nil && c.Summary.Trimmed && (c.Summary.Chars >= full.Summary.Chars || !strings.Contains(full.Summary.Summary, c.Summary.Summary[:10])) {
			t.Fatalf("budget %d: trimmed summary %q is not a part of %q", budget, c.Summary.Summary, full.Summary.Summary)
		}
		if budget >= full.Chars && (c.Summary == nil || c.Summary.Trimmed) {
			t.Fatalf("budget %d: room for everything, summary %+v", budget, c.Summary)
		}
		// Recalled material never crowds out the live conversation: with
		// room for the summary and a few turns, the newest turn is there.
		if newest := full.Turns[len(full.Turns)-1]; budget >= 2*full.Summary.Chars+4*newest.Chars &&
			(len(c.Turns) == 0 || c.Turns[len(c.Turns)-1].Index != newest.Index) {
			t.Fatalf("budget %d: the newest turn is missing: %v", budget, indices(c))
		}
	}
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form friday", BudgetTokens: 150})
	checkQueryContext(t, c, 0)
	if c.Tokens > 150 {
		t.Fatalf("tokens %d over the budget 150", c.Tokens)
	}
}

func TestQueryContextBadRequestsNameTheField(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartService(nil)
	long := strings.Repeat("word ", client.MaxContextQueryChars/5+1)
	cases := []struct{ req, says string }{
		{`{"session":"s1","query":""}`, `"query"`},
		{`{"session":"s1","query":"   "}`, `"query"`},
		{`{"session":"s1","query":"` + long + `"}`, fmt.Sprintf(`"query": expected 1..%d characters`, client.MaxContextQueryChars)},
		{`{"session":"s1","query":"x","recall_turns":51}`, `"recall_turns": expected 1..50`},
		{`{"session":"s1","query":"x","recall_turns":-1}`, `"recall_turns"`},
		{`{"session":"s1","recall_turns":3}`, `"recall_turns"`},
	}
	for _, tc := range cases {
		m := ask(t, e.NC, client.EndpointContext, []byte(tc.req))
		code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader)
		if code != "400" || !strings.Contains(desc, tc.says) {
			t.Errorf("%.80s: got %q %q, want 400 …%s…", tc.req, code, desc, tc.says)
		}
	}
}

// Memories published for the session come first among the recalled
// layers, only those matching the query, and none from before a reset.
func TestQueryContextRecallsMatchingMemories(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	said := testenv.T0.Add(30 * time.Second)
	pubSeq(t, e, e.Layout.Subjects.Out("s1", events.KindMemory), map[string]any{
		"v": 1, "session": "s1", "version": 1, "fold_id": "f1", "at": testenv.T0.Add(time.Hour),
		"memories": []string{"Alice must send the tournament form by Friday.", "Bob likes tea."},
	})
	pubSeq(t, e, e.Layout.Subjects.Out("s1", events.KindMemory), map[string]any{
		"v": 1, "session": "s1", "version": 2, "fold_id": "f2", "at": testenv.T0.Add(time.Hour),
		"memories": []string{"The tournament is in Lisbon."},
		"items":    []map[string]any{{"id": "m-lisbon", "speaker": "Alice", "text": "The tournament is in Lisbon.", "turn_id": "t006", "at": said}},
	})
	// Another session's memory never shows.
	pubSeq(t, e, e.Layout.Subjects.Out("s2", events.KindMemory), map[string]any{
		"v": 1, "session": "s2", "version": 1, "fold_id": "g1", "at": testenv.T0, "memories": []string{"The tournament form is blue."},
	})

	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form"})
	checkQueryContext(t, c, 0)
	var mems []client.RecalledItem
	for i, r := range c.Recalled {
		if r.Kind == client.RecalledMemory {
			if i != len(mems) {
				t.Fatalf("memory after a turn in %+v", c.Recalled)
			}
			mems = append(mems, r)
		}
	}
	// The offline summarizer's own memories of the folds (fold ids the
	// processor made) may rank among these; the test's are told by id.
	var ours []client.RecalledItem
	for _, m := range mems {
		if m.MemoryID == "1.1" || m.MemoryID == "1.2" || m.MemoryID == "m-lisbon" || strings.Contains(m.Text, "blue") {
			ours = append(ours, m)
		}
	}
	if len(ours) != 2 || ours[0].MemoryID != "1.1" || ours[1].MemoryID != "m-lisbon" {
		t.Fatalf("memories %+v, want 1.1 then m-lisbon (tea does not match; s2's never)", mems)
	}
	p := c.Prompt()
	if ours[1].Speaker != "Alice" || !ours[1].At.Equal(said) || ours[1].TurnID != "t006" ||
		!strings.Contains(p, client.MemoriesHeader+"\n- ["+testenv.T0.Add(time.Hour).Format(client.RecallTimeLayout)+"] Alice must send the tournament form by Friday.\n") ||
		!strings.Contains(p, "\n- ["+said.Format(client.RecallTimeLayout)+"] Alice: The tournament is in Lisbon.\n") {
		t.Fatalf("structured memory %+v rendered as:\n%s", ours[1], p)
	}

	// A later memory that supersedes one (the fact changed) answers
	// instead of it.
	pubSeq(t, e, e.Layout.Subjects.Out("s1", events.KindMemory), map[string]any{
		"v": 1, "session": "s1", "version": 3, "fold_id": "f3", "at": testenv.T0.Add(time.Hour),
		"memories": []string{"The tournament moved to Porto."},
		"items":    []map[string]any{{"id": "m-porto", "text": "The tournament moved to Porto.", "supersedes": "m-lisbon"}},
	})
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form"})
	var ids []string
	for _, r := range c.Recalled {
		ids = append(ids, r.MemoryID)
	}
	if !slices.Contains(ids, "m-porto") || slices.Contains(ids, "m-lisbon") {
		t.Fatalf("after m-porto superseded m-lisbon: memories %v", ids)
	}

	// Under a budget the memories come as a per-speaker view: each
	// speaker's facts together, in the order they were stated, and a
	// fact a later one changed marked as superseded.
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form lisbon porto", BudgetChars: 3000})
	checkQueryContext(t, c, 3000)
	var last client.RecalledItem
	done := map[string]bool{}
	for i, r := range c.Recalled {
		if r.Kind != client.RecalledMemory {
			continue
		}
		if i > 0 && r.Speaker != last.Speaker && done[r.Speaker] || r.Speaker == last.Speaker && i > 0 && r.At.Before(last.At) {
			t.Fatalf("memories not grouped by speaker in the order stated: %+v", c.Recalled)
		}
		if (r.MemoryID == "m-lisbon") != strings.HasPrefix(r.Text, "(superseded) ") {
			t.Fatalf("memory %s: %q", r.MemoryID, r.Text)
		}
		done[last.Speaker] = i > 0
		last = r
	}

	// A memory's relative times are resolved against when it was stated,
	// whenever the question is asked.
	pubSeq(t, e, e.Layout.Subjects.Out("s1", events.KindMemory), map[string]any{
		"v": 1, "session": "s1", "version": 4, "fold_id": "f4", "at": testenv.T0.Add(time.Hour),
		"memories": []string{"The tournament form went out yesterday."},
		"items":    []map[string]any{{"id": "m-sent", "text": "The tournament form went out yesterday.", "at": said}},
	})
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form"})
	if p := c.Prompt(); !strings.Contains(p, "The tournament form went out yesterday (21 Nov 2026).") {
		t.Fatalf("relative time not resolved against when it was said:\n%s", p)
	}

	// After a reset, nothing from before: no memory, no turn.
	pubSeq(t, e, e.Layout.Subjects.In("s1", events.KindControl), events.Control{V: 1, Session: "s1", Op: events.OpReset, At: testenv.T0.Add(2 * time.Hour)})
	publishWith(t, e, "s1", 100, 105, nil)
	c = getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form"})
	checkQueryContext(t, c, 0)
	if len(c.Recalled) != 0 {
		t.Fatalf("after a reset: recalled %+v", c.Recalled)
	}
}

// A session's context never recalls another session's turns.
func TestQueryContextIsolatesSessions(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, nil)
	publishWith(t, e, "s2", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	e.Settled("s2", 64, 10)
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form friday lisbon"})
	checkQueryContext(t, c, 0)
	for _, r := range c.Recalled {
		if r.Text != testenv.Turn("s1", int(r.Index)).Text {
			t.Fatalf("s1 recalled %+v", r)
		}
	}
	c = getContext(t, e.NC, client.ContextRequest{Session: "s2", Query: "tournament form friday lisbon"})
	if got := shownTurns(c); !slices.Equal(got, []string{"t003", "t004", "t006"}) {
		t.Fatalf("s2 recalled %v", got)
	}
}

// The Go client's builder sends the query and renders what came back.
func TestBuilderContextFor(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	nc, js := e.Client("builder")
	b, err := client.NewBuilder(nc, js)
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.ContextFor(context.Background(), "s1", "tournament form", client.Budget{Chars: 1500})
	if err != nil {
		t.Fatal(err)
	}
	checkQueryContext(t, c, 1500)
	// The question (3) as an excerpt, unless the summary says it already.
	if !slices.Contains(recalledIndices(c), 3) && (c.Summary == nil || !strings.Contains(c.Summary.Summary, "tournament form")) {
		t.Fatalf("builder: recalled %v, want 3 among them (or in the summary)\n%s", recalledIndices(c), c.Prompt())
	}
	if _, err := b.ContextFor(context.Background(), "s1", "", client.Budget{}); err == nil || !strings.Contains(err.Error(), `"query"`) {
		t.Fatalf("empty query: %v", err)
	}
	if _, err := b.ContextWith(context.Background(), client.ContextRequest{Session: "s1", Query: "x", RecallTurns: 99}); err == nil || !strings.Contains(err.Error(), `"recall_turns"`) {
		t.Fatalf("recall_turns 99: %v", err)
	}
	data, _ := json.Marshal(client.ContextRequest{Session: "s1"})
	if string(data) != `{"session":"s1"}` {
		t.Fatalf("a request without a query encodes as %s", data)
	}
}

// A question and a turn meet on other forms of a word (stemming), and
// the words that only say what kind of answer is wanted do not count.
func TestQueryContextMatchesWordForms(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, map[int]string{
		2: "Carol ran a long discussion of the battery with the designers.",
		7: "Bob wants to discuss something else entirely.",
	})
	e.Settled("s1", 64, 10)
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "What did they discuss about batteries and designing?"})
	checkQueryContext(t, c, 0)
	if got := recalledIndices(c); !slices.Equal(got, []int64{2}) {
		t.Fatalf("recalled %v, want [2] (battery/batteries, designers/designing; not 7 for discuss)", got)
	}
}

// The first turn of a session is recalled with its index, 0, on the wire.
func TestQueryContextSendsIndexZero(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, map[int]string{0: "Meet at the zebra crossing."})
	e.Settled("s1", 64, 10)
	m := ask(t, e.NC, client.EndpointContext, client.ContextRequest{Session: "s1", Query: "zebra"})
	var raw struct {
		Recalled []map[string]json.RawMessage `json:"recalled"`
	}
	if err := json.Unmarshal(m.Data, &raw); err != nil || len(raw.Recalled) == 0 {
		t.Fatalf("%v: %s", err, m.Data)
	}
	if idx, ok := raw.Recalled[0]["index"]; !ok || string(idx) != "0" {
		t.Fatalf("first recalled item %s: want \"index\":0", m.Data)
	}
}

// An ended session is archived and its checkpoint cleared: a question
// recalls none of its turns (and never one at a wrong index).
func TestQueryContextOfAnArchivedSession(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	pubSeq(t, e, e.Layout.Subjects.In("s1", events.KindControl), events.Control{V: 1, Session: "s1", Op: events.OpEnd, At: testenv.T0.Add(time.Hour)})
	e.Eventually("archived", func() bool { return e.Checkpoint("s1").Archived })
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "tournament form friday"})
	checkQueryContext(t, c, 0)
	// Its memories stay until a reset; its turns went to the archive.
	if got := recalledIndices(c); len(got) != 0 || c.TotalTurns != 0 {
		t.Fatalf("archived session: total %d, recalled turns %v", c.TotalTurns, got)
	}
}

// Under a budget the candidates compete by what they hold for the
// question: a greeting that names the person asked about is no evidence,
// a turn said twice is shown once, a long turn is cut to the sentences
// that hold the match, and the last exchange is always kept.
func TestQueryContextPacksEvidenceByValue(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	long := "We talked for ages about the weather and the traffic on the way in this morning. " +
		"The train was late again and the platform was crowded with people going to the stadium. " +
		"Then the conversation turned and she said she wants to cook paella for the party. " +
		"After that we argued about football for an hour and nobody agreed on anything at all, as usual. " +
		"Someone brought up the election and the new bus lines, and then the heating bill of the flat upstairs. " +
		"Somebody else had seen a film about a lighthouse keeper and told the whole plot twice, slowly. " +
		"The waiter kept bringing bread nobody had asked for, and the music was too loud to hear a thing. " +
		"Finally we went home in the rain."
	publishWith(t, e, "s1", 0, 64, map[int]string{
		2:  "Hey Alice!",
		5:  "Alice cooks a great risotto every Sunday.",
		7:  "Alice cooks a great risotto every Sunday!",
		9:  long,
		20: "I would cook the risotto with saffron.",
	})
	e.Settled("s1", 64, 10)
	q := "What does Alice like to cook?"
	full := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q})
	for _, budget := range []int{900, 1500, 2400} {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: budget})
		checkQueryContext(t, c, budget)
		shown := shownTurns(c)
		if slices.Contains(shown, "t002") {
			t.Errorf("budget %d: the greeting was recalled: %v", budget, shown)
		}
		if slices.Contains(shown, "t005") && slices.Contains(shown, "t007") {
			t.Errorf("budget %d: the same fact shown twice: %v", budget, shown)
		}
		// The last exchange is kept; the window gives way to evidence.
		newest := full.Turns[len(full.Turns)-1].Index
		if len(c.Turns) < service.LastExchange || c.Turns[len(c.Turns)-1].Index != newest {
			t.Fatalf("budget %d: window %v, want the last exchange (to %d)", budget, indices(c), newest)
		}
		if !slices.ContainsFunc(shown, func(id string) bool { return slices.Contains([]string{"t005", "t007", "t009", "t020"}, id) }) {
			t.Errorf("budget %d: no evidence recalled (%v), window %v", budget, shown, indices(c))
		}
		if budget >= 2400 && !slices.Contains(shown, "t009") {
			t.Errorf("budget %d: the long turn that says what she wants to cook was not recalled: %v", budget, shown)
		}
		for _, r := range c.Recalled {
			if r.TurnID != "t009" || r.Kind != client.RecalledTurn || !r.Trimmed && utf8.RuneCountInString(long) <= budget/service.TrimShare {
				continue // whole: a turn within its share of the budget
			}
			if !r.Trimmed || !strings.Contains(r.Text, "she said she wants to cook paella for the party.") ||
				strings.Contains(r.Text, "football") || !strings.HasPrefix(r.Text, "… ") || !strings.HasSuffix(r.Text, " …") {
				t.Errorf("budget %d: long turn recalled as %q (trimmed %v), want its matching sentence between marks", budget, r.Text, r.Trimmed)
			}
		}
	}
}

// At a budget that holds the whole summary or the evidence, not both, the
// evidence wins: the summary gives way to what matches the question, and
// the verbatim window to the last exchange.
func TestQueryContextEvidenceBeatsTheSummary(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	// Turn 40 is not folded: the summary does not hold it.
	publishWith(t, e, "s1", 0, 64, map[int]string{40: "The zeppelin museum tickets cost forty euros each, cash only."})
	e.Settled("s1", 64, 10)
	q := "How much do the zeppelin museum tickets cost?"
	full := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q})
	said := testenv.Turn("s1", 40)
	evidence := client.LineChars(client.ExcerptsHeader) +
		client.LineChars(client.RecalledItem{Kind: client.RecalledTurn, Speaker: said.Speaker, At: said.At, Text: said.Text}.Line())
	n := len(full.Turns)
	if full.Summary == nil || strings.Contains(full.Summary.Summary, "zeppelin") || full.Cursor > 40 {
		t.Fatalf("unlimited: summary %+v, cursor %d", full.Summary, full.Cursor)
	}
	last := full.Turns[n-1].Chars + full.Turns[n-2].Chars + client.LineChars(client.RecentHeader)
	budget := full.Summary.Chars + last + evidence - 10
	// Under a budget a turn of the last exchange may be cut to its end
	// (fitLast): the budget is set by the last exchange as it shows it.
	shown := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: budget})
	m := len(shown.Turns)
	last = shown.Turns[m-1].Chars + shown.Turns[m-2].Chars + client.LineChars(client.RecentHeader)
	budget = full.Summary.Chars + last + evidence - 20
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: budget})
	checkQueryContext(t, c, budget)
	if !slices.Contains(shownTurns(c), said.TurnID) || c.Summary != nil && !c.Summary.Trimmed {
		t.Fatalf("budget %d: the evidence gave way to the whole summary (%d chars):\n%s", budget, full.Summary.Chars, c.Prompt())
	}
	if c.Turns[len(c.Turns)-1].Index != full.Turns[n-1].Index || len(c.Turns) < service.LastExchange {
		t.Fatalf("budget %d: the last exchange is not kept: %v", budget, indices(c))
	}
}

// A recalled turn of speech is shown, and charged, without what its
// transcript carries besides the words; a tool's turn is shown as it is.
func TestQueryContextShowsSpeechClean(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	spoken := "Um, the {disfmarker} the tournament is on uh Saturday in Lisbon [laughter]"
	tool := "tournament: um {gap} the the Lisbon"
	ctx := context.Background()
	for i := range 64 {
		turn := testenv.Turn("s1", i)
		switch i {
		case 5:
			turn.Text, turn.Kind = spoken, "speech"
		case 9:
			turn.Text, turn.Kind, turn.Tool, turn.Role = tool, "tool_result", "calendar", "tool"
		}
		data, _ := json.Marshal(turn)
		if _, err := e.JS.Publish(ctx, e.Layout.Subjects.In("s1", events.KindTurn), data, jetstream.WithMsgID("s1:"+turn.TurnID)); err != nil {
			t.Fatal(err)
		}
	}
	e.Settled("s1", 64, 10)
	for _, budget := range []int{0, 1500} {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "When is the tournament in Lisbon?", BudgetChars: budget})
		checkQueryContext(t, c, budget)
		texts := map[string]string{}
		for _, r := range c.Recalled {
			texts[r.TurnID] = r.Text
		}
		if got, want := texts["t005"], "the tournament is on Saturday in Lisbon"; got != want {
			t.Errorf("budget %d: spoken turn recalled as %q, want %q", budget, got, want)
		}
		if got, ok := texts["t009"]; ok && got != tool {
			t.Errorf("budget %d: tool turn recalled as %q, want it as it is", budget, got)
		}
		if budget == 0 && texts["t009"] != tool {
			t.Errorf("no budget: tool turn not recalled as it is: %q", texts["t009"])
		}
	}
}

// Under a small budget a very long turn of the last exchange is shown as
// its last sentences, marked trimmed, so that it does not take the room of
// the evidence; without a budget, or under one that holds it, it is whole.
func TestQueryContextTrimsALongLastTurnToItsEnd(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	var speech []string
	for i := range 12 {
		speech = append(speech, fmt.Sprintf("Point number %d of the quarterly report was about the budget of department %d.", i, i))
	}
	speech = append(speech, "So, who books the zeppelin museum tickets?")
	long := strings.Join(speech, " ")
	publishWith(t, e, "s1", 0, 64, map[int]string{
		20: "The zeppelin museum tickets cost forty euros each, cash only.",
		63: long,
	})
	e.Settled("s1", 64, 10)
	q := "How much do the zeppelin museum tickets cost?"
	whole := client.LineChars(client.TurnLine(testenv.Turn("s1", 63).Speaker, long))
	for _, budget := range []int{0, 2000, 40000} {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: budget})
		checkQueryContext(t, c, budget)
		last := c.Turns[len(c.Turns)-1]
		if last.Index != 63 {
			t.Fatalf("budget %d: window %v does not end with the newest turn", budget, indices(c))
		}
		if budget == 0 || whole <= budget/service.LastTurnShare {
			if last.Trimmed || last.Text != long {
				t.Errorf("budget %d: the newest turn was cut (%q) though the budget holds it", budget, last.Text)
			}
			continue
		}
		rest, marked := strings.CutPrefix(last.Text, "… ")
		if !last.Trimmed || !marked || !strings.HasSuffix(long, " "+rest) || !strings.HasSuffix(rest, "So, who books the zeppelin museum tickets?") {
			t.Errorf("budget %d: newest turn shown as %q (trimmed %v), want its last whole sentences after a mark", budget, last.Text, last.Trimmed)
		}
		if last.Chars > budget/service.LastTurnShare || last.Chars != client.LineChars(last.Line()) {
			t.Errorf("budget %d: trimmed turn costs %d (line %d), want at most %d", budget, last.Chars, client.LineChars(last.Line()), budget/service.LastTurnShare)
		}
		if !slices.Contains(shownTurns(c), "t020") {
			t.Errorf("budget %d: the evidence was not recalled:\n%s", budget, c.Prompt())
		}
	}
}

// A turn of speech with no word once cleaned ("{vocalsound}") is never
// recalled: not as the answer after a matching question, nor as a match
// by a person the question names.
func TestQueryContextNeverRecallsATurnThatSaysNothing(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, map[int]string{
		3: "Can someone book the zeppelin museum tickets for Saturday?",
		4: "{vocalsound}",
		7: "Um , {vocalsound} uh",
		9: "The zeppelin museum tickets are booked, forty euros each.",
	})
	e.Settled("s1", 64, 10)
	q := "What did Bob say about the zeppelin museum tickets?"
	for _, budget := range []int{0, 1500, 4000} {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: budget})
		checkQueryContext(t, c, budget)
		shown := shownTurns(c)
		if !slices.Contains(shown, "t009") || budget == 0 && !slices.Contains(shown, "t003") {
			t.Errorf("budget %d: the evidence was not recalled: %v", budget, shown)
		}
		if slices.Contains(shown, "t004") || slices.Contains(shown, "t007") {
			t.Errorf("budget %d: a turn that says nothing was recalled: %v\n%s", budget, shown, c.Prompt())
		}
	}
}

// A budget the matches and the turns around them do not fill gives its
// room left, after the summary and the window, to turns further from the
// matches.
func TestQueryContextFillsRoomLeftAroundTheMatches(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishWith(t, e, "s1", 0, 64, map[int]string{
		14: "Grandma's lighthouse painting still hangs crooked beside the kitchen door.",
		20: "The zeppelin museum tickets cost forty euros each, cash only.",
	})
	e.Settled("s1", 64, 10)
	budget := 20000
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "How much do the zeppelin museum tickets cost?", BudgetChars: budget})
	checkQueryContext(t, c, budget)
	shown := shownTurns(c)
	if !slices.Contains(shown, "t020") || !slices.Contains(shown, "t014") {
		t.Fatalf("budget %d: recalled %v (window from %d, %d chars), want the match and the turn six before it:\n%s", budget, shown, c.Turns[0].Index, c.Chars, c.Prompt())
	}
}
