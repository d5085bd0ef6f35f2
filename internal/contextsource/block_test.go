package contextsource_test

import (
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/contextsource"
)

func ok(label, text string) contextsource.Answer {
	return contextsource.Answer{Label: label, Text: text, Status: contextsource.StatusOK}
}

func TestHeader(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct{ from, to, want string }{
		{"2026-03-02T09:15:00Z", "2026-03-02T14:30:00Z", "[Session summary — 9:15 AM to 2:30 PM UTC]"},
		{"2026-03-02T09:15:00-05:00", "2026-03-02T14:30:00-05:00", "[Session summary — 2:15 PM to 7:30 PM UTC]"},
		{"2026-03-02T21:15:00Z", "2026-03-03T02:30:00Z", "[Session summary — Mar 2, 9:15 PM to Mar 3, 2:30 AM UTC]"},
		{"2026-03-02T20:00:00-05:00", "2026-03-02T21:00:00-05:00", "[Session summary — 1:00 AM to 2:00 AM UTC]"},
		{"2026-03-02T23:00:00-05:00", "2026-03-03T01:00:00-05:00", "[Session summary — 4:00 AM to 6:00 AM UTC]"},
		{"2025-12-31T23:15:00Z", "2026-01-01T00:30:00Z", "[Session summary — Dec 31 2025, 11:15 PM to Jan 1 2026, 12:30 AM UTC]"},
		{"2025-03-02T09:15:00Z", "2026-03-02T09:15:00Z", "[Session summary — Mar 2 2025, 9:15 AM to Mar 2 2026, 9:15 AM UTC]"},
	} {
		if got := contextsource.Header(at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("Header(%s, %s) = %q, want %q", tc.from, tc.to, got, tc.want)
		}
	}
	if got := contextsource.Header(time.Time{}, to); got != "[Session summary]" {
		t.Errorf("zero from: %q", got)
	}
}

func TestBlock(t *testing.T) {
	head := "[Session summary — 9:15 AM to 2:30 PM UTC]\n"
	cal := ok("Calendar", "Edgewood Park hike 9am-12pm completed. Dentist at 2pm in 45 min.")
	mail := ok("Mail", "5 new emails. Urgent: school principal re: Matteo incident.")
	late := contextsource.Answer{Label: "Mail", Status: contextsource.StatusTimeout, Timeout: 2 * time.Second}
	long := ok("Mail", strings.Repeat("One email about the school trip. ", 10)+"Last one.")
	conv := "discussed enzymatic cleaners, decided to order from Amazon."
	full := head + "Conversation: " + conv + "\n"
	for _, tc := range []struct {
		name         string
		conversation string
		answers      []contextsource.Answer
		max          int
		want         string
	}{
		{"no sources", conv, nil, 0, head + "Conversation: " + conv},
		{"seed example", conv, []contextsource.Answer{cal, mail}, 0, full + "Calendar: " + cal.Text + "\nMail: " + mail.Text},
		{"gap noted", conv, []contextsource.Answer{cal, late}, 0, full + "Calendar: " + cal.Text + "\nMail: (no answer within 2s)"},
		{"other notes", conv, []contextsource.Answer{
			{Label: "Mail", Status: contextsource.StatusNoResponders},
			{Label: "Weather", Status: contextsource.StatusError},
			ok("Tasks", ""),
		}, 0, full + "Mail: (source unavailable)\nWeather: (source failed to answer)\nTasks: (nothing to report)"},
		{"conversation single-lined", "line one.\n\n  line two.", nil, 0, head + "Conversation: line one. line two."},
		{"empty conversation", " ", []contextsource.Answer{cal}, 0, head + "Conversation:\nCalendar: " + cal.Text},
		{"fits exactly", conv, []contextsource.Answer{cal, mail}, len([]rune(full + "Calendar: " + cal.Text + "\nMail: " + mail.Text)),
			full + "Calendar: " + cal.Text + "\nMail: " + mail.Text},
		// Over budget: the long line shrinks first (at a sentence end),
		// the short one keeps its text.
		{"long line shrinks", conv, []contextsource.Answer{cal, long}, len([]rune(full)) + 200,
			full + "Calendar: " + cal.Text + "\nMail: One email about the school trip. One email about the school trip. One email about the school trip."},
		// Both over their share: both shrink.
		{"equal shares", conv, []contextsource.Answer{cal, mail}, len([]rune(full)) + 100,
			full + "Calendar: Edgewood Park hike 9am-12pm completed.\nMail: 5 new emails. Urgent: school principal…"},
		// No room for two lines: the last one goes.
		{"last line dropped", conv, []contextsource.Answer{cal, mail}, len([]rune(full)) + 40,
			full + "Calendar: Edgewood Park hike 9am-12pm…"},
		// No room for any: header and conversation stay whole.
		{"conversation over budget", conv, []contextsource.Answer{cal, mail}, 20, head + "Conversation: " + conv},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := contextsource.Block(from, to, tc.conversation, tc.answers, tc.max)
			if got != tc.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tc.want)
			}
			if n := len([]rune(got)); tc.max > 0 && n > tc.max && got != head+"Conversation: "+conv {
				t.Errorf("%d chars over the budget of %d", n, tc.max)
			}
		})
	}
}

// Every budget from tiny to roomy: never over it unless the header and
// conversation are, never without them, lines in configured order.
func TestBlockBudgetSweep(t *testing.T) {
	answers := []contextsource.Answer{
		ok("Calendar", "Edgewood Park hike 9am-12pm completed. Dentist at 2pm in 45 min."),
		ok("Mail", strings.Repeat("An email about the trip. ", 12)),
		{Label: "Tasks", Status: contextsource.StatusTimeout, Timeout: 2 * time.Second},
	}
	conv := "talked about the hike."
	fixed := len([]rune(contextsource.Block(from, to, conv, nil, 0)))
	for max := 1; max < fixed+600; max++ {
		got := contextsource.Block(from, to, conv, answers, max)
		p, isBlock := contextsource.SplitBlock(got)
		if !isBlock || p.Conversation != conv {
			t.Fatalf("max %d: conversation lost:\n%s", max, got)
		}
		if n := len([]rune(got)); max >= fixed && n > max {
			t.Fatalf("max %d: %d chars:\n%s", max, n, got)
		}
		for i, s := range p.Sources {
			if s.Label != answers[i].Label || s.Text == "" {
				t.Fatalf("max %d: line %d is %+v:\n%s", max, i, s, got)
			}
		}
	}
}

func TestSplitBlockRoundTrip(t *testing.T) {
	answers := []contextsource.Answer{
		ok("Calendar", "Hike 9am-12pm: completed. Dentist at 2pm."),
		{Label: "Mail", Status: contextsource.StatusTimeout, Timeout: 2 * time.Second},
	}
	for _, conv := range []string{
		"discussed enzymatic cleaners, decided to order from Amazon.",
		"Alice: wants Diamond. Bob: plays Hulk. Calendar: mentioned in passing.",
		"",
	} {
		block := contextsource.Block(from, to, conv, answers, 0)
		p, isBlock := contextsource.SplitBlock(block)
		if !isBlock || p.Conversation != conv {
			t.Errorf("SplitBlock(%q) conversation %q (block %v)", block, p.Conversation, isBlock)
		}
		if p.Header != contextsource.Header(from, to) {
			t.Errorf("header %q", p.Header)
		}
		want := []contextsource.SourceLine{{"Calendar", "Hike 9am-12pm: completed. Dentist at 2pm."}, {"Mail", "(no answer within 2s)"}}
		if len(p.Sources) != 2 || p.Sources[0] != want[0] || p.Sources[1] != want[1] {
			t.Errorf("sources %+v, want %+v", p.Sources, want)
		}
		// The next fold: the conversation goes on, the sources are fresh.
		next := contextsource.Block(from, to.Add(time.Hour), p.Conversation+" Then planned lunch.", answers[:1], 0)
		if strings.Count(next, "\nCalendar:") != 1 || strings.Contains(next, "\nMail:") {
			t.Errorf("stale source lines carried over:\n%s", next)
		}
	}
	// Multi-line conversations come back as one line.
	p, _ := contextsource.SplitBlock(contextsource.Block(from, to, "one.\ntwo.", nil, 0))
	if p.Conversation != "one. two." {
		t.Errorf("multi-line conversation: %q", p.Conversation)
	}
	// Not a block: the whole summary is the conversation.
	for _, s := range []string{"", "  Alice and Bob talked about ranked.  ", "[Session summary — 9:15 AM to 2:30 PM UTC]", "[Session summary]\nCalendar: x"} {
		p, isBlock := contextsource.SplitBlock(s)
		if isBlock || p.Conversation != strings.TrimSpace(s) || len(p.Sources) != 0 {
			t.Errorf("SplitBlock(%q) = %+v, %v", s, p, isBlock)
		}
	}
}
