package offline

import "testing"

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
		if got, _, _ := lx.tighten(c.in, nil, nil); got != c.want {
			t.Errorf("tighten(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}
