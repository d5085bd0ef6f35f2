package client

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/sentence"
)

// DefaultRealtimeCeiling is seed 000's hard ceiling on realtime
// instructions, in characters.
const DefaultRealtimeCeiling = 5200

// RealtimeSummaryHeader introduces the summary section in realtime
// instructions (seed 000's buildRealtimeInstructions).
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
// the ceiling, which is the seed's plain truncation. The summary's start is
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
