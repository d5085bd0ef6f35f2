// Package offline is foldstream's network-free summarizer backend, the
// default when no API key is configured.
//
// It is extractive and deterministic. It keeps, as statements attributed
// to their speaker, what later questions ask about: numbers, amounts, dates
// and times (relative ones resolved against the turn's time), names and
// places, decisions, commitments and plans, preferences, what people said
// about themselves; open questions only while unanswered (a backchannel
// answers nothing: agreement is recorded for proposals, offers and
// decisions only); screen-watch notes tied to the people involved.
// Greetings, thanks, laughter, backchannels, transcription marks and
// near-duplicate repeats are dropped. For agent sessions a tool
// call and its result become one short clause: the tool, its salient
// argument and the outcome, never the output; consecutive successful runs
// of one tool merge, and a newer run of the same command supersedes an
// older one. The user's instructions and constraints rank highest there.
//
// The summary is one paragraph of plain prose. It opens with the
// participants and the recent topics ("Alice, Bob and Carol are talking
// about Marvel Rivals and Tokyo."). In a conversation long enough that its
// statements no longer fit, period lines follow: what each stretch of it
// was about, its topic phrases and who drove them ("From 14:02 to 14:20,
// Alice and Bob discussed the venue in Lisbon, catering and hotel rooms.",
// see period.go); older periods merge into coarser lines rather than being
// dropped, so the summary covers the whole conversation. Then come the
// previous summary's statements merged with the new batch, in chronological
// order: a statement that a newer one of the same speaker on the same
// subject changed is replaced. Speech is tidied before it is rendered:
// false starts ("th the") and the tags "I mean," and "you know," go, and an
// opinion is reported ("I think we should" → "Bob thought we should").
// Identifiers (names, numbers, paths, URLs, quoted strings) are copied
// verbatim. When the budget is tight, hedges go first, then chatter, then
// older statements shrink to their main clauses (whole clauses only, those
// with names, numbers, decisions or questions kept), and then the
// statements worth least for their length are dropped, counting only what
// no other kept statement says and weighing importance mildly against age.
//
// Budgets are counted in runes (Unicode code points), as the engine does.
//
// Each fold also returns offline memories (Result.Memories and
// MemoryItems): the batch's statements that hold a durable fact, with
// speaker, turn and time; a restated fact is not returned again and a
// changed one supersedes the older (see memory.go).
package offline

import (
	"cmp"
	"context"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
)

const (
	// Model is the value of Result.Model and Name().
	Model = "offline"
	// DefaultMaxChars is the budget used when Request.MaxChars is not set.
	DefaultMaxChars = 1200

	maxPrevSentences = 300 // newest sentences of an over-long previous summary
	maxNewUnits      = 400 // best sentences of an oversized batch
)

type config struct {
	defaultMaxChars int
	maxParticipants int
	maxTopics       int
	maxUnitsPerTurn int
	maxNotes        int
	extraFiller     map[string]bool
}

// Option configures a Summarizer.
type Option func(*config)

// WithDefaultMaxChars sets the budget used when a request has MaxChars ≤ 0
// (default 1200).
func WithDefaultMaxChars(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.defaultMaxChars = n
		}
	}
}

// WithMaxParticipants caps how many participants the opening sentence names
// (default 8); the rest are counted ("and 3 others").
func WithMaxParticipants(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxParticipants = n
		}
	}
}

// WithMaxTopics caps the topics named in the opening sentence (default 3;
// 0 disables topics).
func WithMaxTopics(n int) Option {
	return func(c *config) {
		if n >= 0 {
			c.maxTopics = n
		}
	}
}

// WithMaxSentencesPerTurn caps how many sentences of one turn can reach the
// summary (default 3), so that a monologue or a pasted document cannot
// dominate it.
func WithMaxSentencesPerTurn(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxUnitsPerTurn = n
		}
	}
}

// WithMaxNotes caps the screen-watch notes folded per call (default 6).
func WithMaxNotes(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxNotes = n
		}
	}
}

// WithFillerWords adds words that count as filler (a bot's catchphrases, a
// community's emote names). Matching is case-insensitive.
func WithFillerWords(words ...string) Option {
	return func(c *config) {
		for _, w := range words {
			if w = strings.ToLower(strings.TrimSpace(w)); w != "" {
				c.extraFiller[w] = true
			}
		}
	}
}

// Summarizer is the offline backend. It is safe for concurrent use.
//
// It keeps bounded caches of what it derived from previous summaries: in a
// rolling session most of their sentences and period lines are carried from
// fold to fold, and they are analysed once (sentCache, heldCache,
// periodCache). The caches never change a result.
type Summarizer struct {
	cfg     config
	cache   *sentCache   // analysed sentences of previous summaries
	held    *heldCache   // the coverage buckets of previous folds' period lines
	periods *periodCache // previous folds' period lines, parsed
	facts   *factStore   // facts extracted per session, for restated and changed facts
	work    scratchPool
}

var _ fold.Summarizer = (*Summarizer)(nil)

// New returns an offline summarizer.
func New(opts ...Option) *Summarizer {
	cfg := config{
		defaultMaxChars: DefaultMaxChars,
		maxParticipants: 8,
		maxTopics:       3,
		maxUnitsPerTurn: 3,
		maxNotes:        6,
		extraFiller:     map[string]bool{},
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return &Summarizer{cfg: cfg, cache: newSentCache(sentCacheSize), held: newHeldCache(heldCacheSize),
		periods: newPeriodCache(periodCacheSize), facts: newFactStore()}
}

// Name returns "offline".
func (s *Summarizer) Name() string { return Model }

// Summarize folds req into a new running summary. It never fails except
// when ctx is already done.
func (s *Summarizer) Summarize(ctx context.Context, req fold.Request) (fold.Result, error) {
	if err := ctx.Err(); err != nil {
		return fold.Result{}, err
	}
	summary, mems := s.summarize(req)
	res := fold.Result{Summary: summary, Model: Model}
	if len(mems) > 0 {
		res.MemoryItems = mems
		res.Memories = make([]string, len(mems))
		for i, m := range mems {
			res.Memories[i] = m.Text
		}
	}
	return res, nil
}

func (s *Summarizer) summarize(req fold.Request) (string, []fold.Memory) {
	budget := req.MaxChars
	if budget <= 0 {
		budget = s.cfg.defaultMaxChars
	}
	agent := req.Profile == fold.ProfileAgent
	for _, t := range req.Turns {
		if isToolTurn(t) {
			agent = true
			break
		}
	}

	prev := parsePrevious(req.PreviousSummary)

	// Everyone known by name: earlier participants, this batch's speakers,
	// note sources that are names.
	who := newNames()
	addName := who.add
	for _, n := range prev.names {
		addName(n)
	}
	for _, t := range req.Turns {
		if !isToolTurn(t) && strings.ToLower(t.Role) != "system" {
			addName(displayName(t))
		}
	}
	for _, n := range req.Notes {
		if src := oneLine(n.Source, 64); looksLikeName(src) {
			addName(src)
		}
	}

	var periods []*period
	if !agent {
		kept := prev.sentences[:0] // (filtered in place)
		ctx := ""                  // sentContext(who, agent), once there is a period line
		for _, st := range prev.sentences {
			if ctx == "" && strings.Contains(st, " discussed ") {
				ctx = sentContext(who, agent)
			}
			if p, ok := s.periods.parse(st, who, ctx); ok {
				periods = append(periods, p)
			} else {
				kept = append(kept, st)
			}
		}
		prev.sentences = kept
	}

	prevSents := s.cache.prevSentences(prev.sentences, who, agent)
	sc := s.work.get()
	defer s.work.put(sc)
	ex := s.extract(req, prev, prevSents, who, agent, sc)
	var mems []fold.Memory
	if !req.Recompact {
		mems = s.memories(req.Session, req, ex.units, who, sc)
	}

	participants, others := s.roster(prev, ex.speakers, ex.talkers)
	topics := ex.topics
	if len(ex.units) == 0 {
		topics = prev.topics // nothing new: keep the opening sentence as it was
	}

	if len(ex.units) == 0 && len(prev.sentences) == 0 {
		if ex.hadTurns && ex.allFiller {
			return smallTalk(participants, others), mems
		}
		if prev.smallTalk && len(req.Turns) == 0 {
			return smallTalk(participants, others), mems
		}
	}

	items := assemble(prevSents, ex, sc)
	dropAnsweredPrev(items, ex.units)
	dedup(items, who)
	lead := leadItem(participants, others, topics, agent)
	if lead != nil {
		items = append(items, nil)
		copy(items[1:], items)
		items[0] = lead
	}
	// Period lines start once the summary is full (until then its
	// statements say it all), and need room.
	if !agent && budget >= minPeriodBudget && (len(periods) > 0 || overBudget(items, budget)) {
		if sc.sal == nil {
			sc.sal = map[string]float64{}
		}
		sal := earlierCounts(sc.sal, periods, prevSents)
		n := 0
		for _, st := range ex.said {
			n += len(st.words)
		}
		batch := sc.phraseCounter(n)
		batch.sal = sal
		for _, st := range ex.said {
			batch.add(st.words, st.infos, st.turn, st.speaker, who)
		}
		if len(periods) == 0 && len(prevSents) > 0 {
			// The first line: what the statements so far were about.
			pc := sc.firstCounter(4 * len(prevSents))
			pc.sal = sal
			for i, ps := range prevSents {
				for _, r := range ps.phrases {
					pc.count(r.words, r.lowerFirst, i, ps.speaker)
				}
			}
			if ph, sp, ok := pc.top(maxPeriodPhrases); ok {
				p := &period{names: sp, phrases: ph, weight: 1}
				if n := len(req.Turns); n > 0 {
					p.to = clockOf(req.Turns[0].At)
				}
				periods = append(periods, p)
			}
		}
		if ph, sp, ok := batch.top(maxPeriodPhrases); ok {
			p := &period{names: sp, phrases: ph}
			if n := len(req.Turns); n > 0 {
				p.from, p.to = clockOf(req.Turns[0].At), clockOf(req.Turns[n-1].At)
				if p.from == "" || p.to == "" {
					p.from, p.to = "", ""
				}
			}
			p.weight = p.minutes()
			periods = append(periods, p)
		}
		// The period lines take what the opening sentence and the
		// statements that hold facts or open questions (up to factShare of
		// the budget) leave, at most periodShare.
		room := budget * periodShare / 100
		if lead != nil {
			room = min(room, budget-runeLen(lead.v[0])-1)
		}
		need := 0
		for _, it := range items {
			if !it.drop && !it.isLead && (it.score >= factScore || it.isNew && strings.HasSuffix(it.v[0], "?")) {
				need += runeLen(it.v[1]) + 1
			}
		}
		room = min(room, budget-min(need, budget*factShare/100))
		periods = fitPeriods(periods, max(budget/periodLineChars, 1), room, sal)
	} else {
		periods = nil
	}
	var linesArr [8]string
	lines := linesArr[:0]
	for _, p := range periods {
		lines = append(lines, p.render())
	}
	periodText := strings.Join(lines, " ")
	rest := budget
	if periodText != "" {
		rest -= runeLen(periodText) + 1
	}
	var bucketsArr [256]uint16
	periodBuckets := bucketsArr[:0]
	if periodText != "" && overBudget(items, rest) { // (else fit drops nothing)
		periodBuckets = s.held.appendBuckets(periodBuckets, periodText, lines, who, agent)
	}
	fit(items, rest, budget, periodBuckets)
	if out := joinWithPeriods(items, periodText); out != "" {
		return out, mems
	}
	// The engine treats an empty summary as a failed fold: whenever there
	// was input, say at least who was there.
	if len(req.Turns) > 0 {
		var ns []string
		seen := map[string]bool{}
		for _, t := range req.Turns {
			if n := displayName(t); !isToolTurn(t) && !seen[strings.ToLower(n)] {
				seen[strings.ToLower(n)] = true
				ns = append(ns, n)
			}
		}
		return smallTalk(ns, 0), mems
	}
	return "", mems
}

// ---- previous summary ----

type previous struct {
	names     []string
	others    int
	topics    []string
	sentences []string
	smallTalk bool
}

var (
	toolCallRe = regexp.MustCompile(`^(.{1,64}?) ran (\S+)(?: \((.*)\))?\.$`)
	toolRunRe  = regexp.MustCompile(`^(.{1,64}?) ran (\S+)(?: \((.*)\))?: (ok|no output|failed)\b`)
)

// parsePrevious splits the previous summary into sentences and recognizes
// the opening sentence this backend writes (participants and topics).
func parsePrevious(s string) previous {
	var p previous
	text := sanitize(s, maxPrevRunes)
	// (about one sentence per terminator: the slice does not grow)
	est := min(strings.Count(text, ".")+strings.Count(text, "?")+strings.Count(text, "!")+1, 1024)
	sents := appendSentences(make([]string, 0, est), text)
	if len(sents) > 0 {
		first := endSentence(sents[0], '.')
		if subj, topicList, ok := matchLead(first); ok {
			p.names, p.others = splitNameList(subj)
			if topicList != "" {
				p.topics, _ = splitNameList(topicList)
			}
			sents = sents[1:]
		} else if subj, ok := matchSmallTalk(first); ok {
			p.names, p.others = splitNameList(subj)
			p.smallTalk = true
			sents = sents[1:]
		}
	}
	p.sentences = sents[:0] // (filled in place)
	for _, st := range sents {
		st = endSentence(st, '.')
		if st == "" {
			continue
		}
		if n := len(p.sentences); n > 0 && strings.HasSuffix(p.sentences[n-1], "?") && isReply(st) {
			p.sentences[n-1] += " " + st
			continue
		}
		p.sentences = append(p.sentences, st)
	}
	if len(p.sentences) > maxPrevSentences {
		p.sentences = p.sentences[len(p.sentences)-maxPrevSentences:]
	}
	return p
}

// matchLead is leadRe.FindStringSubmatch(s) without the regular
// expression: subj is m[1] and topics m[2] or m[3]. s has no line breaks
// (it is a sentence of splitSentences). The lazy (.+?) makes the subject
// the shortest prefix for which the rest matches.
func matchLead(s string) (subj, topics string, ok bool) {
	if !strings.HasSuffix(s, ".") {
		return "", "", false
	}
	for i := 1; i < len(s); i++ {
		if s[i] != ' ' {
			continue
		}
		rest, ok := strings.CutPrefix(s[i+1:], "are ")
		if !ok {
			if rest, ok = strings.CutPrefix(s[i+1:], "is "); !ok {
				continue
			}
		}
		for _, act := range [...]string{"talking about ", "working on "} {
			if t, ok := strings.CutPrefix(rest, act); ok && len(t) > 1 {
				return s[:i], t[:len(t)-1], true // (.+) before the final '.'
			}
		}
		if rest == "in the session." {
			return s[:i], "", true
		}
	}
	return "", "", false
}

// matchSmallTalk is smallTalkRe.FindStringSubmatch(s)[1]: its ending is
// literal, so the subject is whatever precedes it.
func matchSmallTalk(s string) (subj string, ok bool) {
	for _, end := range [...]string{" exchanged small talk.", " made small talk."} {
		if subj, ok := strings.CutSuffix(s, end); ok && subj != "" {
			return subj, true
		}
	}
	return "", false
}

// isReply reports whether s is a reply sentence this backend writes after
// a question: `^[^.?!]{1,80} (said yes|said no|agreed|disagreed)\.$` as a
// regular expression. At most one of the endings fits s, so the subject
// is what precedes it: 1 to 80 runes (an invalid byte counts as one, as
// the expression reads it) without '.', '?' or '!'.
func isReply(s string) bool {
	var subj string
	ok := false
	for _, end := range [...]string{" said yes.", " said no.", " disagreed.", " agreed."} {
		if subj, ok = strings.CutSuffix(s, end); ok {
			break
		}
	}
	if !ok || subj == "" || strings.ContainsAny(subj, ".?!") {
		return false
	}
	return len(subj) <= 80 || utf8.RuneCountInString(subj) <= 80
}

// matchToolCall is toolCallRe.FindStringSubmatch(s); the expression needs
// " ran ".
func matchToolCall(s string) []string {
	if !strings.Contains(s, " ran ") {
		return nil
	}
	return toolCallRe.FindStringSubmatch(s)
}

// matchToolRun is toolRunRe.FindStringSubmatch(s); the expression needs
// " ran ".
func matchToolRun(s string) []string {
	if !strings.Contains(s, " ran ") {
		return nil
	}
	return toolRunRe.FindStringSubmatch(s)
}

// matchMore is moreRe.FindStringSubmatch(s) (`^(.*) and (\d+) more$`)
// without the regular expression: list is m[1] and n m[2]. The digits
// must be preceded by " and ", so they are all the digits before " more":
// the greedy (.*) has only one way to match.
func matchMore(s string) (list, n string, ok bool) {
	rest, ok := strings.CutSuffix(s, " more")
	if !ok {
		return "", "", false
	}
	i := len(rest)
	for i > 0 && '0' <= rest[i-1] && rest[i-1] <= '9' {
		i--
	}
	if i == len(rest) {
		return "", "", false
	}
	list, ok = strings.CutSuffix(rest[:i], " and ")
	if !ok || strings.Contains(list, "\n") { // ('.' does not match a line break)
		return "", "", false
	}
	return list, rest[i:], true
}

// splitNameList parses "A, B and C" or "A, B and 3 others": the parts
// between ", " and the last part split at its last " and ", trimmed,
// empty ones and "N others" left out (N is others).
func splitNameList(s string) ([]string, int) {
	out := make([]string, 0, strings.Count(s, ", ")+2) // (one allocation)
	others := 0
	part := func(p string) {
		p = strings.TrimSpace(p)
		if p == "" {
			return
		}
		if n, ok := matchOthers(p); ok {
			others, _ = strconv.Atoi(n)
			return
		}
		out = append(out, p)
	}
	rest := s
	for {
		p, r, found := strings.Cut(rest, ", ")
		if !found {
			break
		}
		part(p)
		rest = r
	}
	if i := strings.LastIndex(rest, " and "); i >= 0 {
		part(rest[:i])
		part(rest[i+5:])
	} else {
		part(rest)
	}
	if len(out) == 0 {
		return nil, others
	}
	return out, others
}

// matchOthers is `^(\d+) others?$` as a regular expression: n is the
// (ASCII) digits of "3 others" or "1 other".
func matchOthers(s string) (n string, ok bool) {
	rest, ok := strings.CutSuffix(s, " others")
	if !ok {
		if rest, ok = strings.CutSuffix(s, " other"); !ok {
			return "", false
		}
	}
	if rest == "" {
		return "", false
	}
	for i := 0; i < len(rest); i++ {
		if rest[i] < '0' || rest[i] > '9' {
			return "", false
		}
	}
	return rest, true
}

// roster merges earlier participants with this batch's speakers, keeping
// first-appearance order. Beyond the cap, this batch's speakers who said
// something win, then the rest of the batch, then earlier participants.
func (s *Summarizer) roster(prev previous, batch, talkers []string) ([]string, int) {
	var all []string
	seen := map[string]bool{}
	for _, group := range [][]string{prev.names, batch} {
		for _, n := range group {
			k := strings.ToLower(n)
			if !seen[k] {
				seen[k] = true
				all = append(all, n)
			}
		}
	}
	others := prev.others
	max := s.cfg.maxParticipants
	if len(all) <= max {
		return all, others
	}
	keep := map[string]bool{}
	for _, group := range [][]string{talkers, batch, all} {
		for _, n := range group {
			if len(keep) < max {
				keep[strings.ToLower(n)] = true
			}
		}
	}
	var out []string
	for _, n := range all {
		if keep[strings.ToLower(n)] {
			out = append(out, n)
		} else {
			others++
		}
	}
	return out, others
}

func smallTalk(participants []string, others int) string {
	switch {
	case len(participants) == 0:
		return "The participants exchanged small talk."
	case len(participants) == 1 && others == 0:
		return participants[0] + " made small talk."
	}
	return nameList(participants, others) + " exchanged small talk."
}

func nameList(ns []string, others int) string {
	if others > 0 {
		o := strconv.Itoa(others) + " others"
		if others == 1 {
			o = "1 other"
		}
		return joinNames(append(append([]string(nil), ns...), o))
	}
	return joinNames(ns)
}

// ---- items and budget ----

// item is one sentence of the output with its condensation levels.
type item struct {
	v       [3]string // full, light, hard
	n       [3]int    // cached rune lengths (0 = not computed)
	lvl     int
	score   float64
	pos     float64 // age: 0 oldest … 1 newest
	isNew   bool
	isLead  bool
	drop    bool
	dup     bool // dropped as a near-duplicate: never revived
	speaker string
	key     string        // tool runs: caller, tool and argument
	prev    *prevSentence // the sentence of the previous summary it still is, if any
	toks    *tokSet       // content tokens of v[0] (set by dedup)
	unit    *unit         // the speech unit it renders, if any: dedup and fit use its tokens
}

func (it *item) text() string { return it.v[it.lvl] }

// fillHard makes the hard condensation of an item of a new statement,
// which its unit makes only when asked (unit.hard). Call it before v[2] is
// read.
func (it *item) fillHard() {
	if it.unit != nil && it.v[2] == "" {
		it.v[2], it.n[2] = it.unit.hard(), 0
	}
}

// setText replaces the item's sentence.
func (it *item) setText(v [3]string) {
	it.v, it.n, it.prev = v, [3]int{}, nil
}

func (it *item) length() int {
	if it.n[it.lvl] == 0 && it.v[it.lvl] != "" {
		it.n[it.lvl] = runeLen(it.v[it.lvl])
	}
	return it.n[it.lvl]
}

// eff weighs importance against age mildly: a detail stated early in a
// long conversation is asked about as often as a recent one.
func (it *item) eff() float64 { return it.score * (0.7 + 0.3*it.pos) }

// chatterScore is the importance below which a sentence is chatter: it is
// dropped before any statement is condensed to its main clauses.
const chatterScore = 3.0

// appendBuckets appends the coverage bucket of each token of toks.
func appendBuckets(dst []uint16, toks []string) []uint16 {
	for _, t := range toks {
		dst = append(dst, uint16(hashLower(t)%covBuckets))
	}
	return dst
}

// covBuckets is the number of token buckets fit counts coverage in.
const covBuckets = 1024

// value is what keeping the item is worth, given the ids of its tokens and
// cov, the number of kept items that hold each token: its weighed
// importance, scaled by the share of its tokens no other kept item holds,
// per unit of length.
func (it *item) value(toks []uint16, cov *[covBuckets]int32) float64 {
	uniq := 1.0
	if len(toks) > 0 {
		n := 0
		for _, id := range toks {
			if cov[id] <= 1 {
				n++
			}
		}
		uniq = float64(n) / float64(len(toks))
	}
	return it.eff() * (0.1 + 0.9*uniq) * math.Sqrt(100/float64(max(it.length(), 40)))
}

func leadItem(participants []string, others int, topics []string, agent bool) *item {
	if len(participants) == 0 {
		return nil
	}
	subj := nameList(participants, others)
	verb := " are"
	if len(participants) == 1 && others == 0 {
		verb = " is"
	}
	short := subj + verb + " in the session."
	full := short
	if len(topics) > 0 {
		act := " talking about "
		if agent {
			act = " working on "
		}
		full = subj + verb + act + joinNames(topics) + "."
	}
	return &item{v: [3]string{full, short, ""}, isLead: true, score: 100, pos: 1}
}

// assemble builds the items of the previous summary and of the new batch.
func assemble(prevSents []*prevSentence, ex extraction, sc *scratch) []*item {
	n := len(prevSents)
	arena := take(sc.items, n+len(ex.units)) // one array for all items (it never grows)
	sc.items = arena
	newItem := func(it item) *item {
		arena = append(arena, it)
		return &arena[len(arena)-1]
	}
	items := take(sc.ptrs, n+len(ex.units)+1) // (+1: the opening sentence)
	sc.ptrs = items
	for i, ps := range prevSents {
		pos := 0.6
		if n > 1 {
			pos = 0.1 + 0.5*float64(i)/float64(n-1)
		}
		items = append(items, newItem(item{v: ps.v, n: ps.n, score: ps.score, pos: pos, key: ps.key, prev: ps}))
	}
	items = mergePrevToolRuns(items)
	units := ex.units
	// A result whose call was folded last time completes that sentence.
	if len(units) > 0 && units[0].tool != nil && !units[0].tool.hasCall && len(items) > 0 {
		last := items[len(items)-1]
		if m := matchToolCall(last.v[0]); m != nil && m[2] == units[0].tool.name {
			r := *units[0].tool
			r.hasCall, r.caller = true, m[1]
			if m[3] != "" {
				r.args = []string{m[3]}
			}
			last.setText(r.render())
			last.key = r.key()
			last.score = max(last.score, units[0].score)
			units = units[1:]
		}
	}
	m := len(units)
	for k, u := range units {
		pos := 1.0
		if m > 1 {
			pos = 0.7 + 0.3*float64(k)/float64(m-1)
		}
		it := newItem(item{v: u.text, score: u.score, pos: pos, isNew: true, speaker: u.speaker})
		if u.kind == unitSpeech { // (tokenizeUnits gave it its tokens)
			it.unit = u
		}
		if u.tool != nil {
			it.key = u.tool.key()
		}
		items = append(items, it)
	}
	sc.items, sc.ptrs = arena, items // (the parts used)
	return items
}

// mergePrevToolRuns merges consecutive successful runs of one tool in the
// previous summary into one sentence, as mergeToolRuns does for a batch.
func mergePrevToolRuns(items []*item) []*item {
	out := items[:0] // (filtered in place)
	var run *toolRun
	var runItem *item // out's last item, holding run
	merged := false   // runItem's text is stale: rendered when the run ends
	finish := func() {
		if merged {
			runItem.setText(run.render())
			merged = false
		}
	}
	for _, it := range items {
		m := it.prev.run // matchToolRun(it.v[0]): it is unchanged so far
		if m == nil || m[4] != "ok" || m[3] == "" || !strings.HasSuffix(it.v[0], ": ok.") {
			finish()
			run = nil
			out = append(out, it)
			continue
		}
		args, more := m[3], 0
		if list, n, ok := matchMore(args); ok {
			args = list
			more, _ = strconv.Atoi(n)
		}
		if run != nil && run.caller == m[1] && run.name == m[2] {
			for a := range strings.SplitSeq(args, ", ") {
				run.args = append(run.args, a)
			}
			run.more += more
			merged = true
			runItem.key = ""
			runItem.score = max(runItem.score, it.score)
			runItem.pos = it.pos
			continue
		}
		finish()
		run = &toolRun{caller: m[1], name: m[2], hasCall: true, hasResult: true,
			outcome: "ok", short: "ok", args: strings.Split(args, ", "), more: more}
		runItem = it
		out = append(out, it)
	}
	finish()
	return out
}

// dropAnsweredPrev drops the open questions that ended the previous
// summary (among its last three sentences) when the batch opens with their
// answer: a statement by someone else in its first two turns about the
// question (a shared word, or what its question word asks for, see
// answeredBy). A backchannel is no unit, so it answers nothing here
// either.
func dropAnsweredPrev(items []*item, units []*unit) {
	seen := 0
	for k := len(items) - 1; k >= 0 && seen < 3; k-- {
		it := items[k]
		if it.prev == nil {
			continue
		}
		seen++
		q := it.prev
		if q.speaker == "" || !strings.HasSuffix(it.v[0], "?") || !strings.HasPrefix(it.v[0][len(q.speaker):], " asked") {
			continue
		}
		var warr [64]string
		kind := questionKind(appendFields(warr[:0], it.v[0][len(q.speaker):]))
		for _, u := range units {
			if u.turn > 1 {
				break
			}
			if u.kind != unitSpeech || u.sp.t.question || strings.EqualFold(u.speaker, q.speaker) {
				continue
			}
			if answersKind(kind, u.sp.t) || sharesToken(u.toks, q.toks.toks) {
				it.drop, it.dup = true, true
				break
			}
		}
	}
}

// sharesToken reports whether two sorted token sets share a token.
func sharesToken(a, b []string) bool {
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i] < b[j]:
			i++
		case b[j] < a[i]:
			j++
		default:
			return true
		}
	}
	return false
}

// dedup drops near-duplicate sentences: the lower-scored one, or the older
// one when they are about as important.
func dedup(items []*item, who names) {
	toks := make([]*tokSet, len(items))
	fresh, est := 0, 0 // new items without a unit's set, and about their tokens (one in 12 bytes)
	for _, it := range items {
		if it.prev == nil && it.unit == nil {
			fresh++
			est += len(it.v[0])/12 + 1
		}
	}
	// The other new items' sets share one slice of sets, of tokens and of
	// bits.
	sets := make([]tokSet, 0, fresh)
	all := make([]string, 0, est) // (when it grows, earlier sets keep the old array)
	bits := make([]uint8, 0, est)
	for i, it := range items {
		if it.prev != nil {
			toks[i] = &it.prev.toks // tokenSet(it.v[0], who), computed once
			continue
		}
		if it.unit != nil {
			toks[i] = &it.unit.set // (the statement's tokens: its rendering adds none that count)
			continue
		}
		var warr [64]string
		mark := len(all)
		all = appendTokenSet(all, appendFields(warr[:0], it.v[0]), who)
		set := all[mark:len(all):len(all)]
		if cap(bits)-len(bits) < len(set) {
			bits = make([]uint8, 0, max(est, len(set)))
		}
		n := len(bits)
		bits = bits[:n+len(set)]
		sets = append(sets, newTokSetIn(set, bits[n:]))
		toks[i] = &sets[len(sets)-1]
	}
	spk := make([]string, len(items))
	subj := make([][]string, len(items)) // subjectOf, computed when first compared
	for i, it := range items {
		it.toks = toks[i]
		spk[i] = it.speaker
		if it.prev != nil {
			spk[i], subj[i] = it.prev.speaker, it.prev.subj
		}
	}
	for j := range items {
		if items[j].drop {
			continue
		}
		for i := 0; i < j; i++ {
			if k := items[j].key; k != "" && !items[i].drop && items[i].key == k {
				items[i].drop, items[i].dup = true, true // superseded by the newer run
				continue
			}
			if items[i].drop {
				continue
			}
			if !nearDupSets(toks[i], toks[j]) {
				// the same speaker on the same subject with other details
				// (a number, a place): the newer replaces what changed
				if items[j].isNew && !items[i].isNew && spk[i] != "" && spk[i] == spk[j] {
					if subj[j] == nil {
						if u := items[j].unit; u != nil {
							subj[j] = u.subject() // (shared with memories)
						} else {
							subj[j] = subjectOf(toks[j].toks)
						}
					}
					if sameSubject(subj[i], subj[j]) {
						items[i].drop, items[i].dup = true, true
					}
				}
				continue
			}
			if items[i].score > items[j].score+1.0 {
				items[j].drop, items[j].dup = true, true
				break
			}
			items[i].drop, items[i].dup = true, true
		}
	}
}

// lenSum is the length of the kept items joined by spaces, kept up to date
// as fit changes them rather than recounted after every change.
type lenSum struct{ n, parts int }

// add adds (sign 1) or removes (sign -1) the item's part.
func (ls *lenSum) add(it *item, sign int) {
	if it.drop || it.text() == "" {
		return
	}
	ls.n += sign * it.length()
	ls.parts += sign
}

func (ls *lenSum) total() int { return ls.n + max(ls.parts-1, 0) }

// fit brings the items within budget: condense the previous summary
// (oldest first: light), lightly condense weak new sentences, drop chatter,
// shrink the previous summary's and then the weak new sentences to their
// main clauses, then drop sentences by importance weighed against age,
// keeping the best sentence of the new batch. Only then does the opening sentence shrink.
// whole is the summary's budget, of which budget is what the items may
// take (the period lines take the rest): the opening sentence keeps its
// topics unless the whole summary is small. held are the coverage
// buckets of the tokens the period lines already name: a word there is
// no detail a statement adds, so it counts as covered when statements are
// dropped.
func fit(items []*item, budget, whole int, held []uint16) {
	var ls lenSum
	for _, it := range items {
		ls.add(it, 1)
	}
	over := func() bool { return ls.total() > budget }
	if !over() {
		return
	}
	setLvl := func(it *item, lvl int) {
		ls.add(it, -1)
		if lvl == 2 {
			it.fillHard()
		}
		it.lvl = lvl
		ls.add(it, 1)
	}
	setDrop := func(it *item, drop bool) {
		ls.add(it, -1)
		it.drop = drop
		ls.add(it, 1)
	}
	var prevArr, freshArr [64]*item
	prev, fresh := prevArr[:0], freshArr[:0]
	var lead *item
	for _, it := range items {
		switch {
		case it.isLead:
			lead = it
		case it.drop:
		case it.isNew:
			fresh = append(fresh, it)
		default:
			prev = append(prev, it)
		}
	}
	// Hedges go first (oldest first), then chatter (the least important
	// first), and only then do older statements shrink to their main
	// clauses.
	for _, it := range prev {
		if it.lvl < 1 {
			setLvl(it, 1)
			if !over() {
				return
			}
		}
	}
	var weakArr [64]*item
	weak := append(weakArr[:0], fresh...)
	slices.SortStableFunc(weak, func(a, b *item) int { return cmp.Compare(a.score, b.score) })
	for _, it := range weak {
		if it.lvl < 1 {
			setLvl(it, 1)
			if !over() {
				return
			}
		}
	}
	var chatterArr [64]*item
	chatter := chatterArr[:0]
	for _, it := range prev {
		if it.score < chatterScore {
			chatter = append(chatter, it)
		}
	}
	for _, it := range weak {
		if it.score < chatterScore {
			chatter = append(chatter, it)
		}
	}
	slices.SortStableFunc(chatter, func(a, b *item) int { return cmp.Compare(a.eff(), b.eff()) })
	for _, it := range chatter {
		setDrop(it, true)
		if !over() {
			return
		}
	}
	for _, it := range prev {
		if it.lvl < 2 && !it.drop {
			setLvl(it, 2)
			if !over() {
				return
			}
		}
	}
	for _, it := range weak {
		if it.lvl < 2 && !it.drop {
			setLvl(it, 2)
			if !over() {
				return
			}
		}
	}
	if lead != nil && whole < 400 {
		setLvl(lead, 1)
		if !over() {
			return
		}
	}
	// protect the best sentence of the new batch (or of the old summary)
	var keep *item
	pool := fresh
	if len(pool) == 0 {
		pool = prev
	}
	for _, it := range pool {
		if keep == nil || it.score >= keep.score {
			keep = it
		}
	}
	// Drop the sentence worth least for its length, counting only what
	// no other kept sentence says (the summary should cover the most
	// distinct details it can). A token's id is its hash in covBuckets
	// (tokens that share a bucket count as one: a little coverage is
	// underestimated, never invented twice); cov[id] is the number of
	// kept items that hold a token of bucket id, plus one when the period
	// lines name it (held).
	var idArr [256]uint16
	all := idArr[:0]
	var spanArr [64][2]int32
	spans := spanArr[:0]
	for _, it := range items {
		from := int32(len(all))
		switch {
		case it.drop || it.isLead || it.toks == nil:
		case it.prev != nil && it.toks == &it.prev.toks:
			all = append(all, it.prev.buckets...) // (computed once, cached)
		case it.unit != nil && it.toks == &it.unit.set:
			all = append(all, it.unit.buckets...) // (computed with the set)
		default:
			all = appendBuckets(all, it.toks.toks)
		}
		spans = append(spans, [2]int32{from, int32(len(all))})
	}
	var cov [covBuckets]int32
	for _, id := range all {
		cov[id]++
	}
	for _, id := range held {
		cov[id]++
	}
	for over() {
		victim := -1
		vv := 0.0
		for i, it := range items {
			if it.drop || it.isLead || it == keep {
				continue
			}
			if v := it.value(all[spans[i][0]:spans[i][1]], &cov); victim < 0 || v < vv {
				victim, vv = i, v
			}
		}
		if victim < 0 {
			break
		}
		setDrop(items[victim], true)
		for _, id := range all[spans[victim][0]:spans[victim][1]] {
			cov[id]--
		}
	}
	if !over() {
		return
	}
	// Only the opening sentence and the protected sentence are left.
	if lead != nil {
		setLvl(lead, 1)
	}
	if keep != nil {
		setLvl(keep, 2)
	}
	if !over() {
		return
	}
	if keep != nil && lead != nil && budget < whole {
		// Beside period lines the opening sentence goes last: it names
		// the participants, whom the next fold reads back from it (the
		// period lines name only participants it knows).
		setDrop(keep, true)
		if !over() {
			return
		}
	}
	if lead != nil {
		setDrop(lead, true)
		if !over() {
			return
		}
	}
	// A tiny budget: the most valuable sentence that fits on its own, else
	// the participants alone.
	var best *item
	for _, it := range items {
		it.fillHard()
		if it.isLead || it.dup || runeLen(it.v[2]) > budget || it.v[2] == "" {
			continue
		}
		if best == nil || it.eff() > best.eff() {
			best = it
		}
	}
	if best != nil || (lead != nil && runeLen(lead.v[1]) <= budget) {
		for _, it := range items {
			it.drop = true
		}
		if best != nil {
			best.drop, best.lvl = false, 2
		} else {
			lead.drop = false
		}
		return
	}
	if lead != nil {
		lead.drop = false // nothing fits: keep who is here; the engine clamps
	}
	// Still over: the engine's clamp handles it; a backend never truncates.
}

// overBudget reports whether the items, at their fullest, exceed budget.
func overBudget(items []*item, budget int) bool {
	n := -1
	for _, it := range items {
		if !it.drop {
			n += runeLen(it.v[0]) + 1
		}
	}
	return n > budget
}

// joinWithPeriods is join(items) with the period lines after the opening
// sentence.
func joinWithPeriods(items []*item, periodText string) string {
	if periodText == "" {
		return join(items)
	}
	// (one string: the opening sentence, the period lines, the rest)
	var arr [64]string
	if len(items) > 0 && items[0].isLead && !items[0].drop && items[0].text() != "" {
		return strings.Join(appendJoinParts(append(arr[:0], items[0].text(), periodText), items[1:]), " ")
	}
	return strings.Join(appendJoinParts(append(arr[:0], periodText), items), " ")
}

// join writes the kept items as one paragraph, merging consecutive
// sentences of the same speaker from the new batch ("Bob keeps dying as
// Hulk, and asked: can someone heal?") when they are about as important (a
// merged sentence is kept or dropped as a whole in later folds).
func join(items []*item) string {
	var arr [64]string
	return strings.Join(appendJoinParts(arr[:0], items), " ")
}

// appendJoinParts appends the sentences join writes (joined by spaces) to
// parts: a merge looks back only at the sentences of items.
func appendJoinParts(parts []string, items []*item) []string {
	from := len(parts)
	lastSpeaker := ""
	lastScore := 0.0
	merged := 0
	for _, it := range items {
		if it.drop || it.text() == "" {
			continue
		}
		t := it.text()
		n := len(parts)
		if n > from && it.isNew && it.speaker != "" && lastSpeaker == it.speaker && merged < 1 &&
			math.Abs(lastScore-it.score) <= 1.5 &&
			strings.HasSuffix(parts[n-1], ".") && strings.HasPrefix(t, it.speaker) && strings.HasPrefix(t[len(it.speaker):], " ") &&
			!strings.Contains(parts[n-1], " agreed") && !strings.Contains(parts[n-1], " said yes") &&
			!strings.Contains(parts[n-1], " said no") && runeLen(parts[n-1])+runeLen(t) < 240 {
			parts[n-1] = strings.TrimSuffix(parts[n-1], ".") + ", and " + t[len(it.speaker)+1:]
			merged++
			continue
		}
		parts = append(parts, t)
		merged = 0
		lastSpeaker, lastScore = "", it.score
		if it.isNew {
			lastSpeaker = it.speaker
		}
	}
	return parts
}
