package service

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
)

// analyzer turns text into index terms: word tokens (forEachToken),
// stemmed with the Snowball (Porter 2) English stemmer so that a question
// and a turn meet on "discussed"/"discussion"/"discuss" or
// "battery"/"batteries". Stems are cached: the stemmer costs microseconds
// a word, a conversation's vocabulary is small, and a cold build of a
// long session stems every word of it.
type analyzer struct {
	// mu guards stems: read-locked while a text is read, write-locked
	// to cache a token's stem (requests on both cores read texts at
	// once, and nearly every token is cached).
	mu    sync.RWMutex
	stems map[string]stemmed
}

// stemmed is what the analyzer makes of a token: its index term, and
// whether it is a stop word (one lookup a token for both).
type stemmed struct {
	term string
	stop bool
}

// maxStems bounds the stem cache; past it the cache starts over.
const maxStems = 1 << 17

func newAnalyzer() *analyzer { return &analyzer{stems: map[string]stemmed{}} }

// lookup is tok's index term and stop-word mark; a.mu must be
// read-locked (it is released while a token not cached yet is stemmed
// and cached, then locked again). A cached token is found without
// converting tok (m[string(b)] does not allocate), and every caller
// shares the cache's string for its term.
func (a *analyzer) lookup(tok []byte) stemmed {
	if st, ok := a.stems[string(tok)]; ok {
		return st
	}
	a.mu.RUnlock()
	defer a.mu.RLock()
	w := string(tok)
	st := stemmed{term: w, stop: stopWords[w]}
	if len(w) > 2 && !isNumber(w) {
		st.term = english.Stem(w, true)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if cached, ok := a.stems[w]; ok {
		return cached // cached meanwhile: its string is shared
	}
	if len(a.stems) >= maxStems {
		clear(a.stems)
	}
	a.stems[w] = st
	return st
}

// stem is tok's index term; a.mu must be read-locked (see lookup).
func (a *analyzer) stem(tok []byte) string { return a.lookup(tok).term }

func isNumber(tok string) bool {
	for _, r := range tok {
		if !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// each calls fn with each index term of text, and with "" for each stop
// word (it counts in a text's length but is not indexed: queries drop
// them, and they are a conversation's most frequent words); fn must not
// use the analyzer.
func (a *analyzer) each(text string, fn func(string)) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	forEachToken(text, func(tok []byte) {
		st := a.lookup(tok)
		if st.stop {
			fn("")
			return
		}
		fn(st.term)
	})
}

// queryTerms are the query's distinct terms, in order of first
// appearance (at most maxQueryTerms), without stop words and question
// words unless the query has nothing else: "when did they discuss the
// tournament" searches "tournament"; "who are you" finds nothing (stop
// words are not indexed), "what did they discuss" searches "discuss".
func (a *analyzer) queryTerms(q string) []string {
	var terms, stops []string
	seen := map[string]bool{}
	a.mu.RLock()
	defer a.mu.RUnlock()
	forEachToken(q, func(tok []byte) {
		term := a.stem(tok)
		if seen[term] {
			return
		}
		seen[term] = true
		switch {
		case stopWords[string(tok)] || questionWords[string(tok)]:
			if len(stops) < maxQueryTerms {
				stops = append(stops, term)
			}
		case len(terms) < maxQueryTerms:
			terms = append(terms, term)
		}
	})
	if len(terms) == 0 {
		return stops
	}
	return terms
}

// questionWords say what kind of answer a question wants, not what it is
// about ("What did the group discuss about the battery?"): a turn that
// repeats them is no more relevant.
var questionWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`discuss discussed discussing discussion discussions talk talked talking
		mention mentioned mentioning summarize summarise summary meeting group opinion opinions think thought
		thoughts idea ideas kind sort whole`) {
		m[w] = true
	}
	return m
}()

// questionStems are questionWords as index terms (stemmed).
var questionStems = func() map[string]bool {
	m := map[string]bool{}
	for w := range questionWords {
		m[english.Stem(w, true)] = true
	}
	return m
}()

// stopWords are English function words (as forEachToken normalises them:
// "don't" is "dont"), too common in conversation to say what a question
// is about. Queries drop them and the index does not hold them (they
// count in a turn's length only).
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
// "bob"). The analyzer stems them. tok is only valid during the call (it
// is a reused buffer: tokenizing allocates nothing).
func forEachToken(text string, fn func(tok []byte)) {
	var buf [64]byte
	b := buf[:0]
	flush := func() {
		if len(b) > 0 {
			fn(b)
			b = b[:0]
		}
	}
	for i := 0; i < len(text); {
		c := text[i]
		if c < utf8.RuneSelf {
			// ASCII fast path.
			i++
			switch {
			case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
				b = append(b, c)
				continue
			case 'A' <= c && c <= 'Z':
				b = append(b, c+'a'-'A')
				continue
			case c != '\'':
				flush()
				continue
			}
			i-- // an apostrophe: below
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b = utf8.AppendRune(b, unicode.ToLower(r))
		case (r == '\'' || r == '’') && len(b) > 0 && i < len(text):
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
