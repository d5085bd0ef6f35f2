package offline

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// A period line says what a stretch of the conversation was about, so
// that the summary covers the whole conversation and not only its last
// folds: "From 14:02 to 14:20, Alice and Bob discussed the budget, the
// venue in Lisbon and catering." Each fold of a conversation adds one for
// its batch; when there are too many (or they take too much of the
// budget), two adjacent periods merge into one, which keeps the phrases
// that weigh most over both: the pair whose longer period is shortest
// (the older pair on a tie). So the lines grow to spans of about the same
// length, the older ones first, a new fold's line is soon absorbed, and no
// period is dropped. The lines are plain sentences of the summary: the next fold
// reads them back from the previous summary (parsePeriod), so nothing is
// kept between folds but the summary itself.

const (
	maxPeriodPhrases = 16  // phrases of one period line
	maxPeriodNames   = 2   // the speakers a period line names
	minPeriodPhrases = 3   // a batch with fewer adds no line
	maxPhraseWords   = 5   // words of a topic phrase (more than three only for names)
	periodLineChars  = 300 // the budget allows a period line per this many runes
	periodShare      = 80  // percent of the budget the period lines may take
	minPeriodBudget  = 500 // no period lines in a smaller summary
	factScore        = 6.0 // a statement scored this high holds a fact the period lines leave room for
	factShare        = 30  // percent of the budget kept for such statements and open questions
)

// period is one period line.
type period struct {
	from, to string   // "15:04" of the first and last turn ("" when unknown)
	names    []string // who drove the topics, in order of weight
	phrases  []string // topic phrases, most important first
	weight   float64  // how much of the conversation it stands for (minutes, at least 1)
	// keys are the wordKey forms of the words of the phrases, as the
	// line was parsed (periodCache sets them, shared by its copies): read
	// by earlierCounts, before a fold changes its periods.
	keys []string
}

// appendWordKeys appends the wordKey form of every word of phrases.
func appendWordKeys(dst, phrases []string) []string {
	var arr [64]string
	for _, ph := range phrases {
		for _, w := range appendFields(arr[:0], ph) {
			dst = append(dst, wordKey(w))
		}
	}
	return dst
}

// render writes the line.
func (p *period) render() string {
	var b strings.Builder
	n := len("From 00:00 to 00:00,  discussed .")
	for _, x := range p.names {
		n += len(x) + len(", ")
	}
	for _, x := range p.phrases {
		n += len(x) + len(", ")
	}
	b.Grow(n)
	if p.from != "" && p.from == p.to {
		b.WriteString("At ")
		b.WriteString(p.from)
		b.WriteString(", ")
	} else if p.from != "" && p.to != "" {
		b.WriteString("From ")
		b.WriteString(p.from)
		b.WriteString(" to ")
		b.WriteString(p.to)
		b.WriteString(", ")
	} else if p.to != "" {
		b.WriteString("Until ")
		b.WriteString(p.to)
		b.WriteString(", ")
	} else {
		b.WriteString("Earlier, ")
	}
	writeNames(&b, p.names)
	b.WriteString(" discussed ")
	writeNames(&b, p.phrases)
	b.WriteByte('.')
	return b.String()
}

// runes is runeLen(p.render()), without writing the line.
func (p *period) runes() int {
	n := len("Earlier, ")
	switch {
	case p.from != "" && p.from == p.to:
		n = len("At 00:00, ") + runeLen(p.from) - 5
	case p.from != "" && p.to != "":
		n = len("From 00:00 to 00:00, ") + runeLen(p.from) + runeLen(p.to) - 10
	case p.to != "":
		n = len("Until 00:00, ") + runeLen(p.to) - 5
	}
	return n + namesRunes(p.names) + len(" discussed ") + namesRunes(p.phrases) + len(".")
}

// namesRunes is runeLen(joinNames(ns)) as writeNames writes it.
func namesRunes(ns []string) int {
	n := 0
	for i, x := range ns {
		switch {
		case i == 0:
		case i == len(ns)-1:
			n += len(" and ")
		default:
			n += len(", ")
		}
		n += runeLen(x)
	}
	return n
}

// writeNames writes joinNames(ns) to b.
func writeNames(b *strings.Builder, ns []string) {
	for i, n := range ns {
		switch {
		case i == 0:
		case i == len(ns)-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(n)
	}
}

// parsePeriod reads a period line of a previous summary. The names must
// all be participants: a sentence someone said that happens to look like
// one stays a statement.
func parsePeriod(s string, who names) (*period, bool) {
	if !strings.Contains(s, " discussed ") {
		return nil, false // (most sentences: no period line, nothing allocated)
	}
	p := &period{}
	rest, ok := strings.CutPrefix(s, "From ")
	if at, ok2 := strings.CutPrefix(s, "At "); ok2 {
		p.from, rest, ok = strings.Cut(at, ", ")
		if !ok || !isClock(p.from) {
			return nil, false
		}
		p.to = p.from
	} else if ok {
		var span string
		span, rest, ok = strings.Cut(rest, ", ")
		if !ok {
			return nil, false
		}
		p.from, p.to, ok = strings.Cut(span, " to ")
		if !ok || !isClock(p.from) || !isClock(p.to) {
			return nil, false
		}
	} else if until, ok2 := strings.CutPrefix(s, "Until "); ok2 {
		p.to, rest, ok = strings.Cut(until, ", ")
		if !ok || !isClock(p.to) {
			return nil, false
		}
	} else if rest, ok = strings.CutPrefix(s, "Earlier, "); !ok {
		return nil, false
	}
	subj, list, ok := strings.Cut(rest, " discussed ")
	if !ok || !strings.HasSuffix(list, ".") {
		return nil, false
	}
	p.names, _ = splitNameList(subj)
	if len(p.names) == 0 {
		return nil, false
	}
	for _, n := range p.names {
		if !who.has(n) {
			return nil, false
		}
	}
	p.phrases, _ = splitNameList(strings.TrimSuffix(list, "."))
	if len(p.phrases) == 0 {
		return nil, false
	}
	for _, ph := range p.phrases {
		if strings.ContainsAny(ph, ".?!:;") || strings.Count(ph, " ") >= maxPhraseWords {
			return nil, false // a sentence, not a list of topics
		}
	}
	p.weight = p.minutes()
	if p.from == "" && p.to != "" {
		// what the statements before the first period were about, for as
		// long as that was: it stays a line of its own
		p.weight = math.Inf(1)
	}
	return p, true
}

// isClock reports an "hh:mm" time.
func isClock(s string) bool {
	return len(s) == 5 && s[2] == ':' && isNumber(s[:2]) && isNumber(s[3:])
}

func clockMinutes(s string) int {
	h, _ := strconv.Atoi(s[:2])
	m, _ := strconv.Atoi(s[3:])
	return h*60 + m
}

// minutes is the time the period spans, at least 1 (a period past
// midnight wraps around).
func (p *period) minutes() float64 {
	if p.from == "" || p.to == "" {
		return 1
	}
	d := clockMinutes(p.to) - clockMinutes(p.from)
	if d < 0 {
		d += 24 * 60
	}
	return float64(max(d, 1))
}

// mergePeriods merges a and b (a before b) into one period: the phrases
// that weigh most over both (a phrase of both weighs the sum; a phrase's
// weight in a line falls with its rank and grows with the time the line
// spans), the names of both.
func mergePeriods(a, b *period, sal map[string]float64) *period {
	m := &period{from: a.from, to: b.to, weight: a.weight + b.weight}
	if m.to == "" {
		m.from = ""
	} else if m.from != "" {
		m.weight = max(m.minutes(), m.weight)
	}
	var names []string
	for _, ns := range [2][]string{a.names, b.names} {
		for _, n := range ns {
			if !slices.ContainsFunc(names, func(x string) bool { return strings.EqualFold(x, n) }) {
				names = append(names, n)
			}
		}
	}
	m.names = names[:min(len(names), maxPeriodNames)]
	type cand struct {
		text string
		key  string // phraseKey(text)
		w    float64
	}
	var candArr [2 * maxPeriodPhrases]cand
	cands := candArr[:0]
	for _, p := range [2]*period{a, b} {
		for r, ph := range p.phrases {
			w := p.weight * float64(len(p.phrases)-r) / float64(len(p.phrases)) * (1 + 0.5*salience(ph, sal))
			k := phraseKey(ph)
			if i := slices.IndexFunc(cands, func(c cand) bool { return c.key == k }); i >= 0 {
				cands[i].w += w
				continue
			}
			cands = append(cands, cand{text: ph, key: k, w: w})
		}
	}
	// A phrase inside a longer one ("network" in "network size") lends
	// it its weight and goes.
	for i := range cands {
		c := &cands[i]
		for j := range cands {
			if d := &cands[j]; i != j && c.w >= 0 && d.w >= 0 && len(d.text) > len(c.text) &&
				containsWords(d.key, c.key) {
				d.w += c.w
				c.w = -1
				break
			}
		}
	}
	slices.SortStableFunc(cands, func(x, y cand) int { return cmp.Compare(y.w, x.w) })
	for _, c := range cands {
		if c.w < 0 || len(m.phrases) == maxPeriodPhrases {
			break
		}
		m.phrases = append(m.phrases, c.text)
	}
	return m
}

// containsWords is strings.Contains(" "+s+" ", " "+sub+" "): sub is in s
// as whole space-separated words.
func containsWords(s, sub string) bool {
	for from := 0; from <= len(s)-len(sub); {
		i := strings.Index(s[from:], sub)
		if i < 0 {
			return false
		}
		i += from
		if (i == 0 || s[i-1] == ' ') && (i+len(sub) == len(s) || s[i+len(sub)] == ' ') {
			return true
		}
		from = i + 1
	}
	return false
}

// fitPeriods merges periods until there are at most maxLines and their
// lines take at most budget runes (or one is left), then drops the last
// phrases of the lines that are still too long. It merges the adjacent
// pair whose longer period is the shortest, the older on a tie.
func fitPeriods(ps []*period, maxLines, budget int, sal map[string]float64) []*period {
	if len(ps) == 0 || budget <= 0 {
		return nil
	}
	lens := make([]int, len(ps)) // rune lengths of the lines, with a separator
	size := 0
	for i, p := range ps {
		lens[i] = p.runes() + 1
		size += lens[i]
	}
	for len(ps) > 1 && (len(ps) > maxLines || size > budget) {
		best, bw := -1, math.Inf(1)
		for i := 0; i+1 < len(ps); i++ {
			if w := max(ps[i].weight, ps[i+1].weight); best < 0 || w < bw {
				best, bw = i, w
			}
		}
		ps[best] = mergePeriods(ps[best], ps[best+1], sal)
		ps = slices.Delete(ps, best+1, best+2)
		size -= lens[best] + lens[best+1]
		lens[best] = ps[best].runes() + 1
		size += lens[best]
		lens = slices.Delete(lens, best+1, best+2)
	}
	for size > budget {
		longest := -1
		for i, p := range ps {
			if len(p.phrases) > 1 && (longest < 0 || len(p.phrases) > len(ps[longest].phrases)) {
				longest = i
			}
		}
		if longest < 0 || len(ps[longest].phrases) <= minPeriodPhrases {
			return nil // too little room for a line
		}
		p := ps[longest]
		p.phrases = p.phrases[:len(p.phrases)-1]
		size -= lens[longest]
		lens[longest] = p.runes() + 1
		size += lens[longest]
	}
	return ps
}

// salience is how much the words of a phrase run through the
// conversation: the mean of log2(1 + mentions of the word in the previous
// summary), from sal (see earlierCounts).
func salience(ph string, sal map[string]float64) float64 {
	if len(sal) == 0 {
		return 0
	}
	var arr [8]string
	ws := appendFields(arr[:0], ph)
	for i, w := range ws {
		ws[i] = wordKey(w)
	}
	return salienceOf(ws, sal)
}

// salienceOf is salience of the phrase whose word keys are keys.
func salienceOf(keys []string, sal map[string]float64) float64 {
	if len(sal) == 0 || len(keys) == 0 {
		return 0
	}
	t := 0.0
	for _, k := range keys {
		t += math.Log2(1 + sal[k])
	}
	return t / float64(len(keys))
}

// earlierCounts is what the conversation said before this batch, as the
// previous summary keeps it: for each topic word (wordKey form), the
// period lines whose phrases name it plus the statements that mention it
// (their topicKeys, computed once per statement).
// The summary is the only state carried between folds, so the result
// depends on the request alone.
// It counts into out (empty; nil: a new map) and returns it.
func earlierCounts(out map[string]float64, periods []*period, statements []*prevSentence) map[string]float64 {
	n := 0
	for _, ps := range statements {
		n += len(ps.topicKeys)
	}
	if out == nil {
		out = make(map[string]float64, n+len(periods)*maxPeriodPhrases)
	}
	var arr [64]string
	for _, p := range periods {
		keys := p.keys
		if keys == nil {
			keys = appendWordKeys(arr[:0], p.phrases)
		}
		for _, k := range keys {
			out[k]++
		}
	}
	for _, ps := range statements {
		for _, k := range ps.topicKeys {
			out[k]++
		}
	}
	return out
}

// topicKeys are the wordKey forms of the words of a statement that could
// name a topic (no function words or common words), for earlierCounts.
func topicKeys(words []string) []string {
	var out []string
	for _, w := range words {
		if c := core(w); len(c) > 2 && lexicon.getLower(c)&(lxStop|lxCommon) == 0 {
			out = append(out, wordKey(c))
		}
	}
	return out
}

// phraseCounter collects the topic phrases of a batch: runs of one to
// three specific words (not function words, fillers, hedges, common
// verbs and adverbs, numbers or names), counted by the turns that say
// them, and who said them.
type phraseCounter struct {
	idx   map[string]int // phrase key → index
	list  []phraseCount
	words map[string]float64     // word key → turns mentioning it in any phrase
	keys  []string               // the word keys of list's phrases (their words share it)
	surf  []string               // the words of list's phrases as said (their surf share it)
	sal   map[string]float64     // word key → mentions in the previous summary (earlierCounts)
	run   [maxPhraseWords]string // scanPhrases' buffer for add
}

type phraseCount struct {
	surf       []string // the words of the first mention
	lowerFirst bool     // its first word is capitalized only as the sentence's first
	words      []string // keys of its words
	turns      int      // turns that said it
	last       int      // the last turn that said it
	speaker    string   // the first who said it
	speakers   []string // who else said it, once each (in order)
}

func newPhraseCounter(words int) *phraseCounter {
	n := words/3 + 1 // about a topic word in three, most of them new
	return &phraseCounter{idx: make(map[string]int, n), words: make(map[string]float64, n),
		list: make([]phraseCount, 0, n), keys: make([]string, 0, n), surf: make([]string, 0, n)}
}

// reset empties pc for another batch, keeping its capacity.
func (pc *phraseCounter) reset() {
	clear(pc.idx)
	clear(pc.words)
	clear(pc.list)
	clear(pc.keys)
	clear(pc.surf)
	clear(pc.run[:])
	pc.list, pc.keys, pc.surf, pc.sal = pc.list[:0], pc.keys[:0], pc.surf[:0], nil
}

// add counts the phrases of a sentence of turn, said by speaker, whose
// fields are words.
func (pc *phraseCounter) add(words []string, infos []word, turn int, speaker string, who names) {
	scanPhrases(words, infos, who, pc.run[:0], func(run []string, lowerFirst bool) {
		pc.count(run, lowerFirst, turn, speaker)
	})
}

// phraseRun is a topic phrase of a sentence as scanPhrases reports it.
type phraseRun struct {
	words      []string
	lowerFirst bool
}

// appendPhraseRuns appends the topic phrases of the sentence whose fields
// are words (and infos) to dst, each with its own copy of its words.
func appendPhraseRuns(dst []phraseRun, words []string, infos []word, who names) []phraseRun {
	scanPhrases(words, infos, who, make([]string, 0, maxPhraseWords), func(run []string, lowerFirst bool) {
		dst = append(dst, phraseRun{words: slices.Clone(run), lowerFirst: lowerFirst})
	})
	return dst
}

// scanPhrases calls emit with each topic phrase of the sentence whose
// fields are words (and infos): its words (valid during the call only) and
// whether its first is capitalized only as the sentence's first. buf (of
// capacity maxPhraseWords) holds the words: a caller that scans many
// sentences passes one buffer (emit's argument would move a local array to
// the heap on every call).
func scanPhrases(words []string, infos []word, who names, buf []string, emit func(run []string, lowerFirst bool)) {
	run := buf[:0]
	lowerFirst := false // the run opens the sentence with a capital that is no name's
	flush := func() {
		if len(run) > 0 {
			emit(run, lowerFirst)
		}
		run = run[:0]
	}
	for i := range infos {
		x := &infos[i]
		c := x.c
		if !strings.HasPrefix(x.w, c) || !isTopicWord(x, who) || inName(words, i, who) {
			flush()
			continue
		}
		if suf := x.w[len(c):]; suf == "" && i+1 < len(infos) && len(x.n) > 1 &&
			len(infos[i+1].n) > len(x.n) && strings.HasPrefix(infos[i+1].n, x.n) {
			continue // a word cut and said again whole ("functio functionality")
		}
		suf := x.w[len(c):]
		if n := len(run); n > 0 && strings.EqualFold(run[n-1], c) {
			if suf != "" {
				flush()
			}
			continue // a repeated word ("Dave Dave")
		}
		start := i == 0 || prevEndsSentence(words[i-1])
		capital := upperFirst(c) && !(start && !isAcronym(c))
		if len(run) == 3 && !(capital && upperFirst(run[2])) {
			flush() // three words make a phrase, unless a name goes on ("Luna Snow")
		}
		if len(run) == 0 {
			lowerFirst = start && upperFirst(c) && !isAcronym(c)
		}
		run = append(run, c)
		if suf != "" || len(run) == maxPhraseWords {
			flush()
		}
	}
	flush()
}

func (pc *phraseCounter) count(run []string, lowerFirst bool, turn int, speaker string) {
	// The key is built on the stack: a phrase said again allocates nothing.
	var buf [128]byte
	b := buf[:0]
	for i, w := range run {
		if i > 0 {
			b = append(b, ' ')
		}
		b = appendWordKey(b, w)
	}
	i, ok := pc.idx[string(b)]
	if !ok {
		key := string(b)
		i = len(pc.list)
		pc.idx[key] = i
		from := len(pc.keys)
		for k := range strings.SplitSeq(key, " ") {
			pc.keys = append(pc.keys, k)
		}
		sfrom := len(pc.surf)
		pc.surf = append(pc.surf, run...)
		pc.list = append(pc.list, phraseCount{surf: pc.surf[sfrom:len(pc.surf):len(pc.surf)], lowerFirst: lowerFirst,
			words: pc.keys[from:len(pc.keys):len(pc.keys)], last: -1, speaker: speaker})
	}
	c := &pc.list[i]
	if c.last != turn {
		c.last = turn
		c.turns++
		for _, w := range c.words {
			pc.words[w]++
		}
	}
	if c.speaker != speaker && !slices.Contains(c.speakers, speaker) {
		c.speakers = append(c.speakers, speaker)
	}
}

// extendsChosen reports whether the phrase of word keys words holds all
// the words of a chosen phrase ("desert house allow" after "desert
// house"): it would name that topic twice.
func extendsChosen(words []string, chosen [][]string) bool {
	for _, c := range chosen {
		all := true
		for _, w := range c {
			all = all && slices.Contains(words, w)
		}
		if all {
			return true
		}
	}
	return false
}

// text is the phrase as first said.
func (c *phraseCount) text() string {
	first := c.surf[0]
	if c.lowerFirst && !(len(c.surf) > 1 && upperFirst(c.surf[1])) { // ("Navdeep Bains" is a name)
		r, size := utf8.DecodeRuneInString(first)
		first = string(unicode.ToLower(r)) + first[size:]
	}
	if len(c.surf) == 1 {
		return first
	}
	return first + " " + strings.Join(c.surf[1:], " ")
}

// appendWordKey appends wordKey(w) to dst.
func appendWordKey(dst []byte, w string) []byte {
	from := len(dst)
	if isASCII(w) {
		for i := 0; i < len(w); i++ {
			c := w[i]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			dst = append(dst, c)
		}
	} else {
		dst = append(dst, strings.ToLower(w)...)
	}
	if k := dst[from:]; len(k) > 3 && k[len(k)-1] == 's' && k[len(k)-2] != 's' {
		dst = dst[:len(dst)-1]
	}
	return dst
}

// wordKey is the comparison form of a topic word: lowercased, a plural
// "s" dropped.
func wordKey(w string) string {
	k := strings.ToLower(w)
	if len(k) > 3 && strings.HasSuffix(k, "s") && !strings.HasSuffix(k, "ss") {
		k = k[:len(k)-1]
	}
	return k
}

// phraseKey is the comparison form of a phrase: the wordKey of each word.
func phraseKey(ph string) string {
	var arr [8]string
	ws := appendFields(arr[:0], ph)
	for i, w := range ws {
		ws[i] = wordKey(w)
	}
	return strings.Join(ws, " ")
}

// isAcronym reports an all-capitals word ("MLP", "A1"): no lowercase
// letter, some capital, two bytes or more.
func isAcronym(c string) bool {
	if len(c) < 2 {
		return false
	}
	upper := false
	for _, r := range c {
		if unicode.ToUpper(r) != r {
			return false // a lowercase letter
		}
		upper = upper || unicode.ToLower(r) != r
	}
	return upper
}

// isTopicWord reports whether the word x can be part of a topic phrase: letters
// (and inner hyphens or digits), at least three of them or an acronym,
// and not a function word, filler, hedge, common word, number word,
// calendar word or participant name.
func isTopicWord(x *word, who names) bool {
	c := x.c
	if len(c) < 2 || (len(c) < 3 && !isAcronym(c)) || c[0] == '-' || c[len(c)-1] == '-' {
		return false
	}
	if x.lx&(lxStop|lxFillerCore|lxFillerSoft|lxCommon|lxLightDrop|lxNumber|lxCalendar|lxAttribution) != 0 {
		return false // (most words of speech end here)
	}
	if !allLettersExcept(c, '-') || hasRunOver(c, 2) {
		return false // "nnn", "mmm": a sound, not a word
	}
	if strings.HasSuffix(x.n, "ly") || strings.HasSuffix(x.n, "ed") || isLaugh(x.n) {
		return false // an adverb or a verb's past: no topic
	}
	if abbrevs[x.n] {
		return false // ("Mr", "etc": ending a line, it would not end its sentence)
	}
	return !who.has(c)
}

// top returns the batch's period: its n best phrases and the (at most
// two) speakers who said most of them. ok is false when the batch has
// fewer than minPeriodPhrases phrases worth a line.
func (pc *phraseCounter) top(n int) (phrases, speakers []string, ok bool) {
	type scored struct {
		i int
		s float64
	}
	var candArr [128]scored
	cands := candArr[:0]
	for i, c := range pc.list {
		s := float64(c.turns)
		for _, w := range c.words {
			s += 0.5 * (pc.words[w] - float64(c.turns))
		}
		if len(c.words) > 1 {
			s += 0.5 // a phrase says more than a word
		} else if c.turns < 2 && pc.sal[c.words[0]] < 2 && (c.lowerFirst || !upperFirst(c.surf[0])) {
			continue // a word said once, in passing
		}
		s += 0.7 * salienceOf(c.words, pc.sal)
		s += 0.5 * float64(len(c.speakers)) // taken up by others: each one more
		cands = append(cands, scored{i, s})
	}
	slices.SortStableFunc(cands, func(a, b scored) int { return cmp.Compare(b.s, a.s) })
	var usedArr [64]string
	used := usedArr[:0] // the words of the chosen phrases
	var chosenArr [maxPeriodPhrases][]string
	chosen := chosenArr[:0] // the chosen phrases' word keys
	type weighed struct {
		name string
		w    float64
	}
	var byArr [8]weighed
	by := byArr[:0]
	for _, c := range cands {
		if len(phrases) == n {
			break
		}
		pcount := &pc.list[c.i]
		dup := true
		for _, w := range pcount.words {
			dup = dup && slices.Contains(used, w)
		}
		if dup || extendsChosen(pcount.words, chosen) {
			continue // its words are already named by better phrases
		}
		used = append(used, pcount.words...)
		chosen = append(chosen, pcount.words)
		phrases = append(phrases, pcount.text())
	speakers:
		for k := -1; k < len(pcount.speakers); k++ {
			sp := pcount.speaker
			if k >= 0 {
				sp = pcount.speakers[k]
			}
			if sp == "" {
				continue // (a note's phrase)
			}
			for k := range by {
				if by[k].name == sp {
					by[k].w += float64(pcount.turns)
					continue speakers
				}
			}
			by = append(by, weighed{sp, float64(pcount.turns)})
		}
	}
	if len(phrases) < minPeriodPhrases || len(by) == 0 {
		return nil, nil, false
	}
	slices.SortFunc(by, func(a, b weighed) int { // (names are distinct: one order)
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	for _, b := range by[:min(len(by), maxPeriodNames)] {
		speakers = append(speakers, b.name)
	}
	return phrases, speakers, true
}

// clockOf is the "15:04" of t, "" for the zero time.
func clockOf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format("15:04")
}

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
