package offline

import (
	"bytes"
	"cmp"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/reldate"
	"github.com/foldstream/foldstream/internal/sentence"
	"github.com/foldstream/foldstream/internal/speaker"
)

const (
	maxTurnRunes  = 4000 // of one turn's text; the rest is not read
	maxBatchStmts = 400  // statements of one batch kept: the weightiest
)

// lex is the lexicon of the summarizer's words seen (in the fold's scratch).
func (st *state) lex() *lexicon { return &st.scratch().lex }

// batch is what one fold's turns and notes say.
type batch struct {
	stmts         []stmt
	speakers, sps []string // who spoke, in order; each turn's speaker (displayName)
	// answered: the state's open question (by index in st.Open) that the batch's first turn answers, -1 for none.
	answered            int
	hadTurns, allFiller bool
}

// extract turns req's turns and notes into statements, in order. Every turn is read once here; what the summary and the
// memories say comes from these statements.
func (s *Summarizer) extract(req fold.Request, st *state, sc *scratch) batch {
	nt := len(req.Turns) // (sps, then room for every speaker: one allocation)
	b := batch{stmts: sc.stmts[:0], answered: -1, allFiller: true, sps: make([]string, nt, 2*nt)}
	lastQ, lastQSp := -1, "" // index in b.stmts of a question waiting for its answer, and who asked it
	if n := len(st.Open); n > 0 && st.Open[n-1].K == kQuestion {
		lastQ, lastQSp = -2, st.Open[n-1].Sp // -2: the state's last statement
	}
	narr := [64]string{} // (names' room on the stack; each turn's speaker is named once, in sps)
	names, sps := append(narr[:0], st.Names...), b.sps
	for i, t := range req.Turns {
		if j := slices.IndexFunc(req.Turns[:i], func(u fold.Turn) bool { return u.Speaker == t.Speaker && u.Role == t.Role }); j >= 0 {
			sps[i] = sps[j] // (named before)
		} else if sps[i] = displayName(t); !slices.Contains(names, sps[i]) && len(names) < 64 {
			names = append(names, sps[i])
		}
	}
	b.speakers = sps[nt:]
	// A proposal ("Alice suggested …") records who agreed with it in the turns right after it.
	prop, agreed := -1, []string(nil)
	endProposal := func() {
		if prop >= 0 && len(agreed) > 0 {
			b.stmts[prop].Text = strings.TrimSuffix(b.stmts[prop].Text, ".") + ", and " + andList(agreed) + " agreed."
		}
		prop, agreed = -1, nil
	}
	var call *stmt // the tool call waiting for its result
	if n := len(st.Open); n > 0 && st.Open[n-1].K == kTool && strings.HasSuffix(st.Open[n-1].Text, ").") {
		call = &st.Open[n-1] // its result comes in this batch
	}
	for ti, t := range req.Turns {
		if isToolTurn(t) {
			b.hadTurns, b.allFiller = true, false
			call = sc.lex.toolTurn(&b, t, call)
			continue
		}
		call = nil
		if strings.EqualFold(t.Role, "system") {
			continue
		}
		b.hadTurns = true
		sp := sps[ti]
		text := cleanSpeech(sanitize(t.Text, maxTurnRunes))
		if !slices.Contains(b.speakers, sp) && strings.TrimSpace(text) != "" {
			b.speakers = append(b.speakers, sp)
		}
		if prop >= 0 && sp != b.stmts[prop].Sp && agrees(text) {
			if !slices.Contains(agreed, sp) {
				agreed = append(agreed, sp)
			}
			continue
		}
		if prop >= 0 && strings.TrimSpace(text) != "" && !opensWithBackchannel(text) {
			endProposal()
		}
		n := len(b.stmts)
		b.stmts = s.sentences(sc, b.stmts, text, sp, t, req.Profile == fold.ProfileAgent, names)
		sents := b.stmts[n:]
		// A question is answered by the next turn of someone else when that turn says something and does not open with
		// a backchannel ("sure, …").
		if lastQ != -1 && sp != lastQSp && strings.TrimSpace(text) != "" {
			qs, qi := b.stmts, lastQ // (the question)
			if lastQ == -2 {
				qs, qi = st.Open, len(st.Open)-1
			}
			if len(sents) > 0 && !opensWithBackchannel(text) && sents[0].K != kQuestion && answers(&qs[qi], &sents[0], text) {
				if lastQ == -2 {
					b.answered = len(st.Open) - 1
				} else {
					b.stmts[lastQ].K = -1 // dropped below
				}
			}
			lastQ = -1
		}
		if len(sents) == 0 {
			continue
		}
		b.allFiller = false
		if last := sents[len(sents)-1]; strings.HasPrefix(last.Text, sp) && strings.HasPrefix(last.Text[len(sp):], " suggested ") {
			endProposal()
			prop = len(b.stmts) - 1
		}
		if last := sents[len(sents)-1]; last.K == kQuestion {
			lastQ, lastQSp = len(b.stmts)-1, sp
		} else if lastQ != -1 && sp != lastQSp {
			lastQ = -1
		}
	}
	endProposal()
	b.stmts = slices.DeleteFunc(b.stmts, func(x stmt) bool { return x.K < 0 })
	sc.salient(b.stmts, st.counts())
	if len(b.stmts) > maxBatchStmts {
		b.stmts = dropWeakest(b.stmts, len(b.stmts)-maxBatchStmts)
	}
	for _, n := range req.Notes[:min(len(req.Notes), s.cfg.maxNotes)] {
		if x, ok := sc.lex.noteStmt(n); ok {
			b.stmts, b.allFiller = append(b.stmts, x), false
		}
	}
	sc.stmts = b.stmts
	return b
}

// sentences appends to dst a turn's statements worth keeping, at most maxUnitsPerTurn of them (the weightiest), in order.
func (s *Summarizer) sentences(sc *scratch, dst []stmt, text, sp string, t fold.Turn, agent bool, names []string) []stmt {
	lx, out := &sc.lex, dst
	tb := make([]byte, 0, 512) // a statement's terms and text, made one string (not its key: a fact keeps that alone)
	user, nt := agent && strings.EqualFold(t.Role, "user"), 0
	for _, raw := range sentence.AppendSplit(make([]string, 0, 8), text) { // (its room on the stack)
		if isInjection(raw) {
			continue // instructions in the data are not repeated
		}
		sent, ks, plain := lx.tighten(raw, sc.ks[:0])
		sent, ks = s.trimFiller(lx, sent, ks, plain)
		if t := tidyEnds(sent); t != sent {
			sent, ks = t, ks[:0]
		}
		if sent == "" || sent[0]|0x20 == 't' && (strings.EqualFold(sent[:min(len(sent), 6)], "thanks") || strings.EqualFold(sent[:min(len(sent), 9)], "thank you")) {
			continue // thanks are not news
		}
		if len(ks) == 0 || slices.Contains(ks, &noField) { // (its fields not known; each word is looked up once, for the terms, statFields, report and factKey)
			ks = lx.appendFields(ks[:0], sent)
		}
		tb, nt = termText(tb[:0], ks)
		sc.ks = ks
		c := statFields(ks)
		question := strings.HasSuffix(sent, "?")
		if nt == 0 && c.nums == 0 || nt == 1 && c.nums == 0 && c.words < 4 {
			continue // filler, a backchannel or too little to say
		}
		r, i, o, jn := sent, 0, 0, false // (a field that may start a relative date, with it or the next one that may end it: else nothing to resolve)
		if slices.ContainsFunc(ks, func(k *field) bool {
			i++
			return k.is(ffDate) && (k.is(ffDateEnd) || i < len(ks) && ks[i].is(ffDateEnd))
		}) {
			jn = joins(sent, ks) // (o: where field i-3 starts, two before that one: none before it starts a relative date; when sent is ks's fields joined by spaces)
			for _, k := range ks[:max(i-3, 0)*b2i(jn)] {
				o += len(k.f) + 1
			}
			r = reldate.ResolveLikely(sent, o, t.At)
		}
		if r != sent {
			d, m, off := o+max(strings.Index(r[o:], " ("), 0), 0, 0 // (d: where r's first note opens, or before; ks[:m], the fields before it with the space after each, are r's too, and r's m-th starts at off)
			for jn && m < len(ks) && off+len(ks[m].f) < d {
				off, m = off+len(ks[m].f)+1, m+1
			}
			ks = lx.appendFields(ks[:m], r[off:])
			rc := statFields(ks)
			sent, c.names, c.digits, sc.ks = r, rc.names, rc.digits, ks
		}
		w, k := weigh(sent, nt, c), kSaid
		if question {
			k, w = kQuestion, w+2*float64(b2i(nt >= 3)) // (an open question with a subject: +2)
		}
		if user {
			k, w = kAsk, w+3
		}
		n1 := len(tb)
		tr, self := lx.report(tb, sp, sent, ks, question, user, names) // (tb, then its text)
		all := string(tr)
		out = append(out, stmt{Sp: sp, At: unixOf(t.At), Text: clip(all[n1:], maxStmtRunes), W: w + 0.8*float64(b2i(self)), K: k,
			Terms: all[1:max(n1-1, 1)], Key: string(lx.factKey(tr[len(tr):], ks, c.digits)), Own: sent, Batch: true})
	}
	if n := s.cfg.maxUnitsPerTurn; len(out)-len(dst) > n {
		out = out[:len(dst)+len(dropWeakest(out[len(dst):], len(out)-len(dst)-n))]
	}
	for i := range out[len(dst):] {
		out[len(dst)+i].Ph = lx.phrases(statementBody(out[len(dst)+i]), names)
	}
	return out
}

// tidyEnds drops the quotation marks of a sentence that holds half a quote, and the comma a cut sentence ends with ("…
// first,." → "… first.").
func tidyEnds(s string) string {
	if i := strings.IndexByte(s, '"'); i >= 0 && strings.Count(s[i:], `"`)%2 == 1 {
		s = strings.Join(strings.Fields(strings.ReplaceAll(s, `"`, "")), " ")
	}
	if n := len(s); n > 1 && oneOf(s[n-2], 1<<','|1<<';'|1<<':'|1<<' ') { // (most end with a letter and a stop)
		if t := strings.TrimRight(strings.TrimSuffix(s, "."), ",;: "); len(t) < n-1 {
			return t + "."
		}
	}
	return s
}

// salient adds to each statement's weight how much its words are what the statements around it talk about: a word said
// in several of them is a subject of the conversation, which later questions ask about.
func (sc *scratch) salient(ss []stmt, voc *wordCounts) {
	for i := range ss {
		voc.termIDs(&ss[i]) // (every word numbered first)
	}
	tf := append(sc.tf[:0], make([]int32, len(voc.n))...) // by word
	for i := range ss {
		for _, id := range ss[i].ids {
			tf[id]++
		}
	}
	for i := range ss {
		for _, id := range ss[i].ids {
			ss[i].W += salience * float64(min(tf[id]-1, 3))
		}
	}
	sc.tf = tf
}

// salience is the weight of a word said in another statement too.
const salience = 0.25

// weigh is what a sentence is worth by its content: its content words, numbers, names (c), and words of decisions and
// plans.
func weigh(sent string, terms int, c wordStat) float64 {
	return 0.3 + 0.35*float64(min(terms, 14)) + 1.2*float64(min(c.nums, 3)) + 0.6*float64(min(c.names, 4)) + 1.5*float64(b2i(decisionWords.in(sent)))
}

var decisionWords = newKeywords("decided", "decide", "agreed", "agree", "let's", "we'll", "we will", "we should", "plan",
	"going to", "i'll", "i will", "booked", "suggest", "will ", "deadline", "must", "need to", "don't", "never", "always", "only")

// keywords finds any of a set of lower-case keywords in a text in one pass over it (a strings.Contains per keyword is a
// pass each), skipping ahead while a window of m bytes cannot hold a keyword's start (Wu-Manber).
type keywords struct {
	byFirst [256][]string  // the keywords by their first byte
	m       int            // the shortest keyword's length (two bytes or more)
	skip    [1 << 10]uint8 // by the pair of bytes ending a window of m bytes: how far it can move on
}

func pair(a, b byte) int { return int(a&31)<<5 | int(b&31) } // (either case of a letter alike)

func newKeywords(ws ...string) *keywords {
	k := &keywords{m: len(slices.MinFunc(ws, func(a, b string) int { return len(a) - len(b) }))}
	if k.m < 2 {
		panic("offline: a keyword is shorter than two bytes") // (in would find none)
	}
	for i := range k.skip {
		k.skip[i] = uint8(k.m - 1)
	}
	for _, w := range ws {
		k.byFirst[w[0]] = append(k.byFirst[w[0]], w)
		for j := 1; j < k.m; j++ {
			k.skip[pair(w[j-1], w[j])] = min(k.skip[pair(w[j-1], w[j])], uint8(k.m-1-j))
		}
	}
	return k
}

// in reports whether s contains one of the keywords, ignoring the case of ASCII letters (the keywords are ASCII).
func (k *keywords) in(s string) bool {
	for p := k.m - 1; p < len(s) && p > 0; { // (p: the end of a window where a keyword may start)
		if d := int(k.skip[pair(s[p-1], s[p])]); d > 0 {
			p += d
			continue
		}
		i := p - k.m + 1
		for _, w := range k.byFirst[lowerASCII(s[i])] {
			j := 1 // (w's bytes found in s from i)
			for j < len(w) && i+j < len(s) && lowerASCII(s[i+j]) == w[j] {
				j++
			}
			if j == len(w) {
				return true
			}
		}
		p++
	}
	return false
}

func lowerASCII(c byte) byte { return sentence.LowerByte(c) }

// wordStat counts a sentence's words, those with a digit, and the capitalised ones that do not start it (names).
type wordStat struct {
	words, nums, names int
	digits             uint64 // bit i: the i-th word has a digit (bit 63: or a later one)
}

func statWords(s string) wordStat { return statFields((*lexicon)(nil).appendFields(nil, s)) }

func statFields(ks []*field) (c wordStat) { // (ks: the sentence's fields)
	for _, k := range ks {
		d := k.flags & ffDigit / ffDigit // (1: it has a digit)
		c.nums, c.digits = c.nums+int(d), c.digits|uint64(d)<<min(c.words, 63)
		c.names, c.words = c.names+b2i(c.words > 0 && k.is(ffName)), c.words+1
	}
	return c
}

// ---- filler ----

var (
	leadFiller = []string{"yeah", "yes", "yep", "yup", "ok", "okay", "so", "um", "uh", "uhm", "hmm", "mm", "oh", "well",
		"like", "right", "alright", "and", "but", "anyway", "anyways", "also", "hey", "wait", "lol", "haha", "sure",
		"cool", "nice", "i mean", "you know", "hm", "ah", "er", "erm", "actually", "noted", "basically", "honestly", "look", "listen"}
	backchannels = toSet([]string{"sure", "yeah", "yes", "yep", "ok", "okay", "mm-hmm", "uh-huh", "cool", "nice", "right",
		"alright", "fine", "lol", "haha", "gg", "k", "kk", "totally", "exactly", "true", "agreed", "noted", "hmm", "mm"})
)

var leadByFirst = func() (m [256][]string) { // leadFiller by their first byte
	for _, f := range leadFiller {
		m[f[0]] = append(m[f[0]], f)
	}
	return m
}()

// cutLen is how many bytes of s lower-case (as lower does) to n bytes ("K", the Kelvin sign, is three; its "k" one).
func cutLen(s string, n int) (i int) {
	for r, w := utf8.DecodeRuneInString(s); n > 0 && w > 0; r, w = utf8.DecodeRuneInString(s[i:]) {
		i, n = i+w, n-utf8.RuneLen(unicode.ToLower(r))
	}
	return i
}

// trimFiller strips discourse words and laughter from the ends of a sentence and repeated words ("the the"), and drops
// the sentence when nothing with a word of content is left. ks are what the lexicon knows of sent's fields (of one left
// empty: noField), or none, plain that none of them is one it drops inside the sentence (tighten's); it returns what it
// knows of the fields of what it leaves, or none (in ks's room).
func (s *Summarizer) trimFiller(lx *lexicon, sent string, ks []*field, plain bool) (string, []*field) {
	sent = strings.TrimSpace(sent)
	whole := sent
	var buf [32]byte
	for changed := true; changed && sent != ""; {
		changed = false
		low, ascii := sent[:min(len(sent), s.cfg.maxFillerLen+1)], true // (the fillers are short: the start of the sentence, in either case when ASCII)
		if !isASCII(low) {
			low, ascii = string(lower(buf[:0], low)), false // (then compared as it is: lower-cased, not case-folded)
		}
		for _, f := range leadByFirst[lowerASCII(low[0])] {
			if len(low) > len(f) && (low[:len(f)] == f || ascii && strings.EqualFold(low[:len(f)], f)) && oneOf(low[len(f)], 1<<' '|1<<','|1<<'.'|1<<'!') &&
				(low[len(f)] != ' ' || f != "nice" && f != "cool") { // ("Nice shot Jonas!" is not "shot Jonas!")
				sent, changed = strings.TrimLeft(sent[cutLen(sent, len(f)):], " ,.!"), true
				break
			}
		}
		for _, w := range s.cfg.fillers[:len(s.cfg.fillers)*b2i(!changed)] { // (low is read again after a cut)
			if len(low) > len(w) && (low[:len(w)] == w || ascii && strings.EqualFold(low[:len(w)], w)) && low[len(w)] == ' ' {
				sent, changed = strings.TrimLeft(sent[cutLen(sent, len(w)):], " ,"), true
				break
			}
		}
	}
	i, n := 0, len(whole)-len(sent) // (n: the bytes of the fillers cut from its start, i: the fields)
	for ; i < len(ks) && n > 0; i++ {
		n -= len(ks[i].f) + 1
	}
	if len(ks) == 0 || len(sent) < len(whole) && (n != 0 || slices.Contains(ks, &noField) || !joins(whole, ks)) {
		ks, plain = lx.appendFields(ks[:0], sent), false
	} else if i > 0 { // (whole is ks's fields joined by spaces, and the fillers were its first fields)
		ks = append(ks[:0], ks[i:]...)
	}
	nf := len(ks)
	for len(ks) > 0 && (ks[len(ks)-1].is(ffTrail) || ks[len(ks)-1].is(ffDangling) && len(ks) > 2) {
		if last := ks[len(ks)-1].f; len(ks) > 1 && strings.HasSuffix(last, "?") {
			ks[len(ks)-2] = lx.field(strings.TrimRight(ks[len(ks)-2].f, ",;:") + "?") // "is it fine or?"
		}
		ks = ks[:len(ks)-1]
	}
	// (cut: a word was dropped or changed; ko: the fields kept, in ks's room: ko[i] is written once ks[i] is read, and
	// ks[i-1] is read only while ko has not changed it)
	i0 := len(ks) * b2i(plain && len(ks) == nf) // (the words before i0 stay as they are, as the loop below would find: none is a filler, a cut word or said again)
	for i0 < len(ks) && ks[i0].flags&(ffInline|ffLetter|ffDash|ffOnset) == 0 && (i0 == 0 || ks[i0].flags&ks[i0-1].flags&ffASCII != 0 && ks[i0].rh != ks[i0-1].rh) {
		i0++
	}
	ko, cut := ks[:i0], false
	for i := i0; i < len(ks); i++ {
		f, k := ks[i].f, ks[i]
		cut = cut || len(ko) < i
		switch {
		case k.is(ffInline):
			// "um", "uh": keep a sentence end it carried
			if n := len(ko); n > 0 && strings.ContainsAny(f[len(f)-1:], ".!?") && !strings.ContainsAny(ko[n-1].f[len(ko[n-1].f)-1:], ".!?") {
				ko[n-1] = lx.field(strings.TrimRight(ko[n-1].f, ",;:") + f[len(f)-1:])
			}
			continue
		case k.is(ffLetter) && i+1 < len(ks), k.is(ffDash):
			continue // a cut word: "I s", "m or", "we-"
		case k.is(ffOnset) && i > 0 && i+1 < len(ks) && !strings.ContainsFunc(ks[i-1].f, unicode.IsDigit) && !determiners[strings.ToLower(ks[i-1].f)]:
			continue // a cut word, the start of one without its vowel: "also th already", "tr gonna"; "the dr", "tv", "pdf" stay
		case len(ko) > 0 && (k.flags&ko[len(ko)-1].flags&ffASCII == 0 || k.rh == ko[len(ko)-1].rh) && equalFold(f, ko[len(ko)-1].f) && !strings.ContainsAny(f, "0123456789"):
			continue // a false start: "the the"
		}
		ko = append(ko, k)
	}
	if len(ko) == 0 {
		return "", ks[:0]
	}
	if r, _ := utf8.DecodeRuneInString(ko[0].f); unicode.IsLower(r) && len(ko[0].f) > 1 && ko[0].f != strings.ToLower(ko[0].f) {
		ko[0], cut = lx.field(upperFirst(ko[0].f)), true
	}
	joined := sent // (ko's fields joined by single spaces)
	if cut || len(ko) != nf || !joins(sent, ko) {
		joined = spacedFields(ko)
	}
	if sent = strings.TrimLeft(joined, ",;: "); sent == "" {
		return "", ks[:0]
	}
	if ks = ko; len(sent) != len(joined) {
		ks = ks[:0] // (its first field was cut: its fields are not ko's)
	}
	if n := len(ks); !oneOf(sent[len(sent)-1], 1<<'.'|1<<'!'|1<<'?') {
		if sent += "."; n > 0 {
			ks[n-1] = lx.field(sent[len(sent)-len(ks[n-1].f)-1:])
		}
	}
	return sent, ks
}

// spacedFields is ks's fields joined by single spaces, built on the stack: one allocation.
func spacedFields(ks []*field) string {
	b := make([]byte, 0, 256) // (on the stack)
	for _, k := range ks {
		b = append(append(b, ' '), k.f...)
	}
	return string(b[min(1, len(b)):])
}

// joins reports whether s, whose fields are ks's, is ks's fields joined by single spaces.
func joins(s string, ks []*field) bool {
	n := -1
	for _, k := range ks {
		if n += len(k.f) + 1; n < len(s) && s[n] != ' ' {
			return false
		}
	}
	return n == len(s)
}

// answers reports whether a turn (its first statement a, its text) answers the question q: it shares a content word
// with it, gives a number to a how-much or when question, or a yes or no to a yes/no question.
func answers(q, a *stmt, text string) bool {
	for t, wi := nextField(a.Terms, 0); t != ""; t, wi = nextField(a.Terms, wi) {
		for u, wi := nextField(q.Terms, 0); u != ""; u, wi = nextField(q.Terms, wi) {
			if t == u {
				return true
			}
		}
	}
	body := strings.ToLower(q.Text[strings.Index(q.Text, ": ")+2:])
	if strings.ContainsFunc(text, unicode.IsDigit) && (strings.HasPrefix(body, "how") || strings.HasPrefix(body, "when") || strings.HasPrefix(body, "what time")) {
		return true
	}
	f, _ := nextField(text, 0)
	first := strings.ToLower(strings.Trim(cmp.Or(f, "x"), ",.!"))
	return (first == "yes" || first == "no" || first == "nope" || first == "yeah") && slices.ContainsFunc([]string{"is ", "are ", "do ",
		"does ", "did ", "can ", "could ", "will ", "would ", "should ", "have ", "has "}, func(aux string) bool { return strings.HasPrefix(body, aux) })
}

var agreement = toSet([]string{"yeah", "yes", "yep", "ok", "okay", "sounds good", "i'm down", "down", "i'm in", "let's do it", "works for me",
	"that works", "fine with me", "that's fine with me", "good idea", "deal", "agreed", "sure", "count me in", "sounds great"})

// agrees reports a turn that only agrees ("sounds good", "yeah I'm down").
func agrees(text string) bool {
	l := strings.Trim(strings.ToLower(strings.TrimSpace(text)), ".!,")
	for _, p := range []string{"yeah ", "yes ", "ok ", "okay ", "yep ", "sure ", "yeah, ", "yes, ", "ok, ", "okay, "} {
		l = strings.TrimPrefix(l, p)
	}
	return agreement[l]
}

// danglingEnd are words a sentence of speech trails off with ("… but.", "…, yeah."): left out at its end. onsets are
// the consonants that start English words ("th", "str"), which a word cut before its vowel leaves.
var onsets = toSet(strings.Fields(`bl br ch cl cr dr fl fr gl gr kn pl pr sc sh sk sl sm sn sp st sw th tr tw wh wr ph sch scr shr spl spr str thr chr phr`))

var danglingEnd = toSet([]string{"and", "but", "or", "yeah", "because"})

// inlineFiller are words of hesitation dropped wherever they stand.
var inlineFiller = toSet([]string{"um", "uh", "uhm", "umm", "uhh", "er", "erm", "hmm", "mm", "uh-huh", "um-hum", "mm-hmm", "eh"})

// opensWithBackchannel reports whether a turn starts with an acknowledgement ("sure", "ok, …").
func opensWithBackchannel(text string) bool {
	f, _ := nextField(text, 0)
	return f == "" || backchannels[strings.Trim(strings.ToLower(f), ".,!?")]
}

// ---- reported speech ----

var (
	firstPerson  = toSet([]string{"i", "me", "my", "mine", "myself", "i'm", "i've", "i'll", "i'd"})
	secondPerson = toSet([]string{"you", "your", "yours", "yourself", "you're", "you've", "you'll", "you'd", "ya", "u"})
	groupPerson  = map[string]string{"we": "they", "us": "them", "our": "their", "ours": "theirs", "ourselves": "themselves",
		"we're": "they're", "we've": "they've", "we'll": "they'll", "we'd": "they'd"}
	// speechActs are the openings that say what a statement does (propose, offer, agree), and the verb that reports it:
	// "we should leave at 8" → "Jonas suggested they leave at 8"; "how about Tokyo?" → "Bob suggested Tokyo.".
	speechActs = [][2]string{{"we should ", " suggested they "}, {"maybe we should ", " suggested they "}, {"we could ", " suggested they could "},
		{"maybe we could ", " suggested they could "}, {"let's ", " suggested they "}, {"how about ", " suggested "}, {"what about ", " suggested "},
		{"why don't we ", " suggested they "}, {"why not ", " suggested "}, {"i suggest that ", " suggested "}, {"i suggest ", " suggested "},
		{"i'd suggest ", " suggested "}, {"i propose ", " proposed "}, {"let me ", " offered to "}, {"i agree that ", " agreed that "},
		{"i agree, ", " agreed, "}, {"agreed, ", " agreed, "}}
	opinion = []string{"i think that ", "i think ", "i guess ", "i believe ", "i feel like ", "i reckon "}
	// actStarts are the first words of speechActs and opinion.
	actStarts = toSet(strings.Fields("we maybe let's how what why i i'd let agreed"))
)

// report writes what sp said as reported speech a person would write: "I keep dying as Hulk" → "Bob keeps dying as
// Hulk."; "my car fits four" → "Lena's car fits four."; "we're on Ilios" → "Marco said they're on Ilios."; a question →
// "Dave asked: can someone remind me …?". What cannot be turned into the third person without garbling it is quoted.
// self reports a statement about the speaker.
func (lx *lexicon) report(b []byte, sp, sent string, ks []*field, question, user bool, names []string) (_ []byte, self bool) { // (ks: what the lexicon knows of sent's fields; appended to b)
	var buf [48]byte // (only its start is compared: 48 bytes hold the longest prefix tested, "i feel like let me ", even with a Kelvin sign for k)
	low, verb := buf[:0], "said"
	if len(ks) > 0 && ks[0].is(ffAct) { // (else no opinion nor act can open it: low is compared with them alone)
		low = lower(buf[:0], sent[:min(len(sent), len(buf))])
	}
	for _, o := range opinion[:len(opinion)*b2i(len(low) > 0)] {
		if !question && hasPrefixBytes(low, o) && len(sent) > len(o)+3 {
			if ks = ks[strings.Count(o, " "):]; !isASCII(sent[:len(o)]) {
				ks = lx.appendFields(nil, sent[len(o):]) // (o's words are not sent's first fields)
			}
			sent, low, verb = sent[len(o):], low[len(o):], "thought"
			break
		}
	}
	first, second := 0, 0
	for _, k := range ks {
		first, second = first+b2i(k.is(ffFirst)), second+b2i(k.is(ffSecond))
	}
	for _, a := range speechActs[:len(speechActs)*b2i(len(low) > 0)] { // (the act's own "I" or "me" is the only first person word allowed)
		if low[0] == a[0][0] && hasPrefixBytes(low, a[0]) && len(sent) > len(a[0])+3 && second == 0 && first == strings.Count(" "+a[0], " i")+strings.Count(a[0], "me ") {
			ks := ks[strings.Count(a[0], " "):]
			if !isASCII(sent[:len(a[0])]) { // (a's words are not sent's first fields)
				ks = lx.appendFields(nil, sent[len(a[0]):])
			}
			if b = reword(append(append(b, sp...), a[1]...), sent[len(a[0]):], ks, true); question {
				return append(bytes.TrimSuffix(b, []byte("?")), '.'), false // (what reword wrote is not empty)
			}
			return b, first > 0
		}
	}
	if question {
		// "Alice, can you …?" / "can you …, Alice?" is asked of Alice.
		for _, n := range names {
			if n != sp && len(sent) >= len(n)+2 && strings.HasPrefix(sent, n) && sent[len(n):len(n)+2] == ", " {
				return appendLower(append(append(append(append(b, sp...), " asked "...), n...), ": "...), sent[len(n)+2:]), false
			}
			if q, ok := strings.CutSuffix(sent, "?"); n != sp && ok && strings.HasSuffix(q, n) && strings.HasSuffix(q[:len(q)-len(n)], ", ") {
				return append(appendLower(append(append(append(append(b, sp...), " asked "...), n...), ": "...), strings.TrimSuffix(sent, ", "+n+"?")), '?'), false
			}
		}
		return appendLower(append(append(b, sp...), " asked: "...), sent), false
	}
	if verb == "said" && first == 1 && second == 0 {
		if out, ok := thirdPerson(b, sp, sent, ks); ok && bytes.Count(out[len(b):], []byte(sp)) == 1 { // (not "Project Manager is the Project Manager …")
			return out, true
		}
	}
	if first == 0 && second == 0 && !strings.HasSuffix(ks[0].f, ":") { // (a sentence a label opens, "Decided: …", is quoted)
		if user && verb == "said" && (imperative(ks[0].f) || len(ks) > 1 && sequencers[strings.ToLower(strings.TrimRight(ks[0].f, ","))] && imperativeWord(strings.ToLower(ks[1].f))) {
			return appendLower(append(append(b, sp...), " asked: "...), sent), false
		}
		b = append(append(append(append(b, sp...), ' '), verb...), ' ')
		return lowerLead(reword(b, sent, ks, anyIs(ks, ffModal)), len(b)), false // (in the past when a modal is)
	}
	if strings.Contains(sent, "\"") {
		return append(append(append(append(append(b, sp...), ' '), verb...), ": "...), sent...), first > 0
	}
	b = append(append(append(append(b, sp...), ' '), verb...), ", \""...)
	if r, n := utf8.DecodeRuneInString(sent); unicode.IsLower(r) { // (upperFirst's)
		b, sent = utf8.AppendRune(b, unicode.ToUpper(r)), sent[n:]
	}
	return append(append(b, sent...), '"'), first > 0 // (an opinion: "Bob thought, "You …"")
}

func hasPrefixBytes(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// imperative reports whether a sentence opening with w reads as an instruction ("Add a flag", "Don't touch go.mod").
func imperative(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	lw := strings.ToLower(strings.Trim(w, ",.!"))
	return lw == "don't" || lw == "never" || lw == "always" || lw == "please" || unicode.IsUpper(r) && imperativeWord(lw)
}

func imperativeWord(lw string) bool {
	return !stopWords[lw] && !leadCommon[lw] && !strings.HasSuffix(lw, "s") && !strings.HasSuffix(lw, "ed") && lw != ""
}

func upperFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if !unicode.IsLower(r) {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// thirdPerson appends to b "I <verb> …" or "my <noun> …" with no other first or second person word in the third person
// (false when it cannot: what it appended is not b's). s is ks's fields joined by single spaces (ks: what the lexicon
// knows of them).
func thirdPerson(b []byte, sp, s string, ks []*field) ([]byte, bool) {
	w0 := lower(make([]byte, 0, 48), ks[0].f) // (compared as a string: no copy)
	if c := bytes.TrimRight(w0, ","); sequencers[string(c)] && len(ks) > 3 {
		// "Next I will add …" → "Next, Assistant will add …"
		if out, ok := thirdPerson(append(append(b, upperFirst(string(c))...), ", "...), sp, s[len(ks[0].f)+1:], ks[1:]); ok {
			return out, true
		}
	}
	rest := func(b []byte, i int) []byte { // (s from its field i on, the speaker's "we" as "they", appended to b)
		n := 0
		for _, k := range ks[:i] {
			n += len(k.f) + 1
		}
		return reword(b, s[n:], ks[i:], false)
	}
	if len(ks) < 3 && (string(w0) == "my" || string(w0) == "i") {
		return b, false
	}
	switch string(w0) {
	case "my":
		return rest(append(append(b, sp...), "'s "...), 1), true
	case "i'm", "i've", "i'll", "i'd": // (with a word after it: alone, it is no statement)
		aux := [...]string{"is", "has", "will", "would"}[strings.IndexByte("meld", w0[len(w0)-1])] // (by its last letter)
		return rest(append(append(append(append(b, sp...), ' '), aux...), ' '), 1), true
	case "i":
		i, adv := 1, ""
		if adverbs[strings.ToLower(ks[1].f)] {
			adv, i = ks[1].f+" ", 2
		}
		v, ok := conjugate(strings.ToLower(ks[i].f))
		if n := strings.ToLower(ks[min(i+1, len(ks)-1)].f); !ok || strings.HasSuffix(v, "n't") && (strings.Contains(" they there it he she that this ", " "+n+" ") || strings.HasSuffix(n, "'s")) {
			return b, false // (a restart is quoted: "I don't there's lots of ways" is not "Grad F doesn't there's lots of ways")
		}
		return rest(append(append(append(append(append(b, sp...), ' '), adv...), v...), ' '), i+1), true
	}
	return b, false
}

var sequencers = toSet([]string{"next", "then", "now", "first", "also", "so", "today", "tomorrow", "later", "afterwards"})

var approx = toSet([]string{"roughly", "about", "around", "approximately", "nearly", "almost", "over", "under", "exactly"})

var adverbs = toSet([]string{"just", "really", "also", "still", "actually", "already", "never", "always", "usually",
	"only", "probably", "definitely", "totally", "even", "recently", "finally", "honestly", "kinda"})

var pastIrregular = toSet(strings.Fields(`went got made found bought saw told said took came left met ran sent
thought had did was knew gave felt kept lost paid put set spent won wrote ate drove flew forgot heard held built
brought caught chose fell sold spoke stood taught understood began broke grew hid hit hurt lent let meant rode
rang rose shot shut sang sat slept slid stole swam threw woke wore could would should might must can can't
couldn't wouldn't shouldn't didn't won't will may shall`))

var auxThird = map[string]string{"am": "is", "have": "has", "do": "does", "don't": "doesn't", "haven't": "hasn't",
	"was": "was", "wasn't": "wasn't", "go": "goes"}

// conjugate is the third-person form of the verb v after "I"; false when v does not look like a verb it knows how to
// conjugate.
func conjugate(v string) (string, bool) {
	if x, ok := auxThird[v]; ok {
		return x, true
	}
	if pastIrregular[v] || strings.HasSuffix(v, "ed") && !strings.HasSuffix(v, "eed") && len(v) > 3 {
		return v, true
	}
	if strings.ContainsFunc(v, func(r rune) bool { return r < 'a' || r > 'z' }) {
		return "", false
	}
	if len(v) < 3 || stopWords[v] && v != "like" && v != "need" && v != "want" && v != "know" && v != "think" &&
		v != "get" && v != "make" && v != "see" && v != "look" && v != "mean" && v != "say" {
		return "", false
	}
	switch {
	case strings.HasSuffix(v, "s") || strings.HasSuffix(v, "sh") || strings.HasSuffix(v, "ch") ||
		strings.HasSuffix(v, "x") || strings.HasSuffix(v, "z") || strings.HasSuffix(v, "o"):
		return v + "es", true
	case strings.HasSuffix(v, "y") && !strings.ContainsRune("aeiou", rune(v[len(v)-2])):
		return v[:len(v)-1] + "ies", true
	}
	return v + "s", true
}

// reword appends to b s, whose fields are ks's (what the lexicon knows of them), with the speaker's "we" as "they"
// (ffGroup's words, as a person reporting it writes them) and, when past, the modals of reported speech in the past
// (ffModal's: "they will ship it" → "they would ship it").
func reword(b []byte, s string, ks []*field, past bool) []byte {
	flags := ffGroup | ffModal*fieldFlags(b2i(past)) // (the words it changes)
	if !slices.ContainsFunc(ks, func(k *field) bool { return k.flags&flags != 0 }) {
		return append(b, s...)
	}
	if !joins(s, ks) {
		s = spacedFields(ks)
	}
	last := 0 // (s up to last is in b, its words changed: ks's fields joined by single spaces, as they are changed)
	for i, o := 0, 0; i < len(ks); o, i = o+len(ks[i].f)+1, i+1 {
		if ks[i].flags&flags == 0 {
			continue
		}
		w, modal := ks[i].f, past && ks[i].is(ffModal)
		if ks[i].is(ffGroup) {
			core := strings.TrimRight(w, `.,!?;:"`)
			w, modal = groupPerson[strings.ToLower(core)]+w[len(core):], past // ("WE'LL": "they'll", a modal once lower-cased)
		}
		if core := strings.TrimRight(w, ".,!?;:"); modal && pastModal[core] != "" {
			w = pastModal[core] + w[len(core):]
		} else if c, ok := strings.CutSuffix(core, "'ll"); modal && ok {
			w = c + " would" + w[len(core):]
		}
		b, last = append(append(b, s[last:o]...), w...), o+len(ks[i].f)
	}
	return append(b, s[last:]...)
}

// lowerFirst is prefix, then s with its first letter lower-cased when its first word is a common word, not a name ("Can
// you …" → "can you …", "Tokyo …" stays): one string.
func lowerFirst(prefix, s string) string {
	return string(appendLower(append(make([]byte, 0, 256), prefix...), s))
}

// appendLower appends s to b (its prefix) as lowerFirst writes it.
func appendLower(b []byte, s string) []byte { return lowerLead(append(b, s...), len(b)) }

// lowerLead is b with the first letter of b[at:] lower-cased when its first word is a common word (lowerFirst's).
func lowerLead(b []byte, at int) []byte {
	w, _, _ := bytes.Cut(b[at:], []byte(" "))
	lw := lower(make([]byte, 0, 32), string(bytes.TrimRight(w, ",.!?"))) // (read as a string without a copy)
	if string(lw) == "i" || strings.HasPrefix(string(lw), "i'") || !(stopWords[string(lw)] || groupPerson[string(lw)] != "" || secondPerson[string(lw)] || leadCommon[string(lw)]) {
		return b
	}
	if r, n := utf8.DecodeRune(b[at:]); utf8.RuneLen(unicode.ToLower(r)) == n {
		utf8.EncodeRune(b[at:], unicode.ToLower(r)) // (in place: most are ASCII)
	} else {
		b = append(b[:at], string(unicode.ToLower(r))+string(b[at+n:])...)
	}
	return b
}

var leadCommon = toSet([]string{"please", "maybe", "there", "that's", "it's", "there's", "what's", "who's", "where's",
	"how's", "when's", "everyone", "someone", "anyone", "nobody", "somebody", "everybody", "let's", "next", "then"})

// ---- notes and tools ----

// noteStmt is a screen-watch note tied to whose screen it was.
func (lx *lexicon) noteStmt(n fold.Note) (stmt, bool) {
	text := oneLine(n.Text, 600)
	if text == "" || isInjection(text) {
		return stmt{}, false
	}
	src, label := speaker.Short(oneLine(n.Source, 64)), "Screen note: "
	if i := strings.Index(text, "'s screen: "); i > 0 && i < 40 {
		label, text = "On "+text[:i]+"'s screen: ", text[i+len("'s screen: "):]
	} else if r, _ := utf8.DecodeRuneInString(src); src != "" && src != "screen" && unicode.IsUpper(r) && len(strings.Fields(src)) <= 3 {
		label = "On " + src + "'s screen: "
	} else if src != "" && src != "screen" {
		label = "Screen note (" + src + "): "
	}
	text = strings.TrimRight(reldate.Resolve(text, n.At), " ")
	if !strings.ContainsAny(text[len(text)-1:], ".!?") {
		text += "."
	}
	tb, nt := termText(make([]byte, 0, 256), lx.appendFields(nil, text))
	return stmt{Sp: src, At: unixOf(n.At), Text: clip(label+text, maxStmtRunes), K: kNote,
		W: 2 + 0.3*float64(min(nt, 12)), Terms: string(tb[1:max(len(tb)-1, 1)]), Ph: lx.phrases(text, nil), Batch: true}, true
}

func isToolTurn(t fold.Turn) bool {
	k, r := strings.ToLower(t.Kind), strings.ToLower(t.Role)
	return k == "tool_call" || k == "tool_result" || k == "tool_use" || k == "function_call" || k == "function_result" || r == "tool" || r == "function"
}

// displayName is the turn's speaker as the summary names it.
func displayName(t fold.Turn) string {
	if n := speaker.Short(oneLine(t.Speaker, 64)); n != "" {
		return n
	}
	return cmp.Or(roleNames[strings.ToLower(strings.TrimSpace(t.Role))], "Someone")
}

var roleNames = map[string]string{"user": "User", "assistant": "Assistant", "system": "System", "tool": "Tool", "function": "Tool"}

// toolTurn adds a tool call or result: a call and its result become one clause ("Assistant ran bash (go test ./...):
// failed, --- FAIL: …"), the tool's output never.
func (lx *lexicon) toolTurn(b *batch, t fold.Turn, call *stmt) *stmt {
	tool := cmp.Or(oneLine(t.Tool, 48), "a tool")
	if k := strings.ToLower(t.Kind); (k == "tool_call" || k == "tool_use" || k == "function_call") && !strings.EqualFold(t.Role, "tool") {
		who := displayName(t)
		if who == "Tool" || who == "Someone" {
			who = "Assistant"
		}
		arg, text := toolArg(t.Text), who+" ran "+tool
		if arg != "" {
			text += " (" + arg + ")"
		}
		tb, nt := termText(make([]byte, 0, 256), lx.appendFields(nil, tool+" "+arg))
		b.stmts = append(b.stmts, stmt{Sp: who, At: unixOf(t.At), Text: text + ".", K: kTool, W: 1.5 + 0.2*float64(nt),
			Terms: string(tb[1:max(len(tb)-1, 1)]), Key: "tool " + tool + " " + arg, Batch: true})
		return &b.stmts[len(b.stmts)-1]
	}
	outcome := toolOutcome(t.Text)
	if call != nil && strings.HasPrefix(call.Key, "tool "+tool+" ") {
		call.Text = strings.TrimSuffix(call.Text, ".") + ": " + outcome + "."
		if strings.HasPrefix(outcome, "failed") {
			call.W += 1.5
		}
		return nil
	}
	b.stmts = append(b.stmts, stmt{At: unixOf(t.At), Text: tool + " result: " + outcome + ".", K: kTool, W: 1.5,
		Terms: lx.termString(tool), Key: "tool " + tool + " result", Batch: true})
	return nil
}

// toolArg is the salient argument of a tool call: a path, command, query or URL from its JSON arguments, else its first
// line.
func toolArg(text string) string {
	var m map[string]any
	if json.Unmarshal([]byte(text), &m) == nil {
		for _, k := range []string{"path", "file", "filename", "command", "cmd", "query", "q", "url", "pattern", "name"} {
			if v, ok := m[k].(string); ok && v != "" {
				return oneLine(v, 80)
			}
		}
		return ""
	}
	return clip(oneLine(strings.SplitN(text, "\n", 2)[0], 200), 80)
}

var failRe = regexp.MustCompile(`(?m)^.*(FAIL|[Ee]rror|panic:|exception|Exception|exit status [1-9]).*$`)

// toolOutcome is "ok", "no output" or "failed, <the first failing line>".
func toolOutcome(text string) string {
	if strings.TrimSpace(text) == "" {
		return "no output"
	}
	if l := failRe.FindString(sanitize(text, 1<<16)); l != "" {
		return "failed, " + clip(strings.TrimRight(oneLine(l, 200), "."), 80)
	}
	return "ok"
}

// isInjection reports text that addresses a model (injectionRe), with cheap tests first: most text has none of its
// words, nor a phrase or an object of its verbs (the objects' parts have no s or k: (?i) also matches ſ, K).
func isInjection(s string) bool {
	return injectionWords.in(s) && (injectionObjects.in(s) || injectionPhrases.in(s)) && injectionRe.MatchString(s)
}

var injectionWords, injectionObjects, injectionPhrases = newKeywords("ignore", "disregard", "forget", "override", "system prompt", "you are now", "developer mode", "jailbreak", "new instructions"),
	newKeywords("tructio", "prompt", "age", "rule", "context"), newKeywords("system prompt", "you are now", "developer mode", "jailbreak", "new instructions")

// injectionRe matches text that addresses a model rather than the people in the conversation; such sentences are not
// repeated in the summary.
var injectionRe = regexp.MustCompile(`(?i)(ignore|disregard|forget|override)\s+(all\s+|any\s+|the\s+|your\s+|previous\s+|prior\s+|above\s+|earlier\s+)*(instructions|prompts?|messages|rules|context)|system prompt|you are now|developer mode|jailbreak|new instructions`)

// factKey is what the numbers of a statement are about: "slot=value" pairs, the slot being the content word before the
// number ("port 8443") or else the word after it ("$190 a night"). Statements without numbers have no key.
func (lx *lexicon) factKey(key []byte, ks []*field, digits uint64) []byte { // (appended to key; ks: what the lexicon knows of the sentence's fields, digits: statFields')
	if digits == 0 {
		return key
	}
	wb, nk := [64]byte{}, 0
	word := func(i int) ([]byte, lexeme) { // field i lower-cased without the punctuation around it, and its lexeme
		if t := trimCut(ks[i].f, ".,!?;:()\"'"); t != ks[i].core { // (else the field's own reading: most words)
			l := lower(wb[:0], t)
			return l, lx.getBytes(l)
		}
		return append(wb[:0], ks[i].low...), ks[i].x
	}
	for i, k := range ks {
		w := k.f
		if digits>>min(i, 63)&1 == 0 || nk >= 4 || !strings.ContainsFunc(w, unicode.IsDigit) { // (what trimCut cuts has no digit)
			continue
		}
		v := trimCut(w, ".,!?;:()\"'")
		var slot string
		if i > 0 {
			if p, x := word(i - 1); x.is(fTerm) && !x.is(fAdverb) && !approx[string(p)] && bytes.IndexFunc(p, unicode.IsDigit) < 0 && !strings.ContainsAny(ks[i-1].f, ",.;:") {
				slot = x.stem
			}
		}
		for j := i + 1; slot == "" && j < len(ks) && j < i+4; j++ {
			n, x := word(j)
			if n := string(n); n == "a" || n == "an" || n == "per" || n == "the" {
				continue
			}
			if x.is(fTerm) || string(n) == "each" {
				slot = x.stem
			}
			break
		}
		if slot != "" {
			if nk++; nk > 1 {
				key = append(key, ' ')
			}
			key = lower(append(append(key, slot...), '='), v)
		}
	}
	return key
}

// at is a statement's time.
func (x stmt) at() time.Time {
	if x.At == 0 {
		return time.Time{}
	}
	return time.Unix(x.At, 0).UTC()
}

// mergeToolRuns joins consecutive successful runs of one tool by one speaker into one clause ("Assistant ran read_file
// (a.go, b.go and 3 more): ok.").
func (lx *lexicon) mergeToolRuns(ss []stmt) []stmt {
	out := ss[:0]
	for i := range ss {
		if x, n := &ss[i], len(out); n > 0 && x.K == kTool && out[n-1].K == kTool && x.Sp == out[n-1].Sp && x.Sp != "" {
			p := &out[n-1]
			tool, arg, ok1 := toolOf(*x)
			ptool, pargs, ok2 := toolOf(*p)
			if ok1 && ok2 && tool == ptool && strings.HasSuffix(x.Text, "): ok.") && strings.HasSuffix(p.Text, "): ok.") {
				var args []string
				for _, a := range append(strings.Split(pargs, "|"), strings.Split(arg, "|")...) {
					if !slices.Contains(args, a) {
						args = append(args, a)
					}
				}
				shown, more := args, ""
				if len(args) > 3 {
					shown, more = args[len(args)-3:], " and "+strconv.Itoa(len(args)-3)+" earlier"
				}
				p.Text = x.Sp + " ran " + tool + " (" + strings.Join(shown, ", ") + more + "): ok."
				p.Key = "tools " + tool + " " + strings.Join(args, "|")
				p.At, p.Batch, p.W = x.At, x.Batch || p.Batch, max(p.W, x.W)
				p.Terms, p.ids = lx.termString(tool+" "+strings.Join(shown, " ")), nil
				continue
			}
		}
		if out = ss[:len(out)+1]; len(out) <= i { // (a statement where it was is not copied: its pointers are not written again)
			out[len(out)-1] = ss[i]
		}
	}
	return out
}

// toolOf reads a tool statement's key: the tool and its argument (for a merged run, its arguments joined by "|").
func toolOf(x stmt) (tool, args string, ok bool) {
	h, k, _ := strings.Cut(x.Key, " ")
	tool, args, _ = strings.Cut(k, " ")
	return tool, args, (h == "tool" || h == "tools") && args != "" && args != "result"
}

var pastModal = map[string]string{"will": "would", "can": "could", "may": "might", "shall": "should", "won't": "wouldn't", "can't": "couldn't", "cannot": "could not"}
