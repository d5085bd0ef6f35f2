package client

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/sentence"
)

// DefaultRealtimeCeiling is the hard ceiling on realtime
// instructions, in characters.
const DefaultRealtimeCeiling = 5200

// RealtimeSummaryHeader introduces the summary section in realtime
// instructions (buildRealtimeInstructions).
const RealtimeSummaryHeader = "Session conversation summary:"

// minRealtimeSummary is the smallest summary section worth adding: a few
// words of history only take room from the instructions around it.
const minRealtimeSummary = 40

// RealtimeInstructions returns base followed by the summary as a "Session
// conversation summary:" section, never longer than ceiling characters
// (runes; DefaultRealtimeCeiling when ceiling <= 0).
//
// The summary competes for the ceiling and gives way: it is trimmed at a
// sentence boundary (at a word boundary with "…" when no sentence end keeps
// half the room) so that base stays whole, and left out when fewer than 40
// characters would remain for it. base is cut only when it alone exceeds
// the ceiling, by plain truncation. The summary's start is
// kept, as the processor's own clamp does: summaries lead with who is
// present and what they are doing.
func RealtimeInstructions(base, summary string, ceiling int) string {
	if ceiling <= 0 {
		ceiling = DefaultRealtimeCeiling
	}
	if utf8.RuneCountInString(base) >= ceiling {
		return string([]rune(base)[:ceiling])
	}
	summary = strings.TrimSpace(summary)
	if summary == "" {
		return base
	}
	head := RealtimeSummaryHeader + "\n"
	if trimmed := strings.TrimRightFunc(base, unicode.IsSpace); trimmed != "" {
		base = trimmed
		head = "\n\n" + head
	}
	room := ceiling - utf8.RuneCountInString(base) - utf8.RuneCountInString(head)
	if room < minRealtimeSummary {
		return base
	}
	return base + head + sentence.Clamp(summary, room)
}

// RealtimeContextInstructions is RealtimeInstructions for a
// question-aware context (Builder.ContextFor): base, then the context's
// summary as the "Session conversation summary:" section, then what it
// recalled for the question, each section under its header and every
// line labelled as Prompt labels it (day, speaker), never
// longer than ceiling characters (DefaultRealtimeCeiling when <= 0).
//
// The priority is the context's: base, the summary (trimmed as
// RealtimeInstructions trims it), then recalled lines whole, memories
// first, the earlier turns in transcript order; a line that does not fit
// is left out, a shorter one after it may still fit. The verbatim turns
// are not included: a realtime session has them in its own conversation.
func RealtimeContextInstructions(base string, c *Context, ceiling int) string {
	if ceiling <= 0 {
		ceiling = DefaultRealtimeCeiling
	}
	summary := ""
	if c != nil && c.Summary != nil {
		summary = c.Summary.Summary
	}
	out := RealtimeInstructions(base, summary, ceiling)
	if c == nil {
		return out
	}
	room := ceiling - utf8.RuneCountInString(out)
	var b strings.Builder
	for i, kind := range []string{RecalledMemory, RecalledTurn} {
		header := "\n\n" + []string{MemoriesHeader, ExcerptsHeader}[i]
		if out == "" && b.Len() == 0 {
			header = header[2:]
		}
		first := true
		var run ExcerptRun
		for _, r := range c.Recalled {
			if r.Kind != kind {
				continue
			}
			text, next := run.Next(r)
			line := "\n" + text
			cost := utf8.RuneCountInString(line)
			if first {
				cost += utf8.RuneCountInString(header)
			}
			if cost > room {
				continue // the run's state stays: the next line kept is labelled if it must be
			}
			if first {
				b.WriteString(header)
				first = false
			}
			b.WriteString(line)
			room -= cost
			run = next
		}
	}
	return out + b.String()
}
