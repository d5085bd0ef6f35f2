package offline

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// shiftFirstPerson turns first-person singular speech into third person
// about the speaker: "I keep dying as Hulk" → "Bob keeps dying as Hulk",
// "my mic is off" → "Bob's mic is off". Text inside double quotes is left
// verbatim. It reports whether the result starts with the speaker's name.
func shiftFirstPerson(s, speaker string) (string, bool) {
	words := strings.Fields(s)
	out := make([]string, 0, len(words)+2)
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
		lc := strings.ToLower(c)
		first := len(out) == 0
		switch lc {
		case "i":
			out = append(out, pre+speaker+suf)
			if suf == "" {
				j := i + 1
				for j < len(words) && preVerbAdverbs[norm(words[j])] && norm(words[j]) == strings.ToLower(words[j]) {
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
		if first && pre == "" {
			starts = true
		}
	}
	return strings.Join(out, " "), starts
}

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
	for _, w := range strings.Fields(s) {
		if secondPerson[norm(w)] {
			return true
		}
	}
	return false
}

// extractVocative finds a participant addressed by name at the start
// ("Alice, can you …") or end ("…, Alice?") of a sentence and removes it.
func extractVocative(s, speaker string, who names) (addressee, rest string) {
	words := strings.Fields(s)
	if len(words) < 2 {
		return "", s
	}
	if c := core(words[0]); who.has(c) && !strings.EqualFold(c, speaker) {
		if strings.HasSuffix(words[0], ",") || (len(words) > 2 && hasSecondPerson(s)) {
			return who[strings.ToLower(c)], strings.Join(words[1:], " ")
		}
	}
	last := words[len(words)-1]
	if c := core(last); who.has(c) && !strings.EqualFold(c, speaker) &&
		strings.HasSuffix(words[len(words)-2], ",") {
		_, _, suf := splitWord(last)
		body := strings.TrimRight(strings.Join(words[:len(words)-1], " "), ",")
		return who[strings.ToLower(c)], body + suf
	}
	return "", s
}

// proposalRest recognizes a proposal opener and returns what is proposed,
// ready to follow "suggested": "let's push B" → "we push B", "how about
// Jeff?" → "Jeff".
func proposalRest(s string, who names) (string, bool) {
	words := strings.Fields(s)
	// allow a few soft words or names before the opener ("ok guys let's …")
	start := 0
	for start < len(words) && start < 3 {
		n := norm(words[start])
		if !(fillerSoft[n] || who.has(n) || fillerCore[n]) || n == "let's" || n == "lets" || n == "we" || n == "how" || n == "what" || n == "why" || n == "maybe" {
			break
		}
		start++
	}
	ws := words[start:]
	lw := func(i int) string {
		if i < len(ws) {
			return norm(ws[i])
		}
		return ""
	}
	var rest []string
	switch {
	case lw(0) == "let's" || lw(0) == "lets":
		rest = append([]string{"we"}, ws[1:]...)
	case lw(0) == "let" && lw(1) == "us":
		rest = append([]string{"we"}, ws[2:]...)
	case (lw(0) == "how" || lw(0) == "what") && lw(1) == "about" && len(ws) > 2:
		rest = ws[2:]
	case lw(0) == "what" && lw(1) == "if" && len(ws) > 2:
		rest = ws[2:]
	case lw(0) == "why" && (lw(1) == "don't" || lw(1) == "dont") && lw(2) == "we" && len(ws) > 3:
		rest = append([]string{"we"}, ws[3:]...)
	case lw(0) == "why" && lw(1) == "not" && len(ws) > 2:
		rest = ws[2:]
	case lw(0) == "maybe" && lw(1) == "we" && len(ws) > 2:
		rest = ws[1:]
	case lw(0) == "i" && (lw(1) == "suggest" || lw(1) == "propose") && len(ws) > 2:
		rest = ws[2:]
	case lw(0) == "i" && lw(1) == "vote" && len(ws) > 2:
		rest = ws[2:]
		if norm(rest[0]) == "for" && len(rest) > 1 {
			rest = rest[1:]
		}
	default:
		return "", false
	}
	if len(rest) == 0 || (len(rest) == 1 && norm(rest[0]) == "we") {
		return "", false
	}
	r := strings.TrimRight(strings.Join(rest, " "), "?!. ")
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
	switch norm(w) {
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

// speech is one sentence said by one speaker, ready to render.
type speech struct {
	speaker   string
	addressee string
	text      string
	t         traits
}

// render writes the sentence as attributed prose: reported speech with the
// speaker's name when that is safe ("Bob keeps dying as Hulk."; "Alice
// suggested we try the new team comp."), direct speech after a colon when
// the sentence is a question or addresses someone ("Bob asked Alice: can you
// heal me?"). The words of the sentence are kept as they were said.
func (sp speech) render(who names) string {
	return collapseRepeats(sp.renderRaw(who))
}

func (sp speech) renderRaw(who names) string {
	S := sp.speaker
	text := sp.text
	second := hasSecondPerson(text)
	to := ""
	if sp.addressee != "" {
		to = " " + sp.addressee
	}
	if !second {
		if rest, ok := proposalRest(text, who); ok {
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
	if f := strings.Fields(text); len(f) > 2 && strings.EqualFold(f[0], "let") && strings.EqualFold(f[1], "me") && !second {
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
	shifted, starts := shiftFirstPerson(text, S)
	if starts {
		return endSentence(shifted, '.')
	}
	// "Next I will …" → "Next, Bob will …"
	if f := strings.Fields(text); len(f) > 2 && sentenceAdverbs[strings.ToLower(f[0])] && isFirstPersonSubject(f[1]) {
		rest, _ := shiftFirstPerson(strings.Join(f[1:], " "), S)
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
	if strings.Contains(s, "\"") {
		return s
	}
	words := strings.Fields(s)
	for n := 3; n >= 1; n-- {
		out := words[:0:0]
		for i := 0; i < len(words); {
			if i+2*n <= len(words) && sameWords(words[i:i+n], words[i+n:i+2*n]) {
				i += n // drop the first copy, keep the second (and its punctuation)
				continue
			}
			out = append(out, words[i])
			i++
		}
		words = out
	}
	return strings.Join(words, " ")
}

func sameWords(a, b []string) bool {
	for i := range a {
		na, nb := norm(a[i]), norm(b[i])
		if na == "" || na != nb || !isAllLetters(strings.ReplaceAll(na, "'", "")) {
			return false
		}
		// inner words must not carry punctuation ("no, no" is emphasis, kept)
		if i < len(a)-1 && (core(a[i]) != a[i] || core(b[i]) != b[i]) {
			return false
		}
	}
	return core(a[len(a)-1]) == a[len(a)-1]
}

// Light condensation: hedges and verbal filler that carry no state.
var lightDropWords = toSet("basically", "actually", "literally", "honestly", "really",
	"just", "totally", "very", "super", "kinda", "sorta", "um", "uh", "umm", "uhh",
	"seriously", "truly", "genuinely", "lowkey", "obviously")

var lightDropPhrases = [][]string{{"kind", "of"}, {"sort", "of"}, {"pretty", "much"},
	{"you", "know,"}, {"i", "mean,"}, {"to", "be", "honest,"}}

// condenseLight removes hedges and filler words outside quotes. Words that
// carry punctuation other than a comma are kept so sentence ends survive.
func condenseLight(s string) string {
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
	clauses := splitClauses(s)
	if len(clauses) <= 1 {
		return s
	}
	kept := []string{clauses[0].text}
	for _, c := range clauses[1:] {
		t := analyze(c.text, nil)
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
	// a kept question clause may end with '?' inside; use the original end
	return string(append([]byte(r), term))
}

type clause struct{ sep, text string }

// splitClauses splits s at clause boundaries outside double quotes.
func splitClauses(s string) []clause {
	var out []clause
	inQuote := false
	start := 0
	sep := ""
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
				out = append(out, clause{sep: sep, text: s[start:i]})
				sep = sp
				start = i + len(sp)
				i = start - 1
				break
			}
		}
	}
	out = append(out, clause{sep: sep, text: s[start:]})
	return out
}
