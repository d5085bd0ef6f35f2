package sentence

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestRuneLenAndIsASCII check RuneLen against utf8.RuneCountInString and
// IsASCII against a byte-by-byte test, on texts of every length around the
// eight bytes read at a time, with bytes that are not ASCII (or not UTF-8)
// at every place.
func TestRuneLenAndIsASCII(t *testing.T) {
	parts := []string{"a", "word", " ", "\x00", "\x7f", "\x80", "é", "日本", "\xff", "\xc3", "abcdefghijk", "😀"}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 100000 {
		s := joinRandom(rng, parts, 10)
		if got, want := RuneLen(s), utf8.RuneCountInString(s); got != want {
			t.Fatalf("RuneLen(%q) = %d, want %d", s, got, want)
		}
		want := true
		for i := 0; i < len(s); i++ {
			want = want && s[i] < utf8.RuneSelf
		}
		if got := IsASCII(s); got != want {
			t.Fatalf("IsASCII(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestIsPlain checks IsPlain against a byte-by-byte test on texts of every
// length around the eight bytes read at a time, with spaces, control bytes,
// DEL and bytes that are not ASCII at every place.
func TestIsPlain(t *testing.T) {
	parts := []string{"a", "word", " ", "  ", "~", "\x1f", "\x7f", "\x80", "é", "\xff", "\n", "abcdefg "}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 100000 {
		s, want := joinRandom(rng, parts, 12), true
		for i := 0; i < len(s); i++ {
			want = want && ' ' <= s[i] && s[i] <= '~' && !strings.HasPrefix(s[i:], "  ")
		}
		if got := IsPlain(s); got != want {
			t.Fatalf("IsPlain(%q) = %v, want %v", s, got, want)
		}
	}
}

// joinRandom joins fewer than n parts picked at random.
func joinRandom(rng *rand.Rand, parts []string, n int) string {
	var b strings.Builder
	for range rng.IntN(n) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

// TestLowerByte: ASCII capitals become small letters; every other byte,
// including those of UTF-8 sequences, stays as it is.
func TestLowerByte(t *testing.T) {
	for c := range 256 {
		want := byte(c)
		if s := strings.ToLower(string(rune(c))); c < utf8.RuneSelf {
			want = s[0]
		}
		if got := LowerByte(byte(c)); got != want {
			t.Errorf("LowerByte(%#x) = %#x, want %#x", c, got, want)
		}
	}
}
