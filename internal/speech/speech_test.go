package speech

import (
	"strings"
	"testing"
)

func TestClean(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		// Transcribed speech.
		{"tags", "And it {disfmarker} also {vocalsound} has to be on {gap} .", "And it also has to be on ."},
		{"tag carries a sentence end", "I think so {disfmarker}. Then we go", "I think so. Then we go"},
		{"asr tags", "[laughter] that was funny (inaudible) right [Laughter.]", "that was funny right"},
		{"multi-word tag", "we met [background noise] yesterday (inaudible 00:14) at noon", "we met yesterday at noon"},
		{"fillers", "Um, people, uh, want to go there. Er I mean hmm it works", "people, want to go there. I mean it works"},
		{"detached commas around a filler", "So , this is , uh , really simple", "So , this is really simple"},
		{"repeated word", "it {disfmarker} it {disfmarker} it {disfmarker} it it also has to be on", "it also has to be on"},
		{"repeated phrase", "I think I think we may we may need it", "I think we may need it"},
		{"repeat keeps the second's punctuation", "We {disfmarker} we may, may, need it", "We may, need it"},
		{"broken-off letter in speech", "when they w when they want to {disfmarker} go", "when they want to go"},
		{"broken-off hyphen", "I was go- going home", "I was going home"},
		{"nothing left", "Um {disfmarker} uh.", ""},
		{"spaces", "  a   b \t c ", "a b c"},
		{"lines kept", "first line\n\n  second  line", "first line\nsecond line"},
		{"spaces beyond ASCII", "well\u00a0um\u2003I I\u00a0think", "well I think"},
		{"broken off before a capital", "Go- Going home, w When", "Going home, w When"},
		// Text that is not to be changed.
		{"chat with emoji and typos", "omg that was sooo gooood 😂😂 see u tmrw!!", "omg that was sooo gooood 😂😂 see u tmrw!!"},
		{"chat letters", "r u up? plan b is ok, i need vitamin d daily", "r u up? plan b is ok, i need vitamin d daily"},
		{"real parentheses", "We went to Cardiff (Wales) and (1) ate, (2) slept [correction: need to be]", "We went to Cardiff (Wales) and (1) ate, (2) slept [correction: need to be]"},
		{"answers kept", "Mm-hmm. Uh-huh, uh-uh.", "Mm-hmm. Uh-huh, uh-uh."},
		{"doubled on purpose", "he had had enough, ha ha, very very bye bye", "he had had enough, ha ha, very very bye bye"},
		{"numbers read out", "call 555 555 or five five one two one two", "call 555 555 or five five one two one two"},
		{"units", "it is 5 mm wide and 3 m long", "it is 5 mm wide and 3 m long"},
		{"acronym", "the ER was busy", "the ER was busy"},
		{"suspended hyphen", "pre- and post-war, the 2-3 people", "pre- and post-war, the 2-3 people"},
		{"templates and hearts", "use {name} here <3 and <b>bold</b>", "use {name} here <3 and <b>bold</b>"},
		{"sentence repeat", "No. No. Yes.", "No. No. Yes."},
	}
	for _, c := range cases {
		if got := Clean(c.in); got != c.want {
			t.Errorf("%s: Clean(%q) = %q, want %q", c.name, c.in, got, c.want)
		}
	}
}

// TestCleanOnlyRemoves: every word of the cleaned text is a word of the
// original, in order (punctuation aside): nothing is changed or added.
func TestCleanOnlyRemoves(t *testing.T) {
	for _, in := range []string{
		"Grad B : Is {disfmarker} I {disfmarker} I think {disfmarker} the the",
		"So it 's {disfmarker} it 's {disfmarker} it 's way too crude to d capture those differences",
		"may phrase those requests to a {disfmarker} a {disfmarker} a mock - up system",
		"Um . Sometimes I found in the {disfmarker} Uh , looking at the data",
		"héllo wörld 日本語 ✨ [laughs] (inaudible) um",
	} {
		out := strings.Fields(Clean(in))
		j := 0
		for _, w := range strings.Fields(in) {
			if j < len(out) && key(out[j]) == key(w) {
				j++
			}
		}
		if j != len(out) {
			t.Errorf("Clean(%q) = %q: not a subsequence of its words", in, Clean(in))
		}
	}
}

func FuzzClean(f *testing.F) {
	f.Add("And it {disfmarker} it also, uh, has to be on [laughter].")
	f.Add("r u up? 😂 (Wales) <3")
	f.Fuzz(func(t *testing.T, s string) {
		out := Clean(s)
		if len(out) > len(s) {
			t.Fatalf("Clean(%q) = %q: longer", s, out)
		}
		if again := Clean(out); len(again) > len(out) {
			t.Fatalf("Clean(Clean(%q)) grew", s)
		}
	})
}

func BenchmarkClean(b *testing.B) {
	turn := strings.Repeat("So it 's {disfmarker} it 's way too crude , uh , to capture those differences in intentions . ", 4)
	b.SetBytes(int64(len(turn)))
	for b.Loop() {
		Clean(turn)
	}
}

func BenchmarkFieldsBaseline(b *testing.B) {
	turn := strings.Repeat("So it 's {disfmarker} it 's way too crude , uh , to capture those differences in intentions . ", 4)
	b.SetBytes(int64(len(turn)))
	for b.Loop() {
		_ = strings.Fields(turn)
	}
}

func BenchmarkCleanChat(b *testing.B) {
	turn := "I think we should go to Lisbon next week, what do you say? I can book the hotel tonight 😂"
	b.SetBytes(int64(len(turn)))
	for b.Loop() {
		Clean(turn)
	}
}
