package offline

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/fold"
)

// Facts about a speaker are consolidated across folds: a later fold's
// changed fact (where they live, what they like, a plan with another
// date) supersedes that speaker's earlier memory, never another
// speaker's, and the state keeps one fact per subject per speaker.
func TestPersonFactsSupersedeAcrossFolds(t *testing.T) {
	at := time.Date(2026, 5, 2, 19, 0, 0, 0, time.UTC)
	mk := func(from int, lines ...string) []fold.Turn {
		ts := turns(lines...)
		for i := range ts {
			ts[i].TurnID = "t" + strconv.Itoa(from+i)
			ts[i].At = at.Add(time.Duration(from+i) * time.Minute)
		}
		return ts
	}
	s := New()
	first, err := s.Summarize(context.Background(), fold.Request{Turns: mk(0,
		"Lena: I live in Berlin.",
		"Jonas: I love sushi.",
		"Marco: I love sushi too, honestly.",
		"Lena: I will book the cabin at Lake Tahoe for Friday.",
	)})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]fold.Memory{}
	for _, m := range first.MemoryItems {
		ids[m.Text] = m
	}
	for _, want := range []string{"I live in Berlin.", "I love sushi.", "I will book the cabin at Lake Tahoe for Friday."} {
		if _, ok := ids[want]; !ok {
			t.Fatalf("fold 1: no memory %q in %+v", want, first.MemoryItems)
		}
	}
	second, err := s.Summarize(context.Background(), fold.Request{PreviousSummary: first.Summary, PreviousState: first.State, Turns: mk(10,
		"Jonas: I hate sushi now, the last place ruined it.",
		"Lena: I moved to Lisbon.",
		"Lena: I will book the cabin at Lake Tahoe for Saturday.",
	)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"I hate sushi now, the last place ruined it.":       ids["I love sushi."].ID,
		"I moved to Lisbon.":                                ids["I live in Berlin."].ID,
		"I will book the cabin at Lake Tahoe for Saturday.": ids["I will book the cabin at Lake Tahoe for Friday."].ID,
	}
	got := map[string]fold.Memory{}
	for _, m := range second.MemoryItems {
		got[m.Text] = m
	}
	for text, sup := range want {
		m, ok := got[text]
		if !ok {
			t.Errorf("fold 2: no memory %q in %+v", text, second.MemoryItems)
			continue
		}
		if m.Supersedes != sup || sup == "" {
			t.Errorf("%q supersedes %q, want %q", text, m.Supersedes, sup)
		}
		if m.TurnID == "" || m.At.IsZero() || m.Speaker == "" {
			t.Errorf("%q: speaker %q, turn %q, at %v: want all three", text, m.Speaker, m.TurnID, m.At)
		}
	}
	st, err := decodeState(second.State)
	if err != nil {
		t.Fatal(err)
	}
	facts := map[string][]string{}
	for _, p := range st.People {
		for _, f := range p.Facts {
			facts[p.Name] = append(facts[p.Name], f.Text)
		}
	}
	if len(facts["Lena"]) != 2 || len(facts["Jonas"]) != 1 || len(facts["Marco"]) != 1 {
		t.Errorf("one fact per subject per speaker, got %q", facts)
	}
}

// However many speakers and facts, the per-speaker facts stay bounded.
func TestPersonFactsBounded(t *testing.T) {
	st := &state{V: stateVersion}
	for i := range 2000 {
		sp := "Speaker" + strconv.Itoa(i%500)
		x := stmt{Sp: sp, Text: sp + " loves thing" + strconv.Itoa(i) + " number " + strconv.Itoa(i) + ".", At: int64(i)}
		kind, slot, _ := st.lex().personFact(&x)
		st.notePerson(&x, kind, slot, "m"+strconv.Itoa(i), x.Text)
	}
	if len(st.People) > maxPeople {
		t.Fatalf("%d people kept, bound %d", len(st.People), maxPeople)
	}
	for _, p := range st.People {
		if len(p.Facts) > maxPersonFacts {
			t.Fatalf("%s: %d facts, bound %d", p.Name, len(p.Facts), maxPersonFacts)
		}
	}
	if b, _ := st.encode(); len(b) > maxStateBytes {
		t.Fatalf("state of %d bytes, bound %d", len(b), maxStateBytes)
	}
}

// A memory's line names its speaker ("elise: …"), so its text is the
// sentence in the speaker's own words: it never restates the speaker
// ("elise: elise said …"), cuts a name or rewrites the first person
// into a garble ("Whenever elise is in Torino elise like toes watch …").
func TestMemoriesAreTheSpeakersOwnWords(t *testing.T) {
	long := "Mr. Gabriel Ste-Marie (Joliette, BQ)"
	res, err := New().Summarize(context.Background(), fold.Request{Turns: turns(
		"elise: Whenever I'm in Torino I like to watch a Juventus match!",
		"Grad B: I'm frightened by Amtrak, my train was four hours late yesterday.",
		long+": We will vote for the motion on the 3rd of June, as I promised.",
		"Project Manager: We decided the remote will cost 25 Euros.",
	)})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"elise":           "Whenever I'm in Torino I like to watch a Juventus match!",
		"Project Manager": "We decided the remote will cost 25 Euros.",
	}
	for _, m := range res.MemoryItems {
		t.Logf("%s: %s", m.Speaker, m.Text)
		if w, ok := want[m.Speaker]; ok && m.Text != w {
			t.Errorf("%s's memory %q, want %q", m.Speaker, m.Text, w)
		}
		delete(want, m.Speaker)
		if first, _, _ := strings.Cut(m.Speaker, " "); strings.Contains(m.Text, first) || strings.Contains(m.Text, " said") || strings.Contains(m.Text, "…") {
			t.Errorf("%s's memory %q restates or cuts its speaker", m.Speaker, m.Text)
		}
	}
	if len(want) > 0 || len(res.MemoryItems) < 3 {
		t.Errorf("memories %+v: missing %v", res.MemoryItems, want)
	}
}

// A statement is remembered when its speaker's own words say what they
// are, have, like, did or plan, wherever in the sentence: "I don't eat
// meat" is a fact about Jonas however the summary reports it.
func TestMemoryFromAFactWordInTheSpeakersWords(t *testing.T) {
	res, err := New().Summarize(context.Background(), fold.Request{Turns: turns(
		"Jonas: I don't eat meat anymore, only fish.",
		"Lena: The weather looks fine for the trip to the coast.",
	)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.MemoryItems) != 1 || res.MemoryItems[0].Text != "I don't eat meat anymore, only fish." || res.MemoryItems[0].Speaker != "Jonas" {
		t.Errorf("memories %+v, want Jonas's alone", res.MemoryItems)
	}
}

// A changed fact replaces, in the summary and in the memories, only its own
// speaker's older one: another speaker's fact with the same subject and other
// numbers is theirs, and stays.
func TestChangedFactReplacesOnlyItsSpeakers(t *testing.T) {
	s := New()
	ctx := context.Background()
	r1, err := s.Summarize(ctx, fold.Request{Turns: turns("Lena: my flight to Lisbon costs $300 with the bag included.", "Jonas: the flight to Lisbon costs $450 on Friday evening, sadly."), MaxChars: 1200})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := s.Summarize(ctx, fold.Request{PreviousSummary: r1.Summary, PreviousState: r1.State,
		Turns: turns("Jonas: update, the flight to Lisbon costs $480 now."), MaxChars: 1200})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r1.Summary, "$300") || !strings.Contains(r1.Summary, "$450") {
		t.Fatalf("want both fares in the first summary: %q", r1.Summary)
	}
	if !strings.Contains(r2.Summary, "$300") || !strings.Contains(r2.Summary, "$480") || strings.Contains(r2.Summary, "$450") {
		t.Errorf("want Lena's $300 kept and Jonas's $450 replaced by his $480: %q (before: %q)", r2.Summary, r1.Summary)
	}
	// The memories too: a reader hides a memory another replaces.
	byFare := map[string]fold.Memory{}
	for _, m := range append(r1.MemoryItems, r2.MemoryItems...) {
		for _, fare := range []string{"$300", "$450", "$480"} {
			if strings.Contains(m.Text, fare) {
				byFare[fare] = m
			}
		}
	}
	if len(byFare) != 3 {
		t.Fatalf("want a memory of each fare, got %+v", byFare)
	}
	if byFare["$450"].Supersedes != "" {
		t.Errorf("Jonas's $450 memory replaces %q; Lena's $300 is %q and is hers, not his", byFare["$450"].Supersedes, byFare["$300"].ID)
	}
	if byFare["$480"].Supersedes != byFare["$450"].ID {
		t.Errorf("Jonas's $480 memory replaces %q, want his $450 (%q)", byFare["$480"].Supersedes, byFare["$450"].ID)
	}
}
