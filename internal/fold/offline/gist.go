package offline

import "strings"

// condenseGist is the last condensation level of a statement: its
// telegraphic gist, the words that carry its facts in their order. Stop
// words and hedges go; names, numbers, content words, negations and the
// modal verbs of plans and obligations ("will", "must", "can't") stay, so
// the gist never says the opposite of the statement. Whole words only:
// nothing is cut. "Marco found a cabin near Lake Tahoe for the weekend of
// the 14th." → "Marco found cabin near Lake Tahoe weekend 14th."
func condenseGist(s string, who names) string {
	var arr, out [64]string
	words := appendFields(arr[:0], s)
	if len(words) < 4 {
		return s
	}
	kept := out[:0]
	term := byte('.')
	if last := s[len(s)-1]; last == '?' || last == '!' {
		term = last
	}
	for i, w := range words {
		c := core(w)
		if c == "" {
			continue
		}
		lx := lexicon.getLower(c)
		if i > 0 && lx&(lxStop|lxLightDrop) != 0 && lx&lxGistKeep == 0 &&
			!((lx&lxConnector != 0 || lowerEq(c, "and")) && c == w && i+1 < len(words) &&
				upperFirst(words[i-1]) && upperFirst(words[i+1])) &&
			!inName(words, i, who) {
			// ("Bob and Carol agreed" keeps its "and", "Jeff the Land
			// Shark" its "the", "PhD A" its "A")
			continue
		}
		kept = append(kept, strings.TrimRight(w, ".?!"))
	}
	if len(kept) == len(words) || len(kept) < 2 {
		return s
	}
	r := strings.TrimRight(strings.Join(kept, " "), ",;:-")
	return r + string(term)
}

// gistKeep are stop words a gist keeps: negations and the verbs of plans,
// obligations and agreement.
var gistKeep = toSet("not", "no", "don't", "doesn't", "didn't", "can't", "won't", "isn't", "aren't",
	"wasn't", "will", "would", "should", "can", "could", "must", "might", "may", "shall", "i'll",
	"we'll", "agreed", "suggested", "asked", "more", "most", "than", "all", "any", "some")

// inName reports whether words[i] is part of a participant's name of two
// or three words ("Grad A", "User Interface").
func inName(words []string, i int, who names) bool {
	if !who.multi {
		return false
	}
	for start := max(i-2, 0); start <= i; start++ {
		for end := i + 1; end <= min(start+3, len(words)); end++ {
			if end-start < 2 {
				continue
			}
			var b strings.Builder
			for k := start; k < end; k++ {
				if k > start {
					b.WriteByte(' ')
				}
				b.WriteString(core(words[k]))
			}
			if who.has(b.String()) {
				return true
			}
		}
	}
	return false
}
