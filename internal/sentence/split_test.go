package sentence

import (
	"slices"
	"testing"
)

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"Hello there. How are you? Fine!", []string{"Hello there.", "How are you?", "Fine!"}},
		{"Mr. Gabriel Ste-Marie said so. Really.", []string{"Mr. Gabriel Ste-Marie said so.", "Really."}},
		{"It costs 3.5 dollars, e.g. for J. Smith.", []string{"It costs 3.5 dollars, e.g. for J. Smith."}},
		{"first line\n\nsecond line", []string{"first line", "second line"}},
		{`She said "stop." Then left.`, []string{`She said "stop."`, "Then left."}},
		{"see example.com/a.b for it", []string{"see example.com/a.b for it"}},
		{"wait... what?", []string{"wait...", "what?"}},
		{"Yeah. No. Special material?", []string{"Yeah.", "No.", "Special material?"}},
		{"It is No. 5 on the list. No. 7 is not.", []string{"It is No. 5 on the list.", "No. 7 is not."}},
		{"   ", nil},
	}
	for _, c := range cases {
		if got := Split(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
