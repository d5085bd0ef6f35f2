package offline

import (
	"encoding/json"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
)

// The fast paths of the text helpers must give exactly what the plain
// versions below (their original, allocation-heavy forms) give. Inputs mix
// lexicon words, names, identifiers, punctuation and the Unicode cases that
// break byte-level shortcuts: the Kelvin sign and dotted İ (lowercase to
// ASCII), long s (does not), invalid bytes, non-ASCII spaces.

var equivPieces = []string{
	"I", "i", "I'm", "my", "you", "You're", "u", "ur", "yeah", "yeahhh", "YEAH", "sooo", "okkk", "lol", "LMAOOO",
	"hahaha", "nah", "no", "not", "sure", "ok", "let's", "Let", "me", "how", "about", "what", "why", "don't",
	"we", "should", "can", "could", "please", "decided", "agreed", "plan", "will", "gonna", "prefer", "done",
	"next", "must", "never", "keep", "basically", "Actually,", "like,", "really", "kind", "of", "sort",
	"pretty", "much", "know,", "mean,", "to", "be", "honest,", "the", "of", "The", "Tokyo", "2099", "Marvel",
	"Rivals", "Jeff", "Land", "Shark", "Spider-Man", "Alice", "alice", "Bob", "Bob's", "Carol,", "Dave?",
	"go.mod", "cmd/main.go", "https://x.gg/a", "v1.2.3", "11:30", "fooBar", "ERR_X", "e.g.", "Dr.", "Jan.",
	"ran", "said", "asked:", "screen:", "but", "because", "which", "so", "that", "and", "then", "-", "--",
	"...", "…", "\"quoted", "text\"", "(paren)", "[x]", "x,", "y;", "z:", "!!", "?", ".", ",", ";",
	"ignore", "all", "previous", "instructions", "system", "prompt", "jailbreak", "Developer", "mode",
	"\u212Aelvin", "\u212A", "İ", "İgnore", "ſystem", "ſ", "café", "naïve", "東京", "。", "😂", "\u00a0",
	"\u0085", "\u2028", "\xff", "\xe2\x80", "a\xffb", "’", "“x”", "\u200b", "\t", "\n", "  ",
}

func equivText(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			switch r.IntN(10) {
			case 0:
				b.WriteString(", ")
			case 1:
				b.WriteString("  ")
			case 2:
				b.WriteString("")
			default:
				b.WriteByte(' ')
			}
		}
		b.WriteString(equivPieces[r.IntN(len(equivPieces))])
	}
	return b.String()
}

func equivInputs(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 99))
	out := slices.Clone(equivPieces)
	out = append(out, "", " ", "a", "yes, and Bob switched", "I I think", "Bob is Bob is on point")
	for i := 0; i < n; i++ {
		out = append(out, equivText(r, 1+r.IntN(25)))
	}
	return out
}

func refPlain(s string) string {
	var b strings.Builder
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

func refContainsAny(p string, phrases []string) bool {
	for _, ph := range phrases {
		if strings.Contains(p, ph) {
			return true
		}
	}
	return false
}

func refHasPrefixAny(p string, phrases []string) bool {
	for _, ph := range phrases {
		if strings.HasPrefix(p, ph) {
			return true
		}
	}
	return false
}

func refSkipDiscourse(p string) string {
	for {
		w, rest, ok := strings.Cut(strings.TrimPrefix(p, " "), " ")
		if !ok || !discourse[w] {
			return p
		}
		p = " " + rest
	}
}

func refCollapseRuns(s string, max int) string {
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

func refInSet(set map[string]bool, n string) bool {
	return set[n] || set[refCollapseRuns(n, 2)] || set[refCollapseRuns(n, 1)]
}

func TestEquivWordHelpers(t *testing.T) {
	who := newNames("Alice", "Bob", "Carol")
	for _, s := range equivInputs(1, 3000) {
		if got, want := plain(s), refPlain(s); got != want {
			t.Fatalf("plain(%q) = %q, want %q", s, got, want)
		}
		p := plain(s)
		m := matchPhrases(p)
		for _, c := range []struct {
			bit  uint16
			want bool
		}{
			{phQuestionStart, refHasPrefixAny(p, questionStarts)},
			{phProposalStart, refHasPrefixAny(p, proposalStarts)},
			{phRequest, refContainsAny(p, requestPhrases)},
			{phStrongDecision, refContainsAny(p, strongDecision)},
			{phWeakDecision, refContainsAny(p, weakDecision)},
			{phPreference, refContainsAny(p, preferencePhrases)},
			{phDone, refContainsAny(p, donePhrases)},
			{phNext, refContainsAny(p, nextPhrases)},
			{phConstraint, refContainsAny(p, constraintPhrases)},
			{phLets, strings.Contains(p, " let's ")},
			{phSuggested, strings.Contains(p, " suggested ")},
			{phOffered, strings.Contains(p, " offered ")},
		} {
			if got := m&c.bit != 0; got != c.want {
				t.Fatalf("matchPhrases(%q) bit %b = %v, want %v", p, c.bit, got, c.want)
			}
		}
		if got, want := skipDiscourse(p), refSkipDiscourse(p); got != want {
			t.Fatalf("skipDiscourse(%q) = %q, want %q", p, got, want)
		}
		if got, want := hasPrefixClass(skipDiscourse(p), phQuestionStart), refHasPrefixAny(refSkipDiscourse(p), questionStarts); got != want {
			t.Fatalf("question start of %q = %v, want %v", p, got, want)
		}
		if got, want := isInjection(s), injectionRe.MatchString(s); got != want {
			t.Fatalf("isInjection(%q) = %v, want %v", s, got, want)
		}
		if got, want := appendFields(nil, s), strings.Fields(s); !slices.Equal(got, want) {
			t.Fatalf("appendFields(%q) = %q, want %q", s, got, want)
		}
		if got, want := isSingleSpaced(s), strings.Join(strings.Fields(s), " ") == s; got != want {
			t.Fatalf("isSingleSpaced(%q) = %v, want %v", s, got, want)
		}
		if isCleanASCII(s) && sanitizeText(s, 0) != s {
			t.Fatalf("sanitize changes clean %q", s)
		}
		for _, max := range []int{1, 2} {
			if got, want := collapseRuns(s, max), refCollapseRuns(s, max); got != want {
				t.Fatalf("collapseRuns(%q, %d) = %q, want %q", s, max, got, want)
			}
		}
		if got, want := hasSecondPerson(s), slices.ContainsFunc(strings.Fields(s), func(w string) bool {
			return secondPerson[strings.ToLower(strings.Trim(w, trimPunct))]
		}); got != want {
			t.Fatalf("hasSecondPerson(%q) = %v, want %v", s, got, want)
		}
		ents, content := countWords(s, who)
		if wantE, wantC := refCountWords(s, who); ents != wantE || content != wantC {
			t.Fatalf("countWords(%q) = %d, %d; want %d, %d", s, ents, content, wantE, wantC)
		}
		if got, want := hasEntity(s), func() bool { e, _ := refCountWords(s, names{}); return e > 0 }(); got != want {
			t.Fatalf("hasEntity(%q) = %v, want %v", s, got, want)
		}
		if got, want := tokenSet(s, who), refTokenSet(s, who); !slices.Equal(got, want) {
			t.Fatalf("tokenSet(%q) = %q, want %q", s, got, want)
		}
		if got, want := condenseLight(s), refCondenseLight(s); got != want {
			t.Fatalf("condenseLight(%q) = %q, want %q", s, got, want)
		}
		if got, want := condenseHard(s), refCondenseHard(s); got != want {
			t.Fatalf("condenseHard(%q) = %q, want %q", s, got, want)
		}
		if got, want := collapseRepeats(s), refCollapseRepeats(s); got != want {
			t.Fatalf("collapseRepeats(%q) = %q, want %q", s, got, want)
		}
		if utf8.ValidString(s) { // splitSentences only sees sanitized text
			if got, want := appendLine(nil, s), refSplitLine(s); !slices.Equal(got, want) {
				t.Fatalf("appendLine(%q) = %q, want %q", s, got, want)
			}
		}
		for _, w := range strings.Fields(s) {
			c := strings.Trim(w, trimPunct)
			if core(w) != c {
				t.Fatalf("core(%q) = %q, want %q", w, core(w), c)
			}
			if pre, mid, suf := splitWord(w); pre+mid+suf != w || mid != c {
				t.Fatalf("splitWord(%q) = %q %q %q", w, pre, mid, suf)
			}
			n := strings.ToLower(c)
			if norm(w) != n {
				t.Fatalf("norm(%q) = %q, want %q", w, norm(w), n)
			}
			for _, lit := range []string{"i", "and", "kind", "you", "let's", "we"} {
				if lowerEq(c, lit) != (n == lit) {
					t.Fatalf("lowerEq(%q, %q) wrong", c, lit)
				}
			}
			exact, any := lexVariants(n)
			for _, l := range []struct {
				bit uint32
				set map[string]bool
			}{{lxFillerCore, fillerCore}, {lxFillerSoft, fillerSoft}, {lxAgree, agreeWords}, {lxNeg, negWords}, {lxLeadStrip, leadStrip}} {
				if got, want := any&l.bit != 0, refInSet(l.set, n); got != want {
					t.Fatalf("lexVariants(%q) bit %b = %v, want %v", n, l.bit, got, want)
				}
			}
			if got, want := exact&lxLeadStripComma != 0, leadStripComma[n]; got != want {
				t.Fatalf("lexVariants(%q) exact = %v, want %v", n, got, want)
			}
			lw := strings.ToLower(w)
			base := strings.TrimSuffix(lw, ",")
			if got, want := isLightDrop(w), lightDropWords[lw] || (base != lw && (lightDropWords[base] || base == "like")); got != want {
				t.Fatalf("isLightDrop(%q) = %v, want %v", w, got, want)
			}
			if got, want := isIdentifier(c), refIsIdentifier(c); got != want {
				t.Fatalf("isIdentifier(%q) = %v, want %v", c, got, want)
			}
			if got, want := hasLetterOrDigit(c), strings.ContainsFunc(c, func(r rune) bool {
				return unicode.IsLetter(r) || unicode.IsDigit(r)
			}); got != want {
				t.Fatalf("hasLetterOrDigit(%q) = %v, want %v", c, got, want)
			}
			if got, want := allLettersExcept(w, '\''), isAllLetters(strings.ReplaceAll(w, "'", "")); got != want {
				t.Fatalf("allLettersExcept(%q) = %v, want %v", w, got, want)
			}
		}
	}
}

func TestEquivNearDup(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	vocab := strings.Fields("a b c d e f g h i j k l")
	set := func() []string {
		var s []string
		for _, w := range vocab {
			if r.IntN(3) == 0 {
				s = append(s, w)
			}
		}
		return s
	}
	for i := 0; i < 100000; i++ {
		a, b := set(), set()
		if got, want := nearDup(a, b), refNearDup(a, b); got != want {
			t.Fatalf("nearDup(%q, %q) = %v, want %v", a, b, got, want)
		}
		if got, want := nearDupSets(ptr(newTokSet(a)), ptr(newTokSet(b))), refNearDup(a, b); got != want {
			t.Fatalf("nearDupSets(%q, %q) = %v, want %v", a, b, got, want)
		}
	}
}

// dupNeed is the least intersection that dupRatio accepts.
func TestEquivDupNeed(t *testing.T) {
	for small := 3; small <= 300; small++ {
		for sum := 2 * small; sum <= 2*small+600; sum++ {
			want := 0
			for !dupRatio(want, small, sum) {
				want++
			}
			if got := dupNeed(small, sum); got != want {
				t.Fatalf("dupNeed(%d, %d) = %d, want %d", small, sum, got, want)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

func refNearDup(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	small, large := len(a), len(b)
	if small > large {
		small, large = large, small
	}
	if small < 3 && small != large {
		return false
	}
	inter := 0
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] == b[j]:
			inter++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	if small < 3 {
		return inter == small
	}
	union := len(a) + len(b) - inter
	return float64(inter)/float64(small) >= 0.8 || float64(inter)/float64(union) >= 0.6
}

func refCountWords(s string, who names) (entities, content int) {
	words := strings.Fields(s)
	nameSeen := false
	for i, w := range words {
		c := strings.Trim(w, trimPunct)
		if c == "" {
			continue
		}
		n := strings.ToLower(c)
		if len([]rune(n)) >= 3 && !stopwords[n] && hasLetterOrDigit(n) {
			content++
		}
		_, name := who.m[n]
		switch {
		case name:
			if !nameSeen {
				nameSeen = true
				entities++
			}
		case refIsIdentifier(c):
			entities++
		case i > 0 && upperFirst(c) && !commonCaps[n] && !prevEndsSentence(words[i-1]):
			entities++
		}
	}
	entities += strings.Count(s, "\"") / 2
	return entities, content
}

func refIsIdentifier(c string) bool {
	digits, letters := false, false
	for _, r := range c {
		if unicode.IsDigit(r) {
			digits = true
		} else if unicode.IsLetter(r) {
			letters = true
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
		return true
	}
	rs := []rune(c)
	for i := 1; i < len(rs); i++ {
		if unicode.IsUpper(rs[i]) && unicode.IsLower(rs[i-1]) {
			return true
		}
	}
	return false
}

func refTokenSet(s string, who names) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.Fields(s) {
		n := refCollapseRuns(strings.ToLower(strings.Trim(w, trimPunct)), 2)
		n = strings.TrimSuffix(n, "'s")
		_, name := who.m[strings.ToLower(n)]
		if n == "" || stopwords[n] || attribution[n] || !hasLetterOrDigit(n) || name {
			continue
		}
		if len(n) > 4 && strings.HasSuffix(n, "ing") {
			n = n[:len(n)-3]
		} else if len(n) > 3 && strings.HasSuffix(n, "s") && !strings.HasSuffix(n, "ss") {
			n = n[:len(n)-1]
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func refCondenseLight(s string) string {
	words := strings.Fields(s)
	out := make([]string, 0, len(words))
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
		lw := strings.ToLower(w)
		base := strings.TrimSuffix(lw, ",")
		if i > 0 && (lightDropWords[lw] || (base != lw && (lightDropWords[base] || base == "like"))) {
			continue
		}
		matched := false
		if i > 0 {
			for _, ph := range lightDropPhrases {
				if i+len(ph) <= len(words) {
					ok := true
					for k, p := range ph {
						if strings.ToLower(words[i+k]) != p {
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
	r := strings.Join(out, " ")
	r = strings.ReplaceAll(r, ", right?", "?")
	r = strings.ReplaceAll(r, ", you know?", "?")
	return r
}

func refCondenseHard(s string) string {
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
	type cl struct{ sep, text string }
	var clauses []cl
	inQuote := false
	start, sep := 0, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			inQuote = !inQuote
			continue
		}
		if inQuote {
			continue
		}
		for _, sp := range clauseSplitters {
			if strings.HasPrefix(s[i:], sp) {
				clauses = append(clauses, cl{sep, s[start:i]})
				sep = sp
				start = i + len(sp)
				i = start - 1
				break
			}
		}
	}
	clauses = append(clauses, cl{sep, s[start:]})
	if len(clauses) <= 1 {
		return s
	}
	kept := []string{clauses[0].text}
	for _, c := range clauses[1:] {
		t := analyze(c.text, names{})
		if t.entities > 0 || t.strongDecision || t.question || t.request ||
			strings.Contains(c.text, " agreed") || strings.Contains(c.text, " said yes") ||
			strings.Contains(c.text, " said no") {
			kept = append(kept, c.sep+c.text)
		}
	}
	r := strings.Join(kept, "")
	if runeLen(r) > 160 && len(kept) > 2 {
		r = kept[0] + kept[len(kept)-1]
	}
	r = strings.TrimRight(r, " ,;:-.!?")
	return string(append([]byte(r), term))
}

func refCollapseRepeats(s string) string {
	if strings.Contains(s, "\"") {
		return s
	}
	norm := func(w string) string { return strings.ToLower(strings.Trim(w, trimPunct)) }
	same := func(a, b []string) bool {
		for i := range a {
			na, nb := norm(a[i]), norm(b[i])
			if na == "" || na != nb || !isAllLetters(strings.ReplaceAll(na, "'", "")) {
				return false
			}
			if i < len(a)-1 && (core(a[i]) != a[i] || core(b[i]) != b[i]) {
				return false
			}
		}
		return core(a[len(a)-1]) == a[len(a)-1]
	}
	words := strings.Fields(s)
	for n := 3; n >= 1; n-- {
		out := words[:0:0]
		for i := 0; i < len(words); {
			if i+2*n <= len(words) && same(words[i:i+n], words[i+n:i+2*n]) {
				i += n
				continue
			}
			out = append(out, words[i])
			i++
		}
		words = out
	}
	return strings.Join(words, " ")
}

func refSplitLine(line string) []string {
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
	lastWord := func(rs []rune) string {
		k := len(rs)
		for k > 0 && !unicode.IsSpace(rs[k-1]) {
			k--
		}
		return strings.TrimLeft(strings.ToLower(string(rs[k:])), "\"'([{*_")
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

// The regular expressions that matchLead, matchSmallTalk and matchMore
// replace.
var (
	moreRe      = regexp.MustCompile(`^(.*) and (\d+) more$`)
	leadRe      = regexp.MustCompile(`^(.+?) (?:are|is) (?:talking about (.+)|working on (.+)|in the session)\.$`)
	smallTalkRe = regexp.MustCompile(`^(.+?) (?:exchanged|made) small talk\.$`)
	othersRe    = regexp.MustCompile(`^(\d+) others?$`)
	replyRe     = regexp.MustCompile(`^[^.?!]{1,80} (said yes|said no|agreed|disagreed)\.$`)
)

func TestEquivReplyAndOthers(t *testing.T) {
	in := equivInputs(17, 3000)
	long := strings.Repeat("é", 79)
	for _, s := range []string{"Bob", "Bob and Carol", "", " ", "a.b", "x?", "Bob!", long, long + "x", long + "xy",
		"\xff", "\xffé", strings.Repeat("a", 80), strings.Repeat("a", 81), "3", "12", "007", "٣", "3x", "x3", "3 3"} {
		for _, tl := range []string{" said yes.", " said no.", " agreed.", " disagreed.", "agreed.", " said yes",
			" said  yes.", " Agreed.", " said no.x", " others", " other", " otherss", "others", " 3 others"} {
			in = append(in, s+tl, tl, s+tl+tl, s+" "+tl)
		}
	}
	for _, s := range in {
		if got, want := isReply(s), replyRe.MatchString(s); got != want {
			t.Fatalf("isReply(%q) = %v, want %v", s, got, want)
		}
		n, ok := matchOthers(s)
		m := othersRe.FindStringSubmatch(s)
		if ok != (m != nil) || ok && n != m[1] {
			t.Fatalf("matchOthers(%q) = %q, %v; want %q", s, n, ok, m)
		}
	}
}

func TestEquivMatchMore(t *testing.T) {
	in := equivInputs(7, 3000)
	for _, s := range []string{"a.go", "a.go, b.go", "", "x", "\n", "é", "a\nb", "x, y"} {
		for _, tl := range []string{" and 3 more", " and 12 more", "and 3 more", " and  3 more", " and 3x more",
			" and x3 more", " and 3 more ", " and 3 moree", " and ٣ more", " and  more", " and 5 and 12 more",
			" and 3 more and 4 more", " 3 more", " and 0 more", " and 007 more"} {
			in = append(in, s+tl, tl+s, s+tl+s+tl)
		}
	}
	for _, s := range in {
		list, n, ok := matchMore(s)
		m := moreRe.FindStringSubmatch(s)
		if ok != (m != nil) || ok && (list != m[1] || n != m[2]) {
			t.Fatalf("matchMore(%q) = %q, %q, %v; want %q", s, list, n, ok, m)
		}
	}
}

func TestEquivPreviousSummary(t *testing.T) {
	in := equivInputs(5, 3000)
	subjects := []string{"Alice", "Alice and Bob", "Alice is here and Bob", "A, B and 3 others", "x are y", " ", "é"}
	tails := []string{"are talking about X.", "is talking about X, Y and Z.", "are working on a.go.", "is in the session.",
		"are in the session.", "are talking about .", "is talking about is in the session.", "are working on are in the session.",
		"exchanged small talk.", "made small talk.", "are talking about X", "are made small talk.", "is working on  ."}
	for _, s := range subjects {
		for _, tl := range tails {
			in = append(in, s+" "+tl, s+tl, tl, " "+tl, s+" "+tl+" "+tl)
		}
	}
	for _, s := range in {
		if strings.ContainsAny(s, "\n\r") {
			continue // a sentence has no line breaks
		}
		subj, topics, ok := matchLead(s)
		m := leadRe.FindStringSubmatch(s)
		if ok != (m != nil) || ok && (subj != m[1] || topics != m[2]+m[3]) {
			t.Fatalf("matchLead(%q) = %q, %q, %v; want %q", s, subj, topics, ok, m)
		}
		subj, ok = matchSmallTalk(s)
		m = smallTalkRe.FindStringSubmatch(s)
		if ok != (m != nil) || ok && subj != m[1] {
			t.Fatalf("matchSmallTalk(%q) = %q, %v; want %q", s, subj, ok, m)
		}
		for _, w := range []string{s, s + " e.g", "x (Dr", strings.Repeat("a.", 40), "x " + strings.Repeat("a.", 40) + "b"} {
			lw := lastWord(w)
			if got, want := isAbbrev(w), abbrevs[lw] || isDottedAbbrev(lw); got != want {
				t.Fatalf("isAbbrev(%q) = %v, want %v", w, got, want)
			}
		}
	}
}

// refIsCleanASCII is isCleanASCII one byte at a time.
func refIsCleanASCII(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' {
		return s == ""
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ' ' {
			if s[i-1] == ' ' {
				return false
			}
		} else if c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

func TestEquivCleanASCII(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 99))
	// mostly clean text, so that the word-at-a-time checks decide; the
	// rare bytes are the edges of each mask
	rare := []byte{0, '\t', '\n', 0x1f, 0x21, 0x7e, 0x7f, 0x80, 0xa0, 0xff}
	for n := 0; n < 200000; n++ {
		b := make([]byte, r.IntN(40))
		for i := range b {
			switch k := r.IntN(100); {
			case k < 20:
				b[i] = ' '
			case k < 22:
				b[i] = rare[r.IntN(len(rare))]
			default:
				b[i] = byte(0x21 + r.IntN(0x7e-0x21+1))
			}
		}
		if s := string(b); isCleanASCII(s) != refIsCleanASCII(s) {
			t.Fatalf("isCleanASCII(%q) = %v, want %v", s, isCleanASCII(s), refIsCleanASCII(s))
		}
	}
}

func TestEquivToolErrFilter(t *testing.T) {
	in := equivInputs(13, 3000)
	in = append(in, "--- FAIL: TestBackoff (0.01s)", "exit status 1", "EXIT CODE 2", "No Such File or directory",
		"timed  out", "Can't open", "can’t open", "\u212Aelvin error", "ſuch", "panicked", "ERR_X", "0 errors", "not\tfound",
		"UnDeFiNeD", "refused.", "invalid:", "traceback (most recent call last)", "ok  \tgithub.com/x\t0.02s")
	for _, s := range in {
		for _, l := range strings.Split(s, "\n") {
			if toolErrRe.MatchString(l) && !mayBeToolErr(l) {
				t.Fatalf("mayBeToolErr(%q) = false, but toolErrRe matches", l)
			}
		}
	}
}

// refFactSignals is what wordSignals counts besides countWords: it counts what later questions ask about in the sentence whose
// fields are words: numbers (digits or number words), dates and times
// (calendar words, "3 pm", resolved dates), whether it is about its
// speaker (it opens with I/my/we, or with a participant's name as the
// sentences of a summary do) and whether it states a commitment or a plan
// ("I'll", "will", "going to", "gonna").
func refFactSignals(words []string, who names) (numbers, dates int, self, commit bool) {
	for i, w := range words {
		c := core(w)
		if c == "" {
			continue
		}
		lx := lexicon.getLower(c) // (one lookup for every class, without lowercasing)
		if lx&lxNumber != 0 || hasDigit(c) {
			numbers++
		}
		if lx&lxCalendar != 0 || lowerEq(c, "pm") || lowerEq(c, "o'clock") ||
			lowerEq(c, "am") && i > 0 && hasDigit(words[i-1]) {
			dates++
		}
		if i == 0 {
			self = lx&lxSelf != 0 || who.has(c)
		}
		if lx&lxPlan != 0 || len(c) > 3 && lowerEq(c[len(c)-3:], "'ll") ||
			lowerEq(c, "going") && i+1 < len(words) && lowerEq(core(words[i+1]), "to") {
			commit = true
		}
	}
	return numbers, dates, self, commit
}

func TestEquivWordSignals(t *testing.T) {
	who := newNames("Alice", "Bob", "Carol")
	for _, s := range equivInputs(19, 3000) {
		var arr [64]string
		words := appendFields(arr[:0], s)
		var got traits
		var warr [32]word
		wordSignals(&got, s, appendWords(warr[:0], words), who)
		var want traits
		want.entities, want.content = countWords(s, who)
		want.numbers, want.dates, want.self, want.commit = refFactSignals(words, who)
		if got != want {
			t.Fatalf("wordSignals(%q) = %+v, want %+v", s, got, want)
		}
	}
}

func TestEquivWords(t *testing.T) {
	for _, s := range equivInputs(23, 3000) {
		fs := strings.Fields(s)
		ws := appendWords(nil, fs)
		if len(ws) != len(fs) {
			t.Fatalf("appendWords(%q): %d words, want %d", s, len(ws), len(fs))
		}
		for i, f := range fs {
			n := strings.ToLower(core(f))
			if want := (word{w: f, c: core(f), n: n, lx: lexicon.get(n)}); ws[i] != want {
				t.Fatalf("appendWords(%q)[%d] = %+v, want %+v", s, i, ws[i], want)
			}
		}
	}
}

// refMemoryID is memoryID with hash/fnv.
func refMemoryID(m fold.Memory) string {
	h := fnv.New64a()
	h.Write([]byte(strings.ToLower(m.Speaker)))
	h.Write([]byte{0})
	for i, w := range strings.Fields(strings.TrimRight(m.Text, ". ")) {
		if i > 0 {
			h.Write([]byte{' '})
		}
		h.Write([]byte(strings.ToLower(w)))
	}
	return "m" + strconv.FormatUint(h.Sum64(), 16)
}

func TestEquivMemoryID(t *testing.T) {
	in := equivInputs(29, 2000)
	for i, s := range in {
		m := fold.Memory{Speaker: in[(i*7)%len(in)], Text: s}
		if got, want := memoryID(m), refMemoryID(m); got != want {
			t.Fatalf("memoryID(%q, %q) = %s, want %s", m.Speaker, m.Text, got, want)
		}
	}
}

func TestEquivRenderWords(t *testing.T) {
	who := newNames("Alice", "Bob")
	in := equivInputs(31, 3000)
	for _, s := range []string{"let's", "let us", "how about", "what if", "why don't we", "why not", "maybe we",
		"I suggest", "I vote", "I vote for", "ok guys let's", "Bob let's"} {
		for _, tl := range []string{"", " we", " go", " push B?", " for", " for Jeff.", " ?", " we go"} {
			in = append(in, s+tl)
		}
	}
	for _, s := range in {
		f := strings.Fields(s)
		ws := appendWords(nil, f)
		r1, ok1 := proposalRestInfos(ws, who)
		r2, ok2 := refProposalRestIn(f, who)
		if r1 != r2 || ok1 != ok2 {
			t.Fatalf("proposalRestInfos(%q) = %q, %v; want %q, %v", s, r1, ok1, r2, ok2)
		}
		if got, want := hasSecondPersonInfos(ws), hasSecondPersonIn(f); got != want {
			t.Fatalf("hasSecondPersonInfos(%q) = %v, want %v", s, got, want)
		}
	}
}

// refProposalRestIn (proposalRestInfos on fields) recognizes a proposal opener in the sentence whose fields
// are words and returns what is proposed, ready to follow "suggested":
// "let's push B" → "we push B", "how about Jeff?" → "Jeff".
func refProposalRestIn(words []string, who names) (string, bool) {
	var weArr [64]string
	// allow a few soft words or names before the opener ("ok guys let's …")
	start := 0
	for start < len(words) && start < 3 {
		n, nb, k := normParts(words[start]) // norm, on the stack
		if k > 0 {
			n = string(nb[:k])
		}
		if !(fillerSoft[n] || who.has(n) || fillerCore[n]) || n == "let's" || n == "lets" || n == "we" || n == "how" || n == "what" || n == "why" || n == "maybe" {
			break
		}
		start++
	}
	ws := words[start:]
	// is reports norm(ws[i]) == lit
	is := func(i int, lit string) bool { return i < len(ws) && lowerEq(core(ws[i]), lit) }
	we := func(tail []string) []string { return append(append(weArr[:0], "we"), tail...) }
	var rest []string
	switch {
	case is(0, "let's") || is(0, "lets"):
		rest = we(ws[1:])
	case is(0, "let") && is(1, "us"):
		rest = we(ws[2:])
	case (is(0, "how") || is(0, "what")) && is(1, "about") && len(ws) > 2:
		rest = ws[2:]
	case is(0, "what") && is(1, "if") && len(ws) > 2:
		rest = ws[2:]
	case is(0, "why") && (is(1, "don't") || is(1, "dont")) && is(2, "we") && len(ws) > 3:
		rest = we(ws[3:])
	case is(0, "why") && is(1, "not") && len(ws) > 2:
		rest = ws[2:]
	case is(0, "maybe") && is(1, "we") && len(ws) > 2:
		rest = ws[1:]
	case is(0, "i") && (is(1, "suggest") || is(1, "propose")) && len(ws) > 2:
		rest = ws[2:]
	case is(0, "i") && is(1, "vote") && len(ws) > 2:
		rest = ws[2:]
		if lowerEq(core(rest[0]), "for") && len(rest) > 1 {
			rest = rest[1:]
		}
	default:
		return "", false
	}
	if len(rest) == 0 || (len(rest) == 1 && lowerEq(core(rest[0]), "we")) {
		return "", false
	}
	r := strings.TrimRight(strings.Join(rest, " "), "?!. ")
	if r == "" || r == "we" {
		return "", false
	}
	return r, true
}

// refToolArg is toolArg with the arguments decoded into map[string]any.
func refToolArg(text string) string {
	t := strings.TrimSpace(text)
	if len(t) > 64<<10 {
		t = t[:64<<10]
	}
	if strings.HasPrefix(t, "{") {
		var m map[string]any
		if json.Unmarshal([]byte(t), &m) == nil {
			str := func(v any) string {
				switch x := v.(type) {
				case string:
					return x
				case []any:
					var parts []string
					for _, e := range x {
						if s, ok := e.(string); ok {
							parts = append(parts, s)
						}
					}
					return strings.Join(parts, " ")
				}
				return ""
			}
			for _, k := range []string{"command", "cmd", "path", "file_path", "file", "filename",
				"query", "pattern", "url", "name", "input", "code"} {
				if v, ok := m[k]; ok {
					if s := str(v); s != "" {
						return clip(oneLine(s, 400), 80)
					}
				}
			}
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if s := str(m[k]); s != "" {
					return clip(oneLine(s, 400), 80)
				}
			}
			return ""
		}
	}
	first, _, _ := strings.Cut(sanitize(t, 2000), "\n")
	return clip(strings.TrimSpace(first), 80)
}

func TestEquivToolArg(t *testing.T) {
	in := []string{`{"command":"go test ./..."}`, `{"command":   "ls -la" , "path":"x"}`, `{"path":"a.go","command":""}`,
		`{"cmd":["go","test","./x"]}`, `{"cmd":["go",1,null,"x"]}`, `{"command":null,"path":"p"}`, `{"command":3,"zeta":"z","alpha":"a"}`,
		`{"x":{"command":"nested"},"y":"why"}`, `{"command":"a\u00e9\n b","path":"p"}`, `{"command":"dup","command":"last"}`,
		`{"a":[],"b":[1,2],"c":"\ud800"}`, `{"a":"\xff"}`, "{\"a\":\"\xff\"}", `{bad json`, `{}`, `{"a":true}`, `["x"]`, `plain text`,
		`{ "query" : [ "a" , "b" ] }`, `{"url":"https://x.gg/a?b=c"}`, `{"input":"` + strings.Repeat("w ", 300) + `"}`,
		`{"comm\u0061nd":"escaped key","b":"b"}`, `{"k\"q":"x","a":""}`, "{\"é\":\"x\",\"a\":\"\"}", "{\"a\xff\":\"1\",\"a\xfe\":\"2\"}",
		`{"b":"1","a":"2","b":"3"}`, `{"z":[],"y":{},"x":"x"}`, `{"a":{"b":[1,{"c":"}"}]},"d":"]","e":"e"}`, "{\n\t\"path\" :\r\n \"p q\" \n}",
		`{"a":-1.5e3,"b":true,"c":null,"d":"dd"}`, `{"a":"x\/y","b":"\u00e9"}`, `{"a":["\u00e9",2]}`, `{"a":"é"}`, `{"":"empty key"}`,
		`{"a":1}x`, `{"a":1,}`, `{"a" 1}`, `{"a":"\x"}`, `{"a":[}`, "{\"a\":\"\x01\"}", `{"a":"b"} `, `{"name":"n","code":"c"}`}
	for _, s := range in {
		if got, want := toolArg(s), refToolArg(s); got != want {
			t.Fatalf("toolArg(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestEquivToolArgRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(37, 99))
	keys := []string{`"command"`, `"cmd"`, `"path"`, `"name"`, `"zz"`, `"a"`, `"comm\u0061nd"`, `"é"`, `""`, `"k\"q"`, `"code"`}
	vals := []string{`"go test ./..."`, `""`, `"a\nb"`, `"\u00e9x"`, `"é"`, `1`, `-2.5e3`, `true`, `null`, `[]`, `["a","b"]`,
		`["a",1,{"x":"y"}]`, `{}`, `{"command":"inner"}`, `"}"`, `"]"`, `"\""`, `"x\/y"`, `[[],[{"a":[]}]]`}
	ws := []string{"", " ", "\n", "\t ", "\r\n"}
	for n := 0; n < 20000; n++ {
		var b strings.Builder
		b.WriteString("{" + ws[r.IntN(len(ws))])
		for k := r.IntN(5); k > 0; k-- {
			b.WriteString(keys[r.IntN(len(keys))] + ws[r.IntN(len(ws))] + ":" + ws[r.IntN(len(ws))] + vals[r.IntN(len(vals))] + ws[r.IntN(len(ws))])
			if k > 1 {
				b.WriteString("," + ws[r.IntN(len(ws))])
			}
		}
		b.WriteString("}")
		s := b.String()
		if r.IntN(20) == 0 { // now and then invalid
			s = s[:r.IntN(len(s))]
		}
		if got, want := toolArg(s), refToolArg(s); got != want {
			t.Fatalf("toolArg(%q) = %q, want %q", s, got, want)
		}
	}
}

// refShiftFirstPersonIn is shiftFirstPerson before words were found once; words are the fields
// of s.
func refShiftFirstPersonIn(s string, words []string, speaker string) (string, bool) {
	var outArr [64]string
	out := outArr[:0]
	changed := false
	starts := false
	inQuote := false
	for i := 0; i < len(words); i++ {
		w := words[i]
		if inQuote || strings.HasPrefix(w, "\"") {
			out = append(out, w)
			q := strings.Count(w, "\"")
			if q%2 == 1 {
				inQuote = !inQuote
			}
			continue
		}
		pre, c, suf := splitWord(w)
		lc, lb, k := lowerParts(c) // strings.ToLower(c), on the stack
		if k > 0 {
			lc = string(lb[:k])
		}
		first := len(out) == 0
		switch lc {
		case "i":
			out = append(out, pre+speaker+suf)
			if suf == "" {
				j := i + 1
				// (norm(w) == strings.ToLower(w) exactly when core(w) == w)
				for j < len(words) && hasLower(preVerbAdverbs, core(words[j])) && core(words[j]) == words[j] {
					j++
				}
				if j < len(words) {
					out = append(out, words[i+1:j]...)
					out = append(out, conjugate(words[j]))
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
			if i+1 < len(words) {
				n := norm(words[i+1])
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
		default:
			out = append(out, w)
			continue
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

func TestEquivShiftFirstPerson(t *testing.T) {
	in := equivInputs(41, 3000)
	in = append(in, "I think I'm right", "\"I said\" I will", "my I me mine myself", "I just really like it", "I'd gone", "I'd go",
		"imma go", "(I) left", "I", "I  am", "Next I will", "I'M DONE", "i went home")
	for _, s := range in {
		f := strings.Fields(s)
		got, gs := shiftFirstPersonIn(s, f, "Bob")
		want, ws := refShiftFirstPersonIn(s, f, "Bob")
		if got != want || gs != ws {
			t.Fatalf("shiftFirstPersonIn(%q) = %q, %v; want %q, %v", s, got, gs, want, ws)
		}
	}
}

func TestEquivLowerFirstCommon(t *testing.T) {
	ref := func(s string) string {
		w, _, _ := strings.Cut(s, " ")
		c := core(w)
		lc := strings.ToLower(c)
		if !(stopwords[lc] || commonCaps[lc] || sentenceStarters[lc]) || (len(c) > 1 && c == strings.ToUpper(c)) {
			return s
		}
		r, size := utf8.DecodeRuneInString(s)
		if !unicode.IsUpper(r) {
			return s
		}
		return string(unicode.ToLower(r)) + s[size:]
	}
	in := append(equivInputs(43, 3000), "The comp", "THE comp", "I think", "Tomorrow we", "Tokyo is", "Ok then", "É", "ÉTÉ x")
	for _, s := range in {
		if got, want := lowerFirstCommon(s), ref(s); got != want {
			t.Fatalf("lowerFirstCommon(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestEquivSplitNameList(t *testing.T) {
	ref := func(s string) ([]string, int) {
		parts := strings.Split(s, ", ")
		last := parts[len(parts)-1]
		if i := strings.LastIndex(last, " and "); i >= 0 {
			parts = append(parts[:len(parts)-1], last[:i], last[i+5:])
		}
		var out []string
		others := 0
		for _, p := range parts {
			p = strings.TrimSpace(p)
			if p == "" {
				continue
			}
			if m := othersRe.FindStringSubmatch(p); m != nil {
				others, _ = strconv.Atoi(m[1])
				continue
			}
			out = append(out, p)
		}
		return out, others
	}
	in := append(equivInputs(47, 3000), "", ", ", "A", "A and B", "A, B and C", "A, B and 3 others", "A and B and C",
		"A, , B", " and ", "A,  B", "A, B, and C", "3 others", "A, 1 other", "x and 2 others and y")
	for _, s := range in {
		got, go1 := splitNameList(s)
		want, wo := ref(s)
		if !slices.Equal(got, want) || go1 != wo || (got == nil) != (want == nil) {
			t.Fatalf("splitNameList(%q) = %q, %d; want %q, %d", s, got, go1, want, wo)
		}
	}
}

func TestEquivWriteNames(t *testing.T) {
	for n := 0; n < 5; n++ {
		ns := []string{"A", "B b", "", "C, D", "E"}[:n]
		var b strings.Builder
		writeNames(&b, ns)
		if got, want := b.String(), joinNames(ns); got != want {
			t.Fatalf("writeNames(%q) = %q, want %q", ns, got, want)
		}
	}
}
