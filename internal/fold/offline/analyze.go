package offline

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// names is a case-insensitive set of participant names. has is asked
// about most words of every sentence, and most are no name: two bit masks
// (of the names' lengths and first bytes) turn most of them away without
// lowercasing and hashing them.
type names struct {
	m      map[string]string // lowercased → display form
	lens   uint64            // bit min(len(k), 63) of every key k
	firsts uint64            // bit k[0]&63 of every key k
	multi  bool              // some name has more than one word
}

func newNames(display ...string) names {
	n := names{m: make(map[string]string, len(display))}
	for _, d := range display {
		n.add(d)
	}
	return n
}

// add adds name d unless it is empty or known (in any case).
func (n *names) add(d string) {
	if d == "" || n.has(d) {
		return
	}
	k := strings.ToLower(d)
	n.m[k] = d
	n.lens |= 1 << min(len(k), 63)
	n.firsts |= 1 << (k[0] & 63)
	n.multi = n.multi || strings.Contains(k, " ")
}

// display is the display form of the name w (in any case), "" if unknown.
func (n names) display(w string) string { return n.m[strings.ToLower(w)] }

func (n names) has(w string) bool {
	if len(n.m) == 0 || w == "" {
		return false // (no key is empty)
	}
	// An ASCII first byte lowercases to the key's first byte, and an ASCII
	// word keeps its length.
	if c := w[0]; c < utf8.RuneSelf {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if n.firsts>>(c&63)&1 == 0 {
			return false
		}
	}
	if n.lens>>min(len(w), 63)&1 == 0 && isASCII(w) {
		return false
	}
	var buf [lowerBufLen]byte
	if b, ok := lowerASCII(&buf, w); ok {
		_, ok := n.m[string(b)]
		return ok
	}
	_, ok := n.m[strings.ToLower(w)]
	return ok
}

// prefixOf returns the display form of the longest name that s starts
// with (followed by a space or "'s"), "" if none: the speaker of a summary
// sentence.
func (n names) prefixOf(s string) string {
	best := ""
	for k, d := range n.m {
		if len(k) > len(best) && len(s) > len(k) && strings.EqualFold(s[:len(k)], k) &&
			(s[len(k)] == ' ' || s[len(k)] == '\'') {
			best = d
		}
	}
	return best
}

// fillerKind classifies a sentence that carries no conversational state.
type fillerKind int

const (
	notFiller fillerKind = iota
	fillerPlain
	fillerAgree
	fillerDisagree
)

// classifyFiller decides whether a sentence is filler (greeting, thanks,
// laughter, backchannel, small reaction) and, if so, whether it reads as
// assent or dissent.
func classifyFiller(s string, who names, extra map[string]bool) fillerKind {
	var arr [64]string
	return classifyWords(appendFields(arr[:0], s), who, extra)
}

// classifyWords is classifyFiller of the sentence whose fields are words.
func classifyWords(words []string, who names, extra map[string]bool) fillerKind {
	var arr [32]word
	return classifyInfos(appendWords(arr[:0], words), who, extra)
}

// classifyInfos is classifyFiller of the sentence whose words are ws.
func classifyInfos(ws []word, who names, extra map[string]bool) fillerKind {
	agree, neg, coreSeen := false, false, false
	for i := range ws {
		n := ws[i].n // norm(w)
		if n == "" || !hasLetterOrDigit(n) {
			continue // emoji, punctuation
		}
		_, v := lexVariantsOf(n, ws[i].lx) // n or a variant is in a list
		switch {
		case isLaugh(n):
			coreSeen = true
		case v&lxFillerCore != 0 || extra[n]:
			coreSeen = true
		case v&lxFillerSoft != 0 || who.has(n):
		default:
			return notFiller
		}
		if v&lxAgree != 0 {
			agree = true
		}
		if v&lxNeg != 0 {
			neg = true
		}
	}
	if !coreSeen && len(ws) > 3 {
		return notFiller
	}
	switch {
	case agree && !neg:
		return fillerAgree
	case neg && !agree:
		return fillerDisagree
	}
	return fillerPlain
}

// stripFillerInfos removes leading backchannels ("yeah so", "ok,", "lol")
// and trailing laughter from the sentence s, whose fields are words and
// ws their words.
func stripFillerInfos(s string, words []string, ws []word) string {
	i := 0
	for i < len(words)-1 {
		w := words[i]
		n := ws[i].n // norm(w)
		if n == "" && !hasLetterOrDigit(w) {
			i++
			continue
		}
		exact, v := lexVariantsOf(n, ws[i].lx)
		if v&lxLeadStrip != 0 || isLaugh(n) ||
			(exact&lxLeadStripComma != 0 && strings.HasSuffix(w, ",")) {
			i++
			continue
		}
		break
	}
	if i > 0 && i < len(words)-1 {
		if n := ws[i].n; n == "and" || n == "but" {
			i++ // "yes, and Bob switched …" → "Bob switched …"
		}
	}
	j := len(words)
	for j > i+1 {
		n := ws[j-1].n // norm
		if isLaugh(n) || (n == "" && !hasLetterOrDigit(words[j-1])) {
			j--
			continue
		}
		break
	}
	out := s
	if i > 0 || j < len(words) || !isSingleSpaced(s) {
		out = strings.Join(words[i:j], " ")
	}
	return strings.TrimLeft(out, ",;:-. ")
}

// traits are the signals a sentence carries.
type traits struct {
	question, request, proposal, offer   bool
	imperative                           bool
	strongDecision, decision, preference bool
	done, next, constraint               bool
	injection                            bool
	self, commit                         bool // about the speaker; a commitment or plan ("I'll", "going to")
	entities, content, numbers, dates    int
}

// analyze extracts traits from a sentence. who are the known participants
// (they count as entities once).
func analyze(s string, who names) traits {
	var arr [64]string
	return analyzeWords(s, appendFields(arr[:0], s), who)
}

// analyzeWords is analyze(s, who); words are the fields of s.
func analyzeWords(s string, words []string, who names) traits {
	var arr [32]word
	return analyzeInfos(s, appendWords(arr[:0], words), who)
}

// analyzeInfos is analyze(s, who); ws are the words of s.
func analyzeInfos(s string, ws []word, who names) traits {
	var t traits
	// p is plain(s) on the stack: the phrase checks below only read it,
	// and nothing of it outlives the call (pbuf is not written again).
	var pbuf [256]byte
	pb := appendPlain(pbuf[:0], s)
	p := unsafe.String(unsafe.SliceData(pb), len(pb))
	m := matchPhrases(p)
	trimmed := strings.TrimSpace(s)
	sd := skipDiscourse(p)
	// A question word opens many statements ("what I did was …"): without
	// a question mark it is a question only when nothing ends the sentence.
	end := strings.TrimRight(trimmed, "\"')")
	t.question = strings.HasSuffix(end, "?") ||
		!strings.HasSuffix(end, ".") && !strings.HasSuffix(end, "!") &&
			(m&phQuestionStart != 0 || hasPrefixClass(sd, phQuestionStart))
	t.request = m&phRequest != 0
	t.proposal = m&(phProposalStart|phLets|phSuggested) != 0
	if w, _, ok := strings.Cut(strings.TrimPrefix(sd, " "), " "); ok {
		t.imperative = imperativeVerbs[w]
	}
	t.offer = strings.HasPrefix(p, " let me ") || m&phOffered != 0 ||
		strings.HasPrefix(p, " i can ")
	t.strongDecision = m&phStrongDecision != 0
	t.decision = t.strongDecision || m&phWeakDecision != 0
	t.preference = m&phPreference != 0
	t.done = m&phDone != 0
	t.next = m&phNext != 0
	t.constraint = m&phConstraint != 0
	t.injection = isInjection(s)
	wordSignals(&t, s, ws, who)
	return t
}

// wordSignals counts, in one pass over the words of s (each word's core
// and lexicon entry found once), the entities and content words of s (see
// countWordsIn) and what later questions ask about: numbers (digits or
// number words), dates and times (calendar words, "3 pm", resolved dates),
// whether it is about its speaker (it opens with I/my/we, or with a
// participant's name as the sentences of a summary do) and whether it
// states a commitment or a plan ("I'll", "will", "going to", "gonna").
func wordSignals(t *traits, s string, ws []word, who names) {
	nameSeen := false
	for i := range ws {
		c := ws[i].c
		if c == "" {
			continue
		}
		// (lowercasing keeps the runes' count and letters and digits what
		// they are)
		lx := ws[i].lx // (one lookup for every class)
		if utf8.RuneCountInString(c) >= 3 && lx&lxStop == 0 && hasLetterOrDigit(c) {
			t.content++
		}
		name := who.has(c)
		switch {
		case name:
			if !nameSeen {
				nameSeen = true
				t.entities++
			}
		case isIdentifier(c):
			t.entities++
		case i > 0 && upperFirst(c) && lx&lxCommonCaps == 0 && !prevEndsSentence(ws[i-1].w):
			t.entities++
		}
		if lx&lxNumber != 0 || hasDigit(c) {
			t.numbers++
		}
		n := ws[i].n // (lowerEq(c, x) is n == x)
		if lx&lxCalendar != 0 || n == "pm" || n == "o'clock" ||
			n == "am" && i > 0 && hasDigit(ws[i-1].w) {
			t.dates++
		}
		if i == 0 {
			t.self = lx&lxSelf != 0 || name
		}
		if lx&lxPlan != 0 || len(c) > 3 && lowerEq(c[len(c)-3:], "'ll") ||
			n == "going" && i+1 < len(ws) && ws[i+1].n == "to" {
			t.commit = true
		}
	}
	t.entities += strings.Count(s, "\"") / 2
}

func hasDigit(s string) bool {
	for i := 0; i < len(s); i++ {
		if '0' <= s[i] && s[i] <= '9' {
			return true
		}
	}
	return false
}

var (
	numberWords = toSet("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
		"twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen",
		"twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety", "hundred",
		"thousand", "million", "billion", "dozen", "half", "percent")
	firstPersonOpeners = toSet("i", "i'm", "i've", "i'll", "i'd", "my", "we", "we're", "we've", "we'll", "our", "me")
	willWords          = toSet("will", "gonna", "plan", "planning", "promise", "decided", "scheduled")
)

// countWords counts the content words and the entities of s: participant
// names (once), identifiers, and capitalized words that do not start a
// sentence, plus quoted strings.
func countWords(s string, who names) (entities, content int) {
	var arr [64]string
	return countWordsIn(s, appendFields(arr[:0], s), who)
}

// countWordsIn is countWords(s, who); words are the fields of s.
func countWordsIn(s string, words []string, who names) (entities, content int) {
	nameSeen := false
	for i, w := range words {
		c := core(w)
		if c == "" {
			continue
		}
		// (lowercasing keeps the runes' count and letters and digits what
		// they are)
		lx := lexLower(c)
		if utf8.RuneCountInString(c) >= 3 && lx&lxStop == 0 && hasLetterOrDigit(c) {
			content++
		}
		switch {
		case who.has(c):
			if !nameSeen {
				nameSeen = true
				entities++
			}
		case isIdentifier(c):
			entities++
		case i > 0 && upperFirst(c) && lx&lxCommonCaps == 0 && !prevEndsSentence(words[i-1]):
			entities++
		}
	}
	entities += strings.Count(s, "\"") / 2
	return entities, content
}

// hasEntity reports countWords(s, names{}) > 0 for entities.
func hasEntity(s string) bool {
	if strings.Count(s, "\"") >= 2 {
		return true
	}
	prev := ""
	first := true
	for w := range strings.FieldsSeq(s) {
		p := prev
		prev = w
		i0 := first
		first = false
		c := core(w)
		if c == "" {
			continue
		}
		if isIdentifier(c) || (!i0 && upperFirst(c) && lexLower(c)&lxCommonCaps == 0 && !prevEndsSentence(p)) {
			return true
		}
	}
	return false
}

var discourse = toSet("wait", "so", "and", "but", "ok", "okay", "hey", "um", "uh", "like",
	"well", "then", "also", "anyway", "guys", "oh", "hmm", "yo", "alright", "next", "now",
	"first", "finally", "please", "pls", "plz", "can", "could", "you")

// skipDiscourse drops leading discourse words from a plain() string.
func skipDiscourse(p string) string {
	for {
		w, rest, ok := strings.Cut(strings.TrimPrefix(p, " "), " ")
		if !ok || !discourse[w] {
			return p
		}
		p = p[len(p)-len(rest)-1:] // " " + rest: the space Cut found, onwards
	}
}

func prevEndsSentence(w string) bool {
	return strings.HasSuffix(w, ".") || strings.HasSuffix(w, "?") ||
		strings.HasSuffix(w, "!") || strings.HasSuffix(w, ":")
}

// isIdentifier reports numbers, times, paths, URLs, file names and code
// identifiers: tokens that must be kept verbatim and that carry facts.
func isIdentifier(c string) bool {
	digits, letters, ascii := false, false, true
	sep, camel := false, false // '/' or '_' ("://" has a '/'); ASCII aB
	lastDot := -1
	var pb byte // the previous byte
	for i := 0; i < len(c); i++ {
		switch b := c[i]; {
		case b >= utf8.RuneSelf:
			ascii = false
		case '0' <= b && b <= '9':
			digits = true
		case 'a' <= b && b <= 'z':
			letters = true
		case 'A' <= b && b <= 'Z':
			letters = true
			camel = camel || 'a' <= pb && pb <= 'z'
		case b == '/' || b == '_':
			sep = true
		case b == '.':
			lastDot = i
		}
		pb = c[i]
	}
	if ascii && !digits && letters {
		// the checks below, with what the loop saw
		return sep || lastDot > 0 && lastDot < len(c)-1 || camel
	}
	if !ascii {
		digits, letters = false, false
		for _, r := range c {
			if unicode.IsDigit(r) {
				digits = true
			} else if unicode.IsLetter(r) {
				letters = true
			}
		}
	}
	if digits {
		return true
	}
	if !letters {
		return false
	}
	if strings.Contains(c, "://") || strings.Contains(c, "/") || strings.Contains(c, "_") {
		return true
	}
	if i := strings.LastIndexByte(c, '.'); i > 0 && i < len(c)-1 {
		return true // file.go, example.com
	}
	// camelCase / PascalCase inner capital
	prev := rune(-1)
	for _, r := range c {
		if prev >= 0 && unicode.IsUpper(r) && unicode.IsLower(prev) {
			return true
		}
		prev = r
	}
	return false
}

// scoreTraits turns traits into an importance score.
func scoreTraits(t traits, agent bool) float64 {
	s := 1.0
	// A question holds no fact (its answer does) and a request in a
	// conversation is mostly logistics; an agent's user gives the task.
	switch {
	case t.request && agent:
		s += 2.5
	case t.request:
		s += 0.8
	case t.question:
		s += 0.2
	}
	if t.proposal {
		s += 1.5
	}
	if t.imperative {
		if agent {
			s += 2.5 // the user's instruction is the task
		} else {
			s += 0.5
		}
	}
	if t.offer {
		s += 1.0
	}
	switch {
	case t.strongDecision:
		s += 2.5
	case t.decision:
		s += 1.2
	}
	if t.preference {
		s += 1.2
	}
	if agent {
		if t.done {
			s += 1.5
		}
		if t.next {
			s += 1.0
		}
		if t.constraint {
			s += 1.5
		}
	}
	// The details later questions ask about: numbers, dates, names, what
	// someone said about themselves, what they will do.
	s += min(float64(t.numbers)*0.7, 2.1)
	s += min(float64(t.dates)*0.8, 1.6)
	if t.self {
		s += 0.5
	}
	if t.commit && t.content >= 4 {
		s += 0.8
	}
	s += min(float64(t.entities)*0.5, 2.5)
	s += min(float64(t.content)/4, 3)
	if t.content <= 3 && t.entities == 0 && t.numbers == 0 {
		s -= 2 // a fragment
	}
	if t.question && !t.request && t.entities == 0 && t.numbers == 0 {
		s -= 0.5
	}
	if t.injection && s > 1.5 {
		s = 1.5 // data, not instructions: never let it crowd out real content
	}
	return s
}

// tokenSet is the comparison form of a sentence for near-duplicate checks:
// content words, lowercased, light-stemmed, without attribution verbs and
// participant names (the same thing said again by someone else is a repeat).
func tokenSet(s string, who names) []string {
	var arr [64]string
	return tokenSetOf(appendFields(arr[:0], s), who)
}

// tokenSetOf is tokenSet of the sentence whose fields are words.
func tokenSetOf(words []string, who names) []string {
	var arr [32]word
	return tokenSetOfInfos(appendWords(arr[:0], words), who)
}

// tokenSetOfInfos is tokenSet of the sentence whose words are ws.
func tokenSetOfInfos(ws []word, who names) []string {
	var arr [64]string
	out := appendTokenSetInfos(arr[:0], ws, who)
	if len(out) == 0 {
		return nil
	}
	return slices.Clone(out)
}

// appendTokenSetInfos is appendTokenSet of the sentence whose words are
// ws: its tokens are (prefixes of) the words' lowercased forms.
func appendTokenSetInfos(dst []string, ws []word, who names) []string {
	mark := len(dst)
	return sortedSet(appendTokensInfos(dst, ws, who), mark)
}

// sortedSet sorts dst[mark:] and drops its repeats: the set of what was
// appended to dst from mark on.
func sortedSet(dst []string, mark int) []string {
	set := dst[mark:]
	slices.Sort(set)
	return dst[:mark+len(slices.Compact(set))]
}

// appendTokensInfos appends the token of each word of ws that has one,
// in order and with repeats: appendTokenSetInfos before its sort.
func appendTokensInfos(dst []string, ws []word, who names) []string {
	out := dst
	for i := range ws {
		n := collapseRuns(ws[i].n, 2)
		n = strings.TrimSuffix(n, "'s")
		lx := ws[i].lx
		if n != ws[i].n {
			lx = lexicon.get(n)
		}
		if n == "" || lx&(lxStop|lxAttribution) != 0 || !hasLetterOrDigit(n) || who.has(n) {
			continue
		}
		if len(n) > 4 && strings.HasSuffix(n, "ing") {
			n = n[:len(n)-3]
		} else if len(n) > 3 && strings.HasSuffix(n, "s") && !strings.HasSuffix(n, "ss") {
			n = n[:len(n)-1]
		}
		out = append(out, n)
	}
	return out
}

// appendTokenSet appends tokenSetOf(words, who) to dst (callers that build
// many sets share one slice). The words are classed 32 at a time, on the
// stack: a long text (the period lines) allocates no words.
func appendTokenSet(dst []string, words []string, who names) []string {
	mark := len(dst)
	var arr [32]word
	for len(words) > 0 {
		n := min(len(words), len(arr))
		dst = appendTokensInfos(dst, appendWords(arr[:0], words[:n]), who)
		words = words[n:]
	}
	return sortedSet(dst, mark)
}

// tokSet is a tokenSet with a signature for a quick test of nearDup: bit
// tokBit(t) of sig is set for every token t, and bits[i] is that bit's
// index for toks[i].
type tokSet struct {
	toks []string
	bits []uint8
	sig  uint64
}

func newTokSet(toks []string) tokSet { return newTokSetIn(toks, make([]uint8, len(toks))) }

// newTokSetIn is newTokSet(toks) with bits (of len(toks)) from the caller.
func newTokSetIn(toks []string, bits []uint8) tokSet {
	ts := tokSet{toks: toks, bits: bits[:len(toks):len(toks)]}
	for i, t := range toks {
		b := uint8(hashLower(t) & 63)
		ts.bits[i] = b
		ts.sig |= 1 << b
	}
	return ts
}

// nearDupSets is nearDup(a.toks, b.toks). A token of a whose bit is not in
// b's signature is not in b, so counting the others bounds the
// intersection from above: most pairs fail on that bound alone.
func nearDupSets(a, b *tokSet) bool {
	need, ok := dupBar(len(a.toks), len(b.toks))
	if !ok {
		return false
	}
	if len(a.toks) > len(b.toks) {
		a, b = b, a // the smaller set gives the tighter bound
	}
	bound := 0
	for _, bit := range a.bits {
		bound += int(b.sig >> bit & 1)
	}
	if bound < need {
		return false
	}
	return nearDup(a.toks, b.toks)
}

// nearDup reports whether two token sets (sorted, as tokenSet returns
// them) say substantially the same thing.
func nearDup(a, b []string) bool {
	// need is the least intersection that makes them duplicates: stop as
	// soon as it is out of reach.
	need, ok := dupBar(len(a), len(b))
	if !ok {
		return false
	}
	inter := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		if inter+min(len(a)-i, len(b)-j) < need {
			return false
		}
		switch c := strings.Compare(a[i], b[j]); {
		case c == 0:
			inter++
			i++
			j++
		case c < 0:
			i++
		default:
			j++
		}
	}
	return inter >= need
}

// dupBar is the least intersection at which token sets of n and m tokens
// are near duplicates; ok is false when no intersection makes them so.
// Sets of fewer than 3 tokens must be equal; larger ones pass dupRatio.
func dupBar(n, m int) (need int, ok bool) {
	small, large := min(n, m), max(n, m)
	switch {
	case small == 0 || small < 3 && small != large:
		return 0, false
	case small < 3:
		return small, true
	}
	return dupNeed(small, n+m), true
}

// dupNeed is the least inter for which dupRatio(inter, small, sum) holds
// (it grows with inter, and holds for inter = small), in integers:
// inter/small >= 0.8 is 5·inter >= 4·small and inter/(sum-inter) >= 0.6 is
// 8·inter >= 3·sum.
func dupNeed(small, sum int) int {
	return min((4*small+4)/5, (3*sum+7)/8)
}

// dupRatio is nearDup's test for sets of at least 3 tokens: the
// intersection covers most of the smaller set or of the union.
func dupRatio(inter, small, sum int) bool {
	union := sum - inter
	return float64(inter)/float64(small) >= 0.8 || float64(inter)/float64(union) >= 0.6
}
