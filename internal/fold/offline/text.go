package offline

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits that keep hostile input cheap to process.
const (
	maxTurnRunes     = 4000  // text of one turn that is analysed
	maxPrevRunes     = 20000 // previous summary that is analysed
	maxSentenceRunes = 240   // longer sentences are split at clauses
	maxTokenRunes    = 160   // longer tokens (blobs) are elided
)

// sanitize makes s valid, printable UTF-8: invalid bytes and format
// characters (zero-width, bidi overrides) are removed, control characters
// become spaces, curly quotes become ASCII quotes, runs of spaces collapse and
// blank lines are removed. Line breaks are kept (they separate sentences). At
// most maxRunes runes are kept (0 = no limit).
func sanitize(s string, maxRunes int) string {
	if maxRunes > 0 && len(s) > maxRunes*4 {
		s = s[:maxRunes*4]
	}
	s = strings.ToValidUTF8(s, "")
	var b strings.Builder
	b.Grow(len(s))
	n := 0
	pendingSpace, pendingLine := false, false
	for _, r := range s {
		switch {
		case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' || r == '\u0085':
			pendingLine = true
			continue
		case r == utf8.RuneError:
			continue
		case r == '\t' || unicode.IsSpace(r) || (unicode.IsControl(r)):
			pendingSpace = true
			continue
		case unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) || unicode.Is(unicode.Cs, r):
			continue
		case r == '\u2018' || r == '\u2019' || r == '\u02bc' || r == '\u2032':
			r = '\''
		case r == '\u201c' || r == '\u201d' || r == '\u201e' || r == '\u2033':
			r = '"'
		}
		if b.Len() > 0 {
			if pendingLine {
				b.WriteByte('\n')
				n++
			} else if pendingSpace {
				b.WriteByte(' ')
				n++
			}
		}
		pendingSpace, pendingLine = false, false
		if maxRunes > 0 && n >= maxRunes {
			// cut back to a word boundary rather than leave half a word
			out := b.String()
			if i := strings.LastIndexAny(out, " \n"); i > len(out)/2 {
				out = out[:i]
			}
			return out
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// oneLine sanitizes s and joins its lines with spaces.
func oneLine(s string, maxRunes int) string {
	return strings.TrimSpace(strings.ReplaceAll(sanitize(s, maxRunes), "\n", " "))
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// abbreviations that end with a period without ending a sentence.
var abbrevs = toSet("mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc",
	"approx", "inc", "ltd", "co", "corp", "jan", "feb", "mar", "apr", "jun", "jul",
	"aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue", "tues", "wed", "thu",
	"thur", "thurs", "fri", "sat", "sun", "fig", "avg", "est", "dept", "gen", "gov",
	"lt", "col", "sgt", "capt", "mt", "ft", "vol", "pp", "ca", "cf", "al", "ave",
	"blvd", "rd", "hwy", "approx", "misc", "ref", "ver", "v")

func toSet(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

func isTerm(r rune) bool {
	return r == '.' || r == '!' || r == '?' || r == '\u2026' || isCJKTerm(r)
}

// isCJKTerm reports full-width sentence ends, which need no space after.
func isCJKTerm(r rune) bool { return r == '\u3002' || r == '\uff01' || r == '\uff1f' || r == '\uff61' }

func isCloser(r rune) bool {
	return r == '"' || r == '\'' || r == ')' || r == ']' || r == '}' || r == '*' || r == '_'
}

// isDottedAbbrev reports words like "e.g", "i.e", "u.s", "a.m".
func isDottedAbbrev(w string) bool {
	if len(w) < 3 || !strings.Contains(w, ".") {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		if i%2 == 0 {
			if c < 'a' || c > 'z' {
				return false
			}
		} else if c != '.' {
			return false
		}
	}
	return true
}

// splitSentences splits text into sentences. Line breaks always end a
// sentence; '.', '!', '?' and '…' end one when followed by whitespace,
// except after known abbreviations ("Dr.", "e.g.") and ellipses followed by
// a lowercase word. Periods inside tokens (3.5, file.go, example.com) never
// split. Overlong sentences are split further at clause boundaries.
func splitSentences(text string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		for _, s := range splitLine(line) {
			for k, c := range chunkLong(s, maxSentenceRunes) {
				if k > 0 {
					c = upperFirstCommon(c) // a clause that now starts a sentence
				}
				out = append(out, c)
			}
		}
	}
	return out
}

func splitLine(line string) []string {
	rs := []rune(line)
	var out []string
	start := 0
	emit := func(end int) {
		s := strings.TrimSpace(string(rs[start:end]))
		if s != "" {
			out = append(out, s)
		}
		start = end
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		if !isTerm(r) {
			continue
		}
		j := i
		for j+1 < len(rs) && (isTerm(rs[j+1]) || isCloser(rs[j+1])) {
			j++
		}
		if j+1 < len(rs) && !unicode.IsSpace(rs[j+1]) && !isCJKTerm(rs[j]) {
			i = j
			continue
		}
		run := string(rs[i : j+1])
		ellipsis := strings.Contains(run, "..") || strings.ContainsRune(run, '\u2026')
		if r == '.' && !ellipsis && !strings.ContainsAny(run, "!?") {
			w := lastWord(rs[start:i])
			if abbrevs[w] || isDottedAbbrev(w) {
				i = j
				continue
			}
		}
		if ellipsis && !strings.ContainsAny(run, "!?") && j+1 < len(rs) {
			k := j + 1
			for k < len(rs) && unicode.IsSpace(rs[k]) {
				k++
			}
			if k < len(rs) && !unicode.IsUpper(rs[k]) {
				i = j
				continue
			}
		}
		emit(j + 1)
		i = j
	}
	emit(len(rs))
	return out
}

// lastWord returns the lowercased last word of rs without leading punctuation.
func lastWord(rs []rune) string {
	k := len(rs)
	for k > 0 && !unicode.IsSpace(rs[k-1]) {
		k--
	}
	w := strings.ToLower(string(rs[k:]))
	return strings.TrimLeft(w, "\"'([{*_")
}

// chunkLong splits s into pieces of at most max runes, preferring clause
// boundaries and then spaces, and elides blob-like tokens.
func chunkLong(s string, max int) []string {
	s = elideBlobs(s)
	if runeLen(s) <= max {
		return []string{s}
	}
	var out []string
	rest := s
	for runeLen(rest) > max {
		rs := []rune(rest)
		cut := -1
		for i := max - 1; i > max/3; i-- {
			if (rs[i] == ',' || rs[i] == ';' || rs[i] == ':') && i+1 < len(rs) && rs[i+1] == ' ' {
				cut = i + 1
				break
			}
		}
		if cut < 0 {
			for i := max - 1; i > 0; i-- {
				if rs[i] == ' ' {
					cut = i
					break
				}
			}
		}
		if cut <= 0 {
			cut = max
		}
		piece := strings.TrimSpace(string(rs[:cut]))
		piece = strings.TrimRight(piece, ",;:")
		if piece != "" {
			out = append(out, piece)
		}
		rest = strings.TrimSpace(string(rs[cut:]))
	}
	if rest != "" {
		out = append(out, rest)
	}
	return out
}

// elideBlobs shortens tokens that are too long to be a meaningful
// identifier (base64, minified code, hashes of hashes).
func elideBlobs(s string) string {
	if runeLen(s) <= maxTokenRunes {
		return s
	}
	f := strings.Fields(s)
	changed := false
	for i, w := range f {
		if runeLen(w) > maxTokenRunes {
			f[i] = string([]rune(w)[:32]) + "..."
			changed = true
		}
	}
	if !changed {
		return s
	}
	return strings.Join(f, " ")
}

const trimPunct = "\"'()[]{}<>,.;:!?*_~`\u2026"

// core strips surrounding punctuation from a word.
func core(w string) string { return strings.Trim(w, trimPunct) }

// splitWord splits a word into leading punctuation, core and trailing
// punctuation.
func splitWord(w string) (pre, mid, suf string) {
	mid = strings.TrimLeft(w, trimPunct)
	pre = w[:len(w)-len(mid)]
	c := strings.TrimRight(mid, trimPunct)
	suf = mid[len(c):]
	return pre, c, suf
}

// collapseRuns reduces runs of the same rune longer than max to max.
func collapseRuns(s string, max int) string {
	var b strings.Builder
	var prev rune
	run := 0
	for _, r := range s {
		if r == prev {
			run++
		} else {
			prev, run = r, 1
		}
		if run <= max {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// norm is the comparison form of a word: lowercase, no surrounding
// punctuation, curly apostrophes straightened.
func norm(w string) string {
	return strings.ToLower(core(w))
}

// plain returns " w1 w2 … " of lowercased words with punctuation other than
// apostrophes removed, for phrase matching with spaces as word boundaries.
func plain(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte(' ')
	space := true
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'' {
			b.WriteRune(r)
			space = false
		} else if !space {
			b.WriteByte(' ')
			space = true
		}
	}
	if !space {
		b.WriteByte(' ')
	}
	return b.String()
}

func containsAny(p string, phrases ...string) bool {
	for _, ph := range phrases {
		if strings.Contains(p, ph) {
			return true
		}
	}
	return false
}

func hasLetterOrDigit(s string) bool {
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

func isAllLetters(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// upperFirst reports whether s starts with an uppercase letter.
func upperFirst(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return unicode.IsUpper(r)
}

// upperFirstCommon capitalizes s when its first word is a common word.
func upperFirstCommon(s string) string {
	w, _, _ := strings.Cut(s, " ")
	lw := strings.ToLower(core(w))
	if !(stopwords[lw] || sentenceStarters[lw]) {
		return s
	}
	r, size := utf8.DecodeRuneInString(s)
	if !unicode.IsLower(r) {
		return s
	}
	return string(unicode.ToUpper(r)) + s[size:]
}

// endSentence makes sure s ends with terminal punctuation.
func endSentence(s string, def byte) string {
	s = strings.TrimRight(strings.TrimSpace(s), ",;:- ")
	if s == "" {
		return s
	}
	last, _ := utf8.DecodeLastRuneInString(s)
	if isTerm(last) {
		return s
	}
	if isCloser(last) {
		t := strings.TrimRight(s, "\"')]}*_")
		if l2, _ := utf8.DecodeLastRuneInString(t); isTerm(l2) {
			return s
		}
	}
	return s + string(def)
}

// clip shortens s to at most max runes at a word boundary, marking the cut
// with "...". Words are never cut in the middle unless a single word is
// longer than max.
func clip(s string, max int) string {
	if runeLen(s) <= max {
		return s
	}
	rs := []rune(s)
	cut := -1
	for i := max - 3; i > max/3; i-- {
		if rs[i] == ' ' {
			cut = i
			break
		}
	}
	if cut < 0 {
		cut = max - 3
	}
	return strings.TrimRight(string(rs[:cut]), " ,;:") + "..."
}
