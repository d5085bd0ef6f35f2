// Package speech cleans a spoken turn for display: what a transcript of
// speech carries besides the words meant (annotation tags of transcription
// tools and speech recognisers, hesitation fillers, words said twice, words
// broken off and restarted) costs a prompt characters without telling a
// model anything. A turn shown to a model as evidence is worth more per
// character without them.
//
// Clean only removes; it never changes, reorders or cuts a word it keeps,
// and it leaves typed text (chat with typos, emoji, brackets of its own)
// as it is: it removes only bracketed tags made of known tag words, filler
// words that are not words of a language, and repeats and broken-off
// starts of the shapes speech produces.
package speech

import (
	"strings"
	"unicode"

	"github.com/foldstream/foldstream/internal/sentence"
)

// tagWords are the words of an annotation tag ("{disfmarker}",
// "[laughter]", "(inaudible 00:14)", "<noise>", "[background noise]"): a
// bracketed run of these (and of numbers and times) is a tag, any other
// bracket is text.
var tagWords = set(`disfmarker vocalsound nonvocalsound gap comment pause
	laughter laughs laughing laugh chuckles chuckle chuckling giggles giggling
	inaudible unintelligible indistinct incomprehensible crosstalk cross-talk overlapping overlap
	interruption interrupts noise noises music applause silence cough coughs coughing
	sigh sighs sighing sneeze sneezes breath breathing inhales exhales clears throat
	static beep beeps blank_audio unk sil background playing speaking foreign language
	unclear inaudible_speech mumbles mumbling`)

// fillers are words of hesitation, dropped wherever they stand. Not
// "uh-huh", "mm-hmm" or "uh-uh": they answer (yes, no).
var fillers = set(`um umm ummm uh uhh uhm er erm hmm hmmm hm mm mmm ehm`)

// keepDoubled are words said twice on purpose ("had had", "ha ha", "very
// very").
var keepDoubled = set(`had that ha hah haha he hee ho la na bye very really so much many more far long
	knock tut tsk boo chop`)

// numberWords are read-out digits and numbers: a code or a phone number
// repeats them, so no phrase with one is a repeat to drop.
var numberWords = set(`zero oh one two three four five six seven eight nine ten eleven twelve hundred thousand`)

// keepLetters are single letters that are words of typed text ("u up?",
// "r u ok", "plan b") and so never a broken-off start.
var keepLetters = set(`a i o u r k y c b n x`)

// maxRepeat is the longest phrase (in words) whose immediate repeat is
// dropped: "I think I think".
const maxRepeat = 4

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// token is a word of a line (with the punctuation it carries) and
// whether it is dropped.
type token struct {
	w    string
	drop bool
}

// Clean is s without annotation tags, fillers, immediate repeats of a
// word or a short phrase ("the the", "I I think", "we may we may") and
// broken-off starts of the next word ("w when", "go- going"), each line's
// spaces collapsed; a sentence end that a dropped word carried stays on
// the word before it. Line breaks are kept. Text with none of these comes
// back with only its spaces collapsed; text that is nothing but these
// comes back empty.
func Clean(s string) string {
	if !strings.ContainsAny(s, "{[(<") && !maybeSpoken(s) {
		return collapse(s)
	}
	if strings.IndexByte(s, '\n') < 0 {
		return cleanLine(s) // one line: no copy
	}
	var b strings.Builder
	b.Grow(len(s))
	for line := range strings.SplitSeq(s, "\n") {
		if out := cleanLine(line); out != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(out)
		}
	}
	return b.String()
}

// maybeSpoken reports whether s may hold a filler, a repeat or a
// broken-off start (a cheap test over its words; false only when Clean
// would change nothing but spaces).
func maybeSpoken(s string) bool {
	var last [maxRepeat]string
	n := 0
	for w := range strings.FieldsSeq(s) {
		k := key(w)
		if isFillerKey(k) || strings.HasSuffix(w, "-") || len(k) == 1 && 'a' <= k[0] && k[0] <= 'z' && !keepLetters[k] {
			return true
		}
		// A repeated phrase starts with a word said again within
		// maxRepeat words.
		for i := range min(n, maxRepeat) {
			if k != "" && strings.EqualFold(last[i], k) {
				return true
			}
		}
		last[n%maxRepeat] = k
		n++
	}
	return false
}

// collapse is s with each line's runs of white space as one space, and
// without blank lines.
func collapse(s string) string {
	if !needsCollapse(s) {
		return s
	}
	var b strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(strings.Join(f, " "))
		}
	}
	return b.String()
}

func needsCollapse(s string) bool {
	if s != strings.TrimSpace(s) {
		return true
	}
	prevSpace := false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if space && (prevSpace || r != ' ') {
			return true
		}
		prevSpace = space
	}
	return false
}

// cleanLine is one line cleaned (Clean).
func cleanLine(line string) string {
	// A line of a few dozen words is split into arrays on the stack.
	var (
		fieldsBuf [64]string
		toksBuf   [64]token
		outBuf    [64]string
	)
	fields := sentence.AppendFields(fieldsBuf[:0], line)
	toks := toksBuf[:0]
	spoken := false // the line shows it is transcribed speech
	for i := 0; i < len(fields); i++ {
		w := fields[i]
		if n := tagSpan(fields[i:]); n > 0 {
			// The tag's words as one dropped token, with the
			// punctuation after its closing bracket.
			toks = append(toks, token{w: strings.Join(fields[i:i+n], " "), drop: true})
			i += n - 1
			spoken = true
			continue
		}
		f := isFiller(w) && !(strings.HasPrefix(strings.ToLower(w), "mm") && i > 0 && isNumber(fields[i-1]))
		if f {
			spoken = true
		}
		toks = append(toks, token{w: w, drop: f})
	}
	brokenOff(toks, spoken)
	dropPunctAround(toks)
	out := outBuf[:0]
	for _, t := range toks {
		if t.drop {
			if end := terminator(t.w); end != "" && len(out) > 0 && terminator(out[len(out)-1]) == "" {
				// Keep the sentence end it carried.
				last := out[len(out)-1]
				if isPunct(last) {
					out[len(out)-1] = end
				} else {
					out[len(out)-1] = strings.TrimRight(last, ",;:") + end
				}
			}
			continue
		}
		if isPunct(t.w) && (len(out) == 0 || isPunct(out[len(out)-1]) && t.w == out[len(out)-1]) {
			continue // nothing to attach it to, or ", ,"
		}
		out = append(out, t.w)
		out = dropRepeat(out)
	}
	for len(out) > 0 && isPunct(out[0]) {
		out = out[1:]
	}
	return strings.Join(out, " ")
}

// tagSpan is how many of fields (from the first) form an annotation tag:
// a bracket opened by the first and closed within four words, holding
// only tag words, numbers and times; 0 if none.
func tagSpan(fields []string) int {
	first := fields[0]
	if first == "" {
		return 0
	}
	var closer byte
	switch first[0] {
	case '{':
		closer = '}'
	case '[':
		closer = ']'
	case '(':
		closer = ')'
	case '<':
		closer = '>'
	default:
		return 0
	}
	var inner []string
	for n := 1; n <= min(len(fields), 4); n++ {
		w := fields[n-1]
		if n == 1 {
			w = w[1:]
		}
		if i := strings.IndexByte(w, closer); i >= 0 {
			if strings.TrimRight(w[i+1:], ".,?!;:") != "" {
				return 0 // "(s)he": text after the bracket
			}
			inner = append(inner, w[:i])
			if isTag(inner) {
				return n
			}
			return 0
		}
		if strings.ContainsAny(w, "{[(<") {
			return 0
		}
		inner = append(inner, w)
	}
	return 0
}

// isTag reports whether words (a bracket's content) are an annotation
// tag's.
func isTag(words []string) bool {
	any := false
	for _, w := range words {
		w = strings.ToLower(strings.Trim(w, ".,:;?!"))
		switch {
		case w == "":
		case tagWords[w]:
			any = true
		case isNumber(w):
		default:
			return false
		}
	}
	return any
}

// brokenOff drops the words broken off and said again: a word cut with a
// hyphen that the next word starts with ("go- going"), and, in a line
// that shows it is transcribed speech (a tag or a filler), a single
// lower-case letter that the next word starts with ("w when"), unless
// the letter is a word of typed text (keepLetters) or follows a number
// ("5 m").
func brokenOff(toks []token, spoken bool) {
	for i := range toks {
		t := &toks[i]
		if t.drop {
			continue
		}
		next := nextKept(toks, i)
		if next < 0 {
			return
		}
		// Only a word cut with a hyphen or a single letter may be a
		// broken-off start: the next word is lower-cased only then.
		if stem, ok := strings.CutSuffix(t.w, "-"); ok && stem != "" && !strings.HasSuffix(stem, "-") && letters(stem) {
			if nw := strings.ToLower(toks[next].w); len(nw) > len(stem) && strings.HasPrefix(nw, strings.ToLower(stem)) {
				t.drop = true
				continue
			}
		}
		if spoken && len(t.w) == 1 && 'a' <= t.w[0] && t.w[0] <= 'z' && !keepLetters[t.w] && (i == 0 || !isNumber(toks[i-1].w)) {
			if nw := strings.ToLower(toks[next].w); len(nw) > 1 && nw[0] == t.w[0] {
				t.drop = true
			}
		}
	}
}

// dropPunctAround drops the detached commas (and semicolons, colons)
// around a dropped word: they set the filler off ("so , uh , this").
func dropPunctAround(toks []token) {
	for i := range toks {
		if !toks[i].drop {
			continue
		}
		if j := i - 1; j >= 0 && !toks[j].drop && isPause(toks[j].w) {
			toks[j].drop = true
		}
		if j := i + 1; j < len(toks) && !toks[j].drop && isPause(toks[j].w) {
			toks[j].drop = true
		}
	}
}

// dropRepeat drops the repeat of a word or a phrase that out's last words
// make ("the the", "we may we may"), keeping the first saying with the
// punctuation of the second.
func dropRepeat(out []string) []string {
	if len(out) < 2 {
		return out
	}
	last := key(out[len(out)-1])
	for n := 1; n <= maxRepeat && 2*n <= len(out); n++ {
		// A repeat of n words ends with the word n before the last said
		// again: the cheap test first.
		if k := key(out[len(out)-1-n]); k == "" || !strings.EqualFold(k, last) {
			continue
		}
		a, b := out[len(out)-2*n:len(out)-n], out[len(out)-n:]
		same := true
		for i := range n {
			ka, kb := key(a[i]), key(b[i])
			if ka == "" || !strings.EqualFold(ka, kb) || i < n-1 && !strings.EqualFold(a[i], b[i]) || terminator(a[i]) != "" ||
				isNumber(ka) || numberWords[strings.ToLower(ka)] || n == 1 && keepDoubled[strings.ToLower(ka)] {
				same = false
				break
			}
		}
		if !same {
			continue
		}
		last := b[n-1]
		a[n-1] = key(a[n-1]) + last[len(key(last)):]
		return dropRepeat(out[:len(out)-n])
	}
	return out
}

// isFiller reports a filler word (with the punctuation it carries);
// not one in capitals ("ER" is a word).
func isFiller(w string) bool { return isFillerKey(key(w)) }

// isFillerKey is isFiller of a word without its punctuation (key).
func isFillerKey(k string) bool {
	if len(k) < 2 || len(k) > 4 {
		return false
	}
	var low [4]byte
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case 'a' <= c && c <= 'z':
			upper = false
		default:
			return false
		}
		low[i] = c
	}
	return !upper && fillers[string(low[:len(k)])]
}

// key is w without the punctuation it ends with.
func key(w string) string {
	for len(w) > 0 {
		switch c := w[len(w)-1]; {
		case c == '.' || c == ',' || c == '?' || c == '!' || c == ';' || c == ':':
			w = w[:len(w)-1]
		case c == "…"[2] && strings.HasSuffix(w, "…"):
			w = w[:len(w)-len("…")]
		default:
			return w
		}
	}
	return w
}

// terminator is the sentence end w ends with ("." "?" "!"), if any.
func terminator(w string) string {
	if w == "" {
		return ""
	}
	if c := w[len(w)-1]; c == '.' || c == '?' || c == '!' {
		return string(c)
	}
	return ""
}

func isPunct(w string) bool { return w != "" && key(w) == "" }

func isPause(w string) bool { return w == "," || w == ";" || w == ":" }

func letters(s string) bool {
	for _, r := range s {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}

// isNumber reports a number or a time ("5", "3.5", "00:14").
func isNumber(w string) bool {
	w = key(w)
	if w == "" {
		return false
	}
	for _, r := range w {
		if !('0' <= r && r <= '9' || r == ':' || r == '.' || r == ',') {
			return false
		}
	}
	return true
}

func nextKept(toks []token, i int) int {
	for j := i + 1; j < len(toks); j++ {
		if !toks[j].drop && !isPunct(toks[j].w) {
			return j
		}
	}
	return -1
}
