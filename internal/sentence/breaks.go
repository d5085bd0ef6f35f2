package sentence

import "strings"

// ShowBreaks is s with every line break a reader of it may split on shown
// as " ⏎ ": Python's str.splitlines() set ("\r\n", "\n", "\r", "\v", "\f",
// "\x1c", "\x1d", "\x1e", U+0085, U+2028, U+2029), which also holds what
// JavaScript and Unicode-aware readers end a line on. A turn's text on a
// prompt line (the client's TurnLine, the summarizer's transcript) goes
// through it so that it cannot start a forged line of its own; the Python
// and TypeScript clients replace the same set.
func ShowBreaks(s string) string { return lineBreaks.Replace(s) }

var lineBreaks = strings.NewReplacer("\r\n", " ⏎ ", "\n", " ⏎ ", "\r", " ⏎ ", "\v", " ⏎ ", "\f", " ⏎ ",
	"\x1c", " ⏎ ", "\x1d", " ⏎ ", "\x1e", " ⏎ ", "\u0085", " ⏎ ", "\u2028", " ⏎ ", "\u2029", " ⏎ ")
