package service

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// queryTerms are the query's distinct normalised tokens, in order of
// first appearance (at most maxQueryTerms), without stop words unless the
// query has nothing else: "when is the tournament" searches
// "tournament", "who are you" all three words.
func queryTerms(q string) []string {
	var terms, stops []string
	seen := map[string]bool{}
	forEachTerm(q, func(tok string) {
		if seen[tok] {
			return
		}
		seen[tok] = true
		switch {
		case stopWords[tok]:
			if len(stops) < maxQueryTerms {
				stops = append(stops, tok)
			}
		case len(terms) < maxQueryTerms:
			terms = append(terms, tok)
		}
	})
	if len(terms) == 0 {
		return stops
	}
	return terms
}

// stopWords are English function words (as forEachToken normalises them:
// "don't" is "dont"), too common in conversation to say what a question
// is about. The index keeps them; only queries drop them.
var stopWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be
		because been before being below between both but by can cant could couldnt did didnt do does
		doesnt doing dont down during each few for from further had hadnt has hasnt have havent having
		he hed hell her here hers herself hes him himself his how i id ill im in into is isnt it its
		itself ive just let lets me more most my myself no nor not now of off on once only or other
		ought our ours ourselves out over own same she shed shell shes should shouldnt so some such
		than that thats the their theirs them themselves then there theres these they theyd theyll
		theyre theyve this those through to too under until up very was wasnt we wed well were weve
		werent what whats when where which while who whom why will with wont would wouldnt you youd
		youll your youre yours yourself yourselves youve yeah yes ok okay oh um uh hmm mm also get got
		like know think going gonna really thing things say said tell told`) {
		m[w] = true
	}
	return m
}()

// forEachToken calls fn with each normalised word token of text: maximal
// runs of letters and digits, lower-cased; an apostrophe inside a word is
// dropped ("don't" → "dont") and a possessive 's with it ("Bob's" →
// "bob"); a plural s is folded ("wins" → "win", not "class" or "bus"), so
// that a query and a turn meet on the same word in most forms.
func forEachToken(text string, fn func(string)) {
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			fn(foldPlural(b.String()))
			b.Reset()
		}
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case (r == '\'' || r == '’') && b.Len() > 0 && i < len(text):
			next, nsize := utf8.DecodeRuneInString(text[i:])
			if !unicode.IsLetter(next) && !unicode.IsDigit(next) {
				flush()
				continue
			}
			if next == 's' || next == 'S' {
				after, _ := utf8.DecodeRuneInString(text[i+nsize:])
				if i+nsize >= len(text) || !unicode.IsLetter(after) && !unicode.IsDigit(after) {
					i += nsize // possessive: drop the 's
				}
			}
		default:
			flush()
		}
	}
	flush()
}

// foldPlural strips a plural "s" from words of four or more letters
// ("wins", "games"), leaving "ss", "us" and "is" endings alone.
func foldPlural(tok string) string {
	if len(tok) < 4 || tok[len(tok)-1] != 's' {
		return tok
	}
	switch tok[len(tok)-2] {
	case 's', 'u', 'i':
		return tok
	}
	return tok[:len(tok)-1]
}

// forEachTerm calls fn with each index term of text: what both the index
// and a query are made of.
func forEachTerm(text string, fn func(string)) { forEachToken(text, fn) }
