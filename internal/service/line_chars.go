package service

import (
	"strings"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/speaker"
)

// excerptLineChars is client.LineChars of a recalled turn's line, labelled
// with its day (it.Line) or not (it.RunLine), counted without building
// the line: the value packing costs every candidate's lines, most of
// which are never shown. ok is false for what is not a turn (a memory),
// whose line is built to be counted.
//
// It follows client's rendering: a turn's RunLine is its ContextTurn's
// Line ("Speaker: text", the speaker's name normalised, else its role's,
// else "unknown"; each line break " ⏎ "), and its Line is that after
// "[" + its day (client.RecallTimeLayout) + "] " when it has a time.
// TestExcerptLineChars holds it to the lines themselves.
func excerptLineChars(it *client.RecalledItem, labelled bool) (chars int, ok bool) {
	if it.Kind != client.RecalledTurn {
		return 0, false
	}
	name := speaker.Name(it.Speaker)
	if name == "" && it.Role != "" {
		name = speaker.Name(it.Role)
	}
	if name == "" {
		name = "unknown"
	}
	chars = utf8.RuneCountInString(name) + 2 + textChars(it.Text) + 1
	if labelled && !it.At.IsZero() {
		var buf [32]byte
		chars += 3 + utf8.RuneCount(it.At.UTC().AppendFormat(buf[:0], client.RecallTimeLayout))
	}
	return chars, true
}

// textChars is the runes of text on one line: each line break ("\r\n",
// "\n", "\r", U+2028, U+2029) shown as " ⏎ " (client.TurnLine).
func textChars(text string) int {
	n := utf8.RuneCountInString(text)
	if strings.IndexByte(text, '\n') < 0 && strings.IndexByte(text, '\r') < 0 && strings.IndexByte(text, 0xe2) < 0 {
		return n // no line break (U+2028 and U+2029 start with 0xe2)
	}
	// One rune becomes three; "\r\n", two, becomes three.
	n += 2 * (strings.Count(text, "\r") + strings.Count(text, "\n") + strings.Count(text, "\u2028") + strings.Count(text, "\u2029"))
	return n - 3*strings.Count(text, "\r\n")
}
