package sentence

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClamp(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"Short.", 100, "Short."},
		{"First sentence. Second sentence is longer.", 30, "First sentence."},
		{`He said "go." Then left.`, 16, `He said "go."`},
		{"One very long sentence without any end in sight at all", 20, "One very long…"},
		{"Supercalifragilisticexpialidocious", 10, "Supercali…"},
		{"Ünïcödé sentence. More text here.", 20, "Ünïcödé sentence."},
		{"anything", 0, ""},
		{"ab", 1, "…"},
	}
	for _, c := range cases {
		got := Clamp(c.in, c.max)
		if got != c.want {
			t.Errorf("Clamp(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
		if utf8.RuneCountInString(got) > max(c.max, 0) {
			t.Errorf("Clamp(%q, %d) = %q exceeds the budget", c.in, c.max, got)
		}
	}
	long := strings.Repeat("Alice and Bob talked. ", 100)
	for n := 1; n < 200; n++ {
		if got := Clamp(long, n); got == "" || utf8.RuneCountInString(got) > n {
			t.Fatalf("Clamp(long, %d) = %q", n, got)
		}
	}
}
