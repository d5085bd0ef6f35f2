package sentence

import (
	"math/bits"
	"unicode"
	"unicode/utf8"
)

// NextField is the first of s[i:]'s fields (as strings.Fields splits s)
// and the index past it (or past the space after it); "" when there is
// none. It is strings.FieldsSeq without a call per field, fast on ASCII
// words between single spaces:
//
//	for f, i := NextField(s, 0); f != ""; f, i = NextField(s, i) { … }
func NextField(s string, i int) (string, int) {
	start := i
	for i+8 <= len(s) { // eight bytes at a time: the first that is not ' ' < b < utf8.RuneSelf
		x := load64(s[i : i+8])
		if m := ((x-0x2121212121212121)&^x | x) & 0x8080808080808080; m != 0 { // (a borrow only runs up from such a byte)
			if i += bits.TrailingZeros64(m) >> 3; s[i] == ' ' && i > start {
				return s[start:i], i + 1 // (the common end: the space is passed over too)
			}
			break
		}
		i += 8
	}
	if i == start && i < len(s) && s[i] == ' ' { // (spaces before the field: rarely, as the space after one is passed over)
		for i < len(s) && s[i] == ' ' {
			i++
		}
		return NextField(s, i)
	}
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

// AppendFields appends strings.Fields(s) to dst (a caller's array: no
// allocation while it has room).
func AppendFields(dst []string, s string) []string {
	for f, i := NextField(s, 0); f != ""; f, i = NextField(s, i) {
		dst = append(dst, f)
	}
	return dst
}
