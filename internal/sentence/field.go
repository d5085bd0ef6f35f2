package sentence

import (
	"unicode"
	"unicode/utf8"
)

// NextField is the first of s[i:]'s fields (as strings.Fields splits s)
// and the index past it; "" when there is none. It is strings.FieldsSeq
// without a call per field, fast on ASCII words between single spaces:
//
//	for f, i := NextField(s, 0); f != ""; f, i = NextField(s, i) { … }
func NextField(s string, i int) (string, int) {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	start := i
	for i < len(s) && s[i]-'!' < utf8.RuneSelf-'!' { // (' ' < s[i] < utf8.RuneSelf)
		i++
	}
	if i == len(s) || s[i] == ' ' {
		if i > start {
			return s[start:i], i
		}
		return "", i
	}
	// other white space, or not ASCII: rune by rune
	begin := start
	if i == start {
		begin = -1
	}
	for i < len(s) {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		if space := unicode.IsSpace(r); space && begin >= 0 {
			return s[begin:i], i
		} else if !space && begin < 0 {
			begin = i
		}
		i += n
	}
	if begin < 0 {
		return "", i
	}
	return s[begin:], i
}
