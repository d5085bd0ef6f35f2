package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/nats-io/nats.go/jetstream"
)

// publishDays publishes n turns of session, perDay a day (the day's turns
// a minute apart from 18:00), Alice, Bob and Carol in turn, with texts'
// text where given, and waits for the processor to settle.
func publishDays(t *testing.T, e *servicetest.Env, session string, n, perDay int, texts map[int]string) {
	t.Helper()
	speakers := []string{"Alice", "Bob", "Carol"}
	start := time.Date(2026, 5, 1, 18, 0, 0, 0, time.UTC)
	for i := range n {
		text, ok := texts[i]
		if !ok {
			text = fmt.Sprintf("message number %03d about the ranked match.", i)
		}
		tu := events.Turn{V: events.Version, Session: session, TurnID: fmt.Sprintf("t%03d", i),
			At:      start.AddDate(0, 0, i/perDay).Add(time.Duration(i%perDay) * time.Minute),
			Speaker: speakers[i%len(speakers)], Role: "user", Text: text}
		data, _ := json.Marshal(tu)
		if _, err := e.JS.Publish(context.Background(), e.Layout.Subjects.In(session, events.KindTurn), data,
			jetstream.WithMsgID(session+":"+tu.TurnID)); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(fmt.Sprintf("session %s settled with %d turns", session, n), func() bool {
		s := e.Checkpoint(session)
		return s.Total == int64(n) && s.Cursor >= int64(n-60) && s.Lease == nil
	})
}

// checkShownOnce fails t if a turn is shown twice in c: as a memory and
// as an excerpt, or as two excerpts.
func checkShownOnce(t *testing.T, c *client.Context) {
	t.Helper()
	shown := shownTurns(c)
	if len(slices.Compact(slices.Clone(shown))) != len(shown) {
		t.Errorf("a turn shown twice (as a memory and an excerpt): %v\n%s", shown, c.Prompt())
	}
}

// excerptDays are the days (UTC) of a context's recalled turns that
// matched in their own right, by how many of them each has.
func excerptDays(c *client.Context) map[string]int {
	out := map[string]int{}
	for _, r := range c.Recalled {
		if r.Kind == client.RecalledTurn && !r.Neighbour {
			out[r.At.UTC().Format(time.DateOnly)]++
		}
	}
	return out
}

// matchedTurns are the ids of a context's recalled turns that matched in
// their own right (not neighbours), in the reply's order.
func matchedTurns(c *client.Context) []string {
	var out []string
	for _, r := range c.Recalled {
		if r.Kind == client.RecalledTurn && !r.Neighbour {
			out = append(out, r.TurnID)
		}
	}
	return out
}

// A question whose evidence is spread over several days gets excerpts of
// those days, not five that repeat one evening that talked about it most.
func TestQueryContextExcerptsSpanTheDays(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	texts := map[int]string{
		// Day 0, one evening about the paella.
		3: "We cooked paella tonight with saffron from the market.",
		4: "The paella needed more saffron and a bigger pan, honestly.",
		5: "Next time the paella gets chorizo and less rice in the pan.",
		6: "That paella pan is far too small for six people.",
		7: "I burned the bottom of the paella, the socarrat was black.",
		8: "Paella leftovers for lunch tomorrow then, with lemon.",
		// Later days, one mention each.
		25: "Made paella again for the neighbours on the terrace.",
		47: "My sister asked for the paella recipe, I sent it to her.",
		69: "We ordered paella at the harbour restaurant, it was bland.",
	}
	publishDays(t, e, "s1", 150, 22, texts)
	q := "When did we have paella?"
	for _, budget := range []int{1200, 2000} {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: budget})
		checkShownOnce(t, c)
		days := excerptDays(c)
		n := 0
		for _, k := range days {
			n += k
		}
		if n < 4 {
			t.Fatalf("budget %d: %d matching excerpts (%v), want at least 4:\n%s", budget, n, days, c.Prompt())
		}
		if len(days) < 3 {
			t.Errorf("budget %d: excerpts of %d days (%v), want the later days' mentions too:\n%s", budget, len(days), days, c.Prompt())
		}
	}
}

// A question that names a person recalls what that person said on the
// subject, although those turns do not use the question's other words;
// not a turn that only names them.
func TestQueryContextRecallsWhatTheNamedPersonSaid(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishDays(t, e, "s1", 150, 50, map[int]string{
		99:  "Hey Bob!",
		102: "Hi Bob, the trip plans are in the shared folder now.",
		109: "I want to take the night train to Porto and stay in a small guesthouse by the river.",
		110: "Sounds good.",
	})
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "What are Bob's plans?", BudgetChars: 1500})
	checkShownOnce(t, c)
	shown := shownTurns(c)
	if !slices.Contains(shown, "t109") {
		t.Errorf("what Bob said about his plans was not recalled: %v\n%s", shown, c.Prompt())
	}
	if slices.Contains(shown, "t099") {
		t.Errorf("a greeting that names Bob was recalled: %v", shown)
	}
}

// Evidence comes in stretches: of two turns that match a question
// alike, the one in the exchange the best evidence is part of is recalled
// before one said elsewhere in passing.
func TestQueryContextPrefersTheStretchOfTheEvidence(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishDays(t, e, "s1", 150, 150, map[int]string{
		20:  "What did the vet say about Luna's hip?",
		21:  "The vet said Luna's hip joint is worn and she should lose some weight.",
		26:  "So from now on Luna is going to get a spoon of the joint supplement with her dinner.",
		100: "Luna's new red collar, bought today.",
	})
	for _, budget := range []int{1000, 2000} {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "What did the vet say about Luna?", BudgetChars: budget, RecallTurns: 2})
		checkShownOnce(t, c)
		matches := matchedTurns(c)
		if !slices.Contains(matches, "t026") || slices.Contains(matches, "t100") {
			t.Errorf("budget %d: matches %v, want the turn of the vet exchange (t026), not the one said in passing (t100):\n%s", budget, matches, c.Prompt())
		}
	}
}

// A stretch of evidence is one sitting: in a chat of many days, the turn
// that opens the next day's conversation a few turns after the evidence
// gains nothing from it, and a match as good said on another day
// elsewhere comes first when it is a little shorter.
func TestQueryContextStretchEndsWithTheDay(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	publishDays(t, e, "s1", 150, 25, map[int]string{
		// The end of day 0: the vet exchange.
		20: "What did the vet say about Luna's hip?",
		21: "The vet said Luna's hip joint is worn and she should lose some weight.",
		// Day 1 opens, five turns later; day 2, far from the exchange: the
		// same words, one character shorter.
		26: "Luna's new red collar, bought at the pet shop today!!",
		70: "Luna's new red collar, bought at the pet shop today!",
	})
	for _, budget := range []int{1000, 2000} {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "What did the vet say about Luna?", BudgetChars: budget, RecallTurns: 2})
		checkShownOnce(t, c)
		matches := matchedTurns(c)
		if !slices.Contains(shownTurns(c), "t070") || slices.Contains(matches, "t026") {
			t.Errorf("budget %d: matches %v (shown %v), want the shorter match (t070) shown, not the next day's opening near the exchange in turns only (t026) recalled:\n%s",
				budget, matches, shownTurns(c), c.Prompt())
		}
	}
}

// A sentence of the summary competes with the excerpts although it holds
// no word of the question: once the question's words are shown, a turn
// that only says them again is worth less than what the summary says of
// the session.
func TestQueryContextSummaryCompetesWithoutTheQuestionsWords(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	// Turns 41 to 58 are not folded: the summary does not hold them.
	flowers := []string{"tulips", "roses", "lilies", "orchids", "daisies", "peonies", "irises", "poppies", "asters",
		"dahlias", "violets", "crocuses", "freesias", "gerberas", "hyacinths", "jasmine", "lavender", "marigolds"}
	texts := map[int]string{
		// What the summary says: the trip, in words the window does not use.
		6:  "We booked the night train to Porto for the second week of June.",
		12: "The guesthouse by the river has a garden and serves breakfast until eleven.",
		18: "My cousin Ines lends us her bicycles, so we can ride along the coast to Matosinhos.",
		24: "Remember the ferry tickets to the islands, they sell out by Thursday.",
	}
	for i, f := range flowers {
		texts[41+i] = "The zeppelin, yes, the zeppelin, the zeppelin, that zeppelin again, the zeppelin: " + f + "."
	}
	// A day each: no turn of the zeppelin's is near another's in time.
	publishDays(t, e, "s1", 64, 1, texts)
	q := "What about the zeppelin?"
	full := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q})
	if full.Summary == nil || strings.Contains(full.Summary.Summary, "zeppelin") || !strings.Contains(full.Summary.Summary, "Porto") || full.Cursor > 41 {
		t.Fatalf("unlimited: summary %+v, cursor %d", full.Summary, full.Cursor)
	}
	budget := 1500
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: budget})
	checkShownOnce(t, c)
	if n := len([]rune(c.Prompt())); n != c.Chars || n > budget {
		t.Fatalf("prompt is %d chars, context says %d, budget %d", n, c.Chars, budget)
	}
	excerpts := 0
	for _, r := range c.Recalled {
		if r.Kind == client.RecalledTurn && strings.Contains(r.Text, "zeppelin") {
			excerpts++
		}
	}
	if excerpts == 0 || c.Summary == nil || !strings.Contains(c.Summary.Summary, "Porto") {
		t.Errorf("budget %d: %d excerpts of the zeppelin; want some, and the summary's sentence of the trip:\n%s", budget, excerpts, c.Prompt())
	}
}

// evictNote is a processor in mode evict that keeps about 50 turns of
// publishDays': the context's note says what left the window, no summary
// says those turns already.
func evictNote() processor.Config {
	return processor.Config{
		Mode: fold.ModeEvict, RecallEnabled: true,
		Tokens: fold.TokenPolicy{ContextWindow: 1024, ReserveTokens: 400},
		Evict:  fold.EvictPolicy{TargetUtilization: 0.5, MinKeepMessages: 4},
	}
}

// The room left goes to the turns around a match said in its sitting: in
// a chat of many days, the turns that open the next day's conversation
// are not read as the evening's exchange about the question. (Mode
// evict: no summary that already says those turns.)
func TestQueryContextNeighboursStayInTheSitting(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(evictNote(), nil)
	e.StartService(nil)
	publishDays(t, e, "s1", 150, 25, map[int]string{
		// The end of day 0: the plumber's visit.
		22: "He came at six with a toolbox the size of a suitcase.",
		23: "Took him an hour under the sink with a torch in his teeth.",
		24: "The plumber said the leak needs a new valve and a washer.",
		// Day 1 opens.
		25: "Good morning, the sun is out over the harbour today.",
		26: "Cycling to the office along the canal, it is lovely.",
		27: "The bakery on the corner finally reopened after the summer.",
	})
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "What did the plumber say about the leak?", BudgetChars: 3000, RecallTurns: 1})
	checkShownOnce(t, c)
	shown := shownTurns(c)
	if !slices.Contains(shown, "t024") || !slices.Contains(shown, "t023") {
		t.Fatalf("recalled %v, want the match (t024) and the evening's turn before it (t023):\n%s", shown, c.Prompt())
	}
	for _, id := range []string{"t025", "t026", "t027"} {
		if slices.Contains(shown, id) {
			t.Errorf("recalled %v: the next day's opening (%s) shown as a neighbour of the evening's match:\n%s", shown, id, c.Prompt())
		}
	}
}

// A short match is recalled with the turn before it said in its
// sitting, not with the last turn of the evening before: the next day's
// first words do not answer it.
func TestQueryContextFragmentKeepsItsSitting(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(evictNote(), nil)
	e.StartService(nil)
	publishDays(t, e, "s1", 150, 25, map[int]string{
		24: "We should repaint the hallway green someday.", // the end of day 0
		25: "Lisbon trip booked, flights too!",             // day 1 opens
		39: "I spoke to the travel agent about the hotel.",
		40: "So the Lisbon trip is on!",
	})
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "When is the Lisbon trip?", BudgetChars: 2000, RecallTurns: 2})
	checkShownOnce(t, c)
	shown := shownTurns(c)
	if !slices.Contains(shown, "t025") || !slices.Contains(shown, "t040") || !slices.Contains(shown, "t039") {
		t.Fatalf("recalled %v, want both matches (t025, t040) and the turn before the second, said that day (t039):\n%s", shown, c.Prompt())
	}
	if slices.Contains(shown, "t024") {
		t.Errorf("recalled %v: the evening before (t024) shown with the next day's first match:\n%s", shown, c.Prompt())
	}
}

// A question that asks when gets the excerpt's relative dates resolved
// against the day it was said ("yesterday" told on 2 May is 1 May); any
// other question gets the turn as it was said.
func TestQueryContextResolvesRelativeDatesWhenAsked(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(evictNote(), nil)
	e.StartService(nil)
	publishDays(t, e, "s1", 150, 25, map[int]string{
		30: "I went to the support group yesterday, it was great.", // 2 May
	})
	for q, want := range map[string]string{
		"When did Alice go to the support group?":     "yesterday (1 May 2026)",
		"What did Alice say about the support group?": "yesterday, it was great",
	} {
		c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: 2000})
		checkShownOnce(t, c)
		if n := len([]rune(c.Prompt())); n != c.Chars || n > 2000 {
			t.Fatalf("%q: prompt is %d chars, context says %d, budget 2000", q, n, c.Chars)
		}
		found := false
		for _, r := range c.Recalled {
			found = found || r.TurnID == "t030" && strings.Contains(r.Text, want)
		}
		if !found {
			t.Errorf("%q: want the excerpt of t030 to read %q:\n%s", q, want, c.Prompt())
		}
	}
}

// A question-aware context under a budget that holds the whole session
// shows every unfolded turn, verbatim or as an excerpt: no summary holds
// them, so with room to spare none is left out (as none is without a
// budget), however far from the matches.
func TestQueryContextUnderAnAmpleBudgetLosesNoUnfoldedTurn(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	vocab := strings.Fields("apple river garden window mountain coffee train yellow blanket pencil guitar ocean bicycle candle forest jacket ladder marble needle orange pepper quilt rocket saddle tiger umbrella violin walnut zipper anchor basket castle dolphin engine falcon glacier harbor island jungle kettle lantern meadow nectar orchid puzzle quartz rabbit spider tunnel valley wagon")
	const n = 45
	texts := map[int]string{}
	for i := range n {
		w := func(k int) string { return vocab[(i*7+k*13)%len(vocab)] }
		texts[i] = fmt.Sprintf("We talked about the %s and the %s near the %s, then the %s, %s, %s and %s.", w(0), w(1), w(2), w(3), w(4), w(5), w(6))
	}
	for _, m := range []int{10, 20, 30} {
		texts[m] = "The tournament form is due on Friday, says the organiser."
	}
	publishWith(t, e, "s1", 0, n, texts)
	e.Settled("s1", n, 0) // nothing folded: no summary holds any turn
	q := "When is the tournament form due?"
	plain := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q})
	budget := 20 * plain.Chars
	c := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: q, BudgetChars: budget})
	shown := map[int64]bool{}
	for _, ct := range c.Turns {
		shown[ct.Index] = true
	}
	for _, idx := range recalledIndices(c) {
		shown[idx] = true
	}
	var lost []int
	for i := range n {
		if !shown[int64(i)] {
			lost = append(lost, i)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("budget %d (the unbudgeted context costs %d): %d chars, turns %v shown nowhere (dropped_turns %d):\n%s",
			budget, plain.Chars, c.Chars, lost, c.DroppedTurns, c.Prompt())
	}
}
