package offline

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/foldstream/foldstream/internal/fold"
)

// TestHeldStateFoldsAsDecoded: a fold that goes on from the state kept for
// the previous fold's bytes returns what a fold that decodes a copy of them
// returns (summary, state, memories), fold after fold, for voice, agent and
// odd sessions (strings that are not UTF-8, or are escaped, among them);
// and the kept state is the one taken.
func TestHeldStateFoldsAsDecoded(t *testing.T) {
	vt, vn := synthSession(3, 300)
	ot, on := oddSession(7, 300)
	cases := []struct {
		name    string
		turns   []fold.Turn
		notes   []fold.Note
		profile fold.Profile
		budget  int
	}{
		{"voice", vt, vn, fold.ProfileVoice, 1200},
		{"voice, small budget", vt, vn, fold.ProfileVoice, 300},
		{"odd", ot, on, fold.ProfileVoice, 1200},
		{"agent", agentSession(5, 300), nil, fold.ProfileAgent, 800},
	}
	ctx := context.Background()
	for _, c := range cases {
		kept, decoded := New(), New()
		var k, d fold.Outcome
		ni, taken := 0, 0
		for i := 0; i < len(c.turns); i += 10 {
			b := c.turns[i:min(i+10, len(c.turns))]
			var bn []fold.Note
			for ni < len(c.notes) && !c.notes[ni].At.After(b[len(b)-1].At) {
				bn = append(bn, c.notes[ni])
				ni++
			}
			req := fold.Request{Session: c.name, Profile: c.profile, Turns: b, Notes: bn, MaxChars: c.budget, From: b[0].At, To: b[len(b)-1].At}
			kreq, dreq := req, req
			kreq.PreviousSummary, kreq.PreviousState = k.Summary, k.State
			dreq.PreviousSummary, dreq.PreviousState = d.Summary, bytes.Clone(d.State)
			prev, held := k.State, kept.held.Len()
			var err error
			if k, err = fold.Summarize(ctx, kept, kreq); err != nil {
				t.Fatal(err)
			}
			if d, err = fold.Summarize(ctx, decoded, dreq); err != nil {
				t.Fatal(err)
			}
			if got, want := fmt.Sprintf("%q\n%s\n%+v", k.Summary, k.State, k.MemoryItems), fmt.Sprintf("%q\n%s\n%+v", d.Summary, d.State, d.MemoryItems); got != want {
				t.Fatalf("%s, turns %d-%d: from the kept state\n%s\nfrom the decoded one\n%s", c.name, i, i+len(b)-1, got, want)
			}
			if _, again := kept.held.Take(prev); held == 1 && !again {
				taken++ // (kept before the fold, and the fold took it)
			}
		}
		if folds := (len(c.turns) + 9) / 10; taken < folds-1 {
			t.Errorf("%s: %d of %d folds went on from the kept state; want all but the first", c.name, taken, folds)
		}
	}
}

// TestStateNotKeptWhenItReadsBackOtherwise: a string that is not UTF-8 is
// written as U+FFFD, so the state would not read back as it is: it is not
// kept, and its next fold decodes it, wherever the string is. A string
// that says "\ufffd" in six characters reads back as it is: it is kept.
func TestStateNotKeptWhenItReadsBackOtherwise(t *testing.T) {
	s := New()
	for _, st := range []*state{
		{Names: []string{"Ana"}, Open: []stmt{{Sp: "Ana", Text: "Ana likes caf\xe9.", W: 1}}},
		{Names: []string{"Ana"}, Facts: []fact{{ID: "m1", Key: "caf\xe9"}}},
		{Names: []string{"Ana\xff"}},
	} {
		if data := s.keep(st); s.held.Len() != 0 || !bytes.Contains(data, []byte(`\ufffd`)) {
			t.Fatalf("kept %d states of %s; want none", s.held.Len(), data)
		}
	}
	st := &state{Names: []string{"Ana"}, Open: []stmt{{Sp: "Ana", Text: "Ana likes café <3 & \"tea\"\n", W: 1}}}
	if s.keep(st); s.held.Len() != 1 {
		t.Fatalf("kept %d states with escapes; want 1", s.held.Len())
	}
	st = &state{Names: []string{"Ana"}, Open: []stmt{{Sp: "Ana", Text: `Ana typed \ufffd.`, W: 1}}}
	data := s.keep(st)
	if back, err := decodeState(data); s.held.Len() != 2 || err != nil || back.Open[0].Text != st.Open[0].Text {
		t.Fatalf("kept %d states; %s read back as %+v (%v); want it kept, and read back as it was", s.held.Len(), data, back, err)
	}
}

// TestKeptStateTakenOnce: folds at once from the same previous state's bytes
// (a fold retried while the first still runs) give one answer: one goes on
// from the kept state, the others decode the bytes.
func TestKeptStateTakenOnce(t *testing.T) {
	ts, notes := synthSession(9, 80)
	ctx := context.Background()
	s := New()
	first, err := fold.Summarize(ctx, s, fold.Request{Session: "a", Turns: ts[:40], Notes: notes, MaxChars: 600})
	if err != nil {
		t.Fatal(err)
	}
	next := fold.Request{Session: "a", Turns: ts[40:], MaxChars: 600, PreviousSummary: first.Summary, PreviousState: first.State}
	alone := next
	alone.PreviousState = bytes.Clone(first.State)
	want, err := fold.Summarize(ctx, New(), alone)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string, 8)
	for range cap(done) {
		go func() {
			out, err := fold.Summarize(ctx, s, next)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- fmt.Sprintf("%q\n%s", out.Summary, out.State)
		}()
	}
	for range cap(done) {
		if got := <-done; got != fmt.Sprintf("%q\n%s", want.Summary, want.State) {
			t.Fatalf("a fold at once with others gave\n%s\nwant\n%q\n%s", got, want.Summary, want.State)
		}
	}
}

// TestTextReadFollowsTheText: what rendering read of a statement's text
// (its length, whether it is decisive, how its "said" varies) is read
// again once the text changes, also for a copy that shares what was read.
func TestTextReadFollowsTheText(t *testing.T) {
	x := stmt{Sp: "Bob", Text: "Bob said the plan is set for the weekend."}
	if v := varied(x.Text, &x, false); v != x.Text || x.textRead().runes != len(x.Text) || x.textRead().decisive {
		t.Fatalf("first read: %q, %d runes, decisive %v", v, x.textRead().runes, x.textRead().decisive)
	}
	y := x // (a copy, as a closed period keeps it)
	y.Text = "Bob said they booked it because the café was full."
	if v := varied(y.Text, &y, false); v != "Bob explained they booked it because the café was full." {
		t.Errorf("changed text varied as %q", v)
	}
	if y.textRead().runes != len([]rune(y.Text)) || !y.textRead().decisive {
		t.Errorf("changed text: %d runes, decisive %v; want %d, true", y.textRead().runes, y.textRead().decisive, len([]rune(y.Text)))
	}
	if v := varied(x.Text, &x, false); v != x.Text || x.textRead().runes != len(x.Text) || x.textRead().decisive {
		t.Errorf("the original after its copy changed: %q, %d runes, decisive %v", v, x.textRead().runes, x.textRead().decisive)
	}
}

// TestTightenedWordsAreTheSentences: the fields tighten and trimFiller pass
// on with what the lexicon knows of them are the fields of the sentence
// they leave, each read as its own text, over real-looking, synthetic and
// odd turns.
func TestTightenedWordsAreTheSentences(t *testing.T) {
	vt, _ := synthSession(3, 300)
	ot, _ := oddSession(7, 300)
	ts := append(append(loadTurns(t, "testdata/voice_trip.txt"), vt...), ot...)
	s, lx, checked := New(), &lexicon{}, 0
	for _, turn := range ts {
		for _, raw := range splitSentences(cleanSpeech(sanitize(turn.Text, maxTurnRunes))) {
			sent, ks, plain := lx.tighten(raw, nil)
			sent, ks = s.trimFiller(lx, sent, ks, plain)
			if len(ks) == 0 || slices.Contains(ks, &noField) {
				continue // (not known: sentences looks them up afresh)
			}
			fs := make([]string, len(ks))
			for i, k := range ks {
				if fs[i] = k.f; k.flags != lx.field(k.f).flags || k.low != lx.field(k.f).low {
					t.Fatalf("%q: field %q not read as its text", raw, k.f)
				}
			}
			if want := strings.Fields(sent); !slices.Equal(fs, want) {
				t.Fatalf("%q left %q with fields %q; want %q", raw, sent, fs, want)
			}
			checked++
		}
	}
	if checked < 500 {
		t.Fatalf("only %d sentences had their words passed on", checked)
	}
}

// TestTopicsOfStatementsGatheredBefore: the topics of statements are those a
// state that never saw them finds, whether the statements are the ones
// topics read last or differ from them in one statement's phrases or kind (a
// tool run's phrases name no topic), and whether the participants (whose
// names name no topic) changed since or not.
func TestTopicsOfStatementsGatheredBefore(t *testing.T) {
	lx := &lexicon{}
	mk := func(k int, texts ...string) []stmt {
		var ss []stmt
		for _, s := range texts {
			ss = append(ss, stmt{Sp: "Ana", Text: "Ana said " + s, K: k, Ph: lx.phrases(s, nil)})
		}
		return ss
	}
	base := mk(kSaid, "the cabin near Lake Tahoe is booked.", "Lake Tahoe has snow in March.", "the cabin has a hot tub.",
		"we drive to Lake Tahoe on Friday.", "the hot tub at the cabin is broken.")
	other := slices.Clone(base)
	other[2] = mk(kSaid, "the ski pass costs more at Lake Tahoe.")[0]
	tool := slices.Clone(base)
	tool[1].K, tool[3].K = kTool, kTool
	held := &state{}
	for _, names := range [][]string{{"Ana"}, {"Ana", "Tub Hot"}, {"Ana", "Bo"}, {"Ana"}} {
		held.Names = append(held.Names[:0], names...) // (in place, as a state's names change)
		for _, ss := range [][]stmt{base, base, other, base, tool, base, nil, base} {
			for _, n := range []int{2, 6} {
				fresh := &state{Names: slices.Clone(names)}
				if got, want := held.topics(nil, ss, n, nil), fresh.topics(nil, ss, n, nil); !slices.Equal(got, want) {
					t.Fatalf("topics of %d statements among %q after others: %q; a fresh state's: %q", len(ss), names, got, want)
				}
			}
		}
	}
	if got := (&state{Names: []string{"Ana", "Tub Hot"}}).topics(nil, base, 2, nil); slices.Contains(got, "the hot tub") {
		t.Fatalf("a participant's name as a topic: %q", got)
	}
	if got := held.topics(nil, base, 2, nil); len(got) == 0 {
		t.Fatalf("no topics for %q", base[0].Ph)
	}
}
