package offline

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/reldate"
	"github.com/foldstream/foldstream/internal/sentence"
	"github.com/kljensen/snowball/english"
)

// cleanSpeech removes what a speech transcript carries besides the words said: annotation tokens of transcription tools
// ("{disfmarker}", "[laughter]", "<noise>": a bracketed run of letters, digits and '_' or '-', alone between spaces)
// and the spaces that tokenizers put before punctuation and contractions ("we 're on , so" → "we're on, so"). Text
// without either comes back unchanged (and unallocated). Tool turns are not cleaned: brackets and spacing are data
// there.
func cleanSpeech(s string) string {
	if !needsClean(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	for line := range strings.SplitSeq(s, "\n") {
		mark := len(b)
		if mark > 0 {
			b = append(b, '\n')
		}
		if b = cleanLine(b, line); len(b) == mark+min(mark, 1) {
			b = b[:mark] // an empty line: no line break
		}
	}
	return strings.TrimLeft(string(b), ",;: \n")
}

// cleanLine appends the cleaned words of one line to b.
func cleanLine(b []byte, line string) []byte {
	wrote, last := false, byte(0) // (last: the last byte written on this line)
	for _, w := range strings.Fields(line) {
		if isAnnotation(w) {
			// keep a sentence terminator the annotation carried
			if t := w[len(w)-1]; wrote && (t == '.' || t == '?' || t == '!') && strings.IndexByte(".?!", last) < 0 {
				b, last = append(b, t), t
			}
			continue
		}
		if len(w) > 3 && w[1] == '_' {
			if m := acronymRe.FindStringSubmatch(w); m != nil {
				w = strings.ReplaceAll(m[1], "_", "") + m[2]
			}
		}
		punct := w != "" && strings.Trim(w, ",.?!;:") == ""
		switch {
		case !wrote && punct:
			continue // nothing to attach it to
		case wrote && punct && strings.IndexByte(",.?!;:", last) >= 0 && w != "?" && w != "!":
			continue // ", ," → ","
		case wrote && (punct || contractions[strings.ToLower(strings.TrimRight(w, ".,?!;:"))]): // a detached contraction: "'s", "n't"
		default:
			if wrote {
				b = append(b, ' ')
			}
		}
		b, last, wrote = append(b, w...), w[len(w)-1], true
	}
	return b
}

var contractions = toSet([]string{"'s", "'re", "'ll", "'ve", "'d", "'m", "n't", "'t"})

// acronymRe is an acronym that a transcript spells out one letter at a time with '_' ("L_C_D_s," → "LCDs,", "T_V_" →
// "TV"): two or more single letters each followed by '_', then maybe a plural "s" and punctuation.
var acronymRe = regexp.MustCompile(`^((?:[A-Za-z]_){2,32})(s?[.,?!;:]*)$`)

// needsClean reports whether cleanSpeech would change s: it has a bracket, a letter spelled out with '_' or a space
// before punctuation or an apostrophe (or "n't"). Each byte costs a table load: the bytes after such a space are rare.
func needsClean(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; cleanBytes[c] && (c == '{' || c == '[' || c == '<' || c == '_' || i > 0 && s[i-1] == ' ' || c == '\'' && i > 1 && s[i-2:i] == " n" && i+1 < len(s) && s[i+1] == 't') {
			return true
		}
	}
	return false
}

var cleanBytes = [256]bool{'{': true, '[': true, '<': true, '_': true, ',': true, '.': true, '?': true, '!': true, ';': true, ':': true, '\'': true} // the bytes needsClean looks at

// isAnnotation reports a token like "{vocalsound}" or "[laughter]." (a bracketed run of letters, digits, '_' and '-',
// with trailing punctuation).
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
		if c := w[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// sanitize makes s safe to render: valid UTF-8, no control or format characters, curly quotes as ASCII, runs of spaces
// as one, line breaks kept (they end sentences); at most maxRunes runes, cut at a word.
func sanitize(s string, maxRunes int) string {
	if isPlain(s, maxRunes) {
		return s
	}
	if maxRunes > 0 && len(s) > maxRunes*4 {
		s = s[:maxRunes*4]
	}
	var b strings.Builder
	b.Grow(len(s))
	n, space, line := 0, false, false
	for _, r := range strings.ToValidUTF8(s, "") {
		switch {
		case r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029' || r == '\u0085':
			line = true
			continue
		case r == utf8.RuneError:
			continue
		case unicode.IsSpace(r) || unicode.IsControl(r):
			space = true
			continue
		case unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Co, r) || unicode.Is(unicode.Cs, r):
			continue
		case r == '\u2018' || r == '\u2019' || r == '\u02bc':
			r = '\''
		case r == '\u201c' || r == '\u201d' || r == '\u201e':
			r = '"'
		}
		if b.Len() > 0 && (line || space) {
			b.WriteByte(" \n"[b2i(line)])
			n++
		}
		space, line = false, false
		if maxRunes > 0 && n >= maxRunes {
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

// isPlain reports text that sanitize leaves as it is: printable ASCII within maxRunes, single spaces between words.
func isPlain(s string, maxRunes int) bool {
	if maxRunes > 0 && len(s) > maxRunes || s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return s == ""
	}
	return sentence.IsPlain(s)
}

// oneLine sanitizes s and joins its lines with spaces.
func oneLine(s string, maxRunes int) string {
	return strings.TrimSpace(strings.ReplaceAll(sanitize(s, maxRunes), "\n", " "))
}

func splitSentences(s string) []string { return sentence.Split(s) }

func nextField(s string, i int) (string, int) { return sentence.NextField(s, i) } // for f, i := nextField(s, 0); f != ""; f, i = nextField(s, i) { … }

// fieldsAtLeast reports whether s has n fields or more (strings.Fields), reading no further.
func fieldsAtLeast(s string, n int) bool {
	for f, wi := nextField(s, 0); f != "" && n > 0; f, wi = nextField(s, wi) {
		n--
	}
	return n <= 0
}

func runeLen(s string) int  { return sentence.RuneLen(s) }
func isASCII(s string) bool { return sentence.IsASCII(s) }

// clip cuts s to at most max runes at a word boundary, with "…".
func clip(s string, max int) string {
	if len(s) <= max || runeLen(s) <= max { // (no more runes than bytes)
		return s
	}
	r, cut := []rune(s)[:max-1], max-1
	for i := len(r) - 1; i > len(r)/2; i-- {
		if r[i] == ' ' {
			cut = i
			break
		}
	}
	return strings.TrimRight(string(r[:cut]), " ,;:-") + "…"
}

// ---- words ----

// stopWords are the function words of English (NLTK's list) and the words of talk that carry no subject (interjections
// too: "ooh come back" says nothing); they are never terms or topics.
var stopWords = toSet(strings.Fields(`i me my myself we our ours ourselves you your yours yourself yourselves he him
his himself she her hers herself it its itself they them their theirs themselves what which who whom this that these
those am is are was were be been being have has had having do does did doing a an the and but if or because as until
while of at by for with about against between into through during before after above below to from up down in out on
off over under again further then once here there when where why how all any both each few more most other some such no
nor not only own same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn doesn
hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn yeah yes yep okay ok oh um uh uhm hmm mm
like well really actually basically right sure gonna wanna gotta kinda sorta lot lots thing things stuff something
anything everything nothing think thought know knew mean said say says saying get got getting go going goes went make
made want need let see look one two also maybe probably still even much many way kind sort bit could would might must
shall may good great nice fine cool yeah-yeah guess guys guy gg congrats congratulations bye hi hello hey thanks thank
welcome everyone everybody man dude bro please sorry cheers yo wow omg damn hear loud clear anyway anyways lets dunno
gimme lemme ooh oops whoa aha ah ahh ugh huh yay oof eh hm er erm mhm ouch phew whew meh nah yup come comes coming came`))

func toSet(ws []string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// lexeme is what a lower-cased word is to the summarizer: its stem (the Snowball English stem, as the context service's
// recall index uses, numbers as they are) and the word lists it is on.
type lexeme struct {
	stem  string
	flags wordFlags
}

// wordFlags say which word lists a lower-cased word is on: a content word (termWord), laughter (isLaugh), then the
// lists of wordLists.
type wordFlags uint16

const (
	fTerm wordFlags = 1 << iota
	fLaugh
	fAdverb
	fPhraseStop
	fNumber
	fDeterminer
	fReportVerb
)

var wordLists = []map[string]bool{adverbs, phraseStop, numberWords, determiners, reportVerbs}

func (x lexeme) is(f wordFlags) bool { return x.flags&f != 0 }

// lexicon remembers the lexemes of the words a summarizer has seen: the stemmer costs about a microsecond a word, more
// than reading the rest of a sentence, and the words people use are few. Each scratch holds one (a lexeme depends on
// the word alone); past maxWords words it starts over. A nil lexicon works out every word afresh. Most lookups end in
// near, the word last looked up at its slot (by its length and three of its bytes). It knows the fields of text as
// written too (field), so that a sentence's words are trimmed, lower-cased and stemmed once.
type lexicon struct {
	m     map[string]*known
	near  [4096]*known
	fm    map[string]*field
	fnear [4096]*field
	gen   uint32 // how many times its words started over (a *known kept from another gen is not its word's)
}

// known is a word looked up and its lexeme; as a term, its number in the fold (wordCounts.fold) that numbered it last.
type known struct {
	w    string
	x    lexeme
	fold uint32
	id   int32
}

// field is a field of text as written (strings.Fields'), and what the summarizer reads in it.
type field struct {
	f, core, low, bare string   // core: f without the punctuation around it (phrases), low: core lower-cased, bare: f without what tighten trims
	rep                string   // f lower-cased without the punctuation around it that repeated ignores, when ASCII
	rh                 uint64   // rep's hash: repeated tells most words apart by it
	x                  lexeme   // low's
	terms              []string // the distinct stems of its content words (appendTerms)
	flags              fieldFlags
}

// fieldFlags: a field has a digit, reads as a name (capitalised, not "I" nor "I'…": statFields), is a first
// or second person pronoun (report's firstPerson, secondPerson: with its punctuation trimmed, any case), a word group
// changes ("we", "our"), one backshift changes ("will", "we'll"), may start a relative date (reldate.MayStartIn), may be
// dropped by tighten as or with a hedge (hedgeWords), is ASCII (rep is then f as repeated compares it); and what trimFiller
// drops: hesitation (inlineFiller), a cut word (a letter alone, "we-"), a consonant onset that may be one, an end that
// trails off (laughter, "though", hesitation) and one that dangles after a longer sentence (danglingEnd); and for phrases:
// a word of a topic phrase, one that does not start one (a number, "…ed"), one capitalised or a number (core's); and
// one an opinion or a speech act opens with (actStarts: report). ffDateEnd: a relative date may end in it (MayEndIn).
type fieldFlags uint32

const ffDigit, ffName, ffFirst, ffSecond, ffGroup, ffModal, ffDate, ffHedge, ffASCII, ffInline, ffLetter, ffDash, ffOnset, ffTrail, ffDangling, ffPhrase, ffMid, ffUp, ffAct, ffDateEnd fieldFlags = 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 1 << 15, 1 << 16, 1 << 17, 1 << 18, 1 << 19 // (newField's order)

var noField field // (an empty field: on no list)

const maxWords, maxFieldLen = 1 << 16, 48 // (a longer field is read afresh each time)

func (l *lexicon) get(w string) lexeme { return l.getBytes([]byte(w)) }

// getBytes is get(string(w)), without the string when w is known.
func (l *lexicon) getBytes(w []byte) lexeme {
	if l == nil || len(w) == 0 {
		return newLexeme(string(w))
	}
	return l.known(w).x
}

// known is what the lexicon knows of the word w (not empty).
func (l *lexicon) known(w []byte) *known {
	h := int((uint32(w[0]) | uint32(w[len(w)/2])<<8 | uint32(w[len(w)-1])<<16 | uint32(len(w))<<24) * 0x9e3779b1 >> 20)
	if k := l.near[h]; k != nil && k.w == string(w) {
		return k
	}
	k := l.m[string(w)]
	if k == nil {
		if k = (&known{w: string(w), x: newLexeme(string(w))}); l.m == nil {
			l.m = make(map[string]*known, 1024)
		}
		l.m[k.w] = k
	}
	l.near[h] = k
	return k
}

// trim starts the lexicon over past maxWords words or fields (between folds: a fold's terms keep their numbers).
func (l *lexicon) trim() {
	if len(l.m) >= maxWords || len(l.fm) >= maxWords {
		l.m, l.near, l.fm, l.fnear, l.gen = nil, [len(l.near)]*known{}, nil, [len(l.fnear)]*field{}, l.gen+1
	}
}

// field is what the lexicon knows of the field f (a non-empty field of strings.Fields).
func (l *lexicon) field(f string) *field {
	if l == nil || len(f) > maxFieldLen {
		return newField(l, f)
	}
	h := int((uint32(f[0]) | uint32(f[len(f)/2])<<8 | uint32(f[len(f)-1])<<16 | uint32(len(f))<<24) * 0x9e3779b1 >> 20)
	if k := l.fnear[h]; k != nil && k.f == f {
		return k
	}
	k := l.fm[f]
	if k == nil {
		if k = newField(l, strings.Clone(f)); l.fm == nil {
			l.fm = make(map[string]*field, 1024)
		}
		l.fm[k.f] = k
	}
	l.fnear[h] = k
	return k
}

// appendFields appends to ks what the lexicon knows of each of s's fields.
func (l *lexicon) appendFields(ks []*field, s string) []*field {
	for f, i := nextField(s, 0); f != ""; f, i = nextField(s, i) {
		ks = append(ks, l.field(f))
	}
	return ks
}

func newField(l *lexicon, f string) *field {
	k := &field{f: f, core: trimCut(f, `.,!?;:()"`), bare: trimCut(f, `,.!?;:"`), terms: l.tokenTerms(nil, 0, f)}
	if w := k.core; w != "" && (w[0] >= utf8.RuneSelf || w[len(w)-1] >= utf8.RuneSelf) {
		k.core = strings.Trim(w, `.,!?;:()"“”`)
	}
	k.low, k.rep = strings.ToLower(k.core), strings.ToLower(trimCut(f, ",.;:"))
	if k.rh = hashString(k.rep); k.low != "" {
		k.x = l.get(k.low)
	}
	r, _ := utf8.DecodeRuneInString(f)
	core := strings.TrimRight(f, ".,!?;:")
	_, modal := pastModal[core]
	c, ll := strings.CutSuffix(core, "'ll")
	g, p := strings.TrimRight(f, `.,!?;:"`), strings.ToLower(trimCut(f, `.,!?;:"()`))
	tc, end := trimCut(f, ",.;:!?"), strings.ToLower(trimCut(f, ".,!?")) // (trimFiller's word, and as the end of a sentence)
	w, x := k.core, k.x                                                  // (phrases' word)
	rc, _ := utf8.DecodeRuneInString(w)
	for i, on := range []bool{strings.ContainsFunc(f, unicode.IsDigit), unicode.IsUpper(r) && f != "I" && !strings.HasPrefix(f, "I'"),
		len(p) <= len("yourself") && firstPerson[p], len(p) <= len("yourself") && secondPerson[p],
		strings.IndexByte("wWuUoO", f[0]) >= 0 && len(g) <= len("ourselves") && groupPerson[strings.ToLower(g)] != "",
		modal || ll && c != "" && c != "I", reldate.MayStartIn(f), hedgeWords[strings.ToLower(strings.TrimRight(f, ","))], isASCII(f),
		inlineFiller[strings.ToLower(tc)], len(tc) == 1 && tc != "a" && tc != "i" && strings.ToLower(tc) == tc && !unicode.IsDigit(rune(tc[0])), strings.HasSuffix(f, "-") && len(f) > 1,
		len(tc) <= 3 && onsets[tc], isLaugh(end) || end == "though" || inlineFiller[end], danglingEnd[end],
		w != "" && w != "I" && !strings.HasPrefix(w, "I'") && x.is(fTerm) && !x.is(fPhraseStop|fAdverb) && !strings.ContainsAny(w, "$%/=;") &&
			utf8.RuneCountInString(w) > 1 && !(strings.ContainsFunc(f, unicode.IsDigit) && strings.IndexFunc(w, unicode.IsLetter) >= 0), // ("14th", "0.01s")
		strings.HasSuffix(k.low, "ed") || strings.IndexFunc(w, unicode.IsLetter) < 0 || x.is(fNumber), unicode.IsUpper(rc) || unicode.IsDigit(rc), actStarts[k.low], reldate.MayEndIn(f)} {
		k.flags |= fieldFlags(b2i(on)) << i
	}
	return k
}

// addTerms appends to dst the terms of ks that dst[n0:] does not hold. Each term appended sets one of 64 bits, by its
// length and its first and last bytes (a term is not empty): a term whose bit is not set is not held, unlike most.
func addTerms(dst []string, n0 int, ks ...*field) []string {
	held := ^uint64(0) * uint64(b2i(len(dst) > n0)) // (the bits of dst[n0:]'s terms: all, not known, when it holds some already)
	for _, k := range ks {
		for _, t := range k.terms {
			if b := termBit(t); held&b == 0 || !slices.Contains(dst[n0:], t) {
				dst, held = append(dst, t), held|b
			}
		}
	}
	return dst
}

func termBit(t string) uint64 { return 1 << ((len(t) + int(t[0])*7 + int(t[len(t)-1])*3) & 63) } // (addTerms' filter)

// termText appends to b (empty) the terms of ks (addTerms'), each after a space, and a space (b[1:len(b)-1]: the terms
// joined by spaces), and how many: gathered as bytes, where a term kept is no pointer stored behind the collector's
// write barrier.
func termText(b []byte, ks []*field) ([]byte, int) {
	b, nb, n, held := append(b, ' '), [64]byte{}, 0, uint64(0)
	for _, k := range ks {
		for _, t := range k.terms {
			if bit := termBit(t); held&bit == 0 || !bytes.Contains(b, append(append(append(nb[:0], ' '), t...), ' ')) {
				b, held, n = append(append(b, t...), ' '), held|bit, n+1
			}
		}
	}
	return b, n
}

// any reports whether one of ks has the flag f.
func anyIs(ks []*field, f fieldFlags) bool {
	return slices.ContainsFunc(ks, func(k *field) bool { return k.is(f) })
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (k *field) is(f fieldFlags) bool { return k.flags&f != 0 }

func newLexeme(w string) lexeme {
	x := lexeme{stem: w}
	if len(w) > 2 && unicode.IsLetter(rune(w[0])) {
		x.stem = english.Stem(w, false)
	}
	for i, l := range wordLists {
		x.flags |= fAdverb << i * wordFlags(b2i(l[w]))
	}
	x.flags |= wordFlags(b2i(termWord(w)))*fTerm | wordFlags(b2i(isLaugh(w)))*fLaugh
	return x
}

// termWord reports whether the lower-cased word w is a content word.
func termWord(w string) bool {
	w = strings.Trim(w, "'-")
	if len(w) < 2 || stopWords[w] || elongated(w) {
		return false
	}
	if i := strings.IndexByte(w, '\''); i > 0 {
		switch w[i+1:] {
		case "re", "ve", "ll", "d", "m", "t":
			return false // they're, I've, we'll, don't
		}
	}
	w = strings.TrimSuffix(w, "'s")
	return !stopWords[w] && !isLaugh(w)
}

// appendTerms appends to dst the distinct stemmed content words of s, in order.
func (l *lexicon) appendTerms(dst []string, s string) []string {
	n0 := len(dst)
	for f, wi := nextField(s, 0); f != ""; f, wi = nextField(s, wi) {
		dst = addTerms(dst, n0, l.field(f))
	}
	return dst
}

// tokenTerms appends to dst the stems of the content words of s (tokens: runs of letters, digits and ' - $ %) that
// dst[n0:] does not hold.
func (l *lexicon) tokenTerms(dst []string, n0 int, s string) []string {
	var buf [64]byte
	for i := 0; i < len(s); {
		j := i
		for j < len(s) {
			if c := s[j]; c < utf8.RuneSelf && tokenBits[c>>6]>>(c&63)&1 != 0 {
				j++
			} else if r, n := utf8.DecodeRuneInString(s[j:]); c >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
				j += n
			} else {
				break
			}
		}
		if j == i {
			_, n := utf8.DecodeRuneInString(s[i:])
			i += n
			continue
		}
		t := lower(buf[:0], trimCut(s[i:j], "'-"))
		i = j
		if len(t) < 2 {
			continue // no content word ("I", "a", "5")
		}
		x := l.getBytes(t)
		if !x.is(fTerm) {
			continue
		}
		if u, ok := bytes.CutSuffix(t, []byte("'s")); ok {
			x = l.getBytes(u)
		}
		if !slices.Contains(dst[n0:], x.stem) {
			dst = append(dst, x.stem)
		}
	}
	return dst
}

// termsOf are the terms of s (appendTerms) in the scratch's room, until the next call.
func (sc *scratch) termsOf(s string) []string {
	sc.terms = sc.lex.appendTerms(sc.terms[:0], s)
	return sc.terms
}

// termString is terms(s) joined by spaces.
func (l *lexicon) termString(s string) string {
	var arr [32]string
	return strings.Join(l.appendTerms(arr[:0], s), " ")
}

// lower appends s lower-cased to b (on the caller's stack: no copy).
func lower(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return append(b[:len(b)-i], strings.ToLower(s)...)
		}
		b = append(b, lowerASCII(s[i]))
	}
	return b
}

var tokenBits = [2]uint64{0x03ff20b000000000, 0x07fffffe07fffffe} // bit c set: the ASCII byte c is of a token (a letter, a digit, ' - $ %)

// isLaugh reports laughter: lol, lmao, haha, hehe, xd, rofl.
func isLaugh(w string) bool {
	return w == "rofl" || w == "xd" || w == "lmfao" || strings.HasPrefix(w, "lo") && strings.Trim(w, "lo") == "" || // lol, looool
		strings.HasPrefix(w, "lm") && strings.Trim(w, "lmao") == "" || len(w) >= 4 && (strings.Trim(w, "ha") == "" || strings.Trim(w, "he") == "")
}

// elongated reports a word with a letter three times in a row ("gooo", "sooo"): talk, not a term.
func elongated(w string) bool {
	for i := 2; i < len(w); i++ {
		if w[i] == w[i-1] && w[i] == w[i-2] && w[i] >= 'a' && w[i] <= 'z' {
			return true
		}
	}
	return false
}
