package offline

import (
	"cmp"
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/speaker"
)

type unitKind int

const (
	unitSpeech unitKind = iota
	unitNote
	unitTool
)

// unit is one candidate sentence of the new batch.
type unit struct {
	kind      unitKind
	speaker   string
	sp        speech
	agreed    []string
	disagreed []string
	score     float64
	seq       int // chronological order within the batch
	turn      int // index of the source turn (-1 for notes)
	tool      *toolRun
	text      [3]string
	toks      []string // the content tokens of a speech unit (tokenSetOf its words), set by tokenizeUnits
	set       tokSet   // newTokSet(toks), set by tokenizeUnits
	buckets   []uint16 // appendBuckets(nil, toks), set by tokenizeUnits
	subj      []string // subjectOf(toks) once asked for (see subject)
	subjSet   bool     // subj is computed
	allToks   []string // tokenSetOf(sp.words, names{}) once asked for (see allTokens)
	allToksOK bool     // allToks is computed
	light     string   // a speech unit's light condensation, before replies (for hard)
	hardLater bool     // text[2] is not made yet (see hard)
}

// allTokens is tokenSetOf(u.sp.words, names{}) (names included), computed
// once.
func (u *unit) allTokens() []string {
	if !u.allToksOK {
		u.allToks, u.allToksOK = tokenSetOfInfos(u.sp.infos, names{}), true
	}
	return u.allToks
}

// subject is subjectOf(u.toks), computed once.
func (u *unit) subject() []string {
	if !u.subjSet {
		u.subj, u.subjSet = subjectOf(u.toks), true
	}
	return u.subj
}

// unitArena hands out units from blocks of at least size units: one
// allocation for many units. Each new block is twice as large as the one
// before, and the fold keeps the last (used) one for later folds (used),
// so a fold whose batch needs more units than estimated makes later folds
// need one block.
type unitArena struct {
	block []unit
	size  int
}

// used is the arena's last block, the part of it that holds units (the
// earlier blocks are full and dropped).
func (a *unitArena) used() []unit { return a.block }

func (a *unitArena) new(u unit) *unit {
	if len(a.block) == cap(a.block) {
		a.block = make([]unit, 0, max(a.size, 2*cap(a.block), 4))
	}
	a.block = append(a.block, u)
	return &a.block[len(a.block)-1]
}

// extraction is what a batch of turns and notes yields.
type extraction struct {
	units     []*unit
	speakers  []string // non-tool speakers in order of first appearance
	talkers   []string // speakers with content in this batch, in order of first appearance
	topics    []string
	hadTurns  bool           // some turn had text
	allFiller bool           // every turn with text was filler
	said      []saidSentence // the batch's sentences of speech, for its period line (conversations only)
}

// saidSentence is a sentence of speech of the batch: its fields (a part of
// the batch's words that is never written again), its turn and speaker.
type saidSentence struct {
	words   []string
	infos   []word // (as words: kept by the unit, never written again)
	turn    int
	speaker string
}

// displayName is how the summary names a turn's speaker: the normalised
// name (speaker.Name: a display name cannot smuggle "Bob: …" or
// "(assistant)" into the summary, which later prompts read), else its role.
func displayName(t fold.Turn) string {
	if n := speaker.Name(oneLine(t.Speaker, 64)); n != "" {
		return n
	}
	switch strings.ToLower(strings.TrimSpace(t.Role)) {
	case "user":
		return "User"
	case "assistant":
		return "Assistant"
	case "system":
		return "System"
	case "tool", "function":
		return "Tool"
	}
	return "Someone"
}

func isToolTurn(t fold.Turn) bool {
	switch strings.ToLower(t.Kind) {
	case "tool_call", "tool_result", "tool_use", "function_call", "function_result":
		return true
	}
	r := strings.ToLower(t.Role)
	return r == "tool" || r == "function"
}

func isToolCall(t fold.Turn) bool {
	k := strings.ToLower(t.Kind)
	return k == "tool_call" || k == "tool_use" || k == "function_call"
}

// extract turns the batch into scored, rendered units.
func (s *Summarizer) extract(req fold.Request, prev previous, prevSents []*prevSentence, who names, agent bool, sc *scratch) extraction {
	var ex extraction
	ex.allFiller = true
	topics := newTopicCounter(who, agent)
	// Topics that run through the session keep their place: the previous
	// summary and its topic list count, less than the new batch.
	for _, t := range prev.topics {
		topics.bump(t, 0.75)
	}
	// Mentions in the previous summary's sentences reinforce topics but
	// do not introduce any (they may be names an LLM backend wrote): top
	// weighs them in.
	topics.echo = prevSents
	seenSpeaker := map[string]bool{}

	arena := unitArena{size: len(req.Turns)/2 + len(req.Notes) + 1} // (many turns are filler)
	arena.block = take(sc.units, arena.size)
	sc.units = arena.block
	ex.said = sc.said[:0]
	var pendingCall *fold.Turn
	pendingIdx := 0
	flushCall := func() {
		if pendingCall != nil {
			ex.units = append(ex.units, arena.new(toolUnit(pendingCall, nil, pendingIdx)))
			pendingCall = nil
		}
	}

	var sents []string
	// words holds the fields of the batch's sentences: each sentence is
	// split once, and the passes that read its words share them. A unit
	// keeps its sentence's part, which is never written again (a sentence
	// that yields no unit gives its part back).
	var words []string
	var infos []word // the words of the units' sentences, in parts as words
	for i := range req.Turns {
		t := req.Turns[i]
		if isToolTurn(t) {
			ex.hadTurns = true
			ex.allFiller = false
			if isToolCall(t) {
				flushCall()
				pendingCall, pendingIdx = &req.Turns[i], i
				continue
			}
			if pendingCall != nil && (pendingCall.Tool == "" || t.Tool == "" || pendingCall.Tool == t.Tool) {
				ex.units = append(ex.units, arena.new(toolUnit(pendingCall, &t, pendingIdx)))
				pendingCall = nil
				continue
			}
			flushCall()
			ex.units = append(ex.units, arena.new(toolUnit(nil, &t, i)))
			continue
		}
		name := displayName(t)
		role := strings.ToLower(t.Role)
		text := resolveDates(cleanSpeech(sanitize(t.Text, maxTurnRunes)), t.At)
		if strings.TrimSpace(text) == "" {
			continue
		}
		ex.hadTurns = true
		if role != "system" && !hasLower(seenSpeaker, name) {
			seenSpeaker[strings.ToLower(name)] = true
			ex.speakers = append(ex.speakers, name)
		}
		sents = appendSentences(sents[:0], text)
		if words == nil {
			words = take(sc.words, wordsEstimate(req.Turns[i:]))
		}
		if infos == nil {
			infos = take(sc.infos, cap(words))
		}
		for k, sent := range sents {
			mark, imark := len(words), len(infos)
			words = appendFields(words, sent)
			ws := words[mark:len(words):len(words)]
			infos = appendWords(infos, ws)
			wis := infos[imark:len(infos):len(infos)] // the words of ws
			fk := classifyInfos(wis, who, s.cfg.extraFiller)
			if fk == notFiller && k == 0 {
				// "yes, and …" / "nah, …" answers the previous speaker too
				if len(ws) > 1 && strings.HasSuffix(ws[0], ",") {
					n := wis[0].n // norm(ws[0])
					if _, v := lexVariantsOf(n, wis[0].lx); v&lxAgree != 0 || n == "no" || n == "nope" || n == "nah" {
						attachReply(ex.units, i, name, v&lxAgree != 0) // inSet(agreeWords, n)
					}
				}
			}
			if fk == notFiller {
				stripped := stripFillerInfos(sent, ws, wis)
				if stripped == "" {
					words, infos = words[:mark], infos[:imark]
					continue
				}
				if stripped != sent { // (else it is still notFiller)
					sent = stripped
					words = appendFields(words[:mark], sent)
					ws = words[mark:len(words):len(words)]
					infos = appendWords(infos[:imark], ws)
					wis = infos[imark:len(infos):len(infos)]
					fk = classifyInfos(wis, who, s.cfg.extraFiller)
				}
			}
			if fk == notFiller {
				if tidy := dropDisfluencies(sent, ws, who); tidy != sent {
					sent = tidy
					words = appendFields(words[:mark], sent)
					ws = words[mark:len(words):len(words)]
					infos = appendWords(infos[:imark], ws)
					wis = infos[imark:len(infos):len(infos)]
				}
			}
			if fk != notFiller {
				if fk == fillerAgree || fk == fillerDisagree {
					attachReply(ex.units, i, name, fk == fillerAgree)
				}
				words, infos = words[:mark], infos[:imark]
				continue
			}
			ex.allFiller = false
			addressee, body, bws := extractVocativeIn(sent, ws, name, who)
			// The unit's words: those of ws, or of ws without the vocative
			// that opened it, or the body's own (kept by the unit: never
			// written again).
			var bis []word
			switch {
			case bws == nil:
				words = appendFields(words[:mark], body)
				bws = words[mark:len(words):len(words)]
				infos = appendWords(infos[:imark], bws)
				bis = infos[imark:len(infos):len(infos)]
			case len(bws) == len(ws):
				bis = wis
			default: // bws is ws[1:]
				bis = wis[1:]
			}
			tr := analyzeInfos(body, bis, who)
			if agent && tr.imperative && role == "user" {
				tr.request = true // rendered "User asked: Add …"
			}
			sc := scoreTraits(tr, agent)
			switch {
			case role == "system":
				sc *= 0.6
			case role == "assistant" && !agent:
				sc *= 0.85
			case role == "user" && agent:
				sc += 1.5
			}
			ex.units = append(ex.units, arena.new(unit{
				kind:    unitSpeech,
				speaker: name,
				sp:      speech{speaker: name, addressee: addressee, text: body, words: bws, infos: bis, t: tr},
				score:   sc,
				seq:     i*1000 + k,
				turn:    i,
			}))
			if !tr.injection {
				topics.addWords(bis) // (an injection's words are data, not what the session is about)
				if !agent && role != "system" {
					ex.said = append(ex.said, saidSentence{words: bws, infos: bis, turn: i, speaker: name})
				}
			}
		}
	}
	flushCall()
	if words != nil { // (kept for later folds)
		sc.words = words
	}
	if infos != nil {
		sc.infos = infos
	}
	sc.said = ex.said
	ex.units = dropAnswered(ex.units)
	ex.units = capPerTurn(ex.units, s.cfg.maxUnitsPerTurn)
	ex.units = capTotal(ex.units, maxNewUnits)
	talked := map[string]bool{}
	for _, u := range ex.units {
		if u.kind == unitSpeech && !hasLower(talked, u.speaker) && hasLower(seenSpeaker, u.speaker) {
			talked[strings.ToLower(u.speaker)] = true
			ex.talkers = append(ex.talkers, u.speaker)
		}
	}

	notes := s.noteUnits(req, who, topics, &arena)
	sc.units = arena.used()
	ex.units = append(ex.units, notes...)
	slices.SortStableFunc(ex.units, func(a, b *unit) int { return cmp.Compare(a.seq, b.seq) })
	ex.units = mergeToolRuns(ex.units)

	tokenizeUnits(ex.units, who, sc)
	for _, u := range ex.units {
		if u.kind == unitSpeech {
			u.score += 2.0 * float64(min(len(u.agreed)+len(u.disagreed), 1))
			u.renderSpeech(who)
		}
	}
	ex.topics = topics.top(s.cfg.maxTopics)
	return ex
}

// tokenizeUnits sets the content tokens of the speech units (tokenSetOf
// their words), split once for dedup and memories, in one shared slice,
// with their signatures and coverage buckets (one hash per token for
// both).
// (Raising the score of statements that share the batch's words, a
// centroid signal, was measured and did not help: an aside is as likely
// to be asked about.)
func tokenizeUnits(units []*unit, who names, sc *scratch) {
	n := 0
	for _, u := range units {
		n += len(u.sp.words)
	}
	all := take(sc.toks, n) // (units keep their parts: it never grows)
	for _, u := range units {
		if u.kind == unitSpeech {
			from := len(all)
			all = appendTokenSetInfos(all, u.sp.infos, who)
			u.toks = all[from:len(all):len(all)]
		}
	}
	// (one array each for the bits and the buckets of every set)
	bits := take(sc.bits, len(all))[:len(all)] // (every element is set below)
	buckets := take(sc.buckets, len(all))[:len(all)]
	sc.toks, sc.bits, sc.buckets = all, bits, buckets
	at := 0
	for _, u := range units {
		if u.kind != unitSpeech {
			continue
		}
		k := len(u.toks)
		u.set = tokSet{toks: u.toks, bits: bits[at : at+k : at+k]}
		u.buckets = buckets[at : at+k : at+k]
		for i, t := range u.toks {
			h := hashLower(t)
			b := uint8(h & 63) // (as newTokSetIn and appendBuckets compute them)
			u.set.bits[i] = b
			u.set.sig |= 1 << b
			u.buckets[i] = uint16(h % covBuckets)
		}
		at += k
	}
}

// dropAnswered drops the questions of the batch that someone else answered
// with a statement within the next two turns: the answer holds the fact,
// and the question would read as still open. A backchannel ("sure",
// "mm-hmm") is no unit, so it never answers a question: a question it
// followed stays open.
func dropAnswered(units []*unit) []*unit {
	out := units[:0]
	for i, u := range units {
		if u.kind == unitSpeech && u.sp.t.question && !u.sp.t.request && answeredBy(units[i+1:], u) {
			continue
		}
		out = append(out, u)
	}
	return out
}

// answeredBy reports whether a statement in later (the units after q)
// answers q: said by someone else (the addressee, when q has one) within
// two turns of it, and about it: it shares a content word with q, or
// gives what q's question word asks for (a number for "how much", a date
// or time for "when", a name for "who"). "sure, let me finish this round first" answers no "who's bringing
// the grill?".
func answeredBy(later []*unit, q *unit) bool {
	kind := -1 // questionKind(q.sp.words), once needed
	for _, v := range later {
		if v.turn > q.turn+2 {
			return false
		}
		if v.kind != unitSpeech || v.turn == q.turn || strings.EqualFold(v.speaker, q.speaker) ||
			v.sp.t.question || (q.sp.addressee != "" && !strings.EqualFold(v.speaker, q.sp.addressee)) {
			continue
		}
		if kind < 0 {
			kind = questionKind(q.sp.words)
		}
		if answersKind(kind, v.sp.t) {
			return true
		}
		qt := q.allTokens()
		for _, w := range v.allTokens() {
			if slices.Contains(qt, w) {
				return true
			}
		}
	}
	return false
}

// What a question asks for, by its question word.
const (
	askOther  = iota // yes/no, what, why, how: only a statement about it answers
	askWhen          // when, what time: a date, a time or a number
	askAmount        // how much, how many, how long: a number
	askWho           // who, where, which: a name
)

// questionKind reads what the question whose fields are words asks for.
func questionKind(words []string) int {
	for i, w := range words {
		c := core(w)
		switch {
		case lowerEq(c, "when"):
			return askWhen
		case lowerEq(c, "who") || lowerEq(c, "who's") || lowerEq(c, "whom") || lowerEq(c, "whose") ||
			lowerEq(c, "where") || lowerEq(c, "where's") || lowerEq(c, "which"):
			return askWho
		case lowerEq(c, "how") && i+1 < len(words):
			n := core(words[i+1])
			if lowerEq(n, "much") || lowerEq(n, "many") || lowerEq(n, "long") || lowerEq(n, "far") || lowerEq(n, "old") {
				return askAmount
			}
		case lowerEq(c, "what") && i+1 < len(words) && lowerEq(core(words[i+1]), "time"):
			return askWhen
		}
	}
	return askOther
}

// answersKind reports whether a statement with traits t gives what a
// question of kind k asks for.
func answersKind(k int, t traits) bool {
	switch k {
	case askWhen:
		return t.dates > 0 || t.numbers > 0
	case askAmount:
		return t.numbers > 0
	case askWho:
		return t.entities > 0
	}
	return false
}

// attachReply records a filler assent/dissent ("yeah", "sounds good",
// "nah") from speaker name as a reply to the latest open proposal, offer
// or decision by someone else in the last two turns. Questions and
// requests never take one: "sure" may answer something else, and a
// question's answer is a statement.
func attachReply(units []*unit, turn int, name string, agree bool) {
	for j := len(units) - 1; j >= 0; j-- {
		u := units[j]
		if u.turn < turn-2 {
			return
		}
		if u.kind != unitSpeech || strings.EqualFold(u.speaker, name) ||
			(u.sp.addressee != "" && !strings.EqualFold(u.sp.addressee, name)) {
			continue
		}
		t := u.sp.t
		if t.question || t.request || !(t.proposal || t.offer || t.strongDecision) {
			continue
		}
		list := &u.disagreed
		if agree {
			list = &u.agreed
		}
		for _, n := range u.agreed {
			if strings.EqualFold(n, name) {
				return
			}
		}
		for _, n := range u.disagreed {
			if strings.EqualFold(n, name) {
				return
			}
		}
		*list = append(*list, name)
		return
	}
}

// renderSpeech fills the three condensation levels of a speech unit.
func (u *unit) renderSpeech(who names) {
	var arr [64]string
	base, words := u.sp.render(arr[:0], who)
	if words == nil {
		words = appendFields(arr[:0], base)
	}
	l1 := condenseLightIn(base, words)
	// text[2] is made when a fold asks for it (hard): most folds never
	// condense a new statement that far.
	u.light, u.hardLater = l1, true
	u.text = [3]string{withReplies(base, u), withReplies(l1, u), ""}
}

// hard is the hard condensation of a speech unit, u.text[2], made once.
func (u *unit) hard() string {
	if u.hardLater {
		l2 := condenseMain(u.light)
		u.text[2], u.hardLater = withReplies(l2, u), false
	}
	return u.text[2]
}

// withReplies appends who agreed or disagreed.
func withReplies(s string, u *unit) string {
	if len(u.agreed) == 0 && len(u.disagreed) == 0 {
		return s
	}
	if strings.HasSuffix(s, "?") {
		var parts []string
		if len(u.agreed) > 0 {
			parts = append(parts, joinNames(u.agreed)+" said yes")
		}
		if len(u.disagreed) > 0 {
			parts = append(parts, joinNames(u.disagreed)+" said no")
		}
		return s + " " + strings.Join(parts, ", ") + "."
	}
	s = strings.TrimRight(s, ".!")
	if len(u.agreed) > 0 {
		s += ", and " + joinNames(u.agreed) + " agreed"
	}
	if len(u.disagreed) > 0 {
		s += ", but " + joinNames(u.disagreed) + " disagreed"
	}
	return s + "."
}

// joinNames writes "A", "A and B", "A, B and C".
func joinNames(ns []string) string {
	switch len(ns) {
	case 0:
		return ""
	case 1:
		return ns[0]
	}
	return strings.Join(ns[:len(ns)-1], ", ") + " and " + ns[len(ns)-1]
}

// capPerTurn keeps at most n units per turn (the best scored), so that no
// single long turn (a monologue, a pasted document, an injection attempt)
// dominates the summary.
func capPerTurn(units []*unit, n int) []*unit {
	if n <= 0 || !turnOver(units, n) {
		return units
	}
	byTurn := map[int][]int{}
	for i, u := range units {
		byTurn[u.turn] = append(byTurn[u.turn], i)
	}
	drop := make([]bool, len(units))
	for _, idx := range byTurn {
		if len(idx) <= n {
			continue
		}
		sorted := append([]int(nil), idx...)
		sort.SliceStable(sorted, func(a, b int) bool {
			ua, ub := units[sorted[a]], units[sorted[b]]
			if ua.score != ub.score {
				return ua.score > ub.score
			}
			return sorted[a] < sorted[b]
		})
		for _, i := range sorted[n:] {
			drop[i] = true
		}
	}
	out := units[:0:0]
	for i, u := range units {
		if !drop[i] {
			out = append(out, u)
		}
	}
	return out
}

// turnOver reports whether more than n units come from one turn.
func turnOver(units []*unit, n int) bool {
	if len(units) <= n {
		return false
	}
	var arr [64]int
	turns := arr[:0]
	for _, u := range units {
		turns = append(turns, u.turn)
	}
	slices.Sort(turns)
	for i := n; i < len(turns); i++ {
		if turns[i] == turns[i-n] {
			return true
		}
	}
	return false
}

// capTotal keeps the n best units of an oversized batch (ties: newer),
// in their original order.
func capTotal(units []*unit, n int) []*unit {
	if len(units) <= n {
		return units
	}
	idx := make([]int, len(units))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		if units[idx[a]].score != units[idx[b]].score {
			return units[idx[a]].score > units[idx[b]].score
		}
		return idx[a] > idx[b]
	})
	keep := make([]bool, len(units))
	for _, i := range idx[:n] {
		keep[i] = true
	}
	out := make([]*unit, 0, n)
	for i, u := range units {
		if keep[i] {
			out = append(out, u)
		}
	}
	return out
}

// wordsEstimate is a capacity for the words of the sentences of turns that
// are not tool turns: about one word in six bytes of text.
func wordsEstimate(turns []fold.Turn) int {
	n := 0
	for _, t := range turns {
		if !isToolTurn(t) {
			n += min(len(t.Text), maxTurnRunes)
		}
	}
	return min(n/6+16, 4096)
}

// ---- notes ----

const maxNoteRunes = 220

func (s *Summarizer) noteUnits(req fold.Request, who names, topics *topicCounter, arena *unitArena) []*unit {
	var out []*unit
	for j, n := range req.Notes {
		text := oneLine(n.Text, maxTurnRunes)
		if text == "" {
			continue
		}
		var body []string
		var seen [][]string
		total := 0
		sents := splitSentences(text)
		for k, sent := range sents {
			if total > 0 && total+runeLen(sent)+1 > maxNoteRunes {
				break
			}
			// A sentence's token set is only needed to compare it with an
			// earlier or a later one (most notes are one sentence).
			if len(seen) > 0 || k < len(sents)-1 {
				ts := tokenSet(sent, names{})
				dup := false
				for _, o := range seen {
					if nearDup(o, ts) {
						dup = true
						break
					}
				}
				if dup {
					continue
				}
				seen = append(seen, ts)
			}
			body = append(body, endSentence(sent, '.'))
			total += runeLen(sent) + 1
		}
		if len(body) == 0 {
			continue
		}
		full := strings.Join(body, " ")
		src := speaker.Name(oneLine(n.Source, 64))
		prefix := "Screen note: "
		switch {
		case src != "" && (who.has(src) || looksLikeName(src)):
			prefix = "On " + src + "'s screen: "
		case src != "" && !strings.EqualFold(src, "screen"):
			prefix = "Screen note (" + src + "): "
		}
		// A note that names its screen itself ("Marco's screen: …") is
		// labelled once, with its own label.
		if owner, rest, ok := screenLabel(full); ok {
			prefix, full = "On "+owner+"'s screen: ", rest
			if _, r, ok := screenLabel(body[0]); ok {
				body[0] = r
			}
		}
		var warr [64]string
		fw := appendFields(warr[:0], full) // for every pass below
		var iarr [32]word
		fi := appendWords(iarr[:0], fw)
		light := condenseLightIn(full, fw)
		firstLight := light // condenseLight(body[0]): full is body[0]
		if len(body) > 1 {
			firstLight = condenseLight(body[0])
		}
		t := analyzeInfos(full, fi, who)
		sc := 2.0 + min(float64(t.entities)*0.4, 2.0)
		if src != "" || mentionsAnyIn(fw, who) {
			sc += 1.0
		}
		topics.addWords(fi)
		out = append(out, arena.new(unit{
			kind:  unitNote,
			score: sc,
			seq:   noteSeq(req, n, j),
			turn:  -1,
			text: [3]string{
				prefix + full,
				prefix + light,
				prefix + condenseHard(firstLight),
			},
		}))
	}
	if len(out) > s.cfg.maxNotes && s.cfg.maxNotes > 0 {
		sort.SliceStable(out, func(a, b int) bool { return out[a].score > out[b].score })
		out = out[:s.cfg.maxNotes]
	}
	return out
}

// screenLabel splits a note that opens with its own label ("Marco's
// screen: …", one to three words before "'s screen:") into the owner and
// the rest.
func screenLabel(s string) (owner, rest string, ok bool) {
	head, rest, found := strings.Cut(s, "'s screen:")
	if !found || head == "" || len(head) > 64 || !looksLikeName(head) {
		return "", "", false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return "", "", false
	}
	return head, rest, true
}

// noteSeq places a note among the turns by time when both carry times,
// else after the turns.
func noteSeq(req fold.Request, n fold.Note, j int) int {
	if !n.At.IsZero() {
		for i, t := range req.Turns {
			if !t.At.IsZero() && t.At.After(n.At) {
				return i*1000 - 500 + j
			}
		}
	}
	return len(req.Turns)*1000 + j
}

func looksLikeName(s string) bool {
	f := strings.Fields(s)
	if len(f) == 0 || len(f) > 3 {
		return false
	}
	for _, w := range f {
		if !upperFirst(w) || !isAllLetters(strings.ReplaceAll(strings.ReplaceAll(w, "'", ""), "-", "")) {
			return false
		}
	}
	return true
}

// mentionsAnyIn reports whether a word of words names a participant.
func mentionsAnyIn(words []string, who names) bool {
	for _, w := range words {
		if who.has(core(w)) {
			return true
		}
	}
	return false
}

// ---- tools ----

var (
	toolErrRe  = regexp.MustCompile(`(?i)\b(error|errors|err|fail|failed|failure|failing|panic|exception|traceback|fatal|denied|not found|no such file|timed out|timeout|exit (status|code) [1-9]|cannot|can't|unable|refused|invalid|undefined)\b`)
	toolZeroRe = regexp.MustCompile(`(?i)\b(0|no|zero) (errors?|failures?|failed|issues?)\b`)
)

// toolErrAnchors are literals of which a match of toolErrRe has one (in
// ASCII text, case-insensitively), grouped by first letter. They are
// read-only after package initialization.
var toolErrAnchors = func() (t [256][]string) {
	for _, a := range []string{"err", "fail", "panic", "exception", "traceback", "fatal",
		"denied", "not found", "no such file", "timed out", "timeout", "exit ", "cannot",
		"can't", "unable", "refused", "invalid", "undefined"} {
		t[a[0]] = append(t[a[0]], a)
	}
	return t
}()

// mayBeToolErr reports whether toolErrRe may match l: it has an anchor, or
// non-ASCII text (which case folding could turn into one: 'K' is k). Most
// lines of a tool's output have neither, and skip the regular expression.
func mayBeToolErr(l string) bool {
	for i := 0; i < len(l); i++ {
		c := l[i]
		if c >= utf8.RuneSelf {
			return true
		}
		// c|0x20 is a lowercase letter exactly when c is an ASCII letter
		for _, a := range toolErrAnchors[c|0x20] {
			if hasPrefixFold(l[i:], a) {
				return true
			}
		}
	}
	return false
}

// hasPrefixFold reports whether s starts with lower, an ASCII lowercase
// literal, in any case (and may report true for some control bytes where
// lower has a space or an apostrophe: callers only use it as a filter).
func hasPrefixFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for j := 0; j < len(lower); j++ {
		if s[j]|0x20 != lower[j] {
			return false
		}
	}
	return true
}

// toolArg extracts the salient argument of a tool call: the command, path,
// query or URL, verbatim (clipped at a word boundary).
func toolArg(text string) string {
	t := strings.TrimSpace(text)
	if len(t) > 64<<10 {
		t = t[:64<<10]
	}
	if strings.HasPrefix(t, "{") {
		// (values are decoded only as far as argString looks at them)
		if ms, ok := objectMembers(t); ok {
			for _, k := range []string{"command", "cmd", "path", "file_path", "file", "filename",
				"query", "pattern", "url", "name", "input", "code"} {
				if v, ok := memberValue(ms, k); ok {
					if s := argString(v); s != "" {
						return clip(oneLine(s, 400), 80)
					}
				}
			}
			for _, m := range ms { // (in the order of their names)
				if s := argString(m.raw); s != "" {
					return clip(oneLine(s, 400), 80)
				}
			}
			return ""
		}
	}
	first, _, _ := strings.Cut(sanitize(t, 2000), "\n")
	return clip(strings.TrimSpace(first), 80)
}

// argString is a JSON value as an argument: a string, or the strings of an
// array joined by spaces ("" for anything else).
func argString(v string) string {
	if len(v) == 0 {
		return ""
	}
	switch v[0] {
	case '"':
		if s := v[1 : len(v)-1]; strings.IndexByte(s, '\\') < 0 && utf8.ValidString(s) {
			return s // (nothing to decode)
		}
		var s string
		if json.Unmarshal([]byte(v), &s) == nil {
			return s
		}
	case '[':
		var x []any
		if json.Unmarshal([]byte(v), &x) == nil {
			var parts []string
			for _, e := range x {
				if s, ok := e.(string); ok {
					parts = append(parts, s)
				}
			}
			return strings.Join(parts, " ")
		}
	}
	return ""
}

// toolOutcome reads a tool result without dumping it: failed with the first
// error line, or ok.
func toolOutcome(text string) (failed bool, detail string) {
	const part = 32 << 10
	head, tail := text, ""
	if len(text) > 2*part {
		head, tail = text[:part], text[len(text)-part:]
	}
	lines := strings.Split(sanitize(head, 0), "\n")
	if len(lines) > 300 {
		lines = lines[:300]
	}
	if tail != "" || len(lines) == 300 {
		all := strings.Split(sanitize(text[max(0, len(text)-part):], 0), "\n")
		if len(all) > 300 {
			all = all[len(all)-300:]
		}
		lines = append(lines, all...)
	}
	empty := true
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if l != "" {
			empty = false
		}
		if mayBeToolErr(l) && toolErrRe.MatchString(l) && !toolZeroRe.MatchString(l) {
			return true, strings.TrimRight(l, ".:; ")
		}
	}
	if empty {
		return false, "no output"
	}
	return false, "ok"
}

// toolRun is a tool call and its outcome, rendered as one short clause.
// Consecutive successful runs of the same tool merge into one.
type toolRun struct {
	caller, name       string
	args               []string
	hasCall, hasResult bool
	failed             bool
	outcome, short     string // "ok", "no output", "failed, <first error line>" / "failed"
	more               int    // arguments only counted ("and 3 more")
}

func toolUnit(call, result *fold.Turn, idx int) unit {
	r := &toolRun{name: "a tool", caller: "Assistant"}
	if call != nil {
		r.hasCall = true
		r.caller = displayName(*call)
		if call.Tool != "" {
			r.name = oneLine(call.Tool, 64)
		}
		if a := toolArg(call.Text); a != "" {
			r.args = []string{a}
		}
	}
	if result != nil {
		r.hasResult = true
		if r.name == "a tool" && result.Tool != "" {
			r.name = oneLine(result.Tool, 64)
		}
		failed, detail := toolOutcome(result.Text)
		r.failed = failed
		r.outcome, r.short = detail, detail
		if failed {
			r.outcome, r.short = "failed, "+clip(detail, 90), "failed"
		}
	}
	score := 1.5
	if len(r.args) > 0 {
		score += min(float64(analyze(r.args[0], names{}).entities)*0.4, 1.0)
	}
	if r.failed {
		score += 1.0
	}
	return unit{kind: unitTool, score: score, seq: idx * 1000, turn: idx, tool: r, text: r.render()}
}

func (r *toolRun) argList(each, show int) string {
	if len(r.args) == 0 {
		return ""
	}
	var partsArr [3]string
	parts := partsArr[:0]
	shown := r.args[:min(show, len(r.args))]
	size := len(" ()")
	for _, a := range shown {
		parts = append(parts, clip(a, each))
		size += len(parts[len(parts)-1]) + len(", ")
	}
	var extraBuf [24]byte
	var extra []byte
	if n := len(r.args) - len(shown) + r.more; n > 0 {
		extra = strconv.AppendInt(extraBuf[:0], int64(n), 10)
		size += len(" and  more") + len(extra)
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(" (")
	for i := range shown {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(parts[i])
	}
	if extra != nil {
		b.WriteString(" and ")
		b.Write(extra)
		b.WriteString(" more")
	}
	b.WriteString(")")
	return b.String()
}

func (r *toolRun) render() [3]string {
	full, short := r.argList(80, 3), r.argList(40, 1)
	if !r.hasCall {
		return [3]string{
			r.name + " result: " + r.outcome + ".",
			r.name + " result: " + clip(r.outcome, 50) + ".",
			r.name + " result: " + r.short + ".",
		}
	}
	if !r.hasResult {
		s := r.caller + " ran " + r.name + full + "."
		return [3]string{s, s, r.caller + " ran " + r.name + short + "."}
	}
	s := r.caller + " ran " + r.name + full + ": " + r.outcome + "."
	s1 := s
	if c := clip(r.outcome, 50); c != r.outcome {
		s1 = r.caller + " ran " + r.name + full + ": " + c + "."
	}
	return [3]string{s, s1, r.caller + " ran " + r.name + short + ": " + r.short + "."}
}

// key identifies repeated runs of the same command: a newer run supersedes
// an older one ("go test ./..." failed, then passed).
func (r *toolRun) key() string {
	if !r.hasCall || len(r.args) != 1 {
		return ""
	}
	return r.caller + "\x00" + r.name + "\x00" + r.args[0]
}

// mergeToolRuns folds consecutive successful runs of the same tool by the
// same caller into one clause ("Assistant ran read_file (a.go, b.go and 3
// more): ok.").
func mergeToolRuns(units []*unit) []*unit {
	if len(units) < 2 {
		return units
	}
	out := make([]*unit, 0, len(units))
	var last *unit // out's last unit, a merged copy whose text is stale
	finish := func() {
		if last != nil {
			last.text = last.tool.render()
			last = nil
		}
	}
	for _, u := range units {
		if n := len(out); n > 0 && u.tool != nil && out[n-1].tool != nil {
			a, b := out[n-1].tool, u.tool
			if a.hasCall && b.hasCall && a.hasResult && b.hasResult && !a.failed && !b.failed &&
				a.caller == b.caller && a.name == b.name && a.outcome == b.outcome && len(b.args) == 1 {
				if last == nil { // merge into a copy
					m := *out[n-1]
					t := *a
					t.args = append(make([]string, 0, len(a.args)+4), a.args...)
					m.tool = &t
					out[n-1], last = &m, &m
				}
				t := last.tool
				t.args = append(t.args, b.args...)
				for i, x := range t.args[:len(t.args)-1] {
					if x == b.args[0] {
						t.args = append(t.args[:i], t.args[i+1:]...) // (t.args is the copy's own)
						break
					}
				}
				last.score = max(last.score, u.score)
				continue
			}
		}
		finish()
		out = append(out, u)
	}
	finish()
	return out
}

// ---- topics ----

// topicCounter weighs named entities (capitalized phrases that are not
// sentence starts, participant names or calendar words, with a trailing
// number: "Diamond 3") and, for agent sessions, file paths.
type topicCounter struct {
	who    names
	agent  bool
	idx    map[string]int // topic → index in keys and weight (order of first mention)
	keys   []string
	weight []float64
	echo   []*prevSentence // their topic mentions reinforce, see echoWeights
}

func newTopicCounter(who names, agent bool) *topicCounter {
	return &topicCounter{who: who, agent: agent, idx: map[string]int{},
		keys: make([]string, 0, 8), weight: make([]float64, 0, 8)}
}

var calendarWords = toSet("monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
	"sunday", "january", "february", "march", "april", "may", "june", "july", "august",
	"september", "october", "november", "december", "today", "tomorrow", "tonight",
	"jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec")

func (tc *topicCounter) bump(t string, w float64) {
	i, ok := tc.idx[t]
	if !ok {
		i = len(tc.keys)
		tc.idx[t] = i
		tc.keys = append(tc.keys, t)
		tc.weight = append(tc.weight, 0)
	}
	tc.weight[i] += w
}

// bumpRun bumps the words of run joined by spaces, building the phrase only
// when it is new.
func (tc *topicCounter) bumpRun(run []string, w float64) {
	if len(run) == 1 {
		tc.bump(run[0], w)
		return
	}
	var buf [128]byte
	b := buf[:0]
	for i, r := range run {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, r...)
	}
	if i, ok := tc.idx[string(b)]; ok {
		tc.weight[i] += w
		return
	}
	tc.bump(string(b), w)
}

// echoWeight is the weight of a topic mention in the previous summary's
// sentences (twice that for a file path of an agent session).
const echoWeight = 0.4

// echoWeights returns, for every topic of tc, the weight of its mentions in
// the sentences of tc.echo. Mentions of other topics are not counted (rather
// than counted in a map of their own, as they would add nothing): each
// topic's sum is added up in the order of its mentions, as counting all
// would.
func (tc *topicCounter) echoWeights() []float64 {
	w := make([]float64, len(tc.keys))
	for _, ps := range tc.echo {
		for _, b := range ps.bumps {
			if i, ok := tc.idx[b.topic]; ok {
				if b.double {
					w[i] += 2 * echoWeight
				} else {
					w[i] += echoWeight
				}
			}
		}
	}
	return w
}

// addWords counts the topics of the sentence whose words are ws.
func (tc *topicCounter) addWords(ws []word) {
	scanTopics(ws, tc.who, tc.agent, topicSink{tc: tc, weight: 1})
}

// topicSink receives the topic mentions scanTopics finds: it bumps them in
// tc with weight, or records them in rec.
type topicSink struct {
	tc     *topicCounter
	weight float64
	rec    *[]topicBump
}

// bump reports a mention: the words of the phrase (double: a file path of
// an agent session, which counts twice).
func (k topicSink) bump(run []string, double bool) {
	if k.rec != nil {
		*k.rec = append(*k.rec, topicBump{topic: strings.Join(run, " "), double: double})
		return
	}
	if double {
		k.tc.bumpRun(run, 2*k.weight)
	} else {
		k.tc.bumpRun(run, k.weight)
	}
}

// scanTopics finds the topic mentions of the sentence whose words are ws.
func scanTopics(ws []word, who names, agent bool, sink topicSink) {
	var arr [16]string
	run := arr[:0]
	flush := func() {
		for len(run) > 0 && lexicon.get(run[len(run)-1])&lxConnector != 0 { // topicConnectors
			run = run[:len(run)-1]
		}
		if len(run) > 0 && len(run) <= 5 {
			sink.bump(run, false)
		}
		run = run[:0]
	}
	for i := range ws {
		w, c := ws[i].w, ws[i].c
		// (splitWord(w) has punctuation after the core exactly when w does
		// not end with it: the core's last rune is no punctuation)
		suf := !strings.HasSuffix(w, c)
		isStart := i == 0 || prevEndsSentence(ws[i-1].w)
		if agent && isPathLike(c) {
			flush()
			one := [1]string{c}
			sink.bump(one[:], true) // files are what an agent session is about
			continue
		}
		// A possessive continues a phrase ("King's Row"): never cut after
		// it, unless it is a participant's ("Marco's screen").
		base, possessive := strings.CutSuffix(c, "'s")
		capital := c != "" && upperFirst(c) && ws[i].lx&(lxCommonCaps|lxCalendar|lxCommon|lxFillerCore) == 0 &&
			!who.has(c) && allLettersExcept(base, '-') && runeLen(base) > 1 && !(possessive && who.has(base))
		switch {
		case capital && (!isStart || len(run) > 0):
			run = append(run, c)
		case len(run) > 0 && lexicon.get(c)&lxConnector != 0 && w == c && lexicon.get(run[len(run)-1])&lxConnector == 0:
			run = append(run, c) // "Jeff the Land Shark", "League of Legends"
		case len(run) > 0 && isNumber(c) && strings.HasPrefix(w, c):
			run = append(run, c)
			flush()
		default:
			flush()

		}
		if suf {
			flush()
		}
	}
	flush()
}

var topicConnectors = toSet("of", "the")

func isNumber(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func isPathLike(c string) bool {
	if c == "" || strings.Contains(c, "://") {
		return false
	}
	if strings.Count(c, "/") >= 1 && hasLetterOrDigit(c) && !strings.HasPrefix(c, "/") || strings.HasPrefix(c, "/") && strings.Count(c, "/") >= 2 {
		return true
	}
	if i := strings.LastIndexByte(c, '.'); i > 0 && i < len(c)-1 {
		switch strings.ToLower(c[i+1:]) {
		case "go", "py", "ts", "js", "tsx", "jsx", "md", "json", "yaml", "yml", "toml", "rs",
			"java", "c", "h", "cc", "cpp", "sh", "sql", "txt", "mod", "proto", "rb", "kt", "swift":
			return true
		}
	}
	return false
}

// top returns the n heaviest topics, ties broken by first mention; a word
// already part of a chosen phrase is skipped.
func (tc *topicCounter) top(n int) []string {
	order := make([]int, len(tc.keys))
	total := tc.echoWeights()
	for i := range tc.keys {
		order[i] = i
		total[i] += tc.weight[i]
	}
	slices.SortFunc(order, func(a, b int) int { // (indexes are distinct: one order)
		if c := cmp.Compare(total[b], total[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	var out []string
	for _, i := range order {
		k := tc.keys[i]
		if len(out) >= n {
			break
		}
		dup := false
		for _, o := range out {
			lo, lk := strings.ToLower(o), strings.ToLower(k)
			if strings.Contains(" "+lo+" ", " "+lk+" ") || strings.Contains(" "+lk+" ", " "+lo+" ") ||
				strings.HasSuffix(lo, "/"+lk) || strings.HasSuffix(lk, "/"+lo) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, k)
		}
	}
	return out
}
