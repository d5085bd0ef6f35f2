package sentence

import "unicode/utf8"

// load64 is the first eight bytes of s, little-endian: one load (s[i:i+8] inlined).
func load64(s string) uint64 {
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 | uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// RuneLen is utf8.RuneCountInString(s), counting ASCII eight bytes at a time.
func RuneLen(s string) int {
	i := 0
	for i+8 <= len(s) && load64(s[i:i+8])&0x8080808080808080 == 0 {
		i += 8
	}
	return i + utf8.RuneCountInString(s[i:])
}

// IsASCII reports whether every byte of s is below utf8.RuneSelf, reading eight bytes at a time.
func IsASCII(s string) bool {
	for len(s) >= 8 && load64(s)&0x8080808080808080 == 0 {
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// IsPlain reports whether every byte of s is printable ASCII (' ' to '~') and no two spaces are next to each other,
// reading eight bytes at a time.
func IsPlain(s string) bool {
	i, sp := 0, uint64(0) // (sp: bit 7 set when the byte before the eight read is a space)
	for ; i+8 <= len(s); i += 8 {
		x := load64(s[i : i+8])
		t := x ^ 0x2020202020202020
		z := ^((t&0x7f7f7f7f7f7f7f7f + 0x7f7f7f7f7f7f7f7f) | t) & 0x8080808080808080 // (bit 7 of each space)
		if ((x-0x2020202020202020)&^x|(x+0x0101010101010101)|x)&0x8080808080808080 != 0 || z&(z>>8|sp) != 0 {
			return false // (a byte below ' ' borrows, one above '~' carries, only from itself up: either sets a bit 7 of its own)
		}
		sp = z >> 56
	}
	for i = max(i-1, 0); i < len(s); i++ { // (from the last byte read: a space there and one after it)
		if c := s[i]; c < ' ' || c > '~' || c == ' ' && i+1 < len(s) && s[i+1] == ' ' {
			return false
		}
	}
	return true
}

// LowerByte is c lower-cased when it is an ASCII capital letter.
func LowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
