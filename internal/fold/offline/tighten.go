package offline

import (
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxSentRunes is the length past which a spoken sentence is cut at a clause boundary: a run-on of speech says its
// point in its first clauses.
const maxSentRunes = 200
const clauseEnd = 1<<'.' | 1<<',' | 1<<'!' | 1<<'?' | 1<<';' | 1<<':' // what ends a word before a break (oneOf)

// tighten removes from a spoken sentence what a person writing it down leaves out: false starts that the next word
// completes ("th the"), a phrase said twice in a row ("for the for the"), talk that carries nothing ("you know", "I
// mean", "kind of" where it hedges, "really" inside a sentence, a clause at its end with no content word, number or
// negation: "…, I guess", ", and so on"); a run-on sentence ends at the last clause boundary within maxSentRunes; a run
// of one word is said three times at most ("blah blah blah blah"), so a turn of one repeated word costs nothing. What
// it leaves is the speaker's words, in order, and what the lexicon knows of its fields (in ks's room; none if unknown),
// plain if none is one trimFiller drops inside a sentence (hesitation, a cut word, a repeat).
func (lx *lexicon) tighten(s string, ks []*field) (_ string, _ []*field, plain bool) {
	kw, prev, run, changed := ks[:0], "", 0, false // (what the lexicon knows of s's fields, kw[i].f the i-th: in ks's room)
	for f, wi := nextField(s, 0); f != ""; f, wi = nextField(s, wi) {
		if run++; prev == "" || f[0] != prev[0] && f[0]|prev[0] < utf8.RuneSelf && lowerASCII(f[0]) != lowerASCII(prev[0]) || !strings.EqualFold(f, prev) { // (equalFold)
			run = 0
		}
		if prev = f; run >= 3 {
			changed = true
			continue
		}
		kw = append(kw, lx.field(f))
	}
	if len(kw) < 3 {
		return s, kw, false
	}
	n0 := len(kw)
	var buf, cb, nb [48]byte
	for len(kw) > 2 && (kw[0].core == trimCut(kw[0].f, ",.!") && kw[0].x.is(fLaugh) || kw[0].core != trimCut(kw[0].f, ",.!") && lx.getBytes(lower(buf[:0], trimCut(kw[0].f, ",.!"))).is(fLaugh)) { // (its field's reading when it trims the word alike)
		kw = kw[1:] // "hahaha that was close"
	}
	var odd, na, r1, r2, r3 uint64      // bit i of odd (i < 63): the loop below reads kw[i] closely (a hedge, a false start's first letter, a word not ASCII or like one of the three before it); na: the words not ASCII, by bit; r1-r3: the rh of the three before
	p0, plain := byte(0), len(kw) <= 64 // (p0: the first byte of the word before)
	for i, k := range kw[:min(len(kw), 64)] {
		if b := k.bare; i > 0 && b != "" && (b[0]|p0 >= utf8.RuneSelf || lowerASCII(b[0]) == lowerASCII(p0)) {
			odd |= 1 << (i - 1)
		}
		if na = na<<1 | uint64(b2i(!k.is(ffASCII))); k.is(ffHedge) || na&15 != 0 || k.rh == r1 || k.rh == r2 || k.rh == r3 {
			odd |= 1 << i
		}
		plain = plain && k.flags&(ffInline|ffLetter|ffDash|ffOnset) == 0 && (i == 0 || na&3 == 0 && k.rh != r1) // (as trimFiller reads them)
		r1, r2, r3, p0 = k.rh, r1, r2, k.f[0]
	}
	// (ko: the fields kept, in kw's room: ko[i] is written once kw[i] is read. same: how many of ko's last words are the
	// kw before i, as they were: past three, odd's test of the three before holds for ko too)
	ko, same := kw[:0], 0
	for i := 0; i < len(kw); i++ {
		if j := min(i+bits.TrailingZeros64(odd>>i), 63, len(kw)); j > i && same >= min(len(ko), 3) { // (the words before the next odd one stay)
			ko, same, i = append(ko, kw[i:j]...), same+j-i, j-1
			continue
		}
		w, s0, n := kw[i].f, same, len(ko)
		same = 0
		var core []byte // lower-cased without its commas, when it may be a false start or a hedge (compared as a string: no copy)
		if nx := kw[min(i+1, len(kw)-1)].bare; i+1 < len(kw) && nx != "" && (nx[0] >= utf8.RuneSelf || w[0] >= utf8.RuneSelf || lowerASCII(nx[0]) == lowerASCII(w[0])) {
			// a word the next one completes shares its first letter
			if core = lower(cb[:0], strings.TrimRight(w, ",")); len(core) > 0 && (nx[0] >= utf8.RuneSelf || core[0] >= utf8.RuneSelf || lowerASCII(nx[0]) == core[0]) && lx.falseStart(string(core), string(lower(nb[:0], nx))) {
				continue
			}
		}
		if core == nil && kw[i].is(ffHedge) { // (a word that is not one is kept: core is none of the hedges)
			core = lower(cb[:0], strings.TrimRight(w, ","))
		}
		// hedges: "you know" (not after "the more", "what", "if" …), "I mean", "kind of"/"sort of" not after a word
		// that makes them mean "a type of"; an intensifier inside a sentence ("it's really cheap"), not after a
		// negation ("not really")
		skip := 0 // the hedge's words
		switch string(core) {
		case "you", "i", "or", "and", "kind", "sort":
			if nx := kw[min(i+1, len(kw)-1)].f; i+1 < len(kw) && (nx[0] >= utf8.RuneSelf || strings.IndexByte("kmsweo", lowerASCII(nx[0])) >= 0) { // ("know", "mean", "of" …)
				if pair := string(append(append(append(buf[:0], core...), ' '), strings.ToLower(strings.TrimRight(nx, ",.?!"))...)); hedges[pair] &&
					(pair != "you know" || n == 0 || !strings.Contains(" more less what if do did as how ", " "+strings.ToLower(ko[n-1].f)+" ")) || // ("the more you know")
					(pair == "kind of" || pair == "sort of") && (n == 0 || !typeOf[strings.ToLower(strings.Trim(ko[n-1].f, ","))]) {
					skip = 2
				}
			}
		case "really", "actually", "basically", "quite", "pretty", "very", "just", "definitely", "obviously", "literally", "totally", "simply", "certainly":
			if n > 0 && i+1 < len(kw) && !strings.HasSuffix(ko[n-1].f, "n't") && !strings.EqualFold(ko[n-1].f, "not") &&
				(string(core) != "pretty" || w == "pretty" && !strings.Contains(" and but or ", " "+kw[i+1].f+" ")) { // ("it looks pretty but …")
				skip = 1
			}
		}
		if skip > 0 {
			if last := kw[i+skip-1].f; n > 0 && !strings.HasSuffix(last, ",") && strings.TrimRight(last, ".?!;:") != last {
				ko[n-1] = lx.field(strings.TrimRight(ko[n-1].f, ",") + last[len(strings.TrimRight(last, ".?!;:")):])
			}
			i, changed = i+skip-1, true
			continue
		}
		if string(core) == "like" && strings.HasSuffix(w, ",") && n > 0 && len(ko[n-1].f) > 1 && strings.HasSuffix(ko[n-1].f, ",") {
			ko[n-1] = lx.field(ko[n-1].f[:len(ko[n-1].f)-1]) // "it's, like, deep valleys"
			continue
		}
		ko = repeated(append(ko, kw[i]))
		same = (s0 + 1) * b2i(len(ko) == n+1) // (none dropped)
	}
	for j := len(ko) - 1; j > 0; j-- { // a clause at the end after a comma that names nothing ("…, I guess", ", right?") goes
		if k := ko[j]; len(k.terms) > 0 || k.is(ffDigit) || k.low == "not" || k.low == "never" || strings.HasSuffix(k.low, "n't") {
			break
		} else if p := ko[j-1].f; strings.ContainsAny(p[len(p)-1:], ",;:") {
			end := ko[len(ko)-1].f[len(strings.TrimRight(ko[len(ko)-1].f, ".?!")):]
			if ko = append(ko[:j-1], &noField); len(strings.TrimRight(p, ",;:"))+len(end) > 0 { // (none: no field, and its sentence's words are read again)
				ko[j-1] = lx.field(strings.TrimRight(p, ",;:") + end)
			}
		}
	}
	if changed || len(ko) != n0 || !joins(s, ko) { // (none left: s is "")
		s = spacedFields(ko)
	}
	if len(s) > maxSentRunes && runeLen(s) > maxSentRunes { // (no more runes than bytes)
		return cutClause(s, maxSentRunes), ks[:0], false
	}
	return s, ko, plain && len(ko) == len(kw) // (none dropped: ko is kw)
}

// falseStart reports a word that the next one completes ("th" before "the"), not a word in its own right that happens
// to start the next.
func (lx *lexicon) falseStart(w, next string) bool {
	return w != "" && len(w) < len(next) && strings.HasPrefix(next, w) && !stopWords[w] && strings.IndexFunc(w, func(r rune) bool { return !unicode.IsLetter(r) }) < 0 && (len(w) <= 2 || !lx.get(w).is(fTerm) || len(next)-len(w) >= 2)
}

// hedgeWords are the words, lower-cased without a comma after them, that tighten may drop as or with a hedge.
var hedgeWords = toSet(strings.Fields("you i or and kind sort really actually basically quite pretty very just definitely obviously literally totally simply certainly like"))

// hedges are phrases that carry nothing.
var hedges = toSet([]string{"you know", "i mean", "or something", "or whatever", "and stuff", "and everything"})

// typeOf are the words after which "kind of"/"sort of" name a type ("what kind of button"), not a hedge.
var typeOf = toSet([]string{"what", "a", "the", "this", "that", "some", "any", "one", "which", "same", "every", "each", "no", "other", "different", "that's"})

// repeated drops from the end of ko, what the lexicon knows of a sentence's words, the first of a phrase of one to
// three words said twice in a row ("for the for the"), unless it has a number. An attempt started again after other
// words stays: with no dictionary a cut word ("I would mov I would then") cannot be told from a real one ("the more you
// know the more you grow").
func repeated(ko []*field) []*field {
	for n, y := 1, ko[len(ko)-1]; n <= min(3, len(ko)/2); n++ {
		if x := ko[len(ko)-1-n]; x != y && x.flags&y.flags&ffASCII != 0 && x.rh != y.rh {
			continue // (the last words differ, as sameWords finds first: the common case)
		} else if i := len(ko) - 2*n; sameWords(ko[i:i+n], ko[i+n:]) && !anyIs(ko[i+n:], ffDigit) {
			return append(ko[:i], ko[i+n:]...)
		}
	}
	return ko
}

func sameWords(a, b []*field) bool {
	for i := len(a) - 1; i >= 0; i-- { // (last words first: they differ most)
		if x, y := a[i], b[i]; x != y && (x.is(ffASCII) && y.is(ffASCII) && x.rep != y.rep || !(x.is(ffASCII) && y.is(ffASCII)) && x.f != y.f &&
			(lowerASCII(x.f[0]) != lowerASCII(y.f[0]) && isLetter(x.f[0]) && isLetter(y.f[0]) || !equalFold(trimCut(x.f, ",.;:"), trimCut(y.f, ",.;:")))) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool          { return 'a' <= c|0x20 && c|0x20 <= 'z' }
func oneOf(c byte, set uint64) bool { return c < 64 && set>>c&1 != 0 } // c is in set, a mask of bytes below 64: 1<<'.' | 1<<',' …

// equalFold is strings.EqualFold, quick to tell words apart by their first letter.
func equalFold(x, y string) bool {
	return (x == "" || y == "" || x[0]|y[0] >= utf8.RuneSelf || lowerASCII(x[0]) == lowerASCII(y[0])) && strings.EqualFold(x, y)
}

// trimCut is strings.Trim(w, cut) for a cut of ASCII punctuation below '@', without building a set of its bytes.
func trimCut(w, cut string) string {
	for len(w) > 0 && w[0] < '@' && strings.IndexByte(cut, w[0]) >= 0 {
		w = w[1:]
	}
	for len(w) > 0 && w[len(w)-1] < '@' && strings.IndexByte(cut, w[len(w)-1]) >= 0 {
		w = w[:len(w)-1]
	}
	return w
}

// clauseBreaks are where a run-on sentence can end.
var clauseBreaks = []string{", but ", ", and ", ", so ", ", because ", "; ", ", which ", ", or ", ", then ", " but ", " because "}

// cutClause ends s at the last clause boundary within max runes (and past a third of it), with a full stop; s as it is
// when there is none.
func cutClause(s string, max int) string {
	limit, best := min(len(s), len(string([]rune(s)[:min(max, runeLen(s))]))), -1 // (limit: the byte where rune max starts; a long sentence is rare)
	for _, b := range clauseBreaks {
		if i := strings.LastIndex(s[:limit], b); i > best && i > limit/3 {
			best = i
		}
	}
	if best < 0 {
		return s
	}
	out := strings.TrimRight(s[:best], ",;: ")
	if r, _ := utf8.DecodeLastRuneInString(out); r != '.' && r != '!' && r != '?' {
		out += ".?"[b2i(strings.HasSuffix(s, "?")):][:1]
	}
	return out
}
