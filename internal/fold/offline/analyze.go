package offline

import (
	"sort"
	"strings"
	"unicode"
)

// names is a case-insensitive set of participant names.
type names map[string]string // lowercased → display form

func (n names) has(w string) bool {
	_, ok := n[strings.ToLower(w)]
	return ok
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
	words := strings.Fields(s)
	agree, neg, coreSeen := false, false, false
	for _, w := range words {
		n := norm(w)
		if n == "" || !hasLetterOrDigit(n) {
			continue // emoji, punctuation
		}
		switch {
		case isLaugh(n):
			coreSeen = true
		case inSet(fillerCore, n) || extra[n]:
			coreSeen = true
		case inSet(fillerSoft, n) || who.has(n):
		default:
			return notFiller
		}
		if inSet(agreeWords, n) {
			agree = true
		}
		if inSet(negWords, n) {
			neg = true
		}
	}
	if !coreSeen && len(words) > 3 {
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

// stripFiller removes leading backchannels ("yeah so", "ok,", "lol") and
// trailing laughter from a sentence.
func stripFiller(s string) string {
	words := strings.Fields(s)
	i := 0
	for i < len(words)-1 {
		w := words[i]
		n := norm(w)
		if n == "" && !hasLetterOrDigit(w) {
			i++
			continue
		}
		if inSet(leadStrip, n) || isLaugh(n) ||
			(leadStripComma[n] && strings.HasSuffix(w, ",")) {
			i++
			continue
		}
		break
	}
	if i > 0 && i < len(words)-1 {
		if n := norm(words[i]); n == "and" || n == "but" {
			i++ // "yes, and Bob switched …" → "Bob switched …"
		}
	}
	j := len(words)
	for j > i+1 {
		n := norm(words[j-1])
		if isLaugh(n) || (n == "" && !hasLetterOrDigit(words[j-1])) {
			j--
			continue
		}
		break
	}
	out := strings.Join(words[i:j], " ")
	return strings.TrimLeft(out, ",;:-. ")
}

// traits are the signals a sentence carries.
type traits struct {
	question, request, proposal, offer   bool
	imperative                           bool
	strongDecision, decision, preference bool
	done, next, constraint               bool
	injection                            bool
	entities, content                    int
}

// analyze extracts traits from a sentence. who are the known participants
// (they count as entities once).
func analyze(s string, who names) traits {
	var t traits
	p := plain(s)
	trimmed := strings.TrimSpace(s)
	t.question = strings.HasSuffix(strings.TrimRight(trimmed, "\"')"), "?") ||
		hasPrefixAny(p, questionStarts) || hasPrefixAny(skipDiscourse(p), questionStarts)
	t.request = containsAny(p, requestPhrases...)
	t.proposal = hasPrefixAny(p, proposalStarts) || strings.Contains(p, " let's ") ||
		strings.Contains(p, " suggested ")
	if w, _, ok := strings.Cut(strings.TrimPrefix(skipDiscourse(p), " "), " "); ok {
		t.imperative = imperativeVerbs[w]
	}
	t.offer = strings.HasPrefix(p, " let me ") || strings.Contains(p, " offered ") ||
		strings.HasPrefix(p, " i can ")
	t.strongDecision = containsAny(p, strongDecision...)
	t.decision = t.strongDecision || containsAny(p, weakDecision...)
	t.preference = containsAny(p, preferencePhrases...)
	t.done = containsAny(p, donePhrases...)
	t.next = containsAny(p, nextPhrases...)
	t.constraint = containsAny(p, constraintPhrases...)
	t.injection = injectionRe.MatchString(s)

	words := strings.Fields(s)
	nameSeen := false
	for i, w := range words {
		c := core(w)
		if c == "" {
			continue
		}
		n := strings.ToLower(c)
		if len([]rune(n)) >= 3 && !stopwords[n] && hasLetterOrDigit(n) {
			t.content++
		}
		switch {
		case who.has(c):
			if !nameSeen {
				nameSeen = true
				t.entities++
			}
		case isIdentifier(c):
			t.entities++
		case i > 0 && upperFirst(c) && !commonCaps[n] && !prevEndsSentence(words[i-1]):
			t.entities++
		}
	}
	t.entities += strings.Count(s, "\"") / 2
	return t
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
		p = " " + rest
	}
}

func hasPrefixAny(p string, prefixes []string) bool {
	for _, pre := range prefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

func prevEndsSentence(w string) bool {
	return strings.HasSuffix(w, ".") || strings.HasSuffix(w, "?") ||
		strings.HasSuffix(w, "!") || strings.HasSuffix(w, ":")
}

// isIdentifier reports numbers, times, paths, URLs, file names and code
// identifiers: tokens that must be kept verbatim and that carry facts.
func isIdentifier(c string) bool {
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
		return true // file.go, example.com
	}
	// camelCase / PascalCase inner capital
	rs := []rune(c)
	for i := 1; i < len(rs); i++ {
		if unicode.IsUpper(rs[i]) && unicode.IsLower(rs[i-1]) {
			return true
		}
	}
	return false
}

// scoreTraits turns traits into an importance score.
func scoreTraits(t traits, agent bool) float64 {
	s := 1.0
	switch {
	case t.request:
		s += 2.5
	case t.question:
		s += 2.2
	}
	if t.proposal {
		s += 2.0
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
	e := float64(t.entities) * 0.5
	if e > 2.5 {
		e = 2.5
	}
	s += e
	c := float64(t.content) / 6
	if c > 1.5 {
		c = 1.5
	}
	s += c
	if t.content <= 2 && t.entities == 0 {
		s -= 0.8
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
	seen := map[string]bool{}
	var out []string
	for _, w := range strings.Fields(s) {
		n := collapseRuns(norm(w), 2)
		n = strings.TrimSuffix(n, "'s")
		if n == "" || stopwords[n] || attribution[n] || !hasLetterOrDigit(n) || who.has(n) {
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

// nearDup reports whether two token sets (sorted, as tokenSet returns
// them) say substantially the same thing.
func nearDup(a, b []string) bool {
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
