package offline

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/fold"
)

// A period line reads back as the period it was written from, whatever
// its time span says; a line that names someone who is no participant is
// a statement, not a period line.
func TestPeriodLineRoundTrip(t *testing.T) {
	who := newNames("Alice", "Bob", "PhD A")
	for _, p := range []period{
		{from: "14:02", to: "14:20", names: []string{"Alice", "PhD A"}, phrases: []string{"venue in Lisbon", "catering", "keynote speaker"}},
		{from: "09:30", to: "09:30", names: []string{"Bob"}, phrases: []string{"budget", "MLP features", "Luna Snow"}},
		{to: "23:59", names: []string{"Alice"}, phrases: []string{"grill", "cabin", "Lake Tahoe"}},
		{names: []string{"Alice", "Bob"}, phrases: []string{"grill", "cabin", "Lake Tahoe"}},
	} {
		line := p.render()
		got, ok := parsePeriod(line, who)
		if !ok {
			t.Fatalf("%q: not read back as a period line", line)
		}
		if got.from != p.from || got.to != p.to || !slices.Equal(got.names, p.names) || !slices.Equal(got.phrases, p.phrases) {
			t.Errorf("%q read back as %+v", line, *got)
		}
		if again := got.render(); again != line {
			t.Errorf("%q rendered again as %q", line, again)
		}
	}
	for _, s := range []string{
		"From 14:02 to 14:20, Mallory and Bob discussed the plan.", // Mallory is no participant
		"Earlier, Alice said they discussed it.",
		"From noon to 14:20, Alice discussed lunch.",
		"From 14:02 to 14:20, Alice discussed the demo, Mr. Bob thought it was a short meeting because of the four agenda items and Tcl.",
	} {
		if _, ok := parsePeriod(s, who); ok {
			t.Errorf("%q read as a period line", s)
		}
	}
}

// Merging two periods spans both, keeps the phrases that weigh most over
// both (one of both first) and never more than a line holds.
func TestMergePeriods(t *testing.T) {
	a := &period{from: "10:00", to: "10:20", names: []string{"Alice", "Bob"}, weight: 20,
		phrases: []string{"venue", "catering", "keynote speaker", "budget", "hotel rooms", "train tickets", "slides"}}
	b := &period{from: "10:21", to: "10:30", names: []string{"Carol", "Alice"}, weight: 9,
		phrases: []string{"budget", "posters", "badges", "wifi", "speaker dinner", "name tags", "coffee", "sponsors"}}
	m := mergePeriods(a, b, nil)
	if m.from != "10:00" || m.to != "10:30" {
		t.Errorf("span %s–%s, want 10:00–10:30", m.from, m.to)
	}
	if len(m.phrases) > maxPeriodPhrases || len(m.names) > maxPeriodNames {
		t.Errorf("merged line too long: %+v", *m)
	}
	if m.phrases[0] != "budget" {
		t.Errorf("the phrase of both periods is not first: %v", m.phrases)
	}
	if !slices.Contains(m.phrases, "venue") || !slices.Contains(m.phrases, "posters") {
		t.Errorf("the first phrases of each period are lost: %v", m.phrases)
	}
}

// fitPeriods keeps at most maxLines lines within budget, merging adjacent
// periods whose longer one is shortest: the short early periods merge
// first, and no period is dropped.
func TestFitPeriods(t *testing.T) {
	var ps []*period
	for i := 0; i < 8; i++ {
		from := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * 10 * time.Minute)
		minutes := 9
		if i < 4 {
			minutes = 2 // the early periods were short
		}
		to := from.Add(time.Duration(minutes) * time.Minute)
		ps = append(ps, &period{from: clockOf(from), to: clockOf(to), names: []string{"Alice"}, weight: float64(minutes),
			phrases: []string{fmt.Sprintf("topic%da", i), fmt.Sprintf("topic%db", i), fmt.Sprintf("topic%dc", i)}})
	}
	got := fitPeriods(ps, 4, 400, nil)
	if len(got) > 4 {
		t.Fatalf("%d lines, want at most 4", len(got))
	}
	n := 0
	for _, p := range got {
		n += runeLen(p.render()) + 1
	}
	if n > 400 {
		t.Errorf("%d runes, want at most 400", n)
	}
	if got[len(got)-1].to != "11:19" {
		t.Errorf("the newest period was dropped: last line %q", got[len(got)-1].render())
	}
	if got[0].from != "10:00" {
		t.Errorf("the oldest period was dropped: first line %q", got[0].render())
	}
	if fitPeriods(got, 4, 20, nil) != nil {
		t.Errorf("lines kept in a budget no line fits")
	}
}

// The topic phrases of a batch are its specific words: no fillers,
// hedges, common verbs or participants' names; what several turns say
// ranks first.
func TestPhraseCounter(t *testing.T) {
	who := newNames("Alice", "Bob", "Project Manager")
	pc := newPhraseCounter(40)
	for i, l := range []string{
		"Alice: um so I think the venue in Lisbon is basically fine",
		"Bob: yeah the venue looks good, and the catering menu too",
		"Alice: Project Manager wants the catering menu by Friday",
		"Bob: I mean, Dave Dave said the hotel rooms are booked",
	} {
		sp, text, _ := strings.Cut(l, ": ")
		ws := appendFields(nil, text)
		pc.add(ws, appendWords(nil, ws), i, sp, who)
	}
	phrases, speakers, ok := pc.top(maxPeriodPhrases)
	if !ok {
		t.Fatal("no period for the batch")
	}
	if phrases[0] != "catering menu" && phrases[0] != "venue" {
		t.Errorf("a phrase said once ranks first: %v", phrases)
	}
	for _, ph := range phrases {
		for _, w := range strings.Fields(ph) {
			switch strings.ToLower(w) {
			case "um", "think", "basically", "fine", "yeah", "looks", "good", "mean", "project", "manager", "alice", "said":
				t.Errorf("phrase %q has %q", ph, w)
			}
		}
		if strings.Contains(ph, "Dave Dave") {
			t.Errorf("repeated word kept: %q", ph)
		}
	}
	if len(speakers) == 0 || len(speakers) > maxPeriodNames {
		t.Errorf("speakers %v", speakers)
	}
}

// A topic of the first minutes of a long conversation is still named at
// its end, in a period line, after its statements gave way to newer ones.
func TestEarlyTopicSurvives(t *testing.T) {
	early := []string{
		"Alice: The workshop venue in Lisbon holds 120 people.",
		"Bob: Then the Lisbon venue it is, I'll ask about catering.",
		"Alice: The catering quote from the Lisbon venue was 40 euros per person.",
		"Bob: Let's book the Lisbon venue for the second week of June.",
		"Alice: I'll draft the workshop programme for the Lisbon venue.",
	}
	subjects := []string{"printer", "newsletter", "server migration", "logo", "intern hiring", "office plants",
		"parking permits", "expense reports", "security audit", "team offsite", "coffee machine", "wiki cleanup"}
	things := []string{"invoice", "contract", "laptop order", "backup plan", "floor map", "style guide",
		"onboarding checklist", "vendor list", "shipping label", "license key", "meeting notes"}
	lines := append([]string(nil), early...)
	for i := 0; len(lines) < 400; i++ {
		sp := []string{"Alice", "Bob", "Carol"}[i%3]
		lines = append(lines, fmt.Sprintf("%s: The %s %s costs %d euros and is due on %s.",
			sp, subjects[i%len(subjects)], things[i%len(things)], 10+i, []string{"Monday", "Tuesday", "Thursday"}[i%3]))
	}
	sums := rollingFold(t, New(), turns(lines...), nil, 10, 1200)
	final := sums[len(sums)-1]
	var inPeriod bool
	for _, s := range splitSentences(final) {
		if _, ok := parsePeriod(s, newNames("Alice", "Bob", "Carol")); ok && strings.Contains(s, "Lisbon") {
			inPeriod = true
		}
	}
	if !inPeriod {
		t.Errorf("the early topic is gone from the final summary: %s", final)
	}
	if runeLen(final) > 1200 {
		t.Errorf("over budget: %d", runeLen(final))
	}
}

// Short conversations whose statements fit get no period line: the
// statements say it all.
func TestNoPeriodLineWhileStatementsFit(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns(
		"Alice: The workshop venue in Lisbon holds 120 people.",
		"Bob: Then the Lisbon venue it is, I'll ask about catering."), MaxChars: 1200})
	for _, s := range splitSentences(got) {
		if _, ok := parsePeriod(s, newNames("Alice", "Bob")); ok {
			t.Errorf("period line in a summary that fits: %q", got)
		}
	}
}

func TestDropDisfluencies(t *testing.T) {
	who := newNames("Alice", "Ed")
	for _, c := range []struct{ in, want string }{
		{"we started to fill the column with features w with nets trained on PLP", "we started to fill the column with features with nets trained on PLP"},
		{"for th the last column we use our imagination", "for the last column we use our imagination"},
		{"I mean, the fea features are fine", "The features are fine"},
		{"the venue, you know, is booked", "the venue, is booked"},
		{"on one hand it is cheap", "on one hand it is cheap"}, // words, not fragments
		{"Ed edited the slides", "Ed edited the slides"},       // a name
		{`she said "th the" twice`, `she said "th the" twice`}, // quoted as said
		{"we need an answer soon", "we need an answer soon"},   // "an" is a word
		{"the mic mike is off", "the mic mike is off"},         // "mic" is no prefix fragment of a longer word
		{"I mean,", "I mean,"}, // nothing would be left
		{"What I mean, is that it fails", "What is that it fails"},
		{"I mean we could just ask Ed", "We could just ask Ed"},
		{"I mean it, ask Ed", "I mean it, ask Ed"},
		{"so I mean to ask Ed", "so I mean to ask Ed"},
	} {
		if got := dropDisfluencies(c.in, appendFields(nil, c.in), who); got != c.want {
			t.Errorf("dropDisfluencies(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A statement shrinks to its main clauses unless that leaves a stub.
func TestCondenseMain(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Bob said that, because it rains, we stay home.", "Bob said that, because it rains, we stay home."},
		{"Bob booked the hotel, it was nice, the view was great.", "Bob booked the hotel."},
	} {
		if got := condenseMain(c.in); got != c.want {
			t.Errorf("condenseMain(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// runes is the rune length of the rendered line, for every form of span.
func TestPeriodRunes(t *testing.T) {
	for _, p := range []*period{
		{from: "14:02", to: "14:20", names: []string{"Alice", "Bob"}, phrases: []string{"the venue in Lisbon", "catering", "hotel rooms"}},
		{from: "09:00", to: "09:00", names: []string{"Zoë"}, phrases: []string{"café", "naïve plans", "x"}},
		{to: "10:00", names: []string{"A", "B", "C"}, phrases: []string{"one"}},
		{names: []string{"Ann"}, phrases: []string{"a", "b"}},
	} {
		if got, want := p.runes(), runeLen(p.render()); got != want {
			t.Errorf("%q: runes %d, want %d", p.render(), got, want)
		}
	}
}

// A word cut short and said again whole is no part of a topic phrase.
func TestScanPhrasesSkipsCutWord(t *testing.T) {
	words := appendFields(nil, "we need the extra functio functionality of the touch pad")
	var got []string
	scanPhrases(words, appendWords(nil, words), newNames("Bob"), nil, func(run []string, _ bool) {
		got = append(got, strings.Join(run, " "))
	})
	for _, ph := range got {
		if strings.Contains(ph, "functio ") || ph == "functio" {
			t.Fatalf("phrases %q hold the cut word", got)
		}
	}
	if !slices.Contains(got, "functionality") && !slices.Contains(got, "extra functionality") {
		t.Fatalf("phrases %q lost the whole word", got)
	}
}
