package offline

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"
)

// shiftFirstPerson turns first-person singular speech into third person
// about the speaker: "I keep dying as Hulk" → "Bob keeps dying as Hulk",
// "my mic is off" → "Bob's mic is off". Text inside double quotes is left
// verbatim. It reports whether the result starts with the speaker's name.
func shiftFirstPerson(s, speaker string) (string, bool) {
	var arr [64]string
	return shiftFirstPersonIn(s, appendFields(arr[:0], s), speaker)
}

// shiftFirstPersonIn is shiftFirstPerson(s, speaker); words are the fields
// of s.
func shiftFirstPersonIn(s string, words []string, speaker string) (string, bool) {
	var arr [32]word
	return shiftFirstPersonInfos(s, appendWords(arr[:0], words), speaker)
}

// shiftFirstPersonInfos is shiftFirstPerson(s, speaker); ws are the words
// of s.
func shiftFirstPersonInfos(s string, ws []word, speaker string) (string, bool) {
	shift := false
	for i := range ws {
		shift = shift || ws[i].lx&lxShift != 0
	}
	if !shift { // (most sentences: no word to shift, s as it is)
		if isSingleSpaced(s) {
			return s, false
		}
		var b strings.Builder
		for i := range ws {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(ws[i].w)
		}
		return b.String(), false // strings.Join of the fields
	}
	var outArr [64]string
	out := outArr[:0]
	changed := false
	starts := false
	inQuote := false
	for i := 0; i < len(ws); i++ {
		w := ws[i].w
		if inQuote || strings.HasPrefix(w, "\"") {
			out = append(out, w)
			q := strings.Count(w, "\"")
			if q%2 == 1 {
				inQuote = !inQuote
			}
			continue
		}
		lc := ws[i].n // strings.ToLower(core(w))
		if ws[i].lx&lxShift == 0 {
			out = append(out, w) // (most words)
			continue
		}
		pre, _, suf := splitWord(w)
		first := len(out) == 0
		switch lc {
		case "i":
			out = append(out, pre+speaker+suf)
			if suf == "" {
				j := i + 1
				// (norm(w) == strings.ToLower(w) exactly when core(w) == w)
				for j < len(ws) && preVerbAdverbs[ws[j].n] && ws[j].c == ws[j].w {
					j++
				}
				if j < len(ws) {
					for _, x := range ws[i+1 : j] {
						out = append(out, x.w)
					}
					out = append(out, conjugate(ws[j].w))
					i = j
				}
			}
		case "i'm", "im":
			out = append(out, pre+speaker, "is"+suf)
		case "i've":
			out = append(out, pre+speaker, "has"+suf)
		case "i'll":
			out = append(out, pre+speaker, "will"+suf)
		case "i'd":
			aux := "would"
			if i+1 < len(ws) {
				n := ws[i+1].n // norm
				if strings.HasSuffix(n, "ed") || n == "been" || n == "gotten" || n == "done" || n == "seen" {
					aux = "had"
				}
			}
			out = append(out, pre+speaker, aux+suf)
		case "imma", "i'ma":
			out = append(out, pre+speaker, "is", "going", "to"+suf)
		case "me", "myself":
			out = append(out, pre+speaker+suf)
		case "my", "mine":
			out = append(out, pre+speaker+"'s"+suf)
		}
		changed = true
		if first && pre == "" {
			starts = true
		}
	}
	if !changed && isSingleSpaced(s) {
		return s, starts
	}
	return strings.Join(out, " "), starts
}

// shiftWords are the first-person words shiftFirstPerson rewrites (as
// lowercased cores).
var shiftWords = toSet("i", "i'm", "im", "i've", "i'll", "i'd", "imma", "i'ma", "me", "myself", "my", "mine")

// conjugate puts the verb that followed "I" into the third person singular.
func conjugate(w string) string {
	pre, c, suf := splitWord(w)
	lc := strings.ToLower(c)
	var r string
	switch lc {
	case "am":
		r = "is"
	case "have":
		r = "has"
	case "haven't", "havent":
		r = "hasn't"
	case "do":
		r = "does"
	case "don't", "dont":
		r = "doesn't"
	case "gotta":
		r = "has to"
	case "wanna":
		r = "wants to"
	case "gonna":
		r = "is gonna"
	case "were":
		r = "was"
	case "be":
		r = "is"
	case "think", "believe":
		// an opinion is reported, as what was said is ("Bob said …"):
		// "I think we should" → "Bob thought we should"
		r = lc + "d"
		if lc == "think" {
			r = "thought"
		}
	default:
		if noConj[lc] || isPast(lc) || !isAllLetters(c) || len(lc) < 2 {
			return w
		}
		switch {
		case strings.HasSuffix(lc, "y") && len(lc) > 2 && !strings.ContainsRune("aeiou", rune(lc[len(lc)-2])):
			r = lc[:len(lc)-1] + "ies"
		case strings.HasSuffix(lc, "s") || strings.HasSuffix(lc, "sh") || strings.HasSuffix(lc, "ch") ||
			strings.HasSuffix(lc, "x") || strings.HasSuffix(lc, "z") || strings.HasSuffix(lc, "o"):
			r = lc + "es"
		default:
			r = lc + "s"
		}
	}
	if len(c) > 1 && c == strings.ToUpper(c) {
		r = strings.ToUpper(r)
	}
	return pre + r + suf
}

// isPast reports regular past forms ("died", "played") but not base verbs
// that end in -ed ("need", "feed", "shred").
func isPast(lc string) bool {
	if !strings.HasSuffix(lc, "ed") || strings.HasSuffix(lc, "eed") || len(lc) < 4 {
		return false
	}
	switch lc {
	case "shed", "embed", "shred", "bed", "wed", "sled":
		return false
	}
	return true
}

func hasSecondPerson(s string) bool {
	var arr [64]string
	return hasSecondPersonIn(appendFields(arr[:0], s))
}

// hasSecondPersonInfos is hasSecondPerson of the sentence whose words are
// ws.
func hasSecondPersonInfos(ws []word) bool {
	for i := range ws {
		c := ws[i].c
		// every second-person word starts with 'u' or 'y'
		if c == "" || (c[0] < utf8.RuneSelf && c[0]|0x20 != 'u' && c[0]|0x20 != 'y') {
			continue
		}
		if secondPerson[ws[i].n] {
			return true
		}
	}
	return false
}

// hasSecondPersonIn is hasSecondPerson of the sentence whose fields are
// words.
func hasSecondPersonIn(words []string) bool {
	for _, w := range words {
		c := core(w)
		// every second-person word starts with 'u' or 'y'
		if c == "" || (c[0] < utf8.RuneSelf && c[0]|0x20 != 'u' && c[0]|0x20 != 'y') {
			continue
		}
		if hasLower(secondPerson, c) {
			return true
		}
	}
	return false
}

// extractVocativeIn finds a participant addressed by name at the start
// ("Alice, can you …") or end ("…, Alice?") of the sentence s and removes
// it. words are the fields of s, and restWords those of rest (nil: not
// known, split rest).
func extractVocativeIn(s string, words []string, speaker string, who names) (addressee, rest string, restWords []string) {
	if len(words) < 2 {
		return "", s, words
	}
	if c := core(words[0]); who.has(c) && !strings.EqualFold(c, speaker) {
		if strings.HasSuffix(words[0], ",") || (len(words) > 2 && hasSecondPersonIn(words)) {
			return who.display(c), strings.Join(words[1:], " "), words[1:]
		}
	}
	last := words[len(words)-1]
	if c := core(last); who.has(c) && !strings.EqualFold(c, speaker) &&
		strings.HasSuffix(words[len(words)-2], ",") {
		_, _, suf := splitWord(last)
		body := strings.TrimRight(strings.Join(words[:len(words)-1], " "), ",")
		return who.display(c), body + suf, nil
	}
	return "", s, words
}

// proposalRestInfos recognizes a proposal opener in the sentence whose
// words are ws and returns what is proposed, ready to follow "suggested":
// "let's push B" → "we push B", "how about Jeff?" → "Jeff".
func proposalRestInfos(all []word, who names) (string, bool) {
	// allow a few soft words or names before the opener ("ok guys let's …")
	start := 0
	for start < len(all) && start < 3 {
		n, lx := all[start].n, all[start].lx
		if !(lx&lxFillerSoft != 0 || who.has(n) || lx&lxFillerCore != 0) || n == "let's" || n == "lets" || n == "we" || n == "how" || n == "what" || n == "why" || n == "maybe" {
			break
		}
		start++
	}
	ws := all[start:]
	// is reports norm(ws[i]) == lit
	is := func(i int, lit string) bool { return i < len(ws) && ws[i].n == lit }
	// what is proposed is "we " (when we) and the words of ws from rest on
	we, rest := false, 0
	switch {
	case is(0, "let's") || is(0, "lets"):
		we, rest = true, 1
	case is(0, "let") && is(1, "us"):
		we, rest = true, 2
	case (is(0, "how") || is(0, "what")) && is(1, "about") && len(ws) > 2:
		rest = 2
	case is(0, "what") && is(1, "if") && len(ws) > 2:
		rest = 2
	case is(0, "why") && (is(1, "don't") || is(1, "dont")) && is(2, "we") && len(ws) > 3:
		we, rest = true, 3
	case is(0, "why") && is(1, "not") && len(ws) > 2:
		rest = 2
	case is(0, "maybe") && is(1, "we") && len(ws) > 2:
		rest = 1
	case is(0, "i") && (is(1, "suggest") || is(1, "propose")) && len(ws) > 2:
		rest = 2
	case is(0, "i") && is(1, "vote") && len(ws) > 2:
		rest = 2
		if ws[2].n == "for" && len(ws) > 3 {
			rest = 3
		}
	default:
		return "", false
	}
	tail := ws[min(rest, len(ws)):]
	if n := len(tail); we && n == 0 || !we && (n == 0 || n == 1 && tail[0].n == "we") {
		return "", false
	}
	var b strings.Builder
	size := len("we")
	for _, w := range tail {
		size += len(w.w) + 1
	}
	b.Grow(size)
	if we {
		b.WriteString("we")
	}
	for i, w := range tail {
		if i > 0 || we {
			b.WriteByte(' ')
		}
		b.WriteString(w.w)
	}
	r := strings.TrimRight(b.String(), "?!. ")
	if r == "" || r == "we" {
		return "", false
	}
	return r, true
}

// sentenceAdverbs may precede a first-person subject ("Next I will …").
var sentenceAdverbs = toSet("next", "now", "then", "first", "finally", "also", "later",
	"afterwards", "meanwhile", "today", "tomorrow", "tonight", "yesterday", "earlier",
	"still", "sometimes", "maybe", "probably", "hopefully", "honestly", "currently")

func isFirstPersonSubject(w string) bool {
	n, nb, k := normParts(w) // norm(w), on the stack
	if k > 0 {
		n = string(nb[:k])
	}
	switch n {
	case "i", "i'm", "im", "i've", "i'll", "i'd":
		return true
	}
	return false
}

// sentenceStarters are common capitalized openers that are not names.
var sentenceStarters = toSet("tomorrow", "today", "tonight", "yesterday", "everyone",
	"everybody", "nobody", "someone", "somebody", "anyone", "sadly", "luckily", "hopefully",
	"first", "last", "next", "after", "before", "because", "while", "once", "unless",
	"although", "though", "anyway", "sure", "apparently", "probably", "definitely",
	"nothing", "everything", "something", "both", "each", "every", "another", "other",
	"only", "never", "always", "sometimes", "usually", "again", "please", "sorry", "good",
	"bad", "great", "nice", "yes", "no", "okay", "ok")

// lowerFirstCommon lowercases the first letter of s when its first word is
// a common word ("The comp is bad" → "the comp is bad") but never a name,
// an acronym or an identifier.
func lowerFirstCommon(s string) string {
	w, _, _ := strings.Cut(s, " ")
	c := core(w)
	lc, lb, k := lowerParts(c) // strings.ToLower(c), on the stack
	if k > 0 {
		lc = string(lb[:k])
	}
	if lexicon.get(lc)&(lxStop|lxCommonCaps) == 0 && !sentenceStarters[lc] || len(c) > 1 && isUpperCase(c) {
		return s
	}
	r, size := utf8.DecodeRuneInString(s)
	if !unicode.IsUpper(r) {
		return s
	}
	return string(unicode.ToLower(r)) + s[size:]
}

// isUpperCase reports c == strings.ToUpper(c).
func isUpperCase(c string) bool {
	if !isASCII(c) {
		return c == strings.ToUpper(c)
	}
	for i := 0; i < len(c); i++ {
		if 'a' <= c[i] && c[i] <= 'z' {
			return false
		}
	}
	return true
}

// speech is one sentence said by one speaker, ready to render.
type speech struct {
	speaker   string
	addressee string
	text      string
	words     []string // the fields of text, split once for every pass
	infos     []word   // the words of text (one per field), for every pass
	t         traits
}

// render writes the sentence as attributed prose: reported speech with the
// speaker's name when that is safe ("Bob keeps dying as Hulk."; "Alice
// suggested we try the new team comp."), direct speech after a colon when
// the sentence is a question or addresses someone ("Bob asked Alice: can you
// heal me?"). The words of the sentence are kept as they were said.
//
// The fields of the result are appended to dst and returned too, for
// condensation (nil when not split).
func (sp speech) render(dst []string, who names) (string, []string) {
	return collapseRepeatsIn(dst, sp.renderRaw(who))
}

func (sp speech) renderRaw(who names) string {
	S := sp.speaker
	text := sp.text
	f := sp.words
	if f == nil {
		var farr [64]string
		f = appendFields(farr[:0], text)
	}
	fi := sp.infos
	if len(fi) != len(f) {
		var iarr [32]word
		fi = appendWords(iarr[:0], f)
	}
	second := hasSecondPersonInfos(fi)
	to := ""
	if sp.addressee != "" {
		to = " " + sp.addressee
	}
	if !second {
		if rest, ok := proposalRestInfos(fi, who); ok {
			shifted, _ := shiftFirstPerson(rest, S)
			return endSentence(S+" suggested"+to+" "+shifted, '.')
		}
	}
	if sp.t.question || sp.t.request {
		def := byte('?')
		if !sp.t.question {
			def = '.'
		}
		return S + " asked" + to + ": " + endSentence(text, def)
	}
	if len(f) > 2 && strings.EqualFold(f[0], "let") && strings.EqualFold(f[1], "me") && !second {
		rest := strings.Join(f[2:], " ")
		shifted, _ := shiftFirstPerson(rest, S)
		return endSentence(S+" offered to "+shifted, '.')
	}
	if second || sp.addressee != "" {
		verb := " said"
		if sp.t.proposal {
			verb = " suggested"
		}
		if sp.addressee != "" {
			verb += " to"
		}
		return S + verb + to + ": " + endSentence(text, '.')
	}
	shifted, starts := shiftFirstPersonInfos(text, fi, S)
	if starts {
		return endSentence(shifted, '.')
	}
	// "Next I will …" → "Next, Bob will …"
	if len(f) > 2 && hasLower(sentenceAdverbs, f[0]) && isFirstPersonSubject(f[1]) {
		rest, _ := shiftFirstPersonInfos(strings.Join(f[1:], " "), fi[1:], S)
		adv := f[0]
		r, size := utf8.DecodeRuneInString(adv)
		return endSentence(string(unicode.ToUpper(r))+adv[size:]+", "+rest, '.')
	}
	body := lowerFirstCommon(shifted)
	if upperFirst(body) {
		// a capitalized opener that may or may not be a name ("Light rain
		// …", "Tokyo is …"): quote it as said rather than guess its case
		return endSentence(S+" said: "+body, '.')
	}
	return endSentence(S+" said "+body, '.')
}

// collapseRepeats removes immediately repeated words and phrases of up to
// three words, the disfluencies of speech ("I I think", "Bob is Bob is on
// point"). Quoted text is left alone.
func collapseRepeats(s string) string {
	var arr [64]string
	r, _ := collapseRepeatsIn(arr[:0], s)
	return r
}

// collapseRepeatsIn is collapseRepeats(s) and, unless s is quoted, the
// fields of the result, appended to dst (nil when not split).
func collapseRepeatsIn(dst []string, s string) (string, []string) {
	if strings.Contains(s, "\"") {
		return s, nil
	}
	words := appendFields(dst, s)
	changed := false
	may := mayRepeat(words) // (asked again only when words change)
	for n := 3; n >= 1 && may; n-- {
		var out []string // allocated at the first repeat of this pass
		for i := 0; i < len(words); {
			if i+2*n <= len(words) && sameWords(words[i:i+n], words[i+n:i+2*n]) {
				if out == nil {
					out = append(make([]string, 0, len(words)), words[:i]...)
				}
				i += n // drop the first copy, keep the second (and its punctuation)
				continue
			}
			if out != nil {
				out = append(out, words[i])
			}
			i++
		}
		if out != nil {
			words, changed = out, true
			may = mayRepeat(words)
		}
	}
	if !changed && isSingleSpaced(s) {
		return s, words // strings.Join(strings.Fields(s), " ") == s
	}
	return strings.Join(words, " "), words
}

// mayRepeat reports whether a word of words could start a repeat of
// collapseRepeats: the same word (as sameWords compares words) follows one
// to three words later. Without one, sameWords fails for every phrase.
func mayRepeat(words []string) bool {
	var arr [64]string
	var keyArr [64]uint32
	cores, keys := arr[:0], keyArr[:0]
	for _, w := range words {
		c := core(w)
		if c != "" && !allLettersOrApostrophes(c) {
			c = "" // sameWords rejects it
		}
		// key tells ASCII words that differ apart cheaply: their length
		// and lowercased first byte (0 for non-ASCII words)
		var k uint32
		if c != "" && isASCII(c) {
			k = uint32(len(c))<<8 | uint32(c[0]|0x20)
		}
		cores, keys = append(cores, c), append(keys, k)
	}
	for i, c := range cores {
		if c == "" {
			continue
		}
		for n := 1; n <= 3 && i+n < len(cores); n++ {
			if k, kn := keys[i], keys[i+n]; k != 0 && kn != 0 && k != kn {
				continue // ASCII words of different lengths or initials
			}
			if cores[i+n] != "" && sameNorm(c, cores[i+n]) {
				return true
			}
		}
	}
	return false
}

func sameWords(a, b []string) bool {
	for i := range a {
		ca, cb := core(a[i]), core(b[i])
		if ca == "" || !sameNorm(ca, cb) || !allLettersOrApostrophes(ca) {
			return false
		}
		// inner words must not carry punctuation ("no, no" is emphasis, kept)
		if i < len(a)-1 && (len(ca) != len(a[i]) || len(cb) != len(b[i])) {
			return false
		}
	}
	last := len(a) - 1
	return len(core(a[last])) == len(a[last])
}

// sameNorm reports strings.ToLower(a) == strings.ToLower(b).
func sameNorm(a, b string) bool {
	if a == b {
		return true
	}
	if isASCII(a) && isASCII(b) {
		if len(a) != len(b) {
			return false
		}
		for i := 0; i < len(a); i++ {
			x, y := a[i], b[i]
			if 'A' <= x && x <= 'Z' {
				x += 'a' - 'A'
			}
			if 'A' <= y && y <= 'Z' {
				y += 'a' - 'A'
			}
			if x != y {
				return false
			}
		}
		return true
	}
	// Not strings.EqualFold: it folds case by Unicode simple folding, which
	// matches pairs ToLower keeps apart (final ς and σ, long ſ and s), and the
	// rendered output is pinned by golden.txt.
	//lint:ignore SA6005 ToLower equality is the contract, see above
	return strings.ToLower(a) == strings.ToLower(b)
}

// allLettersOrApostrophes is isAllLetters(strings.ReplaceAll(s, "'", ""))
// (lowercasing keeps letters letters and other runes not letters).
func allLettersOrApostrophes(s string) bool { return allLettersExcept(s, '\'') }

// Light condensation: hedges and verbal filler that carry no state.
var lightDropWords = toSet("basically", "actually", "literally", "honestly", "really",
	"just", "totally", "very", "super", "kinda", "sorta", "um", "uh", "umm", "uhh",
	"seriously", "truly", "genuinely", "lowkey", "obviously")

var lightDropPhrases = [][]string{{"kind", "of"}, {"sort", "of"}, {"pretty", "much"},
	{"you", "know,"}, {"i", "mean,"}, {"to", "be", "honest,"}}

// condenseLight removes hedges and filler words outside quotes. Words that
// carry punctuation other than a comma are kept so sentence ends survive.
func condenseLight(s string) string {
	var arr [64]string
	return condenseLightIn(s, appendFields(arr[:0], s))
}

// condenseLightIn is condenseLight(s); words are the fields of s.
func condenseLightIn(s string, words []string) string {
	var outArr [64]string
	out := outArr[:0]
	inQuote := false
	for i := 0; i < len(words); i++ {
		w := words[i]
		if inQuote || strings.HasPrefix(w, "\"") {
			if strings.Count(w, "\"")%2 == 1 {
				inQuote = !inQuote
			}
			out = append(out, w)
			continue
		}
		if i > 0 && isLightDrop(w) {
			continue
		}
		matched := false
		if i > 0 && (w[0] >= utf8.RuneSelf || lightPhraseStart[w[0]|0x20]) {
			for _, ph := range lightDropPhrases {
				if i+len(ph) <= len(words) {
					ok := true
					for k, p := range ph {
						if !lowerEq(words[i+k], p) {
							ok = false
							break
						}
					}
					if ok {
						i += len(ph) - 1
						matched = true
						break
					}
				}
			}
		}
		if !matched {
			out = append(out, w)
		}
	}
	r := s
	if len(out) != len(words) || !isSingleSpaced(s) {
		r = strings.Join(out, " ")
	}
	if strings.IndexByte(r, '?') >= 0 {
		r = strings.ReplaceAll(r, ", right?", "?")
		r = strings.ReplaceAll(r, ", you know?", "?")
	}
	return r
}

// lightPhraseStart flags the (lowercase) first letters of lightDropPhrases.
var lightPhraseStart = func() (t [256]bool) {
	for _, ph := range lightDropPhrases {
		t[ph[0][0]] = true
	}
	return t
}()

// isLightDrop reports a hedge word that condenseLight drops (with or
// without a trailing comma; "like," only with one).
func isLightDrop(w string) bool {
	if !isASCII(w) {
		lw := strings.ToLower(w)
		base := strings.TrimSuffix(lw, ",")
		return lightDropWords[lw] || (base != lw && (lightDropWords[base] || base == "like"))
	}
	if len(w) < 2 || len(w) > lightDropMaxLen+1 || !lightDropPair[w[0]|0x20][w[1]|0x20] {
		return false // (+1: a trailing comma; every word of the list has two letters or more)
	}
	if lexicon.getLower(w)&lxLightDrop != 0 {
		return true
	}
	if base, ok := strings.CutSuffix(w, ","); ok {
		return lexicon.getLower(base)&lxLightDrop != 0 || lowerEq(base, "like")
	}
	return false
}

// lightDropPair flags the (lowercase) first two letters of lightDropWords
// and "like": an ASCII word whose first two bytes, lowercased (c|0x20),
// are no such pair is no hedge.
var lightDropPair = func() (t [256][256]bool) {
	t['l']['i'] = true
	for w := range lightDropWords {
		t[w[0]][w[1]] = true
	}
	return t
}()

// lightDropMaxLen is the length of the longest of lightDropWords (and
// "like"), in bytes.
var lightDropMaxLen = func() int {
	n := len("like")
	for w := range lightDropWords {
		n = max(n, len(w))
	}
	return n
}()

// clauseSplitters separate clauses for hard condensation.
var clauseSplitters = []string{", ", "; ", " - ", " -- ", " but ", " because ", " although ",
	" though ", " since ", " which ", " so that ", " and then ", " cause ", " cuz "}

// condenseHard keeps the first clause of a sentence and any later clause
// that carries identifiers, names, decisions or questions; clauses in quotes
// are never split.
func condenseHard(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	last, _ := utf8.DecodeLastRuneInString(s)
	term := byte('.')
	if last == '?' {
		term = '?'
	} else if last == '!' {
		term = '!'
	}
	var arr [32]clause
	clauses := splitClauses(arr[:0], s)
	if len(clauses) <= 1 {
		return s
	}
	// A kept clause with its separator is s[c.at:c.end].
	var karr [32]clause
	kept := append(karr[:0], clauses[0])
	n := runeLen(clauses[0].text)
	for _, c := range clauses[1:] {
		if keepClause(c.text) {
			kept = append(kept, c)
			n += runeLen(s[c.at:c.end])
		}
	}
	if n > 160 && len(kept) > 2 {
		kept = append(kept[:1], kept[len(kept)-1])
	}
	contiguous := true
	for i := 1; i < len(kept); i++ {
		contiguous = contiguous && kept[i].at == kept[i-1].end
	}
	if contiguous { // kept[0].at == 0
		r := strings.TrimRight(s[:kept[len(kept)-1].end], " ,;:-.!?")
		if len(r) < len(s) && s[len(r)] == term {
			return s[:len(r)+1]
		}
		return r + string(term)
	}
	var buf [256]byte
	b := buf[:0]
	for _, c := range kept {
		b = append(b, s[c.at:c.end]...)
	}
	b = bytes.TrimRight(b, " ,;:-.!?")
	// a kept question clause may end with '?' inside; use the original end
	return string(append(b, term))
}

// clauseIndex lists the clause splitters by their first two bytes, in
// clauseSplitters order. It is read-only after package initialization.
var clauseIndex = func() (t [256]*[256][]string) {
	for _, sp := range clauseSplitters {
		if t[sp[0]] == nil {
			t[sp[0]] = new([256][]string)
		}
		t[sp[0]][sp[1]] = append(t[sp[0]][sp[1]], sp)
	}
	return t
}()

// keepClause reports whether condenseHard keeps a secondary clause: it
// carries entities, a decision, a question or a request (the traits of
// analyze(s, nil)), or a reply.
func keepClause(s string) bool {
	if strings.Contains(s, " agreed") || strings.Contains(s, " said yes") ||
		strings.Contains(s, " said no") || hasEntity(s) {
		return true
	}
	end := strings.TrimRight(strings.TrimSpace(s), "\"')")
	if strings.HasSuffix(end, "?") {
		return true
	}
	p := plain(s)
	m := matchPhrases(p)
	if m&(phRequest|phStrongDecision) != 0 {
		return true
	}
	// a question word opens a question only when no '.' or '!' ends it
	// (see analyzeWords)
	return !strings.HasSuffix(end, ".") && !strings.HasSuffix(end, "!") &&
		(m&phQuestionStart != 0 || hasPrefixClass(skipDiscourse(p), phQuestionStart))
}

// clause is a clause of a sentence s: s[at:end] is its separator (none for
// the first clause) followed by its text.
type clause struct {
	text    string
	at, end int
}

// splitClauses splits s at clause boundaries outside double quotes.
func splitClauses(dst []clause, s string) []clause {
	inQuote := false
	start, at := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			inQuote = !inQuote
			continue
		}
		if inQuote || clauseIndex[s[i]] == nil || i+1 == len(s) {
			continue // (every splitter is longer than one byte)
		}
		for _, sp := range clauseIndex[s[i]][s[i+1]] {
			if strings.HasPrefix(s[i:], sp) {
				dst = append(dst, clause{text: s[start:i], at: at, end: i})
				at = i
				start = i + len(sp)
				i = start - 1
				break
			}
		}
	}
	return append(dst, clause{text: s[start:], at: at, end: len(s)})
}
