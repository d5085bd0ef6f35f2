package service

import (
	"cmp"
	"container/heap"
	"context"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// Packing a question-aware context under a budget by value: every
// candidate (the summary's sentences, the memories that match, the
// earlier turns that match with the neighbours that make them readable,
// and the verbatim turns before the last exchange) competes for the room
// in one ranking, by what it is expected to add to the reply for this
// question per character it costs there; the last exchange is always
// kept (a very long turn of it as its last sentences, fitLast).
//
// What a candidate adds is estimated as the expected number of words it
// shows that the reply does not show yet and that answer the question:
// its relevance (the question's terms it holds, each weighed by its idf
// in the session, halved for each chosen item that already holds it:
// evidence for an aspect already covered is worth less, so the question's
// other aspects get their turn; a summary sentence, which speaks of the
// whole session, at least summaryWeight of an average question term)
// times its novelty (its content terms not yet in the reply: a fact
// shown as a memory is not worth showing again as an excerpt, nor one
// excerpt that repeats another). Its cost is the characters it adds: its
// line, and the section header or the day label it brings when it is the
// first of its section or of its day. A match's value also rises for each
// chosen match near it, in turns and in time (nearBoost: evidence comes
// in stretches, of one sitting). Otherwise both only fall as items are
// chosen, so the greedy choice by value per character is evaluated
// lazily: a candidate's last value bounds its current one, and the bounds
// are recomputed when a header or a label is paid (costs fall then) and,
// for the matches in reach of a chosen one, when it is chosen
// (raiseNear).
//
// An excerpt that no longer fits whole competes again as the largest
// smaller form of it that fits (fallback), valued as that form.
//
// The room the valued candidates leave (when none left holds a word of
// the question, nor a summary sentence a word the reply lacks, or none
// fits) goes first to the turns next to the chosen matches (up to
// fillReach turns away and said in the match's sitting, the best
// matches' first: an answer spans a few turns, and the turns around a
// match say more about the question than any other), then to the
// summary's other sentences, the densest in new words first, then to
// older verbatim turns, newest first, then to the turns further from
// the matches (up to fillFar away), and last to every unfolded turn shown
// nowhere yet, newest first (fillUnfolded): room left unused holds
// nothing.
const (
	// fillReach is how far from a chosen match the room left looks for
	// turns first, and fillFar how far once the summary and the window
	// have had theirs (a budget the matches do not fill).
	fillReach = 3
	fillFar   = 8
	// coveredDecay is what a question term is worth again for each chosen
	// item that already holds it.
	coveredDecay = 0.5
	// excerptPool bounds the matching turns considered, and the matching
	// memories, in rank order, as a multiple of the matches a reply may
	// recall.
	excerptPool = 3
	// maxKeptTermIDs: a request's term numbering of more terms is not
	// kept for the next (clearing it would cost more than it saves).
	maxKeptTermIDs = 8192
	// summaryWeight is what a word a summary sentence adds is worth at
	// least, as a share of an average question term (as weighed now):
	// that of a feedback term, a word related to the question by the
	// session it comes from.
	summaryWeight = feedbackWeight
)

// Kinds of candidates.
const (
	candSummary = iota
	candMemory
	candExcerpt
	candWindow
)

// vcand is a candidate of the value packing.
type vcand struct {
	kind int
	// i is the summary's sentence, the window turn's position in
	// cp.Turns, or the match's position in the picker's hits.
	i int
	// mem and turn are a memory's and a window turn's (pointers: most
	// candidates are neither).
	mem  *client.RecalledItem
	turn *client.ContextTurn
	// terms are the content terms (interned) the candidate would show,
	// and weighted the positions in the packer's weights of the question
	// and feedback terms among them; for an excerpt, of its unit as last
	// built.
	terms    []int32
	weighted []int
	unit     []client.RecalledItem
	docs     []int
	// cost is an excerpt's cost as last computed, and costAt what it
	// depends on besides its unit: whether the excerpts' header is paid,
	// and the chosen docs just before and after the unit (their labels).
	cost   int
	costAt [3]int
	bound  float64
	at     int // position in the heap
	// smaller: an excerpt's unit is a smaller form of it (the match
	// alone, or cut) that competes again by its own value (fallback).
	smaller bool
	// day is an excerpt's match's day.
	day int64
}

// valuePacker is one request's value packing.
type valuePacker struct {
	s     *server
	ctx   context.Context
	pk    *picker
	cp    *state.Session
	tail  map[uint64]*events.Turn
	h     *indexHandle
	total *meter

	ids   map[string]int32
	shown []bool // interned terms the reply shows
	// seen marks the terms intern met in the text at hand (gen).
	seen []uint32
	gen  uint32
	// weight is the weight of each question and feedback term, covered
	// how many chosen items hold it, termAt its position (and id).
	weight  []float64
	termAt  map[string]int
	covered []int
	// now is each weight lowered for its coverage (value).
	now []float64
	// dayPow[k] is dayDecay to the power k.
	dayPow []float64
	// speakers are the speakers' names' terms.
	speakers map[string][]int32

	sents       []string
	sentTaken   []bool
	summaryAny  bool
	summaryLine int // tokens of the summary line as packed

	mems      []client.RecalledItem
	memHeader bool
	// excerpted are the turns (by turn id) chosen as excerpts: a memory
	// stated in one of them is not shown too.
	excerpted map[string]bool

	window     []client.ContextTurn // newest first
	windowNext int                  // position in cp.Turns of the next older window turn, -1 if none
	windowLow  int64                // Index of the oldest window turn packed
	limit      int                  // docs below the window
	days       map[int64]bool       // days with an excerpt

	heap vheap
}

// packByValue packs out (see packQuery) under a budget by value, with
// the picker pk of the question's matches.
func (s *server) packByValue(ctx context.Context, cp *state.Session, tail map[uint64]*events.Turn, h *indexHandle, pk *picker, total *meter, out *client.Context) error {
	ids, _ := s.termIDs.Get().(map[string]int32)
	if ids == nil {
		ids = make(map[string]int32, 1024)
	}
	defer func() {
		if len(ids) <= maxKeptTermIDs {
			clear(ids)
			s.termIDs.Put(ids)
		}
	}()
	v := &valuePacker{s: s, ctx: ctx, pk: pk, cp: cp, tail: tail, h: h, total: total,
		ids: ids, termAt: map[string]int{}, speakers: map[string][]int32{}, windowNext: -1, windowLow: cp.Total, days: map[int64]bool{}, excerpted: map[string]bool{}}
	v.weigh()

	// The last exchange, under the window's header.
	hc, ht := s.lineCost(client.RecentHeader)
	header := take(hc, ht, total)
	next := len(cp.Turns) - 1
	if header {
		for ; next >= 0 && len(v.window) < lastExchange; next-- {
			ct, err := s.windowTurn(ctx, cp, tail, h, next)
			if err != nil {
				return err
			}
			ct = s.fitLast(ct, pk.budget)
			if !take(ct.Chars, ct.Tokens, total) {
				break
			}
			v.window = append(v.window, ct)
			v.windowLow = ct.Index
			v.show(v.intern(ct.Text))
		}
	}
	v.windowNext = next
	v.limit = min(pk.n, pk.x.below(v.windowLow-pk.a.offset))

	// The candidates. The views of the matches among them are made on
	// another core meanwhile, while the summary's and the memories' are
	// weighed.
	ahead := make([]int, 0, excerptPool*pk.want)
	for i := 0; i < len(pk.hits) && i < excerptPool*pk.want; i++ {
		if d := pk.hits[i].doc; d < v.limit && !pk.isShown(d) {
			ahead = append(ahead, d)
		}
	}
	viewsMade := pk.x.viewAhead(ahead)
	defer pk.x.aheadDone()
	if !cp.SummaryIsNote && cp.Summary != "" {
		v.sents = sentences(cp.Summary)
		v.sentTaken = make([]bool, len(v.sents))
		for i, sent := range v.sents {
			v.push(&vcand{kind: candSummary, i: i, terms: v.intern(sent)})
		}
	}
	mems := s.rankMemories(h, pk.terms, true)
	for i := range mems[:min(len(mems), excerptPool*pk.want)] {
		m := &mems[i]
		v.push(&vcand{kind: candMemory, mem: m, terms: append(v.intern(m.Text), v.dayTerm(m.At)...)})
	}
	viewsMade()
	for i := 0; i < len(pk.hits) && i < excerptPool*pk.want; i++ {
		if pk.hits[i].doc < v.limit && pk.relevant(pk.hits[i].doc) {
			v.push(&vcand{kind: candExcerpt, i: i, day: day(pk.x.turn(pk.hits[i].doc).At)})
		}
	}
	if err := v.pushWindow(); err != nil {
		return err
	}

	// The greedy choice.
	for v.heap.Len() > 0 {
		c := v.heap[0]
		value, cost, ok := v.evaluate(c)
		if !ok || value <= 0 {
			heap.Pop(&v.heap)
			continue
		}
		if r := value / float64(cost); r < c.bound {
			c.bound = r
			heap.Fix(&v.heap, 0)
			continue
		}
		heap.Pop(&v.heap)
		refresh, err := v.choose(c)
		if err != nil {
			return err
		}
		if refresh {
			v.rebound()
		}
	}

	// The room left: the turns next to the matches, the summary's other
	// sentences, then older turns. The window's header is only shown
	// between recalled lines and turns.
	v.fillNeighbours(1, fillReach)
	v.fillSummary()
	recalled := len(v.mems) > 0 || len(pk.chosen) > 0
	if header && !recalled {
		total.chars, total.tokens = total.chars-hc, total.tokens-ht
		header = false
	}
	if err := v.fillWindow(); err != nil {
		return err
	}
	v.fillNeighbours(fillReach+1, fillFar)
	v.fillUnfolded()
	if header && len(v.window) == 0 {
		total.chars, total.tokens = total.chars-hc, total.tokens-ht
	}

	// The reply.
	switch {
	case v.summaryAny:
		text := v.summaryText()
		layer := &client.SummaryLayer{Text: client.SummaryPrefix + text, Summary: text, Version: cp.Version,
			CoveredThroughTurn: cp.CoveredThrough, Trimmed: v.countTaken() < len(v.sents)}
		layer.Chars, layer.Tokens = client.LineChars(layer.Text), v.summaryLine
		out.Summary = layer
	case cp.SummaryIsNote && cp.Summary != "":
		// Mode evict's note says what left the window; it is kept if it
		// fits what the rest left.
		s.packSummary(cp, out, func(chars, tokens int) bool { return take(chars, tokens, total) })
	case cp.Summary != "":
		out.SummaryDropped = true
	}
	for i := len(v.window) - 1; i >= 0; i-- {
		out.Turns = append(out.Turns, v.window[i])
	}
	out.DroppedTurns = int(v.windowLow - cp.Cursor)
	if len(v.window) == 0 {
		out.DroppedTurns = len(cp.Turns)
	}
	out.Recalled = bySpeaker(v.mems)
	out.Recalled = append(out.Recalled, pk.items()...)
	out.RecallDropped = pk.dropped()
	out.RecallSearched = pk.searched(v.windowLow)
	out.Chars, out.Tokens = total.chars, total.tokens
	return nil
}

// weigh sets the weights of the question's terms (their idf among the
// searched turns) and of its feedback terms (feedbackWeight of theirs).
func (v *valuePacker) weigh() {
	pk := v.pk
	docs := float64(max(1, pk.n-pk.lo))
	// The weighted terms are interned first: a term's id is its position
	// in v.weight.
	add := func(t string, scale float64) {
		if _, ok := v.termAt[t]; ok {
			return
		}
		_, df := pk.x.postingsIn(t, pk.lo, pk.n)
		v.termAt[t] = len(v.weight)
		v.ids[t] = int32(len(v.weight))
		v.shown = append(v.shown, false)
		v.weight = append(v.weight, scale*math.Log(1+(docs-df+0.5)/(df+0.5)))
		v.covered = append(v.covered, 0)
		v.now = append(v.now, v.weight[len(v.weight)-1]) // not covered yet
	}
	for _, t := range pk.terms {
		add(t, 1)
	}
	for _, t := range pk.feedback {
		add(t, feedbackWeight)
	}
}

// id is term t's id.
func (v *valuePacker) id(t string) int32 {
	id, ok := v.ids[t]
	if !ok {
		id = int32(len(v.ids))
		v.ids[t] = id
		v.shown = append(v.shown, false)
	}
	return id
}

// intern is text's distinct content terms, interned.
func (v *valuePacker) intern(text string) []int32 {
	var out []int32
	v.gen++
	v.s.an.each(text, func(t string) {
		if t == "" {
			return
		}
		id := v.id(t)
		for int(id) >= len(v.seen) {
			v.seen = append(v.seen, 0)
		}
		if v.seen[id] != v.gen {
			v.seen[id] = v.gen
			out = append(out, id)
		}
	})
	return out
}

// unitTerms are the content terms of an excerpt unit's lines, and the
// day they were said.
func (v *valuePacker) unitTerms(unit []client.RecalledItem, docs []int) []int32 {
	var out []int32
	for i, it := range unit {
		if it.Trimmed {
			out = append(out, v.intern(it.Text)...)
			continue
		}
		// The turn's whole text: its terms are known (in its order: the
		// value sums their weights in that order, the same every time).
		dt := v.pk.docTerms(docs[i])
		for s := dt.terms; s != ""; {
			var t string
			t, s = nextTerm(s)
			out = append(out, v.id(t))
		}
		for _, t := range dt.named {
			out = append(out, v.id(t))
		}
	}
	for i := range unit {
		// The line shows who said it, as a memory's does.
		if i == 0 || unit[i].Speaker != unit[i-1].Speaker {
			out = append(out, v.speakerTerms(unit[i].Speaker)...)
		}
	}
	if len(unit) > 0 {
		out = append(out, v.dayTerm(unit[0].At)...)
	}
	return out
}

// speakerTerms are a speaker's name's terms, interned once.
func (v *valuePacker) speakerTerms(name string) []int32 {
	if ids, ok := v.speakers[name]; ok {
		return ids
	}
	ids := v.intern(name)
	v.speakers[name] = ids
	return ids
}

// dayTerm is the day at (UTC) as a term of its own: an excerpt or a
// memory tells when it was said, which the summary and the window do not
// (none for a zero time).
func (v *valuePacker) dayTerm(at time.Time) []int32 {
	if at.IsZero() {
		return nil
	}
	y, m, d := at.UTC().Date()
	return []int32{v.id(string([]byte{0, byte(y >> 8), byte(y), byte(m), byte(d)}))}
}

// weighted is the positions in v.weight of the terms among ids (a
// weighted term's id is its position).
func (v *valuePacker) weighted(ids []int32) []int {
	var out []int
	for _, id := range ids {
		if int(id) < len(v.weight) {
			out = append(out, int(id))
		}
	}
	return out
}

// show records terms as shown by the reply.
func (v *valuePacker) show(terms []int32) {
	for _, id := range terms {
		v.shown[id] = true
	}
}

func (v *valuePacker) push(c *vcand) {
	if c.kind != candExcerpt {
		c.weighted = v.weighted(c.terms)
	}
	value, cost, ok := v.evaluate(c)
	if !ok {
		return
	}
	c.bound = value / float64(cost)
	heap.Push(&v.heap, c)
}

// pushWindow makes the next older window turn a candidate, if the window
// may grow.
func (v *valuePacker) pushWindow() error {
	if v.windowNext < 0 || v.cp.Cursor+int64(v.windowNext) <= v.pk.newest {
		return nil
	}
	ct, err := v.s.windowTurn(v.ctx, v.cp, v.tail, v.h, v.windowNext)
	if err != nil {
		return err
	}
	v.push(&vcand{kind: candWindow, i: v.windowNext, turn: &ct, terms: v.intern(ct.Text)})
	return nil
}

// evaluate is c's value and cost now; ok is false when c can no longer
// be packed.
func (v *valuePacker) evaluate(c *vcand) (value float64, cost int, ok bool) {
	pk := v.pk
	switch c.kind {
	case candSummary:
		cost = runes(v.sents[c.i]) + 1
		if !v.summaryAny {
			cost += utf8.RuneCountInString(client.SummaryPrefix)
		}
	case candMemory:
		if c.mem.TurnID != "" && v.excerpted[c.mem.TurnID] {
			return 0, 0, false
		}
		cost = client.LineChars(c.mem.Line())
		if !v.memHeader {
			cost += client.LineChars(client.MemoriesHeader)
		}
	case candWindow:
		if c.i != v.windowNext || v.cp.Cursor+int64(c.i) <= pk.newest {
			return 0, 0, false
		}
		cost = c.turn.Chars
	case candExcerpt:
		hit := pk.hits[c.i]
		if pk.matches >= pk.want || hit.doc >= v.limit || pk.chosen[hit.doc] != nil {
			return 0, 0, false
		}
		stale := c.unit == nil
		for _, d := range c.docs {
			stale = stale || pk.chosen[d] != nil || d >= v.limit || d != hit.doc && pk.isShown(d)
		}
		if stale && c.smaller {
			return 0, 0, false
		}
		if stale {
			c.unit, c.docs = pk.unit(hit, v.limit)
			c.terms = v.unitTerms(c.unit, c.docs)
			c.weighted = v.weighted(c.terms)
		}
		if at := pk.around(c.docs); stale || at != c.costAt {
			c.cost, c.costAt = pk.unitChars(c.unit, c.docs, false), at
		}
		cost = c.cost
	}
	value = v.value(c)
	if c.kind == candSummary {
		// A sentence of the summary speaks of the session the question is
		// asked of, whether or not it holds a word of the question: each
		// word it adds is worth summaryWeight of an average question term.
		value = max(value, summaryWeight*v.meanWeight()*float64(v.novel(c)))
	}
	if c.kind == candExcerpt {
		if pk.hybrid && len(pk.hits) > 0 {
			// Fused with the turns nearest the question by meaning, which
			// may share no word with it: a match is worth at least its
			// rank's share of an average question term.
			value = max(value, pk.hits[c.i].score/pk.hits[0].score*v.meanWeight()*float64(v.novel(c)))
		}
		value *= v.dayDecay(pk.perDay[c.day])
		value *= math.Pow(nearBoost, float64(pk.nearMatches(pk.hits[c.i].doc)))
	}
	return value, max(1, cost), true
}

// dayDecay is dayDecay to the power k.
func (v *valuePacker) dayDecay(k int) float64 {
	for len(v.dayPow) <= k {
		v.dayPow = append(v.dayPow, math.Pow(dayDecay, float64(len(v.dayPow))))
	}
	return v.dayPow[k]
}

// around is what the cost of a unit of docs (consecutive, none chosen)
// depends on besides its lines (picker.relabel): whether the excerpts'
// header is paid, and the chosen docs just before and after it (-1:
// none).
func (p *picker) around(docs []int) [3]int {
	out := [3]int{0, -1, -1}
	if p.excerpts {
		out[0] = 1
	}
	at, _ := slices.BinarySearch(p.order, docs[0])
	if at > 0 {
		out[1] = p.order[at-1]
	}
	if at < len(p.order) {
		out[2] = p.order[at]
	}
	return out
}

// byNamed reports whether doc d was said by a speaker the question
// names (every term of the speaker's name is a query term).
func (p *picker) byNamed(d int) bool {
	sp := p.x.turn(d).Speaker
	named, ok := p.namedSpeaker[sp]
	if !ok {
		q := map[string]bool{}
		for _, t := range p.terms {
			q[t] = true
		}
		n := 0
		named = true
		p.s.an.each(sp, func(t string) {
			if t != "" {
				n++
				named = named && q[t]
			}
		})
		named = named && n > 0
		if p.namedSpeaker == nil {
			p.namedSpeaker = map[string]bool{}
		}
		p.namedSpeaker[sp] = named
	}
	return named
}

// value is c's relevance times its novelty (see the top of the file).
func (v *valuePacker) value(c *vcand) float64 {
	var rel float64
	for _, at := range c.weighted {
		rel += v.now[at]
	}
	if rel == 0 {
		return 0
	}
	return rel * float64(v.novel(c))
}

// novel is how many of c's terms the reply does not show yet.
func (v *valuePacker) novel(c *vcand) int {
	n := 0
	for _, id := range c.terms {
		if !v.shown[id] {
			n++
		}
	}
	return n
}

// meanWeight is the mean weight of the question's own terms now (each
// lowered for the chosen items that hold it).
func (v *valuePacker) meanWeight() float64 {
	n := len(v.pk.terms)
	if n == 0 {
		return 0
	}
	var w float64
	for at := range n {
		w += v.now[at]
	}
	return w / float64(n)
}

// choose packs c if it fits; refresh reports that costs of other
// candidates fell (a header or a day label was paid).
func (v *valuePacker) choose(c *vcand) (refresh bool, err error) {
	pk := v.pk
	switch c.kind {
	case candSummary:
		if !v.takeSentence(c.i) {
			return false, nil
		}
		refresh = len(v.sents) > 1 && v.countTaken() == 1
	case candMemory:
		it := *c.mem
		it.Chars, it.Tokens = v.s.lineCost(it.Line())
		chars, tokens := it.Chars, it.Tokens
		if !v.memHeader {
			hc, ht := v.s.lineCost(client.MemoriesHeader)
			chars, tokens = chars+hc, tokens+ht
		}
		if !take(chars, tokens, v.total) {
			return false, nil
		}
		refresh = !v.memHeader
		v.memHeader = true
		v.mems = append(v.mems, it)
		pk.show(it)
	case candWindow:
		if !take(c.turn.Chars, c.turn.Tokens, v.total) {
			v.windowNext = -1 // the window stays contiguous
			return false, nil
		}
		v.window = append(v.window, *c.turn)
		v.windowLow = c.turn.Index
		v.windowNext--
		v.limit = min(v.limit, pk.x.below(v.windowLow-pk.a.offset))
		if err := v.pushWindow(); err != nil {
			return false, err
		}
	case candExcerpt:
		hit := pk.hits[c.i]
		if pk.isShown(hit.doc) {
			return false, nil // a memory chosen since says it
		}
		first := !pk.excerpts
		unit, docs := c.unit, c.docs
		if !pk.charge(unit, docs, false, v.total) {
			// A smaller form of it may still fit: it competes again, by
			// what it shows per character.
			if !v.fallback(c) {
				pk.tried[hit.doc] = true
			}
			return false, nil
		}
		d := day(pk.x.turn(hit.doc).At)
		refresh = first || !v.days[d]
		v.days[d] = true
		pk.add(unit, docs, hit.doc)
		for _, it := range unit {
			v.excerpted[it.TurnID] = true
		}
		if !refresh {
			v.raiseNear(hit.doc)
		}
		if v.windowNext >= 0 && v.cp.Cursor+int64(v.windowNext) <= pk.newest {
			v.windowNext = -1
		}
	}
	v.show(c.terms)
	for _, at := range c.weighted {
		v.covered[at]++
		v.now[at] = v.weight[at] * math.Pow(coveredDecay, float64(v.covered[at]))
	}
	return refresh, nil
}

// fallback makes c, an excerpt whose unit no longer fits, the largest
// smaller form of it that fits the room's characters (the match without
// its neighbours, then the sentences of it that hold a query or feedback
// term, then its one best sentence) and pushes it back to compete by its
// own value per character: a one-sentence cut of a long turn shows far
// fewer new words than the whole turn it was valued as. False when no
// smaller form fits.
func (v *valuePacker) fallback(c *vcand) bool {
	pk := v.pk
	d := pk.hits[c.i].doc
	alone := c.unit[slices.Index(c.docs, d)]
	var forms []client.RecalledItem
	if len(c.unit) > 1 {
		forms = append(forms, alone)
	}
	if !alone.Trimmed {
		if text, ok := pk.cut(d); ok {
			f := alone
			f.Text, f.Trimmed = text, true
			forms = append(forms, f)
		}
	}
	if text, ok := pk.best(d); ok && text != alone.Text && (len(forms) == 0 || text != forms[len(forms)-1].Text) {
		f := alone
		f.Text, f.Trimmed = text, true
		forms = append(forms, f)
	}
	docs := []int{d}
	for _, f := range forms {
		f.Chars = client.LineChars(f.Line())
		unit := []client.RecalledItem{f}
		cost := pk.unitChars(unit, docs, false)
		if !v.total.fits(cost, 0) {
			continue
		}
		c.unit, c.docs, c.smaller = unit, docs, true
		c.terms = v.unitTerms(unit, docs)
		c.weighted = v.weighted(c.terms)
		c.cost, c.costAt = cost, pk.around(docs)
		v.push(c)
		return true
	}
	return false
}

func (v *valuePacker) countTaken() int {
	n := 0
	for _, t := range v.sentTaken {
		if t {
			n++
		}
	}
	return n
}

// summaryText is the summary's sentences taken, in their order, one
// space apart.
func (v *valuePacker) summaryText() string {
	var kept []string
	for i, t := range v.sentTaken {
		if t {
			kept = append(kept, v.sents[i])
		}
	}
	return strings.Join(kept, " ")
}

// takeSentence adds sentence i to the summary line if the line still
// fits.
func (v *valuePacker) takeSentence(i int) bool {
	chars := runes(v.sents[i]) + 1
	if !v.summaryAny {
		chars += utf8.RuneCountInString(client.SummaryPrefix)
	}
	if !v.total.fits(chars, 0) {
		return false
	}
	v.sentTaken[i] = true
	tokens := v.s.tokens.Count(client.SummaryPrefix + v.summaryText())
	if !take(chars, tokens-v.summaryLine, v.total) {
		v.sentTaken[i] = false
		return false
	}
	v.summaryLine = tokens
	v.summaryAny = true
	return true
}

// fillSummary adds the summary's sentences not taken, the most new words
// per character first, while they fit (room left is not worth keeping).
func (v *valuePacker) fillSummary() {
	tried := make([]bool, len(v.sents))
	for {
		best, bestValue := -1, 0.0
		for i, sent := range v.sents {
			if v.sentTaken[i] || tried[i] {
				continue
			}
			novel := 0
			for _, id := range v.intern(sent) {
				if !v.shown[id] {
					novel++
				}
			}
			if r := float64(novel) / float64(runes(sent)+1); best < 0 || r > bestValue {
				best, bestValue = i, r
			}
		}
		if best < 0 {
			return
		}
		tried[best] = true
		if v.takeSentence(best) {
			v.show(v.intern(v.sents[best]))
		}
	}
}

// fillNeighbours adds the substantive turns next to the chosen matches
// (not chosen, not shown as a memory, said in the match's sitting
// (sameSitting: in a chat of many days, the turns that open the next
// day's conversation say nothing of the evening before), and with more
// than a fifth of their words new to the reply: not one that repeats
// what it shows), the nearest first and among them the best matches'
// first, from to to turns away, while they fit (past maxMisses that do
// not, the room is as good as full). Its cost is one pass over those
// turns' terms: no comparison with every chosen excerpt.
func (v *valuePacker) fillNeighbours(from, to int) {
	pk := v.pk
	var matches []int
	for _, h := range pk.hits {
		if len(matches) == pk.matches {
			break
		}
		if it := pk.chosen[h.doc]; it != nil && !it.Neighbour {
			matches = append(matches, h.doc)
		}
	}
	misses := 0
	for dist := from; dist <= to; dist++ {
		for _, m := range matches {
			for _, d := range []int{m + dist, m - dist} {
				if misses >= maxMisses {
					return // the room is as good as full
				}
				if d < pk.lo || d >= v.limit || pk.chosen[d] != nil || pk.isShown(d) || !sameSitting(pk.chosen[m].At, pk.x.turn(d).At) {
					continue
				}
				dt := pk.docTerms(d)
				if !dt.substantive || pk.saysNothing(d) {
					continue
				}
				fresh := 0
				for s := dt.terms; s != ""; {
					var t string
					t, s = nextTerm(s)
					if id, ok := v.ids[t]; !ok || !v.shown[id] {
						fresh++
					}
				}
				if fresh*5 <= dt.n {
					continue // the reply says (nearly) all of it already
				}
				if !v.addNeighbour(d) {
					misses++
				}
			}
		}
	}
}

// fillWindow adds older verbatim turns, newest first, while they fit.
func (v *valuePacker) fillWindow() error {
	for v.windowNext >= 0 && v.cp.Cursor+int64(v.windowNext) > v.pk.newest {
		ct, err := v.s.windowTurn(v.ctx, v.cp, v.tail, v.h, v.windowNext)
		if err != nil {
			return err
		}
		if !take(ct.Chars, ct.Tokens, v.total) {
			return nil
		}
		v.window = append(v.window, ct)
		v.windowLow = ct.Index
		v.windowNext--
		v.limit = min(v.limit, v.pk.x.below(v.windowLow-v.pk.a.offset))
	}
	return nil
}

// fillUnfolded adds the unfolded turns (from the cursor on) shown
// nowhere yet, newest first, as excerpts while they fit (past maxMisses
// that do not, the room is as good as full): no summary holds them, so a
// reply with room to spare leaves none of them out, whatever its
// distance from a match, its sitting or what the reply already shows.
func (v *valuePacker) fillUnfolded() {
	pk := v.pk
	misses := 0
	for d := v.limit - 1; d >= max(pk.lo, pk.x.below(v.cp.Cursor-pk.a.offset)) && misses < maxMisses; d-- {
		if pk.chosen[d] != nil || pk.isShown(d) {
			continue
		}
		if !v.addNeighbour(d) {
			misses++
		}
	}
}

// addNeighbour adds doc d as a neighbour excerpt if it fits, and reports
// whether it did.
func (v *valuePacker) addNeighbour(d int) bool {
	pk := v.pk
	unit := []client.RecalledItem{pk.item(d, 0, true)}
	if !pk.charge(unit, []int{d}, false, v.total) {
		return false
	}
	pk.chosen[d] = &unit[0]
	at, _ := slices.BinarySearch(pk.order, d)
	pk.order = slices.Insert(pk.order, at, d)
	pk.newest = max(pk.newest, unit[0].Index)
	v.show(v.unitTerms(unit, []int{d}))
	return true
}

// raiseNear recomputes the bounds of the matches in reach of a chosen
// match d (their value rose: nearBoost), so that the lazy choice sees
// them at their new value.
func (v *valuePacker) raiseNear(d int) {
	raised := false
	for _, c := range v.heap {
		if c.kind != candExcerpt || abs(v.pk.hits[c.i].doc-d) > nearReach {
			continue
		}
		if value, cost, ok := v.evaluate(c); ok {
			c.bound = value / float64(cost)
		} else {
			c.bound = -1
		}
		raised = true
	}
	if raised {
		heap.Init(&v.heap)
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// rebound recomputes every candidate's bound (costs fell).
func (v *valuePacker) rebound() {
	for _, c := range v.heap {
		if value, cost, ok := v.evaluate(c); ok {
			c.bound = value / float64(cost)
		} else {
			c.bound = -1
		}
	}
	heap.Init(&v.heap)
}

// vheap is the candidates by bound, highest first.
type vheap []*vcand

func (h vheap) Len() int           { return len(h) }
func (h vheap) Less(i, j int) bool { return h[i].bound > h[j].bound }
func (h vheap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
func (h *vheap) Push(x any) {
	c := x.(*vcand)
	c.at = len(*h)
	*h = append(*h, c)
}
func (h *vheap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// bySpeaker orders the chosen memories as a per-speaker view: each
// speaker's facts together (the speakers in the order their first fact
// was chosen), each speaker's in the order they were stated, so that what
// a person said before they changed it comes before what replaced it.
func bySpeaker(mems []client.RecalledItem) []client.RecalledItem {
	first := map[string]int{}
	for i, m := range mems {
		if _, ok := first[m.Speaker]; !ok {
			first[m.Speaker] = i
		}
	}
	out := slices.Clone(mems)
	slices.SortStableFunc(out, func(a, b client.RecalledItem) int {
		return cmp.Or(cmp.Compare(first[a.Speaker], first[b.Speaker]), a.At.Compare(b.At))
	})
	return out
}
