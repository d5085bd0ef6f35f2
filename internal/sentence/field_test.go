package sentence

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestNextFieldIsFields checks NextField (and AppendFields, after what
// its slice holds) against strings.Fields on texts of words, every kind of
// white space, control bytes, other scripts and bytes that are not UTF-8.
func TestNextFieldIsFields(t *testing.T) {
	parts := []string{"a", "word", "Bob's", " ", "  ", "\t", "\n", "\v", "\f", "\r", "\u0085", "\u00a0", "\u2028", "\u3000",
		"é", "日本", "\xff", "\xc3", "\x01", "\x7f", ",", "x\u00a0y", "-", "abcdefghijk", "Tokyo,tonight", "!~}{", "\x20\x21", "\x7e\x80", "\x1f"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		s := b.String()
		var got []string
		for f, i := NextField(s, 0); f != ""; f, i = NextField(s, i) {
			got = append(got, f)
		}
		if want := strings.Fields(s); !slices.Equal(got, want) {
			t.Fatalf("NextField(%q): %q, want %q", s, got, want)
		} else if app := AppendFields([]string{"x"}, s); !slices.Equal(app, append([]string{"x"}, want...)) {
			t.Fatalf("AppendFields(x, %q): %q, want x then %q", s, app, want)
		}
	}
}
