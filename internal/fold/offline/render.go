package offline

import (
	"bytes"
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

const (
	periodChars    = 400 // one closed period per this many characters of budget
	maxTopics      = 6   // topic phrases a period keeps
	shownTopics    = 4   // of which its line names at most
	maxTopicPhrase = 3   // words of one topic phrase
	leadNameRunes  = 80  // of the names the opening sentence lists
)

// ---- periods ----

// closePeriods moves the oldest statements of the current period into a closed period once they no longer fit the
// budget, and merges the two closed periods of shortest span while there are more than the budget has lines for.
// Statements of the batch just folded stay current.
func (st *state) closePeriods(budget int) {
	size := 0
	for i := range st.Open {
		size += st.Open[i].textRead().runes + 1
	}
	if size > budget*4/5 && len(st.Open) > 4 || len(st.Open) > maxOpen {
		keep, cut := 0, len(st.Open) // runes kept current, newest first; where they start
		for ; cut > 0; cut-- {
			if x := &st.Open[cut-1]; !x.Batch && (keep+x.textRead().runes > budget*2/5 || len(st.Open)-cut >= maxOpen/2) {
				break
			}
			keep += st.Open[cut-1].textRead().runes + 1
		}
		if cut > 0 {
			p := st.newPeriod(st.Open[:cut])
			if len(st.Topics) > 0 {
				p.Topics = append(slices.Clone(st.Topics), p.Topics...)[:min(maxTopics, len(st.Topics)+len(p.Topics))]
				st.Topics = nil
			}
			st.Periods = append(st.Periods, p)
			st.Open = slices.Delete(st.Open, 0, cut)
		}
	}
	for limit := max(2, budget/periodChars); len(st.Periods) > limit; {
		best, span := 0, int64(math.MaxInt64)
		for i := 0; i+1 < len(st.Periods); i++ {
			a, b := st.Periods[i], st.Periods[i+1]
			s := b.To - a.From
			if a.From == 0 || b.To == 0 {
				s = 0 // times unknown (a summary read as prose): merge them first
			}
			if s < span {
				best, span = i, s
			}
		}
		st.Periods[best] = st.mergePeriods(st.Periods[best], st.Periods[best+1])
		st.Periods = slices.Delete(st.Periods, best+1, best+2)
	}
}

// newPeriod closes the statements ss into a period.
func (st *state) newPeriod(ss []stmt) period {
	p, arr, ns := period{}, [8]string{}, [8]int{} // its speakers (a few) in order of their first statement, how many each made
	order, count := arr[:0], ns[:0]
	for i := range ss {
		x := &ss[i]
		if x.At != 0 {
			p.From, p.To = min(cmp.Or(p.From, x.At), x.At), max(p.To, x.At)
		}
		if j := slices.Index(order, x.Sp); x.Sp != "" && x.K != kTool && x.K != kNote { // a screen note is no one speaking
			if j < 0 {
				j, order, count = len(order), append(order, x.Sp), append(count, 0)
			}
			count[j]++
		}
	}
	for i := 1; i < len(order); i++ { // the most first, of equals the first (a stable insertion sort: they are few)
		for j := i; j > 0 && count[j-1] < count[j]; j-- {
			order[j-1], order[j], count[j-1], count[j] = order[j], order[j-1], count[j], count[j-1]
		}
	}
	p.Names = slices.Clone(order[:min(len(order), 3)])
	p.Topics = st.topics(nil, ss, maxTopics, st.counts())
	p.Stmts = st.covering(ss, p.Topics, maxPeriodKept)
	for i := range p.Stmts {
		// a closed period's topics are found: its statements' phrases are not needed again (the bytes go to statements)
		p.Stmts[i].Batch, p.Stmts[i].Ph = false, ""
	}
	return p
}

// covering keeps n of ss, in the order of their times: half by pickCovering, half the weightiest.
func (st *state) covering(ss []stmt, topics []string, n int) []stmt {
	if len(ss) <= n {
		return slices.Clone(ss)
	}
	_, sc := st.counts(), st.sc // (the counts read first)
	covered := sc.naming(topics)
	cands := sc.cands[:0]
	for i := range ss {
		cands = append(cands, sc.newCand(&ss[i], 0, 1))
	}
	sc.cands = cands
	sc.pickCovering(cands, covered, math.MaxInt, (n+1)/2)
	// the rest by their own weight, len(ss)-n of them dropped as dropWeakest drops them: a statement with names, numbers
	// or a decision is worth keeping even about what is said rarely
	ws, drop, keep := sc.bound[:0], len(ss)-n, make([]int32, 0, 16) // (keep: those taken, then the rest kept)
	for i := range cands {
		if cands[i].taken {
			keep = append(keep, int32(i))
		} else {
			ws = append(ws, cands[i].x.W)
		}
	}
	slices.Sort(ws)
	for i, cut := 0, ws[drop-1]; i < len(cands); i++ {
		k := !cands[i].taken && (drop == 0 || cands[i].x.W > cut)
		keep, drop = append(keep, int32(i))[:len(keep)+b2i(k)], drop-b2i(!k && !cands[i].taken)
	}
	sc.bound = ws
	slices.SortStableFunc(keep, func(a, b int32) int { return cmp.Compare(ss[a].At, ss[b].At) })
	out := make([]stmt, len(keep))
	for j, i := range keep {
		out[j] = ss[i]
	}
	return out
}

func (st *state) mergePeriods(a, b period) period {
	p := period{From: min(cmp.Or(a.From, b.From), cmp.Or(b.From, a.From)), To: max(a.To, b.To), // (0: not known)
		Names: make([]string, 0, 3), Topics: make([]string, 0, maxTopics)}
	for _, n := range append(append(make([]string, 0, 8), a.Names...), b.Names...) {
		if !slices.Contains(p.Names, n) && len(p.Names) < 3 {
			p.Names = append(p.Names, n)
		}
	}
	for i := 0; i < maxTopics && len(p.Topics) < maxTopics; i++ {
		for _, ts := range [][]string{a.Topics, b.Topics} {
			if i < len(ts) && len(p.Topics) < maxTopics && !slices.ContainsFunc(p.Topics, func(t string) bool { return st.lex().termString(t) == st.lex().termString(ts[i]) }) {
				p.Topics = append(p.Topics, ts[i])
			}
		}
	}
	sc := st.scratch() // (the memories' candidates are read: their room holds the statements of both)
	sc.sents = append(append(sc.sents[:0], a.Stmts...), b.Stmts...)
	p.Stmts = st.covering(sc.sents, p.Topics, maxPeriodKept)
	return p
}

// ---- topics ----

// phrase is one of topics', without a pointer: its text, key (its terms, for overlap) are ss[si].Ph[at:eq], [eq+1:end].
type phrase struct {
	si, at, eq, end int32
	n, last, words  int32 // statements that have it, the last of them (its index in topics' ss); its words
	upper           bool
	h               uint64  // key's hash
	score           float64 // for topics
}

func (p *phrase) text(ss []stmt) string { return ss[p.si].Ph[p.at:p.eq] }
func (p *phrase) key(ss []stmt) string  { return ss[p.si].Ph[min(p.eq+1, p.end):p.end] }

// topicPh are the phrases of x that topics gathers: a tool run's, none.
func topicPh(x *stmt) string { return x.Ph[:len(x.Ph)*b2i(x.K != kTool)] }

// topics are the phrases the statements ss are most about: runs of up to three content words ("the cabin near Lake
// Tahoe" gives "cabin", "Lake Tahoe"), names of people left out, multi-word phrases and names preferred to single
// words, which must recur to count, and, given the conversation's word counts (a closed period's topics, not what the
// opening sentence says is talked about now), phrases of the words the whole conversation says most preferred to those
// of a passing remark.
func (st *state) topics(out []string, ss []stmt, n int, voc *wordCounts) []string {
	if n <= 0 {
		return nil
	}
	sc := st.scratch()
	// all: the phrases that could name a subject last time (st.gathered) when ss are the statements they were gathered
	// from (same: a period closes those the opening sentence read the fold before), else all gathered anew
	total, same := 0, len(st.gatheredOf) == len(ss)
	for i := range ss {
		total += len(ss[i].Ph)/3 + 2 // (its distinct keys at most: a key but "" takes "=", a byte and ";" but the last)
		same = same && st.gatheredOf[i] == topicPh(&ss[i])
	}
	all := [2][]phrase{sc.phrases[:0], st.gathered}[b2i(same)]
	slots := append(sc.slots[:0], make([]int32, (2<<bits.Len(uint(total)))*b2i(!same))...) // all's places by key (open addressing, at most half full; 0: free)
	for si := 0; si < len(ss) && !same; si++ {
		st.gatheredOf = append(slices.Grow(st.gatheredOf[:si], len(ss)-si), topicPh(&ss[si])) // (grown once)
		for ph, more := st.gatheredOf[si], st.gatheredOf[si] != ""; more; {
			seg, rest, found := strings.Cut(ph, ";") // the next "text=key" (a key but "": after a '=')
			text, key, _ := strings.Cut(seg, "=")
			at := int32(len(ss[si].Ph) - len(ph))
			ph, more = rest, found
			h := hashString(key)
			j := int(h) & (len(slots) - 1)
			for slots[j] != 0 && (all[slots[j]-1].h != h || all[slots[j]-1].key(ss) != key) {
				j = (j + 1) & (len(slots) - 1) // (the next place)
			}
			if i := slots[j] - 1; i >= 0 {
				p := &all[i]
				if p.last == int32(si) {
					continue // (said twice in one statement: once)
				}
				p.n, p.last = p.n+1, int32(si)
				if strings.HasPrefix(text, "the ") && !strings.HasPrefix(p.text(ss), "the ") {
					p.si, p.at, p.eq, p.end = int32(si), at, at+int32(len(text)), at+int32(len(seg)) // said as a noun phrase somewhere
				}
				continue
			}
			r, _ := utf8.DecodeRuneInString(text)
			slots[j] = int32(len(all) + 1)
			all = append(all, phrase{si: int32(si), at: at, eq: at + int32(len(text)), end: at + int32(len(seg)), h: h, n: 1, last: int32(si), words: int32(strings.Count(text, " ") + 1 - b2i(strings.HasPrefix(text, "the "))),
				upper: unicode.IsUpper(r) || unicode.IsDigit(r)})
		}
	}
	st.gatheredOf, sc.slots = st.gatheredOf[:len(ss)], slots
	kept := [2][]phrase{all, sc.phrases}[b2i(same)][:0] // (what can name a subject, sorted)
	for i := range all {
		p := &all[i]
		text, key := p.text(ss), p.key(ss)
		np := strings.HasPrefix(text, "the ")
		if p.words == 1 && !p.upper && (!np || p.n < 3 || genericNouns[key] || strings.HasSuffix(text, "ing")) {
			continue // a word alone names a subject when it is said as a noun, often, and is not just any noun
		}
		if !p.upper && p.n < 2 || p.upper && p.words == 1 && p.n < 2 {
			continue // a word alone is too often a verb or an adjective, a capital too often a sentence's first
		}
		p.score = float64(p.n) * (1 + 0.7*float64(p.words-1))
		if p.upper {
			p.score++
		}
		for k, wi := nextField(key, 0); k != "" && voc != nil; k, wi = nextField(key, wi) {
			p.score += topicSalience * max(0, voc.weight(voc.id(k)))
		}
		kept = append(kept, *p)
	}
	if !same { // (not yet sorted: as gathered)
		st.gathered = append(st.gathered[:0], kept...)
	}
	slices.SortStableFunc(kept, func(a, b phrase) int { return cmp.Compare(b.score, a.score) })
	used := sc.seen[:0] // the words of the topics chosen
	for i := range kept {
		if len(out) >= n {
			break
		}
		p := &kept[i]
		text, key := p.text(ss), p.key(ss)
		np := strings.HasPrefix(text, "the ")
		clash := false // a word of a topic chosen
		for k := range strings.FieldsSeq(key) {
			clash = clash || slices.Contains(used, k)
		}
		if clash {
			continue
		}
		if !slices.Equal(st.peopleOf, st.Names) { // (the names' words stemmed, once for the names)
			st.people, st.peopleOf = st.people[:0], slices.Clone(st.Names)
			for _, n := range st.Names {
				for w, wi := nextField(n, 0); w != ""; w, wi = nextField(n, wi) {
					st.people = append(st.people, st.lex().getBytes(lower(make([]byte, 0, 32), strings.TrimSuffix(w, "'s"))).stem)
				}
			}
		}
		if slices.Contains(st.Names, strings.TrimSuffix(strings.TrimSuffix(text, "'s"), "'")) || ofPeople(key, st.people) {
			continue // a participant ("Project Manager", "Anna Lee") is who talks, not what about
		}
		for k, wi := nextField(key, 0); k != ""; k, wi = nextField(key, wi) {
			used = append(used, k)
		}
		t := text
		if first, _, _ := strings.Cut(t, " "); !p.upper && !np && !strings.HasSuffix(first, "ing") {
			t = "the " + t
		}
		out = append(out, t)
	}
	sc.seen, sc.phrases = used, kept
	return out
}

// ofPeople reports a phrase made of the words of participants' names ("Interface Designer" beside User Interface and
// Industrial Designer).
func ofPeople(key string, peopleKeys []string) bool {
	for k, wi := nextField(key, 0); k != ""; k, wi = nextField(key, wi) {
		if !slices.Contains(peopleKeys, strings.TrimSuffix(k, "'")) {
			return false
		}
	}
	return key != ""
}

var reportVerbs = toSet([]string{"said", "asked", "thought", "suggested", "offered", "to"})

// phraseStop are words that never start or join a topic phrase.
var phraseStop = toSet(strings.Fields(`near via per without within across around behind beyond toward towards
upon onto plus minus next last first second third new old big small little whole
ago today tonight tomorrow yesterday week weekend month year day days time times minute minutes hour hours
asked suggested thought working talked push take taking make get keep keeps try play playing use using grab
stop start call run going come left right point lost whether versus rather quite pretty makes gets used often
everyone someone anyone nobody somebody anybody everyone's someone's anyone's everybody's nobody's somebody's anybody's whoever whatever
monday tuesday wednesday thursday friday saturday sunday january february march april may june july august september october november december`))

// topicSalience is what a topic phrase gains per unit of its words' weight in the whole conversation
// (wordCounts.weight), beside the one per statement of ss that has it.
const topicSalience = 3

// numberWords are numbers said as words.
var numberWords = toSet(strings.Fields(`one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million ones twos threes`))

// genericNouns (stemmed) name no subject on their own: "the problem", "the idea".
var genericNouns = toSet(strings.Fields(`problem idea thing issu end point way question meet peopl part case number moment type fact reason rest side cours time day week follow talk end start stuff lot bit one other first last next same whole kind sort person guy group place sens job work call result list option difference differ chang discuss`))

// determiners open a noun phrase: the content words after one name a thing ("the scroll wheel", "our budget").
var determiners = toSet([]string{"the", "a", "an", "this", "that", "these", "those", "my", "your", "our", "their", "his", "her", "its", "some", "any", "each", "every", "no", "another"})

// statementBody is a statement's text without its attribution.
func statementBody(x stmt) string {
	if t, ok := strings.CutPrefix(x.Text, x.Sp); ok && x.Sp != "" {
		_, rest, _ := strings.Cut(t, " ")
		return rest
	}
	return x.Text
}

// phrases are the runs of content words of s, encoded for stmt.Ph.
func (lx *lexicon) phrases(s string, people []string) string {
	barr, rarr := [256]byte{}, [8]*field{} // (rarr: the run's words, their core and lexeme)
	out, run := barr[:0], rarr[:0]
	runUpper, np := false, false // (np: the run follows a determiner, a noun phrase)
	flush := func() {
		for len(run) > 0 && (run[len(run)-1].x.is(fAdverb) || strings.HasSuffix(run[len(run)-1].core, "ally")) {
			run = run[:len(run)-1]
		}
		if w0 := run[0:min(len(run), 1)]; len(run) > 0 && len(run) <= maxTopicPhrase &&
			!(len(w0[0].core) >= 2 && lowerASCII(w0[0].core[len(w0[0].core)-2]) == 'l' && lowerASCII(w0[0].core[len(w0[0].core)-1]) == 'y') {
			if len(out) > 0 {
				out = append(out, ';')
			}
			if np && !runUpper {
				out = append(out, "the "...)
			}
			for i, w := range run { // its words, then their stems
				out = append(append(out, " "[:min(i, 1)]...), w.core...)
			}
			out = append(out, '=')
			for i, w := range run {
				out = append(append(out, " "[:min(i, 1)]...), w.x.stem...)
			}
		}
		run, np = run[:0], false
	}
	start, det, paren := true, false, false // the word starts a sentence (its capital says nothing); follows a determiner
	// held: a capitalised word that opens a sentence, the start of a name when the next word is capitalised too
	// ("decided: Joshua Tree, …")
	held, heldAt, at := (*field)(nil), -2, 0 // (held is the word before's when heldAt is at-1)
	for f, wi := nextField(s, 0); f != ""; f, wi = nextField(s, wi) {
		at++
		if paren = paren || strings.HasPrefix(f, "("); paren {
			paren = !strings.Contains(f, ")")
			flush()
			continue // a resolved date
		}
		k, end := lx.field(f), f[len(f)-1] // (end is tested against ASCII only: a byte will do)
		// (no phrase starts with a number, "…ed"; "14th", "0.01s", "the forty five", "the already mentioned" are no topics)
		ok := k.is(ffPhrase) && (len(run) > 0 || !k.is(ffMid)) && !slices.Contains(people, k.core)
		up := ok && k.is(ffUp)
		if ok && start && up {
			ok = false
			if !oneOf(end, clauseEnd) {
				held, heldAt = k, at
			}
		}
		if ok && len(run) > 0 && up != runUpper {
			flush() // "cabin" | "Lake Tahoe"
		}
		start = oneOf(end, 1<<'.'|1<<'!'|1<<'?'|1<<'"'|1<<':') || k.x.is(fReportVerb)
		wasDet := det
		det = k.x.is(fDeterminer) && !oneOf(end, clauseEnd)
		if !ok {
			if len(run) > 0 { // (np is set again when a run starts)
				flush()
			}
			continue
		}
		if len(run) == 0 {
			runUpper = up
			np = wasDet
			if heldAt == at-1 && up {
				run = append(run, held)
			}
		}
		run = append(run, k)
		if oneOf(end, clauseEnd|1<<')') {
			flush()
		}
	}
	flush()
	return string(out)
}

// ---- rendering ----

// hasPhrase reports whether s holds t as whole words ("ice" is not in "price list", nor "art" in "the party").
func hasPhrase(s []byte, t string) bool {
	word := func(c byte) bool { return isLetter(c) || '0' <= c && c <= '9' || c >= utf8.RuneSelf }
	for i, j := 0, bytes.Index(s, []byte(t)); j >= 0 && t != ""; i, j = i+j+1, bytes.Index(s[i+j+1:], []byte(t)) {
		if at := i + j; (at == 0 || !word(s[at-1])) && (at+len(t) == len(s) || !word(s[at+len(t)])) {
			return true
		}
	}
	return false
}

// render writes the summary from the state within budget runes: the opening sentence (who, and what about), a line for
// each closed period with its best statements, then the current statements; what does not fit is left out by worth for
// its length, counting only what no statement kept already says.
func (st *state) render(budget, maxParticipants, maxLeadTopics int) string {
	lead := st.lead(maxParticipants, maxLeadTopics)
	if len(st.Periods) == 0 && len(st.Open) == 0 {
		return lead
	}
	multiDay, lines, tarr, low := st.multiDay(), [8]string{lead}, [maxTopics]string{}, [512]byte{}
	texts := append(lines[:1], make([]string, len(st.Periods))...) // the opening, then the periods' lines (headers)
	headers := texts[1:]
	named := low[:0] // (the opening and the lines before, lower-cased)
	for i, p := range st.Periods {
		if i == 0 {
			named = lower(named, lead)
		}
		// a topic the opening or an earlier line names already, as whole words, is not named again (unless it is all the line is about)
		if ts := slices.DeleteFunc(append(tarr[:0], p.Topics...), func(t string) bool { return hasPhrase(named, strings.ToLower(t)) }); len(ts) > 0 {
			p.Topics = ts
		}
		p.Topics = p.Topics[:min(len(p.Topics), shownTopics)]
		if headers[i] = p.header(multiDay, len(st.Names)+st.Others >= 3, i%2 == 1); i+1 < len(st.Periods) { // (what the next lines may name again)
			named = lower(named, headers[i])
		}
	}
	used := runeLen(lead)
	for _, h := range headers {
		used += runeLen(h) + 1
	}
	dropped := 0 // the oldest periods left out, with their statements
	for ; used > budget && dropped < len(headers); dropped++ {
		used -= runeLen(headers[dropped]) + 1
		headers[dropped] = ""
	}
	_, sc := st.counts(), st.sc // (the counts read first)
	cands := sc.cands[:0]
	add := func(x *stmt, pi int, rec float64) { // (a question of the batch folded last weighs half as much again)
		cands = append(cands, sc.newCand(x, pi, rec*(1+0.5*float64(b2i(x.K == kQuestion && x.Batch)))))
	}
	for pi := dropped; pi < len(st.Periods); pi++ {
		for i := range st.Periods[pi].Stmts {
			add(&st.Periods[pi].Stmts[i], pi, 1+0.1*float64(pi+1)/float64(len(st.Periods)))
		}
	}
	for i := range st.Open { // (a statement of the batch folded last weighs 0.1 more)
		add(&st.Open[i], -1, 1+0.1*float64(i+1)/float64(len(st.Open))+0.1*float64(b2i(st.Open[i].Batch)))
	}
	if n := len(cands); n > 0 && cands[n-1].period < 0 {
		cands[n-1].latest = true
	}
	sc.cands = cands
	// What the opening sentence and the period lines name is said already.
	sc.pickCovering(cands, sc.naming(texts), budget-used, len(cands))
	sc.lines = st.compose(sc.lines[:0], lead, headers, cands, budget-used)
	return strings.Join(sc.lines, " ")
}

// compose lays out the summary's sentences: the opening, each period's line with its statements taken, then the current
// statements taken. Two statements in a row that one speaker said become one sentence ("Bob said the venue is booked,
// and the caterer wants a deposit."). A speaker reported just before "also said" (asked, thought, suggested) while room
// lasts: the runes left by the statements taken (room: what the lines of the lead and the periods left).
func (st *state) compose(lines []string, lead string, headers []string, cands []cand, room int) []string {
	lines = append(lines, lead)[:b2i(lead != "")] // (lines come empty)
	for i := range cands {
		room -= cands[i].size * b2i(cands[i].taken)
	}
	joinSp := ""        // the speaker of the last line when it is a statement another of theirs may join
	first := len(lines) // the first statement's line
	saidLast := false   // of the statements reported with "said" or "mentioned", the last said "said"
	when := ""          // the time of a period without a line of its own, which opens its first statement
	add := func(x *stmt) {
		said := len(x.Sp) + len(" said ")
		plain := x.K == kSaid && x.Sp != "" && strings.HasPrefix(x.Text, x.Sp) && strings.HasPrefix(x.Text[len(x.Sp):], " said ") && !strings.ContainsRune(x.Text, '"') && !strings.Contains(x.Text, ": ")
		if n := len(lines) - 1; plain && joinSp == x.Sp { // (its verb maybe varied)
			lines[n] = strings.TrimRight(lines[n], ".!") + ", and " + x.Text[said:]
			joinSp = ""
			return
		}
		t := x.Text
		if v := t[min(len(x.Sp), len(t)):]; room >= len(" also") && x.Sp != "" && strings.HasPrefix(t, x.Sp) &&
			(strings.HasPrefix(v, " said") || strings.HasPrefix(v, " asked") || strings.HasPrefix(v, " thought") || strings.HasPrefix(v, " suggested")) &&
			alsoAfter(lines[first:], x.Sp) {
			t, room = x.Sp+" also"+v, room-len(" also")
		}
		if v := varied(t, x, saidLast); len(v)-len(t) <= room {
			t, room = v, room-(len(v)-len(t))
		}
		if (x.K == kSaid || x.K == kAsk) && strings.HasSuffix(t, "…") && strings.Count(t, `"`)%2 == 1 && room > 0 {
			t, room = t+`"`, room-1 // a quote cut short (clip) closes
		}
		if v := strings.TrimPrefix(strings.TrimPrefix(t, x.Sp), " also"); strings.HasPrefix(v, " said ") || strings.HasPrefix(v, " mentioned ") {
			saidLast = v[1] == 's'
		}
		if when != "" {
			t = lowerFirst(when, t)
		}
		lines = append(lines, t)
		if joinSp, when = "", ""; plain && strings.HasSuffix(x.Text, ".") {
			joinSp = x.Sp
		}
	}
	// (cands are the statements of the periods with a line, then the current ones, in order)
	i := 0
	for pi := range len(st.Periods) + 1 { // (the last: the current statements)
		if when = ""; pi < len(st.Periods) && strings.HasSuffix(headers[pi], ", ") {
			when, joinSp = headers[pi], ""
		} else if pi < len(st.Periods) && headers[pi] != "" {
			lines, joinSp = append(lines, headers[pi]), ""
		}
		for ; i < len(cands) && (cands[i].period == pi || pi == len(st.Periods)); i++ {
			if cands[i].taken {
				add(cands[i].x)
			}
		}
	}
	return lines
}

// lead is the opening sentence: who, and what the current period is about.
func (st *state) lead(maxParticipants, maxTopics int) string {
	if len(st.Names) == 0 {
		return ""
	}
	b := appendNames(make([]byte, 0, 256), st.Names, st.Others, maxParticipants) // (the sentence, written once at its size)
	small, verb, none := " exchanged small talk.", " are talking about ", " are in the session."
	if st.Agent {
		verb = " are working on "
	}
	if len(st.Names) == 1 && st.Others == 0 {
		small, verb, none = " made small talk.", strings.Replace(verb, "are", "is", 1), " is in the session."
	}
	if st.Small && len(st.Open) == 0 && len(st.Periods) == 0 {
		return string(append(b, small...))
	}
	ts := st.topics(make([]string, 0, 8), st.Open, maxTopics, nil)
	if len(st.Topics) > 0 {
		// what the summary read as prose was about comes first
		ts = append(slices.Clone(st.Topics), ts...)
		ts = slices.CompactFunc(ts, strings.EqualFold)[:min(len(ts), max(maxTopics, 1))]
	}
	for i := len(st.Periods) - 1; len(ts) == 0 && i >= 0; i-- { // what the latest period that names a subject was about
		ts = st.Periods[i].Topics[:min(maxTopics, len(st.Periods[i].Topics))]
	}
	if len(ts) == 0 {
		return string(append(b, none...))
	}
	return string(append(appendList(append(b, verb...), ts), '.'))
}

// appendNames appends at most maxN of ns, in leadNameRunes, and counts the rest: a name is never cut, and one cut
// already ("Mallory says everyone must now…", speaker.Short) is counted unless none other is named.
func appendNames(b []byte, ns []string, others, maxN int) []byte {
	var arr [8]string
	list := arr[:0]
	for size, i := 0, 0; i < len(ns) && len(list) < maxN && size+runeLen(ns[i]) <= leadNameRunes; i++ {
		if !strings.HasSuffix(ns[i], "…") || len(list) == 0 && i == len(ns)-1 {
			list, size = append(list, ns[i]), size+runeLen(ns[i])+2
		}
	}
	if others += len(ns) - len(list); others > 0 { // "1 other", "3 others"
		return append(strconv.AppendInt(appendList(b, append(list, "")), int64(others), 10), " others"[:6+min(others-1, 1)]...)
	}
	return appendList(b, list)
}

func andList(xs []string) string { return string(appendList(make([]byte, 0, 128), xs)) }

// appendList appends xs as a list: "a", "a and b", "a, b and c".
func appendList(b []byte, xs []string) []byte {
	for i, x := range xs {
		b = append(append(b, [3]string{"", ", ", " and "}[min(i, 1)+b2i(i > 0 && i == len(xs)-1)]...), x...)
	}
	return b
}

// multiDay reports whether the statements of the state fall on more than one calendar day (UTC): the period lines then
// carry their dates.
func (st *state) multiDay() bool {
	first, last := int64(math.MaxInt64), int64(0) // (a period without its times has neither)
	for _, p := range st.Periods {
		first, last = min(first, cmp.Or(p.From, first)), max(last, p.To)
	}
	for _, x := range st.Open {
		first, last = min(first, cmp.Or(x.At, first)), max(last, x.At)
	}
	return last != 0 && day(first) != day(last)
}

// day is the UTC day of the unix time t, counted from 1 January 1970.
func day(t int64) int64 { return (t - (t%86400+86400)%86400) / 86400 }

// cand is a statement that may go in the summary.
type cand struct {
	x      *stmt   // (its words: x.ids, wordCounts.termIDs; the one pointer, so that candidates are cheap to write)
	rec    float64 // more for newer statements
	extra  float64 // worthBeyondWords
	latest bool    // the last thing said: where the conversation is
	size   int     // runes, with the space before it
	period int     // -1: current
	taken  bool
	dup    bool  // its text, lower-cased, is a taken candidate's
	worth  int32 // where the worth of each of its words starts in one pick's
}

// naming are the words of texts by their numbers (after state.counts).
func (sc *scratch) naming(texts []string) termSet {
	named := sc.named[:0]
	for _, t := range texts {
		for _, w := range sc.termsOf(t) {
			id := sc.voc.id(w)
			named = append(named, make(termSet, max(0, int(id)+1-len(named)))...)
			named[id] = true
		}
	}
	sc.named = named
	return named
}

func (sc *scratch) newCand(x *stmt, period int, rec float64) cand {
	terms := sc.voc.termIDs(x)
	return cand{x: x, period: period, rec: rec, size: x.textRead().runes + 1, extra: worthBeyondWords(x, len(terms))}
}

// pickCovering marks at most n candidates within room runes, one at a time: the one that adds most for its length of
// what no statement taken says, nor the lines written name (named; its words weighed by how often the conversation says
// them, plus worthBeyondWords), while any adds anything. A text is taken once.
func (sc *scratch) pickCovering(cands []cand, named termSet, room, n int) {
	var sizes, twice [8]uint64 // the candidates' sizes (mod 512), and those of two or more
	voc := &sc.voc
	said, named, worth, bound := append(sc.said[:0], make(termSet, len(voc.n))...), append(named, make(termSet, len(voc.n)-len(named))...), sc.worth[:0], sc.bound[:0] // (as large as the words numbered)
	take := func(b *cand) {
		for i := 0; i < len(cands) && twice[b.size&511>>6]&(1<<(b.size&63)) != 0; i++ { // (a text is its size)
			if c := &cands[i]; c != b && c.size == b.size && strings.EqualFold(c.x.Text, b.x.Text) {
				c.dup = true
			}
		}
		b.dup = true
		for _, t := range b.x.ids {
			said[t] = true
		}
	}
	order := sc.slots[:0] // those of any value, by bound, the highest first (of equal ones, the first)
	for i := range cands {
		c, z, gain := &cands[i], cands[i].size&511, 0.0
		c.dup, twice[z>>6], sizes[z>>6] = false, twice[z>>6]|sizes[z>>6]&(1<<(z&63)), sizes[z>>6]|1<<(z&63)
		// what each candidate's words are worth does not change while picking; its bound, value's while nothing is said
		for _, t := range c.x.ids {
			w := voc.weight(t) * [2]float64{1, 0.25}[b2i(named[t])] // a quarter for a word named: said in other words (exact, as /4 is)
			worth, gain = append(worth, w), gain+w
		}
		c.worth = int32(len(worth) - len(c.x.ids))
		if bound = append(bound, (gain+c.extra)*c.rec/float64(c.size+30)*float64(b2i(c.size <= room))); bound[i] > 0 {
			order = append(order, int32(i))
		}
	}
	// value is what taking c adds now (0: nothing, nor ever again: room only shrinks and what is said only grows)
	value := func(c *cand) float64 {
		if c.taken || c.size > room || c.dup {
			return 0
		}
		gain, fresh, worth := 0.0, 0, worth[c.worth:int(c.worth)+len(c.x.ids)]
		for j, t := range c.x.ids {
			if !said[t] {
				fresh++
				gain += worth[j]
			}
		}
		if len(c.x.ids) > 0 && fresh*3 < len(c.x.ids) && c.x.K == kSaid && !(c.latest && fresh > 0) {
			return 0 // says little that is not said already
		}
		return (gain + c.extra) * c.rec / float64(c.size+30)
	}
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && bound[order[j-1]] < bound[order[j]]; j-- {
			order[j-1], order[j] = order[j], order[j-1]
		}
	}
	// The first of the most valuable, found lazily: a value never grows, so one still at its bound, the highest, is the
	// most valuable now.
	for n > 0 && len(order) > 0 {
		best, j := order[0], 1
		if v := value(&cands[best]); v != bound[best] {
			for bound[best] = v; j < len(order) && (bound[order[j]] > v || bound[order[j]] == v && order[j] < best); j++ {
				order[j-1] = order[j] // (it moves down to its place; out, at 0)
			}
			order[j-1], order = best, order[:len(order)-b2i(!(v > 0))]
			continue
		}
		cands[best].taken, order = true, order[1:]
		room -= cands[best].size
		take(&cands[best])
		n--
	}
	sc.said, sc.worth, sc.bound, sc.named = said, worth, bound, named
}

// worthBeyondWords: numbers, names, and most a decision, an instruction or a question just asked.
func worthBeyondWords(x *stmt, terms int) float64 {
	w := 0.3 * max(0, x.W-0.3-0.35*float64(min(terms, 14)))
	if x.K == kQuestion && x.Batch || x.K == kAsk || x.textRead().decisive {
		w += 2
	}
	return w
}

// textRead is what rendering reads in a statement's text (rendered fold after fold), read again once the text changes:
// its length in runes, whether it is decisive, whether what follows its "said" gives a reason or an opinion (varied).
type textRead struct {
	text                    string
	runes                   int
	rest                    int32 // the length of the rest of the text (after "said") that reason and opine read; -1: none yet
	decisive, reason, opine bool
}

func (x *stmt) textRead() *textRead {
	if r := x.read; r == nil || r.text != x.Text || r.runes == 0 {
		x.read = &textRead{text: x.Text, rest: -1, runes: runeLen(x.Text), decisive: decisive.in(x.Text)}
	}
	return x.read
}

var decisive = newKeywords("decided", "agreed", "we'll ", "we will ", "let's ", "suggested ", "booked", "deadline")

// header is a period's line: when, who, what about ("From 14:02 to 14:20, Alice and Bob talked about the venue in
// Lisbon and catering."); for a period that names no subject, only when ("Between 14:47 and 14:51, ").
func (p period) header(multiDay, group, vary bool) string { // (vary: "discussed", as a person varies the verb)
	b, from, to := make([]byte, 0, 192), time.Unix(p.From, 0).UTC(), time.Unix(p.To, 0).UTC()
	w := [2][3]string{{"From ", " from ", " to "}, {"Between ", " between ", " and "}}[b2i(len(p.Topics) == 0)]
	const clock, date = "15:04", "2 Jan"
	switch {
	case p.From == 0 || p.To == 0:
		b = append(b, "Earlier"...)
	case day(p.From) != day(p.To):
		b = to.AppendFormat(append(from.AppendFormat(append(b, w[0]...), clock+" on "+date), w[2]...), clock+" on "+date)
	case from.Hour() == to.Hour() && from.Minute() == to.Minute():
		b = from.AppendFormat(append(b, "At "...), [2]string{clock, clock + " on " + date}[b2i(multiDay)])
	case multiDay:
		b = to.AppendFormat(append(from.AppendFormat(append(from.AppendFormat(append(b, "On "...), date), w[1]...), clock), w[2]...), clock)
	default:
		b = to.AppendFormat(append(from.AppendFormat(append(b, w[0]...), clock), w[2]...), clock)
	}
	if b = append(b, ", "...); len(p.Topics) == 0 { // no "At 14:47, the group spoke.": the time opens its first statement (compose), which need not have lasted it
		return string(b)
	}
	n := len(b)
	switch b = appendList(b, p.Names[:min(2, len(p.Names))]); {
	case len(p.Names) >= 3 || group && (len(b) == n || utf8.RuneCount(b[n:]) > 24):
		b = append(b[:n], "the group"...) // (as a person writes of a meeting)
	case len(b) == n || utf8.RuneCount(b[n:]) > 24:
		b = append(b[:n], "they"...)
	}
	return string(append(appendList(append(b, [2]string{" talked about ", " discussed "}[b2i(vary)]...), p.Topics), '.'))
}

// varied is t, a statement of sp, with its verb "said" varied as a person writing a report varies it: "explained" where
// it gives a reason, "thought" an opinion, "mentioned" (not for a quote or a remark of a few words) after a statement
// reported with "said" (saidLast).
func varied(t string, x *stmt, saidLast bool) string { // (x: the statement, for what its text read)
	if v := t[min(len(x.Sp), len(t)):]; !strings.HasPrefix(t, x.Sp) || !strings.HasPrefix(v, " said") && !strings.HasPrefix(v, " also said") {
		return t // (not "sp said" nor "sp also said": not looked for further)
	}
	head, rest, ok := strings.Cut(t, " said")
	if sp := x.Sp; !ok || head != sp && head != sp+" also" || !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, ", ") {
		return t
	}
	if r := x.textRead(); r.rest != int32(len(rest)) { // (rest: a suffix of the text, known by its length)
		r.rest, r.reason, r.opine = int32(len(rest)), reasons.in(rest), opinions.in(rest)
	}
	switch {
	case x.read.reason: // (x.read: textRead's)
		return head + " explained" + rest
	case x.read.opine:
		return head + " thought" + rest
	case saidLast && fieldsAtLeast(rest, 5) && 'a' <= rest[1] && rest[1] <= 'z':
		return head + " mentioned" + rest
	}
	return t
}

var reasons = newKeywords(" because ", " so that ", "the reason ", " 'cause ", " cause ")
var opinions = newKeywords(" probably ", " maybe ", " i guess ", " i'm inclined ", " i feel ", " seems ", " better ", " i think ", " would be ", " they should ", " it should ")

// alsoAfter reports a statement of sp after lines that says "also": sp spoke two or three lines before (not "also"
// there), another just before.
func alsoAfter(lines []string, sp string) bool {
	for i := len(lines) - 1; i >= max(0, len(lines)-3); i-- {
		if strings.HasPrefix(lines[i], sp) && strings.HasPrefix(lines[i][len(sp):], " ") {
			return i < len(lines)-1 && !strings.HasPrefix(lines[i][len(sp):], " also ")
		}
	}
	return false
}
