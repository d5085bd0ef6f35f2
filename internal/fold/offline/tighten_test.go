package offline

import (
	"strings"
	"testing"
)

// TestTightenKeepsThreeOfARun: a run of one word is said three times at
// most, the word compared as strings.EqualFold compares it (a Kelvin sign
// "K" is a "k", a long s "ſ" an "s"); numbers too, which repeated keeps.
func TestTightenKeepsThreeOfARun(t *testing.T) {
	lx := &lexicon{}
	for _, c := range []struct{ in, want string }{
		{"room k1 k1 k1 k1 is free", "room k1 k1 k1 is free"},
		{"room k1 \u212a1 k1 k1 is free", "room k1 \u212a1 k1 is free"},
		{"room \u212a1 k1 k1 k1 is free", "room \u212a1 k1 k1 is free"},
		{"gate s2 \u017f2 s2 s2 s2 opens", "gate s2 \u017f2 s2 opens"},
	} {
		if got, _, _ := lx.tighten(c.in, nil); got != c.want {
			t.Errorf("tighten(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

// TestTightenReadsEveryWord: a false start, a hedge, hesitation and a
// repeated word or phrase go wherever they stand (past the 63rd word too,
// next to a word not ASCII); a filler opening a sentence goes in either case
// (a Kelvin sign is no "k" there); reword changes its words in a sentence
// whatever spaces it has.
func TestTightenReadsEveryWord(t *testing.T) {
	long := strings.Repeat("we talked about the plan ", 13) // (65 words)
	s, lx := New(WithFillerWords("émoi")), &lexicon{}
	for _, c := range []struct{ in, want string }{
		{long + "for the for the hotel", long + "for the hotel."},
		{long + "and you know th the hotel", long + "and the hotel."},
		{"th the café café was open for the for the night", "the café was open for the night."},
		{"we booked the hotel just really actually the hotel for May", "we booked the hotel for May."},
		{"the plan, you know, is fine naïve naïve really", "the plan, is fine naïve really."},
		{"um the the um hotel is booked", "the hotel is booked."},
		{"we-  we booked\tthe hotel", "we booked the hotel."},
		{"OKAY, we leave at 8", "we leave at 8."},
		{"Ok\u212a we leave at 8", "Ok\u212a we leave at 8."},
		{"ÉMOI we leave at 8", "we leave at 8."},
		{"Nice shot Jonas", "Nice shot Jonas."},
	} {
		if got := s.spoken(lx, c.in); got != c.want {
			t.Errorf("%q tightened to %q; want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"we  will\tgo there", "they would go there"},
		{"We'll book it, our car will do", "they would book it, their car would do"},
	} {
		if got := string(reword(nil, c.in, lx.appendFields(nil, c.in), true)); got != c.want {
			t.Errorf("reword(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

// spoken is in as a sentence leaves tighten, then trimFiller.
func (s *Summarizer) spoken(lx *lexicon, in string) string {
	sent, ks, plain := lx.tighten(in, nil)
	got, _ := s.trimFiller(lx, sent, ks, plain)
	return got
}
