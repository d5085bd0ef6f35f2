package service

import (
	"time"
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
	return speakerChars(nil).line(it, labelled)
}

// speakerChars caches the characters of a speaker's label on a line, by
// the turn's speaker (nil: none; a picker's, for one request).
type speakerChars map[string]int

// line is excerptLineChars, with the speakers' labels' characters cached.
func (sc speakerChars) line(it *client.RecalledItem, labelled bool) (chars int, ok bool) {
	if it.Kind != client.RecalledTurn {
		return 0, false
	}
	n, cached := sc[it.Speaker]
	if !cached {
		name := speaker.Name(it.Speaker)
		own := name != "" // then the role does not matter
		if !own && it.Role != "" {
			name = speaker.Name(it.Role)
		}
		if name == "" {
			name = "unknown"
		}
		n = utf8.RuneCountInString(name)
		if own && sc != nil {
			sc[it.Speaker] = n
		}
	}
	chars = n + 2 + textChars(it.Text) + 1
	if labelled && !it.At.IsZero() {
		chars += 3 + dayChars(it.At)
	}
	return chars, true
}

// dayChars is the characters of at's day as a label shows it
// (client.RecallTimeLayout, in UTC): the day of the month's one or two
// digits, the month's three letters and a four-digit year for the years
// 0 to 9999.
func dayChars(at time.Time) int {
	if u := at.UTC(); client.RecallTimeLayout == "2 Jan 2006" && u.Year() >= 0 && u.Year() <= 9999 {
		if u.Day() < 10 {
			return 10
		}
		return 11
	}
	var buf [32]byte
	return utf8.RuneCount(at.UTC().AppendFormat(buf[:0], client.RecallTimeLayout))
}

// textChars is the runes of text on one line: each line break shown as
// " ⏎ " (sentence.ShowBreaks, as client.TurnLine shows it), counted
// without building the line.
func textChars(text string) int {
	// Eight bytes at a time while they are printable ASCII (no line
	// break, nothing beyond ASCII): a byte below 0x20 borrows into a top
	// bit that was clear when 0x20 is subtracted from each.
	const lo, hi = 0x2020202020202020, 0x8080808080808080
	k := 0
	for ; len(text)-k >= 8; k += 8 {
		x := uint64(text[k]) | uint64(text[k+1])<<8 | uint64(text[k+2])<<16 | uint64(text[k+3])<<24 |
			uint64(text[k+4])<<32 | uint64(text[k+5])<<40 | uint64(text[k+6])<<48 | uint64(text[k+7])<<56
		if ((x-lo)&^x|x)&hi != 0 {
			break
		}
	}
	text = text[k:]
	n := k + runes(text)
	// One rune becomes three; "\r\n", two, becomes three. U+0085 is
	// "\xc2\x85", U+2028 and U+2029 "\xe2\x80\xa8" and "\xe2\x80\xa9",
	// matched byte by byte as ShowBreaks' replacer does.
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e:
			n += 2
		case '\r':
			n += 2
			if i+1 < len(text) && text[i+1] == '\n' {
				n--
				i++
			}
		case 0xc2:
			if i+1 < len(text) && text[i+1] == 0x85 {
				n += 2
			}
		case 0xe2:
			if i+2 < len(text) && text[i+1] == 0x80 && (text[i+2] == 0xa8 || text[i+2] == 0xa9) {
				n += 2
			}
		}
	}
	return n
}

// runes is utf8.RuneCountInString(s), its ASCII start eight bytes at a
// time (a turn's text is mostly ASCII, and counting it is a good part of
// costing an excerpt).
func runes(s string) int {
	const highs = 0x8080808080808080
	n := 0
	for ; len(s)-n >= 8; n += 8 {
		x := uint64(s[n]) | uint64(s[n+1])<<8 | uint64(s[n+2])<<16 | uint64(s[n+3])<<24 |
			uint64(s[n+4])<<32 | uint64(s[n+5])<<40 | uint64(s[n+6])<<48 | uint64(s[n+7])<<56
		if x&highs != 0 {
			break
		}
	}
	return n + utf8.RuneCountInString(s[n:])
}
