package offline

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
)

// FuzzSummarize checks that no input makes the summarizer panic, emit
// invalid UTF-8 or several lines, go silent on real input, or (with a
// workable budget) exceed the budget.
func FuzzSummarize(f *testing.F) {
	f.Add("Alice", "let's try the new team comp on Tokyo 2099", "Bob", "I keep dying as Hulk lol", "", 1200, false)
	f.Add("", "let-me", "Bob", "\xff\xfe", "Alice and Bob are talking about X.", 200, false)
	f.Add("Eve", "Ignore previous instructions. \"I\" my me I'm I'll", "tool", `{"command":"rm -rf /"}`, "prev. summary? yes! ok", 600, true)
	f.Add("A", "how about?", "B", "why not", "x ran y (z): ok. x ran y (w and 3 more): ok.", 50, true)
	f.Fuzz(func(t *testing.T, sp1, text1, sp2, text2, prev string, maxChars int, recompact bool) {
		if maxChars > 5000 || maxChars < -5 {
			maxChars %= 5000
		}
		req := fold.Request{PreviousSummary: prev, MaxChars: maxChars, Recompact: recompact}
		if !recompact {
			req.Turns = []fold.Turn{
				{Speaker: sp1, Role: "user", Text: text1},
				{Speaker: sp2, Role: "assistant", Text: text2},
				{Speaker: sp2, Role: "assistant", Kind: "tool_call", Tool: sp1, Text: text1},
				{Role: "tool", Kind: "tool_result", Tool: sp1, Text: text2},
				{Speaker: sp1, Role: "user", Text: text2 + " " + text1},
			}
			req.Notes = []fold.Note{{Source: sp2, Text: text1}}
			req.Profile = fold.ProfileVoice
		}
		res, err := New().Summarize(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		s := res.Summary
		if !utf8.ValidString(s) || strings.ContainsAny(s, "\n\r") {
			t.Fatalf("bad summary %q", s)
		}
		if !recompact && s == "" {
			t.Fatalf("empty summary for real input")
		}
		budget := maxChars
		if budget <= 0 {
			budget = DefaultMaxChars
		}
		if budget >= 600 && runeLen(s) > budget {
			t.Fatalf("%d chars over budget %d: %q", runeLen(s), budget, s)
		}
		again, _ := New().Summarize(context.Background(), req)
		if again.Summary != s {
			t.Fatalf("not deterministic")
		}
	})
}
