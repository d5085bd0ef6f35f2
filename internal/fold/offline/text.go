package offline

import (
	"slices"
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
	if isCleanASCII(s) && (maxRunes <= 0 || len(s) <= maxRunes) {
		return s // what sanitizeText returns
	}
	return sanitizeText(s, maxRunes)
}

func sanitizeText(s string, maxRunes int) string {
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
		case r >= utf8.RuneSelf && // (no ASCII rune is in these tables)
			(unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) || unicode.Is(unicode.Cs, r)):
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

// isCleanASCII reports whether s is printable ASCII words separated by
// single spaces, which sanitize returns unchanged.
func isCleanASCII(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return s == ""
	}
	// Eight bytes at a time (a previous summary is thousands of bytes):
	// per-byte masks with the high bit of a byte set where it is a space,
	// or where it is not printable ASCII.
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	prevSpace := false // s[i-1] == ' '
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8] // (one bounds check; the loads combine into one)
		x := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		y := x &^ highs                                // low seven bits (no carries below)
		below := ^(y + (0x80-0x21)*ones) & highs       // < 0x21
		del := (y + ones) & highs                      // 0x7f
		z := x ^ 0x20*ones                             // zero where a space
		space := ^((z&^highs + 0x7f*ones) | z) & highs // == ' '
		if x&highs|del|below&^space != 0 {
			return false
		}
		if space&(space<<8) != 0 || prevSpace && space&0x80 != 0 {
			return false // two spaces in a row
		}
		prevSpace = space>>63 != 0
	}
	for ; i < len(s); i++ { // (s[i-1] is checked here again)
		c := s[i]
		if c == ' ' {
			if s[i-1] == ' ' {
				return false
			}
			continue
		}
		if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
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

// isDottedAbbrev reports words like "e.g", "i.e", "u.s", "a.m". (A word
// of the pattern has a '.' at index 1: no separate search for one.)
func isDottedAbbrev[S ~string | ~[]byte](w S) bool {
	if len(w) < 3 {
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
func splitSentences(text string) []string { return appendSentences(nil, text) }

// appendSentences appends the sentences of text to dst.
func appendSentences(dst []string, text string) []string {
	for len(text) > 0 {
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		// The line's sentences go straight to dst; they are taken out again
		// only in the rare case that one needs shortening.
		mark := len(dst)
		dst = appendLine(dst, line)
		short := true
		for _, s := range dst[mark:] {
			short = short && len(s) <= maxTokenRunes
		}
		if short {
			continue // no blob, not long: the common case
		}
		sents := slices.Clone(dst[mark:])
		dst = dst[:mark]
		for _, s := range sents {
			if len(s) <= maxTokenRunes {
				dst = append(dst, s)
				continue
			}
			if s = elideBlobs(s); runeLen(s) <= maxSentenceRunes {
				dst = append(dst, s) // chunkLong's common case
				continue
			}
			for k, c := range chunkLong(s, maxSentenceRunes) {
				if k > 0 {
					c = upperFirstCommon(c) // a clause that now starts a sentence
				}
				dst = append(dst, c)
			}
		}
	}
	return dst
}

// appendLine appends the sentences of one line to out.
func appendLine(out []string, line string) []string {
	if !utf8.ValidString(line) {
		line = string([]rune(line)) // invalid bytes become U+FFFD, one each
	}
	start := 0
	emit := func(end int) {
		s := strings.TrimSpace(line[start:end])
		if s != "" {
			out = append(out, s)
		}
		start = end
	}
	// i is the byte offset of a rune r; end is the offset after the run of
	// terminators and closers that r starts, last its final rune.
	for i := 0; i < len(line); {
		if !termOrHigh[line[i]] {
			i++ // an ASCII byte that ends no sentence: the common case
			continue
		}
		r, size := utf8.DecodeRuneInString(line[i:])
		if !isTerm(r) {
			i += size
			continue
		}
		last, end := r, i+size
		for end < len(line) {
			nr, ns := utf8.DecodeRuneInString(line[end:])
			if !isTerm(nr) && !isCloser(nr) {
				break
			}
			last, end = nr, end+ns
		}
		if end < len(line) {
			if nr, _ := utf8.DecodeRuneInString(line[end:]); !unicode.IsSpace(nr) && !isCJKTerm(last) {
				i = end
				continue
			}
		}
		run := line[i:end]
		ellipsis := strings.Contains(run, "..") || strings.ContainsRune(run, '\u2026')
		if r == '.' && !ellipsis && !strings.ContainsAny(run, "!?") {
			if isAbbrev(line[start:i]) {
				i = end
				continue
			}
		}
		if ellipsis && !strings.ContainsAny(run, "!?") && end < len(line) {
			k := end
			var rk rune
			for k < len(line) {
				var sk int
				rk, sk = utf8.DecodeRuneInString(line[k:])
				if !unicode.IsSpace(rk) {
					break
				}
				k += sk
			}
			if k < len(line) && !unicode.IsUpper(rk) {
				i = end
				continue
			}
		}
		emit(end)
		i = end
	}
	emit(len(line))
	return out
}

// termOrHigh flags the bytes where appendLine looks for a sentence end:
// '.', '!', '?' and every byte of a multi-byte rune.
var termOrHigh = func() (t [256]bool) {
	t['.'], t['!'], t['?'] = true, true, true
	for c := utf8.RuneSelf; c < 256; c++ {
		t[c] = true
	}
	return t
}()

// isAbbrev reports whether the last word of s is an abbreviation:
// abbrevs[w] || isDottedAbbrev(w) for w = lastWord(s), without allocating
// for ASCII words.
func isAbbrev(s string) bool {
	var buf [lowerBufLen]byte
	w := trimOpeners(s[lastSpaceEnd(s):])
	b, ok := lowerASCII(&buf, w)
	if !ok { // not ASCII, or long
		w := lastWord(s)
		return abbrevs[w] || isDottedAbbrev(w)
	}
	return lexicon.getLower(w)&lxAbbrev != 0 || isDottedAbbrev(b) // (abbrevs[string(b)])
}

// lastSpaceEnd is strings.LastIndexFunc(s, unicode.IsSpace) + 1 (0 when s
// has no space), without a call through a function value per rune.
func lastSpaceEnd(s string) int {
	for k := len(s); k > 0; {
		if c := s[k-1]; c < utf8.RuneSelf {
			if asciiSpace[c] {
				return k
			}
			k--
			continue
		}
		r, size := utf8.DecodeLastRuneInString(s[:k])
		if unicode.IsSpace(r) {
			return k
		}
		k -= size
	}
	return 0
}

// trimOpeners is strings.TrimLeft(w, "\"'([{*_") without building the
// cutset on every call.
func trimOpeners(w string) string {
	for len(w) > 0 {
		switch w[0] {
		case '"', '\'', '(', '[', '{', '*', '_':
			w = w[1:]
		default:
			return w
		}
	}
	return w
}

// lastWord returns the lowercased last word of s without leading
// punctuation.
func lastWord(s string) string {
	k := len(s)
	for k > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:k])
		if unicode.IsSpace(r) {
			break
		}
		k -= size
	}
	w := strings.ToLower(s[k:])
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
	var arr [64]string
	f := appendFields(arr[:0], s) // (strings.Fields, on the stack for a sentence)
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

// appendFields appends the fields of s, as strings.Fields splits them, to
// dst (callers pass a stack array to avoid allocating).
func appendFields(dst []string, s string) []string {
	start := -1
	for i := 0; i < len(s); {
		c := s[i]
		size := 1
		space := false
		if c < utf8.RuneSelf {
			space = asciiSpace[c]
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			space = unicode.IsSpace(r)
		}
		if space {
			if start >= 0 {
				dst = append(dst, s[start:i])
				start = -1
			}
		} else if start < 0 {
			start = i
		}
		i += size
	}
	if start >= 0 {
		dst = append(dst, s[start:])
	}
	return dst
}

// word is one field of a sentence with the forms that the passes over its
// words compare, found once: a sentence is split into words once, and its
// words are lowercased and looked up in the lexicon once, for every pass.
type word struct {
	w  string // the field
	c  string // core(w)
	n  string // norm(w): strings.ToLower(c)
	lx uint32 // lexicon.get(n): the word lists n is in
}

// appendWords appends the word of each field of fs to dst. The lowercased
// forms that are no substring of their field share one string.
func appendWords(dst []word, fs []string) []word {
	var bufArr [128]byte
	buf := bufArr[:0]
	type pend struct{ at, to int32 } // dst[at].n is buf[previous to:to]
	var pendArr [8]pend
	pending := pendArr[:0]
	dst = slices.Grow(dst, len(fs))
	for _, f := range fs {
		// (the fields are set in place: no copy of a whole word, which
		// the garbage collector's write barrier would scan)
		dst = dst[:len(dst)+1]
		d := &dst[len(dst)-1]
		c := core(f)
		d.w, d.c = f, c
		n, nb, k := lowerParts(c)
		if k > 0 {
			buf = append(buf, nb[:k]...)
			pending = append(pending, pend{int32(len(dst) - 1), int32(len(buf))})
			d.n, d.lx = "", 0
			continue
		}
		d.n, d.lx = n, lexicon.get(n)
	}
	if len(pending) > 0 {
		all := string(buf)
		from := int32(0)
		for _, p := range pending {
			n := all[from:p.to]
			dst[p.at].n, dst[p.at].lx = n, lexicon.get(n)
			from = p.to
		}
	}
	return dst
}

var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// isSingleSpaced reports whether s has no leading, trailing or repeated
// white space and no white space but ' ', that is whether
// strings.Join(strings.Fields(s), " ") == s.
func isSingleSpaced(s string) bool {
	if isCleanASCII(s) {
		return true // (eight bytes at a time)
	}
	space := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if unicode.IsSpace(r) {
				return false
			}
			i += size - 1
			space = false
			continue
		}
		if asciiSpace[c] {
			if c != ' ' || space {
				return false
			}
			space = true
			continue
		}
		space = false
	}
	return !space || s == ""
}

// trimPunct is the punctuation core strips: the ASCII characters of
// punctASCII and the ellipsis '…'.
const trimPunct = "\"'()[]{}<>,.;:!?*_~`\u2026"

// punctASCII flags the ASCII bytes of trimPunct.
var punctASCII = func() (t [utf8.RuneSelf]bool) {
	for _, r := range trimPunct {
		if r < utf8.RuneSelf {
			t[r] = true
		}
	}
	return t
}()

const ellipsis = "\u2026"

// trimPunctLeft is strings.TrimLeft(w, trimPunct) without building the
// cutset on every call.
func trimPunctLeft(w string) string {
	for len(w) > 0 {
		if c := w[0]; c < utf8.RuneSelf {
			if !punctASCII[c] {
				return w
			}
			w = w[1:]
		} else if strings.HasPrefix(w, ellipsis) {
			w = w[len(ellipsis):]
		} else {
			return w
		}
	}
	return w
}

// trimPunctRight is strings.TrimRight(w, trimPunct).
func trimPunctRight(w string) string {
	for len(w) > 0 {
		if c := w[len(w)-1]; c < utf8.RuneSelf {
			if !punctASCII[c] {
				return w
			}
			w = w[:len(w)-1]
		} else if strings.HasSuffix(w, ellipsis) {
			w = w[:len(w)-len(ellipsis)]
		} else {
			return w
		}
	}
	return w
}

// core strips surrounding punctuation from a word.
func core(w string) string { return trimPunctRight(trimPunctLeft(w)) }

// splitWord splits a word into leading punctuation, core and trailing
// punctuation.
func splitWord(w string) (pre, mid, suf string) {
	mid = trimPunctLeft(w)
	pre = w[:len(w)-len(mid)]
	c := trimPunctRight(mid)
	suf = mid[len(c):]
	return pre, c, suf
}

// collapseRuns reduces runs of the same rune longer than max to max.
func collapseRuns(s string, max int) string {
	if !hasRunOver(s, max) {
		return s
	}
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

// hasRunOver reports whether s has a run of the same rune longer than max
// (or an invalid byte, which collapseRuns rewrites).
func hasRunOver(s string, max int) bool {
	i := 0
	run := 0
	for ; i < len(s) && s[i] < utf8.RuneSelf; i++ { // ASCII without decoding
		if i > 0 && s[i] == s[i-1] {
			run++
			if run > max {
				return true
			}
		} else {
			run = 1
		}
	}
	if i == len(s) {
		return false
	}
	var prev rune
	if i > 0 {
		prev = rune(s[i-1]) // (run counts it)
	}
	for _, r := range s[i:] {
		if r == utf8.RuneError {
			return true
		}
		if r == prev {
			run++
			if run > max {
				return true
			}
		} else {
			prev, run = r, 1
		}
	}
	return false
}

// lowerBufLen is the longest word that lowercase lookups handle without
// allocating.
const lowerBufLen = 64

// lowerASCII writes the lowercase form of s to buf and returns it, when s is
// ASCII and fits; otherwise ok is false and the caller uses strings.ToLower.
func lowerASCII(buf *[lowerBufLen]byte, s string) (b []byte, ok bool) {
	if len(s) > len(buf) {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return nil, false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return buf[:len(s)], true
}

// hasLower is set[strings.ToLower(s)] without allocating for short ASCII s.
func hasLower(set map[string]bool, s string) bool {
	var buf [lowerBufLen]byte
	if b, ok := lowerASCII(&buf, s); ok {
		return set[string(b)]
	}
	return set[strings.ToLower(s)]
}

// lowerEq reports strings.ToLower(s) == lower.
func lowerEq(s, lower string) bool {
	if len(s) == len(lower) {
		ascii := true
		for i := 0; i < len(s); i++ {
			c := s[i]
			if c >= utf8.RuneSelf {
				ascii = false
				break
			}
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != lower[i] {
				return false
			}
		}
		if ascii {
			return true
		}
	} else if isASCII(s) {
		return false // ASCII lowercasing keeps the length
	}
	return strings.ToLower(s) == lower
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// norm is the comparison form of a word: lowercase, no surrounding
// punctuation, curly apostrophes straightened.
func norm(w string) string {
	return strings.ToLower(core(w))
}

// normParts is norm(w) either as n or, when w is a short ASCII word with
// upper-case letters, as b[:k]. A caller that converts b[:k] to a string
// that does not escape gets it on the stack:
//
//	n, b, k := normParts(w)
//	if k > 0 {
//		n = string(b[:k])
//	}
func normParts(w string) (n string, b [normBufLen]byte, k int) { return lowerParts(core(w)) }

// lowerParts is normParts for strings.ToLower(s).
func lowerParts(s string) (n string, b [normBufLen]byte, k int) {
	if !isASCII(s) {
		return strings.ToLower(s), b, 0
	}
	upper := false
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			upper = true
			break
		}
	}
	if !upper {
		return s, b, 0
	}
	if len(s) > len(b) {
		return strings.ToLower(s), b, 0
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b[i] = c
	}
	return "", b, len(s)
}

// normBufLen is the size of the compiler's stack buffer for short strings
// that do not escape.
const normBufLen = 32

// plain returns " w1 w2 … " of lowercased words with punctuation other than
// apostrophes removed, for phrase matching with spaces as word boundaries.
func plain(s string) string {
	var arr [256]byte // (on the stack for a sentence: one allocation, the string)
	return string(appendPlain(arr[:0], s))
}

// appendPlain appends plain(s) to dst.
func appendPlain(b []byte, s string) []byte {
	b = append(b, ' ')
	space := true
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '\'' {
				b = append(b, c)
				space = false
			} else if !space {
				b = append(b, ' ')
				space = true
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		r = unicode.ToLower(r) // as strings.ToLower; invalid bytes stay RuneError
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b = utf8.AppendRune(b, r)
			space = false
		} else if !space {
			b = append(b, ' ')
			space = true
		}
	}
	if !space {
		b = append(b, ' ')
	}
	return b
}

func hasLetterOrDigit(s string) bool {
	i := 0
	for ; i < len(s) && s[i] < utf8.RuneSelf; i++ { // ASCII without decoding
		if c := s[i]; '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'z' {
			return true
		}
	}
	for _, r := range s[i:] {
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

// allLettersExcept is isAllLetters(strings.ReplaceAll(s, string(skip), "")).
func allLettersExcept(s string, skip rune) bool {
	letters := false
	i := 0
	for ; i < len(s); i++ { // ASCII without decoding
		c := s[i]
		if c >= utf8.RuneSelf {
			break
		}
		if rune(c) == skip {
			continue
		}
		if c|0x20 < 'a' || c|0x20 > 'z' {
			return false
		}
		letters = true
	}
	for _, r := range s[i:] {
		if r == skip {
			continue
		}
		if !unicode.IsLetter(r) {
			return false
		}
		letters = true
	}
	return letters
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
