// Package reldate resolves relative dates in text ("yesterday", "next
// Friday", "last week", "three days ago") against the time the text was
// said, so that a sentence read weeks later still says when. The phrase is
// kept and the calendar date follows it in parentheses: "I saw her
// yesterday" said on 6 May 2026 becomes "I saw her yesterday (5 May
// 2026)", "last week" becomes "last week (the week before 6 May 2026)".
//
// It is shared by the offline summarizer (summaries and memories) and the
// context service. Resolve is idempotent: a phrase already followed by a
// parenthesis is left as it is.
package reldate

import (
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/sentence"
)

// Layout is how a resolved day is written.
const Layout = "2 Jan 2006"

var weekdays = map[string]time.Weekday{"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday,
	"wednesday": time.Wednesday, "thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday}

var numbers = map[string]int{"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
	"seven": 7, "eight": 8, "nine": 9, "ten": 10, "couple": 2, "few": 3}

// word is one word of the text: its bytes [start, end) without the
// punctuation around it, and lower-cased (strings.ToLower): a word not
// ASCII always, an ASCII one only when a phrase may start at it or at one
// of the two words before it.
type word struct {
	start, end int
	lower      string
	// stop: punctuation right after the word ends a phrase ("last." is
	// not "last week").
	stop, ascii bool
}

// words appends the words of s from the byte i to out, those not ASCII lower-cased.
func words(out []word, s string, i int) []word {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf && !wordBytes[c] { // (ASCII read as it is)
			i++
			continue
		} else if r, n := utf8.DecodeRuneInString(s[i:]); c >= utf8.RuneSelf && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			i += n
			continue
		}
		j, ascii := i, s[i] < utf8.RuneSelf
		for j < len(s) && (wordBytes[s[j]] || s[j] == '\'') { // (ASCII: most words)
			j++
		}
		for j < len(s) && s[j] >= utf8.RuneSelf {
			if r, n := utf8.DecodeRuneInString(s[j:]); unicode.IsLetter(r) || unicode.IsDigit(r) {
				j, ascii = j+n, false
				for j < len(s) && (wordBytes[s[j]] || s[j] == '\'') {
					j++
				}
				continue
			}
			break
		}
		out = append(out, word{start: i, end: j, stop: j < len(s) && s[j] != ' ', ascii: ascii})
		if !ascii {
			out[len(out)-1].lower = strings.ToLower(s[i:j])
		}
		i = j
	}
	return out
}

// MayHave reports cheaply (one pass over s, no copy of ASCII text)
// whether s may hold a phrase Resolve changes: a word that starts one
// ("yesterday", "in" before a number, a number before "ago"), or "this",
// "next", "last" or "coming" before a word of time ("week", "Friday").
// ASCII text is read as it is, its letters compared in either case.
func MayHave(s string) bool {
	ascii := sentence.IsASCII(s)
	if !ascii {
		s = strings.ToLower(s)
	}
	for i := 0; i < len(s); i++ {
		if !wordBytes[s[i]] {
			if s[i] == ' ' && sentence.LowerByte(s[min(i+1, len(s)-1)]) == 'a' && hasPrefixFold(s[i:], " ago") {
				return true
			}
			continue
		}
		start := i // (a word's start: the rest of the word is passed over, most bytes with one test)
		for i+1 < len(s) && wordBytes[s[i+1]] {
			i++
		}
		if !mayStart[s[start]] {
			continue
		}
		c, rest := sentence.LowerByte(s[start]), s[start:]
		shift := ""
		switch c {
		case 'y':
			if hasPrefixFold(rest, "yesterday") {
				return true
			}
		case 't':
			if hasPrefixFold(rest, "to") && (hasPrefixFold(rest, "today") || hasPrefixFold(rest, "tonight") || hasPrefixFold(rest, "tomorrow")) {
				return true
			}
			shift = "this "
		case 'n':
			shift = "next "
		case 'l':
			shift = "last "
		case 'c':
			shift = "coming "
		case 'i':
			// "in three days": "in " before a number
			if hasPrefixFold(rest, "in ") {
				var b [9]byte
				if w := nextWord(rest[3:]); !ascii || numbers[string(lowerWord(&b, w))] > 0 || len(w) > 0 && w[0] >= '0' && w[0] <= '9' {
					return true
				}
			}
		}
		if shift != "" && hasPrefixFold(rest, shift) && (!ascii || timeWord(rest[len(shift):])) {
			return true
		}
	}
	return false
}

// MayStartIn reports whether a phrase MayHave looks for may start in f, a field of a text (its bytes between
// white space): MayHave is false for a text none of whose fields MayStartIn. A caller that has split a text into its
// fields and reads each of them anyway can tell most texts apart this way without reading them again.
func MayStartIn(f string) bool {
	if !sentence.IsASCII(f) {
		return true
	}
	for i := 0; i < len(f); i++ {
		if i > 0 && wordByte(f[i-1]) {
			continue // not the start of a word
		}
		switch rest := f[i:]; sentence.LowerByte(f[i]) {
		case 'a':
			if hasPrefixFold(rest, "ago") {
				return true
			}
		case 'y':
			if hasPrefixFold(rest, "yesterday") {
				return true
			}
		case 't', 'n', 'l', 'c', 'i':
			if hasPrefixFold(rest, "today") || hasPrefixFold(rest, "tonight") || hasPrefixFold(rest, "tomorrow") {
				return true
			}
			for _, w := range []string{"this", "next", "last", "coming", "in"} { // (a space after it: the field's end)
				if len(rest) == len(w) && hasPrefixFold(rest, w) {
					return true
				}
			}
		}
	}
	return false
}

// MayEndIn reports whether a phrase Resolve changes may end in f, a field of a text, having started in it or in the
// field before (MayStartIn): f holds a phrase alone ("yesterday", "ago"), or its first word may go on from "this",
// "next", "last", "coming" or "in" at the end of the field before (a word of time, a weekday, a number), or it has no
// ASCII word to go on with (resolve then reads the word after it) or is not ASCII. Resolve leaves a text as it is unless
// one of its fields MayStartIn and it or the field after it MayEndIn ("in the morning", "this is", "last one" and
// most texts MayStartIn finds are passed over this way).
func MayEndIn(f string) bool {
	var b [9]byte
	w0 := nextWord(f)
	w := lowerWord(&b, w0)
	if _, wd := weekdays[string(w)]; wd || w0 == "" || timeWords[string(w)] || numbers[string(w)] > 0 || w0[0] <= '9' || !sentence.IsASCII(f) {
		return true // (a word's first byte is a letter or a digit)
	}
	for i := 0; i < len(f); i++ {
		if rest := f[i:]; (i == 0 || !wordByte(f[i-1])) && (hasPrefixFold(rest, "ago") || hasPrefixFold(rest, "yesterday") ||
			hasPrefixFold(rest, "today") || hasPrefixFold(rest, "tonight") || hasPrefixFold(rest, "tomorrow")) {
			return true
		}
	}
	return false
}

// mayStart are the bytes, in either case, the phrases MayHave looks for start with (" ago" apart).
var mayStart = [256]bool{'y': true, 't': true, 'n': true, 'l': true, 'c': true, 'i': true,
	'Y': true, 'T': true, 'N': true, 'L': true, 'C': true, 'I': true}

// timeWords are the words after "this", "next", "last" or "coming" that
// match resolves.
var timeWords = map[string]bool{"week": true, "weekend": true, "month": true, "year": true, "morning": true,
	"afternoon": true, "evening": true, "night": true}

// hasPrefixFold reports whether s starts with the lower-case ASCII p, its
// letters in either case.
func hasPrefixFold(s, p string) bool {
	if len(s) < len(p) {
		return false
	}
	for i := 0; i < len(p); i++ {
		if sentence.LowerByte(s[i]) != p[i] {
			return false
		}
	}
	return true
}

// wordByte reports an ASCII letter or digit: a byte inside a word.
func wordByte(c byte) bool { return wordBytes[c] }

// wordBytes are the ASCII letters and digits (wordByte).
var wordBytes = func() (t [256]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
	}
	return t
}()

// timeWord reports whether the next word of the ASCII text l is one of
// timeWords or a weekday, in either case.
func timeWord(l string) bool {
	var b [len("wednesday")]byte // (the longest of them)
	w := lowerWord(&b, nextWord(l))
	_, wd := weekdays[string(w)]
	return wd || timeWords[string(w)]
}

// nextWord is the first word of the ASCII text l, as words reads it.
func nextWord(l string) string {
	i := 0
	for i < len(l) && !wordByte(l[i]) {
		i++
	}
	j := i
	for j < len(l) && (wordByte(l[j]) || l[j] == '\'') {
		j++
	}
	return l[i:j]
}

// lowerWord is the ASCII word w lower-cased in b; nil when it is longer.
func lowerWord(b *[9]byte, w string) []byte {
	if len(w) > len(b) {
		return nil
	}
	for i := 0; i < len(w); i++ {
		b[i] = sentence.LowerByte(w[i])
	}
	return b[:len(w)]
}

// Resolve writes the calendar date after each relative date of s,
// resolved against at. A zero at leaves s as it is.
func Resolve(s string, at time.Time) string {
	if at.IsZero() || !MayHave(s) {
		return s
	}
	return resolve(s, 0, at, true)
}

// ResolveLikely is Resolve for a text likely to hold a relative date (one of
// its fields MayStartIn and it or the next MayEndIn): the same result,
// without reading the text for MayHave first, nor before from, the start of
// the field two before the first such one (0 for the text's start). A
// phrase resolve finds implies MayHave but one ending in "ago", which then
// reads it.
func ResolveLikely(s string, from int, at time.Time) string {
	if at.IsZero() {
		return s
	}
	return resolve(s, from, at, false)
}

// resolve is Resolve without MayHave's check when mayHave (MayHave(s) is
// known), and with it only for a phrase ending in "ago" else; its words
// from the byte from (a word's start).
func resolve(s string, from int, at time.Time, mayHave bool) string {
	var day time.Time // (read at the first word a phrase may start at)
	var arr [48]word
	var nb [48]byte // (a note's room: "the weekend before 31 Sep 2006" and longer ones)
	ws := words(arr[:0], s, from)
	var b strings.Builder
	last := 0
	for i := 0; i < len(ws); i++ {
		if w := ws[i]; w.ascii && startLens[s[w.start]|0x20]>>min(w.end-w.start, 15)&1 == 0 && (i+2 >= len(ws) || !isAgo(s, ws[i+2])) {
			continue // (the ASCII words match starts with have startLens' letters and lengths, or are two before "ago")
		}
		for k := i; k < min(i+3, len(ws)); k++ { // (the words match reads)
			if ws[k].lower == "" {
				ws[k].lower = strings.ToLower(s[ws[k].start:ws[k].end])
			}
		}
		if day.IsZero() {
			day = time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, at.Location())
		}
		n, note := match(nb[:0], ws, i, day)
		if n == 0 {
			continue
		}
		if n == 3 && !mayHave && isAgo(s, ws[i+2]) { // (the other phrases imply MayHave: none is resolved before if it is false)
			if !MayHave(s) {
				return s
			}
			mayHave = true
		}
		end := ws[i+n-1].end
		if strings.HasPrefix(strings.TrimLeft(s[end:], " "), "(") {
			i += n - 1
			continue // already resolved
		}
		if last == 0 {
			b.Grow(len(s) + len(" (the weekend before 31 Sep 2006)")) // (room for s and a note)
		}
		b.WriteString(s[last:end])
		b.WriteString(" (")
		b.Write(note)
		b.WriteString(")")
		last = end
		i += n - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// startLens are the lengths, a bit each, of the words match starts with ("yesterday", "in", …) by their first letter
// lower-cased.
var startLens = [256]uint16{'y': 1 << 9, 't': 1<<4 | 1<<5 | 1<<7 | 1<<8, 'n': 1 << 4, 'l': 1 << 4, 'c': 1 << 6, 'i': 1 << 2}

// isAgo reports whether w of s is "ago", in either case.
func isAgo(s string, w word) bool { return w.end-w.start == 3 && hasPrefixFold(s[w.start:], "ago") }

// date appends d to b as Layout writes it.
func date(b []byte, d time.Time) []byte {
	y, m, dd := d.Date()
	if y < 1000 || y > 9999 {
		return d.AppendFormat(b, Layout)
	}
	return strconv.AppendInt(append(append(append(strconv.AppendInt(b, int64(dd), 10), ' '), m.String()[:3]...), ' '), int64(y), 10)
}

// match reports how many words from ws[i] make a relative date (0 for
// none), and appends to b the note to write after them.
func match(b []byte, ws []word, i int, day time.Time) (int, []byte) {
	w := ws[i].lower
	next := func(k int) string {
		if i+k < len(ws) && !ws[i+k-1].stop {
			return ws[i+k].lower
		}
		return ""
	}
	switch w {
	case "yesterday":
		return 1, date(b, day.AddDate(0, 0, -1))
	case "today", "tonight":
		return 1, date(b, day)
	case "tomorrow":
		return 1, date(b, day.AddDate(0, 0, 1))
	case "next", "this", "last", "coming":
		n := next(1)
		if wd, ok := weekdays[n]; ok {
			diff := (int(wd) - int(day.Weekday()) + 7) % 7
			switch w {
			case "next", "coming":
				if diff == 0 {
					diff = 7
				}
			case "last":
				diff -= 7
				if diff == 0 {
					diff = -7
				}
			}
			return 2, date(b, day.AddDate(0, 0, diff))
		}
		switch n {
		case "week", "weekend":
			rel := "after" // (next, coming)
			switch w {
			case "this":
				rel = "of"
			case "last":
				rel = "before"
			}
			return 2, date(append(append(append(append(append(b, "the "...), n...), ' '), rel...), ' '), day)
		case "month":
			switch w {
			case "next", "coming":
				return 2, firstOfMonth(day, 1).AppendFormat(b, "January 2006")
			case "last":
				return 2, firstOfMonth(day, -1).AppendFormat(b, "January 2006")
			default:
				return 2, day.AppendFormat(b, "January 2006")
			}
		case "year":
			switch w {
			case "next", "coming":
				return 2, strconv.AppendInt(b, int64(day.Year()+1), 10)
			case "last":
				return 2, strconv.AppendInt(b, int64(day.Year()-1), 10)
			default:
				return 2, strconv.AppendInt(b, int64(day.Year()), 10)
			}
		case "morning", "afternoon", "evening":
			if w == "this" {
				return 2, date(b, day)
			}
		case "night":
			switch w {
			case "last":
				return 2, date(b, day.AddDate(0, 0, -1))
			case "this":
				return 2, date(b, day)
			}
		}
	case "in":
		// "in three days", "in 2 weeks"
		if k, unit, ok := count(next(1), next(2)); ok {
			return 3, shifted(b, day, k, unit, "")
		}
	default:
		// "three days ago", "a week ago" (ago first: most words are followed by no "ago")
		if next(2) == "ago" {
			if k, unit, ok := count(w, next(1)); ok {
				return 3, shifted(b, day, -k, unit, "about ")
			}
		}
	}
	return 0, b
}

// count reads "<number> <unit>" ("two days", "3 weeks").
func count(n, unit string) (int, string, bool) {
	k, ok := numbers[n]
	if !ok {
		if n == "" || n[0] < '0' || n[0] > '9' {
			return 0, "", false // (not a number: no error to build)
		}
		v, err := strconv.Atoi(n)
		if err != nil || v <= 0 || v > 400 {
			return 0, "", false
		}
		k = v
	}
	unit = strings.TrimSuffix(unit, "s")
	switch unit {
	case "day", "week", "month", "year":
		return k, unit, true
	}
	return 0, "", false
}

func shifted(b []byte, day time.Time, k int, unit, approx string) []byte {
	switch unit {
	case "day":
		return date(b, day.AddDate(0, 0, k))
	case "week":
		return date(append(b, approx...), day.AddDate(0, 0, 7*k))
	case "month":
		return firstOfMonth(day, k).AppendFormat(b, "January 2006")
	default:
		return strconv.AppendInt(b, int64(day.Year()+k), 10)
	}
}

func firstOfMonth(day time.Time, k int) time.Time {
	return time.Date(day.Year(), day.Month()+time.Month(k), 1, 0, 0, 0, 0, day.Location())
}
