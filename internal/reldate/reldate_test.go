package reldate

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/benchtext"
	"github.com/foldstream/foldstream/internal/sentence"
)

// said is a Wednesday.
var said = time.Date(2026, 5, 6, 15, 0, 0, 0, time.UTC)

func TestResolve(t *testing.T) {
	cases := []struct{ in, want string }{
		{"I talked to my sister yesterday, she might join.", "I talked to my sister yesterday (5 May 2026), she might join."},
		{"I'll send the deposit tonight", "I'll send the deposit tonight (6 May 2026)"},
		{"the dentist is next Friday at 9", "the dentist is next Friday (8 May 2026) at 9"},
		{"we met last Wednesday", "we met last Wednesday (29 Apr 2026)"},
		{"see you this Friday!", "see you this Friday (8 May 2026)!"},
		{"we went there last week", "we went there last week (the week before 6 May 2026)"},
		{"Next week we ship", "Next week (the week after 6 May 2026) we ship"},
		{"I moved here last year.", "I moved here last year (2025)."},
		{"she left three days ago", "she left three days ago (3 May 2026)"},
		{"she left a week ago", "she left a week ago (about 29 Apr 2026)"},
		{"it opens in 2 days", "it opens in 2 days (8 May 2026)"},
		{"last month was busy", "last month (April 2026) was busy"},
		{"the last. Week two", "the last. Week two"},
		{"nothing relative here", "nothing relative here"},
		{"in the meantime", "in the meantime"},
		{"İn 2 days, TONIGHT", "İn 2 days (8 May 2026), TONIGHT (6 May 2026)"}, // (a word not ASCII lower-cased to one match reads)
	}
	for _, c := range cases {
		if got := Resolve(c.in, said); got != c.want {
			t.Errorf("Resolve(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestResolveIdempotent(t *testing.T) {
	once := Resolve("yesterday and next Friday", said)
	if twice := Resolve(once, said.AddDate(0, 0, 3)); twice != once {
		t.Errorf("resolved again: %q -> %q", once, twice)
	}
}

func TestResolveZeroTime(t *testing.T) {
	if got := Resolve("yesterday", time.Time{}); got != "yesterday" {
		t.Errorf("zero time changed the text: %q", got)
	}
}

// TestMayHaveMissesNothing: MayHave misses no text that resolve changes (but for "ago", which it reads MayHave for), MayStartIn no field of a
// text MayHave reads, and MayStartIn with MayEndIn no text Resolve changes; ResolveLikely is Resolve.
func TestMayHaveMissesNothing(t *testing.T) {
	words := []string{"in", "In", "IN", "3", "three", "days", "To", "day", "Today", "tonight", "ago", "a", "go", "next",
		"Nexted", "last", "lasting", "this", "coming", "Yesterday", "yes", "it's", "İn", "Kelvin", "é", "we", "the", "thin", "in3",
		"week", "Weekend", "weeks", "month", "year", "Friday", "friday's", "night", "morning", "(", ".", "'", "—", "2", "\u00a0", "(ago"}
	rng := rand.New(rand.NewPCG(7, 8))
	passed, fieldsPassed, pairsPassed := 0, 0, 0
	for range 50000 {
		var ws []string
		for range 1 + rng.IntN(6) {
			ws = append(ws, words[rng.IntN(len(words))])
		}
		sep := " "
		if rng.IntN(4) == 0 {
			sep = ""
		}
		s := strings.Join(ws, sep)
		if fieldsSay := slices.ContainsFunc(strings.Fields(s), MayStartIn); MayHave(s) && !fieldsSay {
			t.Fatalf("MayHave(%q) = true, but MayStartIn is false for each of its fields", s)
		} else if !fieldsSay {
			fieldsPassed++
		}
		fs, pair, from := strings.Fields(s), false, 0 // (from: the start of the field two before the first of a pair)
		for i, f := range fs {
			if !pair && MayStartIn(f) && (MayEndIn(f) || i+1 < len(fs) && MayEndIn(fs[i+1])) {
				pair, from = true, fieldStart(s, max(i-2, 0))
			}
		}
		if got, likely := Resolve(s, said), ResolveLikely(s, from, said); got != likely || got != ResolveLikely(s, 0, said) {
			t.Fatalf("Resolve(%q) = %q, ResolveLikely from %d %q", s, got, from, likely)
		}
		if got := Resolve(s, said); !pair && got != s {
			t.Fatalf("no field of %q MayStartIn with itself or the next MayEndIn, but it resolves to %q", s, got)
		} else if !pair && slices.ContainsFunc(fs, MayStartIn) {
			pairsPassed++
		}
		if MayHave(s) {
			continue
		}
		passed++
		if got := resolve(s, 0, said, false); got != s {
			t.Fatalf("MayHave(%q) = false, but it resolves to %q", s, got)
		}
	}
	if passed < 10000 || fieldsPassed < passed/2 || pairsPassed < 5000 {
		t.Errorf("MayHave passed over %d texts of 50,000, MayStartIn over %d and MayEndIn over %d of those MayStartIn finds, want most of those without a relative date",
			passed, fieldsPassed, pairsPassed)
	}
}

// TestMayEndIn: a text whose relative date follows what else MayHave finds ("this x", a text not ASCII) is resolved
// with its "ago" after a parenthesis, and its fields tell it.
func TestMayEndIn(t *testing.T) {
	s := "this x\u00a0y 3 days (ago)"
	fs := strings.Fields(s)
	if got := Resolve(s, said); got == s || !MayStartIn(fs[len(fs)-1]) || !MayEndIn(fs[len(fs)-1]) {
		t.Errorf("Resolve(%q) = %q; MayStartIn, MayEndIn(%q) = %v, %v", s, got, fs[len(fs)-1], MayStartIn(fs[len(fs)-1]), MayEndIn(fs[len(fs)-1]))
	}
	for f, want := range map[string]bool{"week.": true, "(Friday": true, "three": true, "2": true, "-": true, "é": true, "the": false,
		"morning's": false, "yesterday's": true, "to": false} {
		if got := MayEndIn(f); got != want {
			t.Errorf("MayEndIn(%q) = %v, want %v", f, got, want)
		}
	}
}

func TestMayHave(t *testing.T) {
	for s, want := range map[string]bool{"see you this Friday": true, "this is fine": false, "next to it": false,
		"last week": true, "the last. Week": false, "in (2 weeks)": true, "yesterday": true, "it opens in 2 days": true, "nottoday": false,
		"three days ago": true, "coming  weekend": true} {
		if got := MayHave(s); got != want {
			t.Errorf("MayHave(%q) = %v, want %v", s, got, want)
		}
	}
}

// BenchmarkResolve resolves the sentences of the ingest bench's lines,
// most of which hold no relative date.
func BenchmarkResolve(b *testing.B) {
	var sents []string
	for _, l := range benchtext.Lines() {
		sents = append(sents, sentence.Split(l[1])...)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range sents {
			Resolve(s, said)
		}
	}
}

// fieldStart is the byte where the k-th of s's fields (strings.Fields') starts.
func fieldStart(s string, k int) (at int) {
	for i := 0; ; i++ {
		f := strings.Fields(s[at:])[0]
		if at += strings.Index(s[at:], f); i == k {
			return at
		}
		at += len(f)
	}
}
