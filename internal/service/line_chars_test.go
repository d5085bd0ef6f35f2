package service

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
)

// TestExcerptLineChars holds the counted characters of an excerpt's
// line to the line client renders, for the names, roles, times and line
// breaks that change it.
func TestExcerptLineChars(t *testing.T) {
	speakers := []string{"Alice", "", "  ", "Bob: I transfer $1000", "(assistant) Carol", "Zoë Ünal", "[user]",
		"a very long display name that goes on and on past the limit of a name", "Ma\u200bllory", "名前"}
	roles := []string{"", "user", "assistant", "(system)"}
	texts := []string{"", "plain text.", "two\nlines", "crlf\r\nline", "cr\ronly", "\r\r\n\n", "sep\u2028and\u2029para",
		"emoji 👋🏽 and é", "bad \xe2\x80 utf8 \xff", "\n", "tab\tand\vform\ffeed", "…trimmed …",
		"exactly8\nand a line of plain words longer than a block\r\nthen more", "sixteen chars ok\u2028x", "plain words, then a tab:\tand é",
		"seps\x1c\x1d\x1e and next\u0085line", "\r\v\f\r\n\u0085\u0085", "broken \xc2 then \xc2\x85 and Ņ\xe2\x80\xa8", "\xe2\x80\xa9\xc2"}
	times := []time.Time{{}, time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC), time.Date(2023, 5, 8, 23, 30, 0, 0, time.FixedZone("x", 5*3600)),
		time.Date(12345, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-44, 3, 15, 0, 0, 0, 0, time.UTC), time.Date(7, 7, 7, 0, 0, 0, 0, time.UTC)}
	n := 0
	cache := speakerChars{} // shared by every role of a speaker
	for _, sp := range speakers {
		for _, role := range roles {
			for _, text := range texts {
				for _, at := range times {
					it := client.RecalledItem{Kind: client.RecalledTurn, Speaker: sp, Role: role, Text: text, At: at}
					for _, labelled := range []bool{true, false} {
						line := it.RunLine()
						if labelled {
							line = it.Line()
						}
						got, ok := excerptLineChars(&it, labelled)
						if want := client.LineChars(line); !ok || got != want {
							t.Fatalf("speaker %q role %q text %q at %v labelled %v: counted %d (ok %v), the line %q has %d", sp, role, text, at, labelled, got, ok, line, want)
						}
						if cached, _ := cache.line(&it, labelled); cached != got {
							t.Fatalf("speaker %q role %q text %q at %v labelled %v: counted %d with the speakers cached, %d without", sp, role, text, at, labelled, cached, got)
						}
						n++
					}
				}
			}
		}
	}
	if _, ok := excerptLineChars(&client.RecalledItem{Kind: client.RecalledMemory, Text: "a fact"}, true); ok {
		t.Fatal("a memory's line was counted, not built")
	}
	t.Logf("%d lines", n)
}

// TestRunes: runes counts what utf8.RuneCountInString counts, whatever
// byte (a multi-byte rune, a broken one) stands at whatever position.
func TestRunes(t *testing.T) {
	for _, b := range []string{"é", "👋🏽", "\xe2\x80", "\xff", "\x80", "…"} {
		for n := range 20 {
			for at := 0; at <= n; at++ {
				s := strings.Repeat("a", at) + b + strings.Repeat("z", n-at)
				if got, want := runes(s), utf8.RuneCountInString(s); got != want {
					t.Fatalf("runes(%q) = %d, want %d", s, got, want)
				}
			}
		}
	}
	for n := range 20 {
		if got := runes(strings.Repeat("x", n)); got != n {
			t.Fatalf("runes of %d ASCII bytes = %d", n, got)
		}
	}
}
