package offline

import "strings"

// dropDisfluencies removes, from a sentence of speech whose fields are
// words, what a reader of the summary would trip over and that says
// nothing: false starts (a fragment the next word completes: "th the",
// "w with", "fea features"), the discourse tags "I mean," and "you know,"
// with their comma, and a bare "I mean" before a clause. Quoted text is
// left as said. It returns s unchanged when there is nothing to drop.
func dropDisfluencies(s string, words []string, who names) string {
	if strings.IndexByte(s, '"') >= 0 || len(words) < 2 {
		return s
	}
	var arr [64]string
	out := arr[:0]
	changed := false
	for i := 0; i < len(words); i++ {
		w := words[i]
		if i+1 < len(words) && isFalseStart(w, words[i+1], who) {
			changed = true
			continue
		}
		if i+1 < len(words) && strings.HasSuffix(words[i+1], ",") && !strings.HasSuffix(w, ",") {
			a, b := core(w), strings.TrimSuffix(words[i+1], ",")
			if (lowerEq(a, "i") && lowerEq(b, "mean")) || (lowerEq(a, "you") && lowerEq(b, "know")) {
				if len(out) > 0 || i+2 < len(words) {
					changed = true
					i++
					continue
				}
			}
		}
		if i+2 < len(words) && lowerEq(w, "i") && lowerEq(words[i+1], "mean") && meanFollowers[strings.ToLower(core(words[i+2]))] {
			changed = true // "I mean we could …": a tag without its comma
			i++
			continue
		}
		out = append(out, w)
	}
	if !changed || len(out) == 0 {
		return s
	}
	r := strings.Join(out, " ")
	if upperFirst(words[0]) && !upperFirst(out[0]) {
		r = upperFirstCommon(r)
	}
	return r
}

// meanFollowers open the clause that a bare "I mean" tags ("I mean we
// could …"); after others ("I mean it", "I mean to") it is meant.
var meanFollowers = toSet("i", "we", "you", "they", "he", "she", "it's", "that's", "there's",
	"the", "if", "we're", "you're", "they're", "i'm", "i'd", "i'll", "we'll", "so", "like")

// isFalseStart reports whether w is a fragment that next completes: a
// short run of lowercase letters (a trailing hyphen allowed) that is no
// word of the lexicon nor a name, and that next starts with and extends.
func isFalseStart(w, next string, who names) bool {
	f := strings.TrimSuffix(w, "-")
	if len(f) == 0 || len(f) > 4 {
		return false
	}
	for i := 0; i < len(f); i++ {
		if f[i] < 'a' || f[i] > 'z' {
			return false // lowercase ASCII letters only
		}
	}
	if f == "a" || f == "i" || lexicon.get(f) != 0 || who.has(f) {
		return false
	}
	n := core(next)
	return len(n) > len(f) && hasPrefixFold(n, f)
}

// condenseMain is condenseHard(s) unless that leaves a stub that says
// nothing ("Bob suggested.", "Alice said that."): then s as it is.
func condenseMain(s string) string {
	h := condenseHard(s)
	if h == s {
		return s
	}
	var arr [8]string
	ws := appendFields(arr[:0], h)
	if len(ws) < 3 {
		return s
	}
	last := strings.ToLower(strings.TrimRight(ws[len(ws)-1], ".?!:,"))
	switch last {
	case "said", "suggested", "asked", "thought", "agreed", "that", "and", "but", "so", "to", "the", "a":
		return s
	}
	return h
}
