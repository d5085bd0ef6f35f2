package sentence

import (
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"
)

// abbrevs end with a period that does not end a sentence.
var abbrevs = map[string]bool{"mr": true, "mrs": true, "ms": true, "dr": true, "prof": true, "sr": true,
	"jr": true, "st": true, "vs": true, "etc": true, "e.g": true, "i.e": true, "approx": true,
	"fig": true, "inc": true, "ltd": true, "co": true, "mt": true, "ste": true, "jan": true, "feb": true,
	"mar": true, "apr": true, "jun": true, "jul": true, "aug": true, "sep": true, "sept": true, "oct": true,
	"nov": true, "dec": true, "p.m": true, "a.m": true}

// Split cuts text into sentences: at ".", "!" or "?" (with any closing
// quotes or brackets after it) followed by white space, and at line
// breaks. A period after a known abbreviation ("Mr.", "e.g.", "No."
// before a number), a single letter ("J. Smith") or inside a number
// ("3.5") does not end a sentence.
// Sentences are trimmed; empty ones are left out.
func Split(text string) []string { return AppendSplit(nil, text) }

// AppendSplit appends Split(text) to dst (a caller's array: no allocation
// while it has room).
func AppendSplit(dst []string, text string) []string {
	if strings.IndexByte(text, '\n') < 0 {
		return splitLine(dst, text) // (one line: most texts)
	}
	for line := range strings.SplitSeq(text, "\n") {
		dst = splitLine(dst, line)
	}
	return dst
}

func splitLine(out []string, line string) []string {
	start := 0
	for i := 0; i < len(line); {
		for i+8 <= len(line) { // eight bytes at a time: the first of mayEnd's ('.', '!', '?' or beyond ASCII)
			x := load64(line[i : i+8])
			a, b, c := x^0x2e2e2e2e2e2e2e2e, x^0x2121212121212121, x^0x3f3f3f3f3f3f3f3f // (a zero byte: '.', '!', '?')
			if m := ((a-0x0101010101010101)&^a | (b-0x0101010101010101)&^b | (c-0x0101010101010101)&^c | x) & 0x8080808080808080; m != 0 {
				i += bits.TrailingZeros64(m) >> 3 // (a borrow only runs up from a zero byte: the first flagged is one)
				break
			}
			i += 8
		}
		for i < len(line) && !mayEnd[line[i]] {
			i++ // (the last bytes: one test each)
		}
		if i == len(line) {
			break
		}
		r, n := rune(line[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(line[i:])
		}
		i += n
		if r != '.' && r != '!' && r != '?' && r != '…' {
			continue
		}
		end := i
		for end < len(line) && strings.ContainsRune(`.!?"')]”’»`, rune(line[end])) {
			end++
		}
		if end < len(line) && line[end] != ' ' && line[end] != '\t' {
			i = end
			continue
		}
		if r == '.' && end < len(line) && !endsSentence(line[start:i-1], line[end:]) { // (at the end of the line it ends anyway)
			i = end
			continue
		}
		if s := strings.TrimSpace(line[start:end]); s != "" {
			out = append(out, s)
		}
		start, i = end, end
	}
	if s := strings.TrimSpace(line[start:]); s != "" {
		out = append(out, s)
	}
	return out
}

// mayEnd are the bytes splitLine stops at: '.', '!', '?' and those of
// runes beyond ASCII ('…').
var mayEnd = func() (t [256]bool) {
	for c := utf8.RuneSelf; c < len(t); c++ {
		t[c] = true
	}
	t['.'], t['!'], t['?'] = true, true, true
	return t
}()

// endsSentence reports whether a period between before and after ends a
// sentence. "No." is an abbreviation only before a number ("No. 5"): "No.
// Special material?" is two sentences.
func endsSentence(before, after string) bool {
	k := strings.LastIndexAny(before, " \t(")
	w := strings.ToLower(before[k+1:])
	if w == "" {
		return true
	}
	if a := strings.TrimLeft(after, " \t"); abbrevs[w] || w == "no" && a != "" && '0' <= a[0] && a[0] <= '9' {
		return false
	}
	r, n := utf8.DecodeRuneInString(w)
	return !(n == len(w) && unicode.IsLetter(r)) // "J." is an initial
}
