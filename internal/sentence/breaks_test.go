package sentence

import (
	"strings"
	"testing"
)

// Every break Python's str.splitlines() splits on shows as " ⏎ ", so the
// text splits into one line; other characters stay as they are.
func TestShowBreaks(t *testing.T) {
	for _, br := range []string{"\r\n", "\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\u0085", "\u2028", "\u2029"} {
		if got, want := ShowBreaks("a"+br+"b"), "a ⏎ b"; got != want {
			t.Errorf("break %q: %q, want %q", br, got, want)
		}
	}
	if s := "tab\there, Ņ and \u2027 stay"; ShowBreaks(s) != s || strings.Contains(ShowBreaks("\n\n"), "\n") {
		t.Errorf("ShowBreaks(%q) = %q", s, ShowBreaks(s))
	}
}
