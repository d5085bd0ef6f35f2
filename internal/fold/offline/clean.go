package offline

import (
	"strings"
	"time"
)

// cleanSpeech removes what a speech transcript carries besides the words
// said: annotation tokens of transcription tools ("{disfmarker}",
// "[laughter]", "<noise>": a bracketed run of letters, digits and '_' or
// '-', alone between spaces) and the spaces that tokenizers put before
// punctuation and contractions ("we 're on , so" → "we're on, so"). Text
// without either comes back unchanged (and unallocated). Tool turns are not
// cleaned: brackets and spacing are data there.
func cleanSpeech(s string) string {
	if !needsClean(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for line := range strings.SplitSeq(s, "\n") {
		mark := b.Len()
		if mark > 0 {
			b.WriteByte('\n')
		}
		if !cleanLine(&b, line) {
			// an empty line: take back its line break
			out := b.String()[:mark]
			b.Reset()
			b.WriteString(out)
		}
	}
	return strings.TrimLeft(b.String(), ",;: \n")
}

// cleanLine writes the cleaned words of one line to b and reports whether
// it wrote any.
func cleanLine(b *strings.Builder, line string) bool {
	var arr [64]string
	wrote := false
	last := byte(0) // the last byte written on this line
	for _, w := range appendFields(arr[:0], line) {
		if isAnnotation(w) {
			// keep a sentence terminator the annotation carried
			if t := w[len(w)-1]; wrote && (t == '.' || t == '?' || t == '!') && !isTermByte(last) {
				b.WriteByte(t)
				last = t
			}
			continue
		}
		if a, ok := spelledAcronym(w); ok {
			w = a
		}
		punct := isPunctOnly(w)
		switch {
		case !wrote && punct:
			continue // nothing to attach it to
		case wrote && punct && isPunctByte(last) && w != "?" && w != "!":
			continue // ", ," → ","
		case wrote && (punct || isContraction(w)):
		default:
			if wrote {
				b.WriteByte(' ')
			}
		}
		b.WriteString(w)
		last = w[len(w)-1]
		wrote = true
	}
	return wrote
}

// spelledAcronym joins the letters of an acronym that a transcript spells
// out one letter at a time with '_' ("L_C_D_s," → "LCDs,", "T_V_" →
// "TV"): two or more single letters each followed by '_', then maybe a
// plural "s" and punctuation.
func spelledAcronym(w string) (string, bool) {
	body := strings.TrimRight(w, ".,?!;:")
	tail := w[len(body):]
	var b [32]byte
	n, letters := 0, 0
	i := 0
	for i+1 < len(body) && isASCIILetter(body[i]) && body[i+1] == '_' && n < len(b) {
		b[n] = body[i]
		n++
		letters++
		i += 2
	}
	if letters < 2 {
		return w, false
	}
	rest := body[i:]
	if rest != "" && rest != "s" {
		return w, false
	}
	return string(b[:n]) + rest + tail, true
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isTermByte(c byte) bool { return c == '.' || c == '?' || c == '!' }

func isPunctByte(c byte) bool { return strings.IndexByte(",.?!;:", c) >= 0 }

// needsClean reports whether cleanSpeech would change s: it has a
// bracket, a letter spelled out with '_' or a space before punctuation or
// an apostrophe.
func needsClean(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '[', '<', '_':
			return true
		case ' ':
			if i+1 < len(s) {
				switch s[i+1] {
				case ',', '.', '?', '!', ';', ':', '\'':
					return true
				case 'n':
					if strings.HasPrefix(s[i+1:], "n't") {
						return true
					}
				}
			}
		}
	}
	return false
}

// isAnnotation reports a token like "{vocalsound}" or "[laughter]." (a
// bracketed run of letters, digits, '_' and '-', with trailing
// punctuation).
func isAnnotation(w string) bool {
	w = strings.TrimRight(w, ".,?!;:")
	if len(w) < 3 {
		return false
	}
	open, close := w[0], w[len(w)-1]
	if !(open == '{' && close == '}' || open == '[' && close == ']' || open == '<' && close == '>') {
		return false
	}
	for i := 1; i < len(w)-1; i++ {
		c := w[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func isPunctOnly(w string) bool {
	for i := 0; i < len(w); i++ {
		switch w[i] {
		case ',', '.', '?', '!', ';', ':':
		default:
			return false
		}
	}
	return w != ""
}

// isContraction reports a detached contraction: "'s", "'re", "n't", "'ll".
func isContraction(w string) bool {
	c := strings.ToLower(strings.TrimRight(w, ".,?!;:"))
	switch c {
	case "'s", "'re", "'ll", "'ve", "'d", "'m", "n't", "'t":
		return true
	}
	return false
}

// ---- relative dates ----

var weekdays = map[string]time.Weekday{"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday,
	"wednesday": time.Wednesday, "thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday}

// resolveDates writes the calendar date after a relative one, resolved
// against at, the time the turn was said: "yesterday" → "yesterday (1 Mar
// 2026)", "next Friday" → "next Friday (13 Mar 2026)". "next/this/last
// week" gets the Monday of that week. A zero at leaves s as it is; so does
// text without a relative date word (checked without allocating).
func resolveDates(s string, at time.Time) string {
	if at.IsZero() || !mayHaveRelDate(s) {
		return s
	}
	return resolveDatesIn(s, at)
}

// resolveDatesIn is resolveDates without its filter (mayHaveRelDate).
func resolveDatesIn(s string, at time.Time) string {
	var arr [64]string
	words := appendFields(arr[:0], s)
	day := time.Date(at.Year(), at.Month(), at.Day(), 0, 0, 0, 0, at.Location())
	changed := false
	out := make([]string, 0, len(words)+2)
	for i := 0; i < len(words); i++ {
		w := words[i]
		c, cb, ck := lowerParts(core(w)) // strings.ToLower(core(w)), on the stack
		if ck > 0 {
			c = string(cb[:ck])
		}
		var d time.Time
		span := 1
		switch c {
		case "yesterday":
			d = day.AddDate(0, 0, -1)
		case "today", "tonight":
			d = day
		case "tomorrow":
			d = day.AddDate(0, 0, 1)
		case "next", "this", "last", "coming":
			if i+1 >= len(words) || w != core(w) {
				break // "last." ends a sentence; "next, Friday" is no date
			}
			n, nb, nk := lowerParts(core(words[i+1])) // strings.ToLower, on the stack
			if nk > 0 {
				n = string(nb[:nk])
			}
			if wd, ok := weekdays[n]; ok {
				diff := (int(wd) - int(day.Weekday()) + 7) % 7
				switch c {
				case "next", "coming":
					if diff == 0 {
						diff = 7
					}
				case "this":
				case "last":
					diff -= 7
					if diff == 0 {
						diff = -7
					}
				}
				d, span = day.AddDate(0, 0, diff), 2
			} else if n == "week" {
				monday := day.AddDate(0, 0, -((int(day.Weekday()) + 6) % 7))
				switch c {
				case "next", "coming":
					d = monday.AddDate(0, 0, 7)
				case "this":
					d = monday
				case "last":
					d = monday.AddDate(0, 0, -7)
				}
				span = 2
			}
		}
		if d.IsZero() {
			out = append(out, w)
			continue
		}
		last := words[i+span-1]
		c2 := core(last)
		k := strings.LastIndex(last, c2) + len(c2) // trailing punctuation starts here
		out = append(out, words[i:i+span-1]...)
		prefix := ""
		if span == 2 && strings.EqualFold(core(words[i+1]), "week") {
			prefix = "from "
		}
		out = append(out, last[:k]+" ("+prefix+d.Format("2 Jan 2006")+")"+last[k:])
		i += span - 1
		changed = true
	}
	if !changed {
		return s
	}
	return strings.Join(out, " ")
}

// mayHaveRelDate is a fast filter for resolveDates: s has one of the
// words it resolves (in any case), or in ASCII text next, this, last or
// coming before white space and a field that holds "week" or a weekday; in
// text that is not all ASCII (which case folding could turn into such
// words), next, this, last or coming before a space.
func mayHaveRelDate(s string) bool {
	ascii := -1 // isASCII(s), once asked: 0 or 1
	for i := 0; i < len(s); i++ {
		k := relDateFirst[s[i]]
		if k == 0 {
			continue
		}
		for _, a := range relDateWords[k-1] {
			if !hasPrefixFold(s[i:], a) {
				continue
			}
			if !relDateBefore[a] {
				return true
			}
			j := i + len(a)
			if j >= len(s) {
				continue
			}
			if ascii < 0 {
				ascii = 0
				if isASCII(s) {
					ascii = 1
				}
			}
			if ascii == 0 {
				if s[j]|0x20 == ' ' {
					return true
				}
				continue
			}
			if asciiSpace[s[j]] && relDateNext(s[j:]) {
				return true
			}
		}
	}
	return false
}

// relDateNext reports whether the field that s, ASCII text, starts with
// (after white space) may be "week" or a weekday in resolveDates: it holds
// one in any case.
func relDateNext(s string) bool {
	i := 0
	for i < len(s) && s[i] < 0x80 && asciiSpace[s[i]] {
		i++
	}
	j := i
	for j < len(s) && !(s[j] < 0x80 && asciiSpace[s[j]]) {
		j++
	}
	f := s[i:j]
	for k := 0; k < len(f); k++ {
		switch f[k] | 0x20 {
		case 'w':
			if hasPrefixFold(f[k:], "week") || hasPrefixFold(f[k:], "wednesday") {
				return true
			}
		case 's':
			if hasPrefixFold(f[k:], "sunday") || hasPrefixFold(f[k:], "saturday") {
				return true
			}
		case 'm':
			if hasPrefixFold(f[k:], "monday") {
				return true
			}
		case 't':
			if hasPrefixFold(f[k:], "tuesday") || hasPrefixFold(f[k:], "thursday") {
				return true
			}
		case 'f':
			if hasPrefixFold(f[k:], "friday") {
				return true
			}
		}
	}
	return false
}

// The words resolveDates looks for, by first letter: relDateFirst[c] is
// one more than the index in relDateWords of the words that start with c
// (in either case), 0 for none.
var (
	relDateWords = [][]string{{"yesterday"}, {"today", "tonight", "tomorrow", "this"}, {"next"}, {"last"}, {"coming"}}
	// relDateBefore are the words that resolve only before a weekday or
	// "week".
	relDateBefore = map[string]bool{"this": true, "next": true, "last": true, "coming": true}
	relDateFirst  = func() (t [256]uint8) {
		for k, ws := range relDateWords {
			t[ws[0][0]], t[ws[0][0]-('a'-'A')] = uint8(k+1), uint8(k+1)
		}
		return t
	}()
)
