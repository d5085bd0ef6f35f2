package offline

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
)

// bareList finds a sentence of s that lists more than four bare nouns:
// single lower-case words in a run of ", " / " and " separated items
// ("they discussed overwatch, rusty, snacks, maps and leaving").
func bareList(s string) (string, bool) {
	for _, sent := range splitSentences(s) {
		items := strings.Split(strings.ReplaceAll(strings.TrimRight(sent, ".!?"), " and ", ", "), ", ")
		run := 0
		for i, it := range items {
			// A segment of one word is an item; a longer one ends the run,
			// and its last word may start the next one ("Tomás and Lena
			// discussed overwatch, rusty, …"), unless it is the last
			// segment ("…, snacks and the maps app").
			fs := strings.Fields(it)
			w := ""
			switch {
			case len(fs) == 1:
				w = fs[0]
			case len(fs) > 1 && i < len(items)-1:
				run = 0
				w = fs[len(fs)-1]
			}
			r, _ := utf8.DecodeRuneInString(w)
			if w != "" && unicode.IsLower(r) && !strings.ContainsAny(w, "0123456789$") {
				run++
				if run > 4 {
					return sent, true
				}
			} else {
				run = 0
			}
		}
	}
	return "", false
}

func TestBareList(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"Until 00:25, Tomás and Lena discussed overwatch, rusty, snacks, maps and leaving.", true},
		{"They talked about knives, forks, spoons, plates and cups. Then they left.", true},
		{"Alice, Bob, Carol, Dave and Eve are talking about the venue in Lisbon and catering.", false},
		{"From 14:02 to 14:20, Alice and Bob talked about the venue, the maps app and hotel rooms.", false},
		{"Bob said red, green, blue and white are fine.", false},
	} {
		if _, got := bareList(c.s); got != c.want {
			t.Errorf("bareList(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

// No summary of the demo, voice, agent or synthetic sessions has a
// sentence that is a list of more than four bare nouns.
func TestNoBareNounLists(t *testing.T) {
	_, vv, _ := voiceReplay(t)
	_, av, _ := agentReplay(t)
	all := append(vv, av...)
	ts, ns := demoSession(3, 240)
	all = append(all, rollingFold(t, New(), ts, ns, 10, 1200)...)
	ts, ns = synthSession(5, 300)
	all = append(all, rollingFold(t, New(), ts, ns, 10, 1200)...)
	for i, v := range all {
		if s, ok := bareList(v); ok {
			t.Errorf("summary %d lists bare nouns: %q\n%s", i+1, s, v)
		}
	}
}

// composed are the sentences of s that the summarizer composes itself (the
// opening and period lines), not the statements it reports.
func composed(s string) string {
	var out []string
	for _, sent := range splitSentences(s) {
		if strings.Contains(sent, " talking about ") || strings.Contains(sent, " talked about ") || strings.Contains(sent, " working on ") {
			out = append(out, sent)
		}
	}
	return strings.Join(out, " ")
}

// demoFolds folds the demo bot's conversation (seed, the first n turns) as
// the processor does by default: batches of 10, state carried.
func demoFolds(t *testing.T, seed int64, n int) []string {
	ts, ns := demoSession(seed, n)
	return rollingFold(t, New(), ts, ns, 10, 1200)
}

// TestDemoSession folds the demo bot's conversation; -v prints every
// version (docs/offline-summaries.md shows them). No sentence is a list of
// bare nouns, and nothing is said twice. The conversation's one correction
// (Tomás's pizza) supersedes its speaker's own earlier memory, and no memory
// supersedes another speaker's.
func TestDemoSession(t *testing.T) {
	ts, ns := demoSession(1, 71)
	s, summary, state := New(), "", []byte(nil)
	speakerOf := map[string]string{} // (by memory id)
	corrections := 0
	for c, ni := 0, 0; c < len(ts); c += 10 { // the memories, as a context's lines show them
		b, bn := ts[c:min(c+10, len(ts))], []fold.Note(nil)
		for ; ni < len(ns) && !ns[ni].At.After(b[len(b)-1].At); ni++ {
			bn = append(bn, ns[ni])
		}
		res, err := s.Summarize(context.Background(), fold.Request{Session: "long", Profile: fold.ProfileVoice, PreviousSummary: summary,
			PreviousState: state, Turns: b, Notes: bn, MaxChars: 1200, From: b[0].At, To: b[len(b)-1].At})
		if err != nil {
			t.Fatal(err)
		}
		summary, state = res.Summary, res.State
		for _, m := range res.MemoryItems {
			t.Logf("memory: %s: %s", m.Speaker, m.Text)
			if m.Supersedes != "" {
				corrections++
				if sp := speakerOf[m.Supersedes]; sp != m.Speaker {
					t.Errorf("%s's memory %q supersedes %s's (%s)", m.Speaker, m.Text, sp, m.Supersedes)
				}
			}
			speakerOf[m.ID] = m.Speaker
		}
	}
	if corrections == 0 {
		t.Error("no memory supersedes an earlier one, want Tomás's pizza update to supersede his first estimate")
	}
	for i, v := range demoFolds(t, 1, 71) {
		t.Logf("version %d (%d characters): %s", i+1, runeLen(v), v)
		if s, ok := bareList(v); ok {
			t.Errorf("version %d lists bare nouns: %q", i+1, s)
		}
		seen := map[string]bool{}
		for _, s := range splitSentences(v) {
			if seen[s] {
				t.Errorf("version %d says %q twice", i+1, s)
			}
			seen[s] = true
		}
	}
}

var periodRe = regexp.MustCompile(`(?:From|Between) (\d\d:\d\d)(?: on (\d+ \w+))? (?:to|and) (\d\d:\d\d)(?: on (\d+ \w+))?,|On (\d+ \w+) (?:from|between) (\d\d:\d\d) (?:to|and) (\d\d:\d\d),`)

// A conversation over several days: its period lines carry their dates
// and never run backwards.
func TestPeriodsAcrossDays(t *testing.T) {
	var ts []fold.Turn
	day0 := time.Date(2026, 5, 4, 13, 50, 0, 0, time.UTC)
	lines := []string{
		"Marco: the cabin near Lake Tahoe costs $190 a night.",
		"Lena: I can drive, my car fits four people and the bikes.",
		"Jonas: the dentist booked me for Friday at 9.",
		"Tomás: we are on King's Row, their Reinhardt is alone.",
		"Marco: the owner says the deposit is due by Wednesday.",
	}
	for d := range 4 {
		for i := range 30 {
			at := day0.Add(time.Duration(d)*24*time.Hour + time.Duration(i)*37*time.Second)
			if d%2 == 1 {
				at = at.Add(10 * time.Hour) // late at night, over midnight
			}
			l := lines[(d*30+i)%len(lines)]
			sp, text, _ := strings.Cut(l, ": ")
			ts = append(ts, fold.Turn{Index: int64(len(ts)), TurnID: fmt.Sprintf("t%d", len(ts)), At: at, Speaker: sp, Role: "user",
				Text: fmt.Sprintf("%s Round %d of day %d.", text, i, d)})
		}
	}
	vs := rollingFold(t, New(), ts, nil, 10, 1200)
	periods := 0
	for i, v := range vs {
		for _, m := range periodRe.FindAllStringSubmatch(v, -1) {
			periods++
			from, to := m[1]+" "+m[2], m[3]+" "+m[4]
			if m[5] != "" {
				from, to = m[6]+" "+m[5], m[7]+" "+m[5]
			}
			if m[2] == "" && m[5] == "" && i >= 3 { // (versions 1-3 are of the first day)
				t.Errorf("version %d: a period without its date in a conversation over days: %q", i+1, m[0])
			}
			a, errA := time.Parse("15:04 2 Jan", strings.TrimSpace(from+fallbackDay(m[2], m[4], m[5])))
			b, errB := time.Parse("15:04 2 Jan", strings.TrimSpace(to+fallbackDay(m[4], m[2], m[5])))
			if errA == nil && errB == nil && b.Before(a) {
				t.Errorf("version %d: period runs backwards: %q", i+1, m[0])
			}
		}
	}
	if periods == 0 {
		t.Fatalf("no period lines in %d versions; last: %s", len(vs), vs[len(vs)-1])
	}
}

func fallbackDay(own, other, on string) string {
	switch {
	case own != "" || on != "":
		return ""
	case other != "":
		return " " + other
	}
	return " 1 Jan"
}

// A participant is who talks, never what they talk about, even when the
// others name them often ("as Project Manager said").
func TestTopicsNameNoParticipant(t *testing.T) {
	var lines []string
	for i := range 6 {
		lines = append(lines,
			"Project Manager: we need the remote control design by Friday, the scroll wheel and the rubber case "+strconv.Itoa(i),
			"Marketing: as Project Manager said, the scroll wheel matters, Project Manager is right about the rubber case",
			"Industrial Designer: I agree with Project Manager, the rubber case and the scroll wheel, Project Manager knows")
	}
	got := summarize(t, fold.Request{Turns: turns(lines...)})
	if c := composed(got); strings.Contains(c, "about Project Manager") || strings.Contains(c, ", Project Manager") || strings.Contains(c, "and Project Manager.") {
		t.Errorf("a participant named as a topic: %q", c)
	}
	if !strings.Contains(composed(got), "scroll wheel") && !strings.Contains(composed(got), "rubber case") {
		t.Errorf("the subjects are not named: %q", composed(got))
	}
}

// A topic names a subject: never a common verb after "the" (a transcript's
// slip: "the gets rid of", "the makes sense") nor an indefinite pronoun
// ("why did nobody follow me in?").
func TestTopicsAreNoVerbsNorPronouns(t *testing.T) {
	for _, tc := range []struct {
		lines [3]string
		bad   []string
	}{
		{[3]string{"Alice: the filter the gets rid of the noise in the scroll wheel",
			"Bob: the makes sense, the scroll wheel and the often used buttons need the rubber case",
			"Carol: the scroll wheel is what the gets rid of, the rubber case too"},
			[]string{"the gets", "the makes", "the often"}},
		{[3]string{"Alice: why did nobody follow me in to the scroll wheel",
			"Bob: somebody cover the rubber case, nobody follow Alice",
			"Carol: has anybody seen the scroll wheel, somebody check the rubber case"},
			[]string{"the nobody", "about nobody", "the somebody", "about somebody", "the anybody", "about anybody", "nobody follow,", "somebody cover,", "anybody seen,"}},
		{[3]string{"Alice: why did nobody's friend follow me in to the scroll wheel",
			"Bob: whoever follows Alice takes the rubber case, someone's bag too",
			"Carol: whatever happens the scroll wheel stays, everyone's rubber case too"},
			[]string{"nobody's", "whoever", "someone's", "whatever", "everyone's"}},
	} {
		var lines []string
		for i := range 6 {
			lines = append(lines, tc.lines[0]+" "+strconv.Itoa(i), tc.lines[1], tc.lines[2])
		}
		c := composed(summarize(t, fold.Request{Turns: turns(lines...)}))
		for _, bad := range tc.bad {
			if strings.Contains(c, bad) {
				t.Errorf("not a subject named as a topic (%q): %q", bad, c)
			}
		}
		if !strings.Contains(c, "scroll wheel") {
			t.Errorf("the subjects are not named: %q", c)
		}
	}
}

// A sentence a label opens ("Decided: …", "Reminder: …") is quoted, not
// reported after "said" ("Marco said decided: Joshua Tree").
func TestLabelledSentenceIsQuoted(t *testing.T) {
	c := summarize(t, fold.Request{Turns: turns(
		"Marco: Decided: Joshua Tree on Saturday, leaving at 8 am from the station.",
		"Lena: Reminder: everyone sends the deposit by Wednesday night.")})
	for _, want := range []string{`Marco said, "Decided: Joshua Tree`, `Lena said, "Reminder: everyone sends`} {
		if !strings.Contains(c, want) {
			t.Errorf("want %q in %q", want, c)
		}
	}
}

// Two statements in a row by one speaker are one sentence; a quoted one
// or another speaker's stays its own.
func TestOneSpeakerOneSentence(t *testing.T) {
	st := &state{V: stateVersion, Names: []string{"Bob", "Alice"}}
	for _, x := range []struct{ sp, text string }{
		{"Bob", "Bob said the venue in Lisbon is booked."},
		{"Bob", "Bob said the caterer wants a deposit by Friday."},
		{"Alice", "Alice said the budget allows 40 guests."},
		{"Alice", `Alice said, "You should call the caterer."`},
	} {
		st.Open = append(st.Open, stmt{Sp: x.sp, Text: x.text, W: 3, Terms: (*lexicon)(nil).termString(x.text), At: 1})
	}
	got := st.render(1200, 5, 2)
	for _, want := range []string{
		"Bob said the venue in Lisbon is booked, and the caterer wants a deposit by Friday.",
		"Alice mentioned the budget allows 40 guests.",
		`Alice said, "You should call the caterer."`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// A sentence cut after a comma ends with a full stop alone, and one that
// holds half a quote loses its quotation marks.
func TestTidyEnds(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns(
		"Alice: let's find out which venues in Lisbon we need first,",
		`Bob: the caterer said the menu costs 40 euros a head at this time ".`)})
	for _, bad := range []string{",.", ` ".`, ` "`} {
		if strings.Contains(got, bad) {
			t.Errorf("summary has %q: %s", bad, got)
		}
	}
	if !strings.Contains(got, "first.") || !strings.Contains(got, "at this time.") {
		t.Errorf("summary lost the sentences' ends: %s", got)
	}
}

// A sentence of speech that trails off ("… but", "…, yeah", "… or uh")
// ends at its last word of content, a question keeping its mark, and a
// "like" set off by commas is left out.
func TestTrailingWordsAndLikeDropped(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns(
		"Alice: rabbits don't come in blue but",
		"Bob: the price in Euros is current, yeah",
		"Carol: should the case be wood or plastic or uh?",
		"Dan: the valleys are, like, deep in the high energy regions")})
	for _, want := range []string{"rabbits don't come in blue.", "the price in Euros is current.", "wood or plastic?",
		"the valleys are deep in the high energy regions."} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q: %s", want, got)
		}
	}
}

// A screen note is no one speaking: its source never heads a period's
// line as one of those who talked.
func TestNoteSourceIsNoSpeaker(t *testing.T) {
	var ts []fold.Turn
	var ns []fold.Note
	at := time.Date(2026, 5, 4, 19, 0, 0, 0, time.UTC)
	for i := range 60 {
		at = at.Add(20 * time.Second)
		sp := []string{"Alice", "Bob"}[i%2]
		ts = append(ts, fold.Turn{Index: int64(i), TurnID: fmt.Sprintf("t%d", i), At: at, Speaker: sp, Role: "user",
			Text: fmt.Sprintf("the venue in Lisbon holds %d guests and the caterer wants a deposit by Friday", 40+i)})
		for range 3 {
			ns = append(ns, fold.Note{Source: "screen", At: at, Text: fmt.Sprintf("booking page for the Lisbon venue, room %d", i)})
		}
	}
	vs := rollingFold(t, New(), ts, ns, 10, 600)
	for i, v := range vs {
		if c := composed(v); strings.Contains(c, "screen and") || strings.Contains(c, "and screen") || strings.Contains(c, ", screen") {
			t.Errorf("version %d names the screen as a speaker: %q", i+1, c)
		}
	}
	if !strings.Contains(strings.Join(vs, " "), "talked about") {
		t.Fatalf("no period lines: %s", vs[len(vs)-1])
	}
}

// A period line varies its own verb, never a participant's name that says it ("A talked about B").
func TestPeriodLineVariesItsVerbNotANameSayingIt(t *testing.T) {
	from := time.Date(2026, 1, 10, 14, 2, 0, 0, time.UTC)
	p := period{From: from.Unix(), To: from.Add(18 * time.Minute).Unix(), Names: []string{"A talked about B", "Cy"}, Topics: []string{"the flank"}}
	if got, want := p.header(false, false, true), "From 14:02 to 14:20, A talked about B and Cy discussed the flank."; got != want {
		t.Errorf("header = %q, want %q", got, want)
	}
}

// A period line of three or more speakers names the group, as a person
// writes of a meeting; of two, their names; of two long names, "they"
// (or the group, in a conversation of three or more).
func TestPeriodLineNamesTheGroup(t *testing.T) {
	from := time.Date(2026, 5, 2, 14, 2, 0, 0, time.UTC)
	p := period{From: from.Unix(), To: from.Add(18 * time.Minute).Unix(), Topics: []string{"the venue"}}
	for _, c := range []struct {
		names []string
		group bool
		want  string
	}{
		{[]string{"Alice", "Bob", "Carol"}, true, "From 14:02 to 14:20, the group talked about the venue."},
		{[]string{"Alice", "Bob"}, true, "From 14:02 to 14:20, Alice and Bob talked about the venue."},
		{[]string{"Industrial Designer", "Project Manager"}, true, "From 14:02 to 14:20, the group talked about the venue."},
		{[]string{"Industrial Designer", "Project Manager"}, false, "From 14:02 to 14:20, they talked about the venue."},
	} {
		p.Names = c.names
		if got := p.header(false, c.group, false); got != c.want {
			t.Errorf("header of %v (group %v) = %q, want %q", c.names, c.group, got, c.want)
		}
	}
}

// Reported speech puts its modals in the past, as a person reporting it
// writes them: will → would, can → could ("May" the month stays).
func TestReportedSpeechPutsModalsInThePast(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns(
		"Bob: we will ship the release on Friday, the installer can wait.",
		"Carol: the budget review can wait until May.",
		"Dave: it'll rain at the venue, we won't need the terrace.",
	)})
	for _, want := range []string{
		"Bob said they would ship the release on Friday, the installer could wait.",
		"Carol mentioned the budget review could wait until May.",
		"Dave said it would rain at the venue, they wouldn't need the terrace.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// A "we'll" written in capitals is the group's "we'll" too: put in the past
// with the other modals of the sentence, and in a proposal.
func TestReportedSpeechPutsCapitalisedWellInThePast(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns(
		"Bob: WE'LL ship the release on Friday, the installer can wait.",
		"Carol: let's make sure WE'LL ship the installer too.",
	)})
	for _, want := range []string{
		"Bob said they would ship the release on Friday, the installer could wait.",
		"Carol suggested they make sure they would ship the installer too.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// A speaker reported two or three statements before, with someone else
// between, "also" says what they said next; a speaker just reported is
// joined or reported plainly.
func TestAlsoForASpeakerReportedJustBefore(t *testing.T) {
	st := &state{V: stateVersion, Names: []string{"Bob", "Alice"}}
	for _, x := range []struct{ sp, text string }{
		{"Bob", "Bob said the venue in Lisbon is booked."},
		{"Alice", "Alice said the budget allows 40 guests."},
		{"Bob", "Bob said the caterer wants a deposit by Friday."},
		{"Bob", `Bob said, "You should call the florist."`},
	} {
		st.Open = append(st.Open, stmt{Sp: x.sp, Text: x.text, W: 3, Terms: (*lexicon)(nil).termString(x.text), At: 1})
	}
	got := st.render(1200, 5, 2)
	want := `Bob and Alice are in the session. Bob said the venue in Lisbon is booked. Alice mentioned the budget allows 40 guests. ` +
		`Bob also said the caterer wants a deposit by Friday. Bob said, "You should call the florist."`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// A report varies its verbs as a person writes one: "explained" for a reason given, "thought" for an opinion,
// "mentioned" after a line that said "said" (not for a quote), and every other period line "discussed".
func TestReportingVerbsVary(t *testing.T) {
	st := &state{V: stateVersion, Names: []string{"Bob", "Alice", "Carol", "Dave", "Erin"}}
	for i, topic := range []string{"the venue", "the caterer", "the florist"} {
		st.Periods = append(st.Periods, period{From: int64(1000 + 100*i), To: int64(1050 + 100*i), Names: []string{"Bob", "Alice"}, Topics: []string{topic}})
	}
	for _, x := range []struct{ sp, text string }{
		{"Bob", "Bob said the venue in Lisbon is booked."},
		{"Alice", "Alice said the budget allows 40 guests."},
		{"Alice", "Alice said the caterer wants a deposit."},
		{"Carol", "Carol said the hall is closed because of the strike."},
		{"Dave", "Dave said the terrace is probably too cold in May."},
		{"Bob", "Bob said the band plays until midnight."},
		{"Erin", "Erin said the invitations went out on Monday."},
		{"Carol", `Carol said, "You should book the photographer."`},
	} {
		st.Open = append(st.Open, stmt{Sp: x.sp, Text: x.text, W: 3, Terms: (*lexicon)(nil).termString(x.text), At: 2000})
	}
	got := st.render(1200, 5, 2)
	for _, want := range []string{
		"Bob and Alice talked about the venue.", "Bob and Alice discussed the caterer.", "Bob and Alice talked about the florist.",
		"Bob said the venue in Lisbon is booked. Alice mentioned the budget allows 40 guests, and the caterer wants a deposit.",
		"Carol explained the hall is closed because of the strike.",
		"Dave thought the terrace is probably too cold in May.",
		"Bob said the band plays until midnight. Erin mentioned the invitations went out on Monday.",
		`Carol said, "You should book the photographer."`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// A quote cut short where a statement's text is clipped still closes in the summary.
func TestCutQuoteCloses(t *testing.T) {
	text := clip(`Bob said, "`+strings.Repeat("the venue in Lisbon has a terrace and a garden, ", 8)+`and a pool."`, maxStmtRunes)
	st := &state{V: stateVersion, Names: []string{"Bob"}, Open: []stmt{{Sp: "Bob", Text: text, W: 3, Terms: (*lexicon)(nil).termString(text), At: 1}}}
	if got := st.render(1200, 5, 2); !strings.HasSuffix(got, `…"`) {
		t.Errorf("the cut quote does not close: %s", got)
	}
}

// Two statements in a row are one sentence only when one speaker said both, not when one name begins the other.
func TestOnlyOneSpeakersStatementsJoin(t *testing.T) {
	at := time.Date(2026, 5, 5, 10, 0, 0, 0, time.UTC)
	out, err := New().Summarize(context.Background(), fold.Request{Session: "j", MaxChars: 1200, Turns: []fold.Turn{
		{Speaker: "Ann Lee", Role: "user", Text: "The caterer in Lisbon wants a deposit of 300 euros by Friday.", At: at},
		{Speaker: "Ann", Role: "user", Text: "The venue for the workshop is booked for the whole of June.", At: at.Add(time.Minute)},
		{Speaker: "Bob", Role: "user", Text: "The printer on the second floor is broken again since Monday.", At: at.Add(2 * time.Minute)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Summary, "Ann Lee said the caterer") || !strings.Contains(out.Summary, "the venue for the workshop") ||
		strings.Contains(out.Summary, ", and the venue") {
		t.Errorf("each statement should be credited to its own speaker: %s", out.Summary)
	}
}

// A quote closes only where a spoken statement was cut short: a tool call or a screen note with an odd quote mark keeps
// its text as it was.
func TestOnlyCutQuotesClose(t *testing.T) {
	at := time.Date(2026, 5, 5, 10, 0, 0, 0, time.UTC)
	out, err := New().Summarize(context.Background(), fold.Request{Session: "q", MaxChars: 1200, Turns: []fold.Turn{
		{Speaker: "Ann", Role: "user", Text: "The caterer in Lisbon wants a deposit of 300 euros by Friday.", At: at},
		{Role: "assistant", Kind: "tool_call", Tool: "bash", Text: `{"command":"echo \"hello"}`, At: at.Add(3 * time.Minute)},
		{Role: "tool", Kind: "tool_result", Tool: "bash", Text: "hello", At: at.Add(3 * time.Minute)},
	}, Notes: []fold.Note{{Source: "Ann", Text: `Monitor settings: 27" display, brightness 80%, contrast 70%`, At: at.Add(time.Minute)}}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.Summary, `(echo "hello)`) || !strings.Contains(out.Summary, `27" display`) {
		t.Fatalf("the tool call and the note should be in the summary: %s", out.Summary)
	}
	if strings.Count(out.Summary, `"`) != 2 {
		t.Errorf("a quote mark added to a line that was not cut: %s", out.Summary)
	}
}

// A line that says nothing is not written: a period in which nothing recurs
// ("From 20:34 to 20:41, the group spoke.") has no line of its own, its time
// opens its first statement ("Between 20:34 and 20:41, Dave said …", not
// "From … to …", which would say the statement lasted the stretch), and the opening names what the latest period
// that names a subject was about rather than only who is there.
func TestNoLineSaysNothing(t *testing.T) {
	ts, ns := synthSession(1, 300)
	lines := 0
	for i, v := range rollingFold(t, New(), ts, ns, 10, 400) {
		if strings.Contains(v, " spoke.") {
			t.Errorf("summary %d has a line that says nothing: %s", i+1, v)
		}
		if strings.Contains(v, " talked about ") && strings.Contains(v, " in the session.") {
			t.Errorf("summary %d opens without a subject though a period names one: %s", i+1, v)
		}
		for _, m := range periodRe.FindAllStringIndex(v, -1) {
			if sent, _, _ := strings.Cut(v[m[1]:], "."); !strings.Contains(sent, " talked about ") && !strings.Contains(sent, " discussed ") {
				lines++ // (a period's time only, before a statement)
				if !strings.Contains(v[m[0]:m[1]], "etween ") {
					t.Errorf("summary %d puts a stretch's whole time before one statement, as if it lasted it: %s", i+1, v[m[0]:])
				}
			}
		}
	}
	if lines == 0 {
		t.Error("no summary with a period of no subject: the session no longer tests the rule")
	}
}

// A remark with no word of content, an interjection and a verb of talk
// ("ooh come back", "oops, go back"), is not reported: its rare words
// would otherwise make it look worth its few runes.
func TestInterjectionsSayNothing(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns(
		"Ann: the caterer wants a deposit of $300 by Friday.",
		"Bob: ooh come back.",
		"Carol: oops, go back.",
		"Dave: whoa, ugh.",
		"Ann: the venue in Lisbon is booked for the second of May.",
	)})
	for _, bad := range []string{"ooh", "oops", "whoa", "ugh"} {
		if strings.Contains(got, bad) {
			t.Errorf("summary reports %q: %s", bad, got)
		}
	}
	if !strings.Contains(got, "deposit") || !strings.Contains(got, "Lisbon") {
		t.Errorf("summary lost a statement: %s", got)
	}
}

// A committee's transcript names its speakers with asides ("Hon. Bill
// Morneau (Minister of Finance)", "The Chair (Hon. Anthony Rota
// (NipissingTimiskaming, Lib.))"): the summary and the memories name them
// whole, without the aside, one person with or without it is one name, and
// the opening names fewer people rather than a long list.
func TestWholeNames(t *testing.T) {
	sps := []string{"The Chair (Hon. Anthony Rota (NipissingTimiskaming, Lib.))", "Hon. Bill Morneau (Minister of Finance)",
		"Mr. Gabriel Ste-Marie (Joliette, BQ)", "Hon. Bill Morneau", "Ms. Elizabeth May (SaanichGulf Islands, GP)",
		"Hon. Jean-Yves Duclos (President of the Treasury Board)", "Mr. Garnett Genuis (Sherwood ParkFort Saskatchewan, CPC)"}
	var lines []string
	for i, sp := range sps {
		lines = append(lines, fmt.Sprintf("%s: the wage subsidy program pays %d%% of wages until June, I will table the report on Friday.", sp, 70+i))
	}
	res, err := New().Summarize(context.Background(), fold.Request{Turns: turns(lines...), MaxChars: 1200})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Summary, "…") || strings.Contains(res.Summary, "Rota") || strings.Contains(res.Summary, "Minister of") {
		t.Errorf("a name is cut or keeps its aside: %s", res.Summary)
	}
	lead, _, _ := strings.Cut(res.Summary, " are talking about ")
	if strings.Count(lead, "Hon. Bill Morneau") != 1 || runeLen(lead) > 100 {
		t.Errorf("the opening names %q", lead)
	}
	for _, m := range res.MemoryItems {
		if strings.Contains(m.Speaker, "…") || strings.Contains(m.Text, "…") || strings.ContainsAny(m.Speaker, "()") {
			t.Errorf("memory of %q: %q", m.Speaker, m.Text)
		}
	}
}

// A speaker named by a role who names the role ("I'm the Project Manager
// Christa Pavlov …") is quoted, not rewritten into "Project Manager is the
// Project Manager Christa Pavlov …".
func TestSelfReportNamesTheSpeakerOnce(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns(
		"Project Manager: I'm the Project Manager Christa Pavlov and okay let's begin.",
		"Marketing: I'm the marketing expert, I looked at the user requirements.",
	)})
	if strings.Contains(got, "Project Manager is the Project Manager") || !strings.Contains(got, "Christa Pavlov") {
		t.Errorf("summary: %s", got)
	}
}

// "nice" and "cool" open a sentence as fillers only when set apart ("Nice,
// the cabin is booked."); before a noun they are its adjective, and
// dropping them garbles the sentence ("Nice shot Jonas!" → "shot Jonas!").
func TestAdjectiveIsNoFiller(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns("Marco: Nice shot Jonas!", "Lena: Cool, the cabin is booked for Friday.", "Tomás: Cool map, the desert one.")})
	if strings.Contains(got, "Cool, the cabin") {
		t.Errorf("a filler set apart kept: %s", got)
	}
	for _, want := range []string{"nice shot Jonas", "the cabin is booked", "cool map"} {
		if !strings.Contains(strings.ToLower(got), strings.ToLower(want)) {
			t.Errorf("want %q in %s", want, got)
		}
	}
}

// A speaker who starts over after a negation ("I don't there's lots of
// ways") is quoted, not put in the third person ("Grad F doesn't there's
// lots of ways").
func TestRestartAfterNegationIsQuoted(t *testing.T) {
	got := summarize(t, fold.Request{Turns: turns(
		"Grad F: I don't there's lots of different ways in the world that people use it.",
		"Industrial Designer: I don't they designed it to look a little bit like a face.",
		"Marketing: I don't like the yellow remote control at all.",
	)})
	for _, bad := range []string{"doesn't there's", "doesn't they"} {
		if strings.Contains(got, bad) {
			t.Errorf("%q in %s", bad, got)
		}
	}
	if !strings.Contains(got, "Marketing doesn't like the yellow remote control") {
		t.Errorf("a plain negation is not reported: %s", got)
	}
}

// Two speakers told apart only by a short aside stay two people in the
// summary and its memories: leaving asides out is for names that would be
// cut for them.
func TestAsidesThatFitTellSpeakersApart(t *testing.T) {
	res, err := New().Summarize(context.Background(), fold.Request{Turns: turns(
		"Alex (Sales): I moved to Berlin last spring and I love the city.",
		"Alex (Engineering): I moved to Paris in May and I love the food there.",
	), MaxChars: 1200})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Summary, "Alex Sales") || !strings.Contains(res.Summary, "Alex Engineering") {
		t.Errorf("the two Alexes are not named apart: %s", res.Summary)
	}
	for _, m := range res.MemoryItems {
		if m.Speaker == "Alex" {
			t.Errorf("memory %q credited to a bare Alex", m.Text)
		}
	}
}

// TestFillerComparedLowerCased: a sentence not ASCII opens with a filler word only when its start, lower-cased, is that
// word: a final sigma is no other sigma ("ως" is not "ωσ").
func TestFillerComparedLowerCased(t *testing.T) {
	s, lx := New(WithFillerWords("ως")), &lexicon{}
	for in, want := range map[string]string{"ωσ we leave at 8": "ωσ we leave at 8.", "ΩΣ we leave at 8": "ΩΣ we leave at 8.",
		"ως we leave at 8": "we leave at 8."} {
		if got := s.spoken(lx, in); got != want {
			t.Errorf("%q trimmed to %q; want %q", in, got, want)
		}
	}
}

// TestFillersThatOpenOneAnother: filler words where one opens another ("ab", "ab cd") drop whole words only, the same
// ones whatever the order they were given in.
func TestFillersThatOpenOneAnother(t *testing.T) {
	for _, words := range [][]string{{"ab", "ab cd"}, {"ab cd", "ab"}} {
		s, lx := New(WithFillerWords(words...)), &lexicon{}
		for range 32 { // (a map's order would differ between runs)
			if got := s.spoken(lx, "ab cd efg hij klm"); got != "efg hij klm." {
				t.Fatalf("fillers %q: trimmed to %q; want \"efg hij klm.\"", words, got)
			}
		}
	}
}

// TestFillerCutByOriginalBytes: a filler is cut from a sentence by the bytes of the sentence's own letters, not of their
// lower case: a Kelvin sign ("K") is three bytes and lower-cases to one ("k").
func TestFillerCutByOriginalBytes(t *testing.T) {
	s, lx := New(WithFillerWords("kk")), &lexicon{}
	for in, ascii := range map[string]string{"O\u212a, we leave at 8": "OK, we leave at 8", "\u212a\u212a we leave at 8": "kk we leave at 8"} {
		if got, want := s.spoken(lx, in), s.spoken(lx, ascii); got != want || !utf8.ValidString(got) {
			t.Errorf("%q trimmed to %q; want %q", in, got, want)
		}
	}
}
