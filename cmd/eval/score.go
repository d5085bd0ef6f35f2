package main

import (
	"strings"
	"unicode"
)

// The measure is answer-word recall: the share of a reference answer's
// distinct content words that occur anywhere in a context. A word is a
// maximal run of Unicode letters and digits, lower-cased (so "don't" is
// "don" and "t", "$190" is "190", "co-operate" is "co" and "operate");
// content words are the words not in stopWords. No stemming: "decided"
// does not match "decision", the same for every context measured, so the
// figures compare contexts with each other, not with a person's judgement.

// stopWords is NLTK's English stop list (179 words), which is what "stop
// words removed" most often means; listed here so the measure does not
// move with a library.
var stopWords = func() map[string]bool {
	list := `i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
yourselves he him his himself she she's her hers herself it it's its itself they them their theirs
themselves what which who whom this that that'll these those am is are was were be been being have
has had having do does did doing a an the and but if or because as until while of at by for with
about against between into through during before after above below to from up down in out on off
over under again further then once here there when where why how all any both each few more most
other some such no nor not only own same so than too very s t can will just don don't should
should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't
hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't
shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't`
	m := map[string]bool{}
	for _, w := range strings.Fields(list) {
		// Entries with an apostrophe can never be a word of words(); they
		// stay in the list only so that it is NLTK's as published.
		m[w] = true
	}
	return m
}()

// words splits text into lower-cased words (runs of letters and digits).
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// contentWords is the set of text's words that are not stop words.
func contentWords(text string) map[string]bool {
	set := map[string]bool{}
	for _, w := range words(text) {
		if !stopWords[w] {
			set[w] = true
		}
	}
	return set
}

// vocabulary is the set of every word of a context, stop words included
// (they are never looked up).
type vocabulary map[string]bool

func vocab(text string) vocabulary {
	v := vocabulary{}
	for _, w := range words(text) {
		v[w] = true
	}
	return v
}

// recall is the share of answer's content words that context holds; ok is
// false when the answer has none (such a question is not scored).
func recall(answer map[string]bool, context vocabulary) (r float64, ok bool) {
	if len(answer) == 0 {
		return 0, false
	}
	hit := 0
	for w := range answer {
		if context[w] {
			hit++
		}
	}
	return float64(hit) / float64(len(answer)), true
}

// scoring is the measure's one option: stem folds every word, of the
// answer and of the context alike, with the light stemmer (stem), to
// check that a finding does not hang on word forms (-score-stem). The
// default is no stemming.
type scoring struct{ stem bool }

func (s scoring) answer(text string) map[string]bool {
	set := contentWords(text)
	if !s.stem {
		return set
	}
	out := map[string]bool{}
	for w := range set {
		out[stem(w)] = true
	}
	return out
}

func (s scoring) vocab(text string) vocabulary {
	v := vocab(text)
	if !s.stem {
		return v
	}
	out := vocabulary{}
	for w := range v {
		out[stem(w)] = true
	}
	return out
}
