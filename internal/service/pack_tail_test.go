package service_test

import (
	"testing"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/service"
)

// A long turn is cut to its last whole sentences, or to the last words of
// a last sentence too long alone, never inside a word, within the limit.
func TestTailTextKeepsTheEnd(t *testing.T) {
	for _, c := range []struct {
		text  string
		limit int
		want  string
		cut   bool
	}{
		{"Short enough.", 40, "Short enough.", false},
		{"First we met. Then we ate. Who pays?", 24, "… Then we ate. Who pays?", true},
		{"First we met. Then we ate. Who pays?", 12, "… Who pays?", true},
		{"one two three four five six", 13, "… five six", true},
		{"one two three four five supercalifragilistic", 8, "one two three four five supercalifragilistic", false},
	} {
		got, cut := service.TailText(c.text, c.limit)
		if got != c.want || cut != c.cut {
			t.Errorf("TailText(%q, %d) = %q, %v; want %q, %v", c.text, c.limit, got, cut, c.want, c.cut)
		}
		if cut && utf8.RuneCountInString(got) > c.limit {
			t.Errorf("TailText(%q, %d) = %q: over the limit", c.text, c.limit, got)
		}
	}
}
