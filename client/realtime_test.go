package client_test

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
)

const summary = "Alice, Bob and Carol are playing Marvel Rivals on Tokyo 2099. Bob keeps dying as Hulk. " +
	"Carol asked Bob to try Jeff the Land Shark instead, and he agreed. Dave must stop at 11:30 pm."

func TestRealtimeInstructionsFitsTheSummaryWhenThereIsRoom(t *testing.T) {
	base := "You are Clanky, a helpful participant in a Discord voice channel.\nBe brief.\n"
	got := client.RealtimeInstructions(base, summary, 0)
	want := strings.TrimRight(base, "\n") + "\n\nSession conversation summary:\n" + summary
	if got != want {
		t.Fatalf("got\n%q\nwant\n%q", got, want)
	}
	if client.RealtimeInstructions(base, "  ", 0) != base {
		t.Fatal("an empty summary changed the instructions")
	}
	if got := client.RealtimeInstructions("", summary, 0); got != "Session conversation summary:\n"+summary {
		t.Fatalf("no base: %q", got)
	}
}

func TestRealtimeInstructionsTrimsTheSummaryNotTheBase(t *testing.T) {
	base := strings.Repeat("Rule. ", 850) // 5100 chars of instructions
	base = strings.TrimSpace(base)
	got := client.RealtimeInstructions(base, summary, 0)
	if n := utf8.RuneCountInString(got); n > client.DefaultRealtimeCeiling {
		t.Fatalf("%d chars, over the 5200 ceiling", n)
	}
	if !strings.HasPrefix(got, base+"\n\nSession conversation summary:\n") {
		t.Fatal("base instructions were not kept whole")
	}
	tail := strings.TrimPrefix(got, base+"\n\nSession conversation summary:\n")
	if !strings.HasPrefix(summary, tail) || !strings.HasSuffix(tail, ".") || tail == summary {
		t.Fatalf("summary not trimmed at a sentence end: %q", tail)
	}
	// Too little room for any useful summary: left out entirely.
	base = strings.Repeat("x", 5180)
	if got := client.RealtimeInstructions(base, summary, 0); got != base {
		t.Fatalf("a %d-char sliver of summary was added", utf8.RuneCountInString(got)-5180)
	}
	// Base alone over the ceiling: cut to the ceiling, no summary.
	if got := client.RealtimeInstructions(strings.Repeat("é", 6000), summary, 0); utf8.RuneCountInString(got) != 5200 || strings.Contains(got, "summary") {
		t.Fatalf("oversized base: %d chars", utf8.RuneCountInString(got))
	}
}

// Whatever the inputs, the result never exceeds the ceiling, keeps the base
// whole whenever the base fits, and contains only a prefix of the summary.
func TestRealtimeInstructionsNeverExceedsTheCeiling(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"Alice", "said", "Hulk.", "Tokyo", "ränked", "match?", "🎮", "ok!", "\"quote.\"", "(aside.)", "x", "   ", "\n"}
	text := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	for range 3000 {
		base, sum := text(rng.IntN(60)), text(rng.IntN(80))
		ceiling := rng.IntN(400) - 20
		got := client.RealtimeInstructions(base, sum, ceiling)
		limit := ceiling
		if limit <= 0 {
			limit = client.DefaultRealtimeCeiling
		}
		if n := utf8.RuneCountInString(got); n > limit {
			t.Fatalf("ceiling %d: got %d chars for base %q summary %q", ceiling, n, base, sum)
		}
		if utf8.RuneCountInString(base) < limit && !strings.HasPrefix(got, strings.TrimRight(base, " \n")) {
			t.Fatalf("base %q not kept in %q", base, got)
		}
		if i := strings.Index(got, client.RealtimeSummaryHeader+"\n"); i >= 0 {
			part := strings.TrimSuffix(got[i+len(client.RealtimeSummaryHeader)+1:], "…")
			if !strings.HasPrefix(strings.TrimSpace(sum), part) {
				t.Fatalf("summary section %q is not a prefix of %q", part, sum)
			}
		}
	}
}

func TestRealtimeContextInstructionsAddsRecalledLinesWithinTheCeiling(t *testing.T) {
	base := "You are Clanky.\n"
	at := time.Date(2026, 11, 22, 20, 5, 0, 0, time.UTC)
	c := &client.Context{
		Summary: &client.SummaryLayer{Summary: summary},
		Recalled: []client.RecalledItem{
			{Kind: client.RecalledMemory, MemoryID: "1.1", Text: "Dave must stop at 11:30 pm.", Score: 2},
			{Kind: client.RecalledTurn, Index: 3, Speaker: "Bob", At: at, Text: "I will try Jeff the Land Shark.", Score: 1},
			{Kind: client.RecalledTurn, Index: 4, Speaker: "Carol", At: at.Add(time.Minute), Text: strings.Repeat("long ", 30), Neighbour: true},
			{Kind: client.RecalledTurn, Index: 5, Speaker: "Dave", At: at.Add(2 * time.Minute), Text: "Sure.", Neighbour: true},
		},
		Turns: []client.ContextTurn{{Index: 60, Speaker: "Alice", Text: "verbatim turns stay out"}},
	}
	full := client.RealtimeContextInstructions(base, c, 0)
	want := client.RealtimeInstructions(base, summary, 0) + "\n\n" + client.MemoriesHeader + "\n- Dave must stop at 11:30 pm." +
		"\n\n" + client.ExcerptsHeader + "\n[22 Nov 2026] Bob: I will try Jeff the Land Shark." +
		"\nCarol: " + strings.Repeat("long ", 30) + "\nDave: Sure." // one day: labelled once
	if full != want {
		t.Fatalf("got\n%q\nwant\n%q", full, want)
	}
	// A ceiling too short for the long line keeps the others whole.
	for ceiling := 1; ceiling <= utf8.RuneCountInString(full); ceiling += 7 {
		got := client.RealtimeContextInstructions(base, c, ceiling)
		if n := utf8.RuneCountInString(got); n > ceiling {
			t.Fatalf("ceiling %d: %d chars", ceiling, n)
		}
		if strings.Contains(got, "verbatim") || strings.Contains(got, "Carol: long") && !strings.Contains(got, "long \n") && !strings.HasSuffix(got, "long ") {
			t.Fatalf("ceiling %d: %q", ceiling, got)
		}
	}
	short := client.RealtimeContextInstructions(base, c, utf8.RuneCountInString(full)-len("\nDave: Sure.")-10)
	if !strings.Contains(short, "Bob: I will try") || strings.Contains(short, "Carol:") {
		t.Fatalf("too short for the long line: it goes, the others stay: %q", short)
	}
	// Without the line before it, Dave's turn is still of the day Bob's
	// line gave: no label.
	if !strings.HasSuffix(short, "Shark.\nDave: Sure.") {
		t.Fatalf("the line after a left-out one of the same day is labelled: %q", short)
	}
}
