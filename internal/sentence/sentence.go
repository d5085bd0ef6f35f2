// Package sentence clamps text to a character budget at a sentence
// boundary. It has no dependencies so that both the engine (the last
// resort of the summary budget) and the public client (realtime
// instructions) can use it.
package sentence

import (
	"strings"
	"unicode"
)

// Clamp cuts s to at most maxChars runes, at the last sentence end
// (".", "!" or "?", optionally followed by closing quotes or brackets, then
// a space or the end of s) that keeps at least half the budget. Failing
// that it cuts at the last word boundary and appends "…", still within
// maxChars. The result is never empty for non-blank s and maxChars >= 1.
func Clamp(s string, maxChars int) string {
	s = strings.TrimSpace(s)
	if maxChars <= 0 {
		return ""
	}
	r := []rune(s)
	if len(r) <= maxChars {
		return s
	}

	// Sentence boundary: end index e (exclusive) <= maxChars.
	for e := maxChars; e >= 1; e-- {
		if e < maxChars/2 {
			break
		}
		if !sentenceEnd(r, e) {
			continue
		}
		if out := strings.TrimSpace(string(r[:e])); out != "" {
			return out
		}
	}

	// Word boundary, leaving room for the ellipsis.
	limit := maxChars - 1
	if limit == 0 {
		return "…"
	}
	cut := limit
	for i := limit; i > 0; i-- {
		if unicode.IsSpace(r[i]) {
			cut = i
			break
		}
	}
	out := strings.TrimRightFunc(string(r[:cut]), func(c rune) bool {
		return unicode.IsSpace(c) || strings.ContainsRune(",;:-–—", c)
	})
	if out == "" {
		// One long word: a hard cut is the only option.
		out = string(r[:limit])
	}
	return out + "…"
}

// sentenceEnd reports whether r[:e] ends a sentence: r[e-1] is a closing
// quote/bracket or terminal punctuation, the run of closers is preceded by
// . ! or ?, and r[e] (if any) is a space.
func sentenceEnd(r []rune, e int) bool {
	if e < len(r) && !unicode.IsSpace(r[e]) {
		return false
	}
	i := e - 1
	for i >= 0 && strings.ContainsRune(`"'”’)]»`, r[i]) {
		i--
	}
	return i >= 0 && strings.ContainsRune(".!?", r[i])
}
