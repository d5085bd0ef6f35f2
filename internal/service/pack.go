package service

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// Packing a question-aware context (a request with a query).
//
// The layers, in prompt order:
//
//  1. the summary (or, in mode evict, the eviction note in its place);
//  2. the memories that match the query;
//  3. earlier excerpts: the turns before the verbatim window that match
//     the query (at most RecallTurns matches), each with the neighbours
//     that make it readable (the turn before a short match, and the
//     answer after a question), in transcript order, the excerpts of each
//     day labelled once with the day (client.ExcerptRun: a turn's cost
//     depends on the turn before it);
//  4. the verbatim window, newest first, down to the newest excerpt.
//
// Under a budget, with terms to search, every candidate competes in one
// ranking by its value per character (packByValue, pack_value.go); the
// last exchange (the lastExchange newest turns) is always kept, a turn of
// it longer than 1/lastTurnShare of the budget as its last sentences
// (fitLast): a 900-character speech would otherwise take half of a
// 2,000-character budget whatever the question, and its end is what the
// next reply answers.
//
// Under a budget with nothing to search (a query of stop words only, or
// turns that could not be read) the window keeps the last exchange and
// windowShare of the budget, the summary is kept whole when it costs at
// most summaryShare of the budget (else the sentences of it that match,
// or none), and the window takes the rest.
//
// Without a budget every layer is packed whole (at most
// maxRecalledMemories memories, best first), as without a query but with
// the recalled layers between the summary and the window.
const (
	// lastExchange is how many of the newest turns a budget always keeps.
	lastExchange = 2
	// windowShare is the share of a budget (chars and tokens alike) the
	// window keeps before anything is recalled, in percent.
	windowShare = 10
	// summaryShare is the most of a budget the whole summary takes, in
	// percent: past it the summary would crowd out what matches the
	// question.
	summaryShare = 65
	// maxRecalledMemories bounds the memories a context recalls.
	maxRecalledMemories = 5
	// fragmentChars: a matching turn shorter than this is recalled with
	// the turn before it (an answer like "Yes, on Tuesday." says nothing
	// without its question).
	fragmentChars = 40
	// maxMisses bounds the matches a pass tries after the room is full.
	maxMisses = 20
	// lastTurnShare: under a budget, with terms to search, a turn of the
	// last exchange whose line costs more than 1/lastTurnShare of the
	// budget is shown as its last sentences within that share (fitLast).
	lastTurnShare = 8
)

// meter charges lines against limits (0: unlimited).
type meter struct{ chars, tokens, maxChars, maxTokens int }

func (m *meter) fits(chars, tokens int) bool {
	return (m.maxChars == 0 || m.chars+chars <= m.maxChars) && (m.maxTokens == 0 || m.tokens+tokens <= m.maxTokens)
}

// take charges chars and tokens to every meter if they fit all of them.
func take(chars, tokens int, ms ...*meter) bool {
	for _, m := range ms {
		if !m.fits(chars, tokens) {
			return false
		}
	}
	for _, m := range ms {
		m.chars += chars
		m.tokens += tokens
	}
	return true
}

// percent is pct percent of limit (0: unlimited stays unlimited).
func percent(limit, pct int) int {
	if limit == 0 {
		return 0
	}
	return max(1, limit*pct/100)
}

// lineCost is a prompt line's cost: its characters with the newline, and
// its tokens.
func (s *server) lineCost(line string) (int, int) {
	return client.LineChars(line), s.tokens.Count(line)
}

// packQuery fills out (created by assemble, with nothing charged yet)
// with the question-aware layers. cp has the stream's tail applied; tail
// holds the turns that tail added; early is the session's packed index
// as unpacked since the request arrived, if it was (recallIndex).
func (s *server) packQuery(ctx context.Context, r client.ContextRequest, cp *state.Session, checkpointed bool, tail map[uint64]*events.Turn, early *earlyUnpack, out *client.Context) error {
	out.Query = r.Query
	total := &meter{maxChars: r.BudgetChars, maxTokens: r.BudgetTokens}
	budgeted := total.maxChars != 0 || total.maxTokens != 0

	terms := s.an.queryTerms(r.Query)
	var h *indexHandle
	if len(terms) > 0 {
		var err error
		if h, err = s.recallIndex(ctx, r.Session, early); err != nil {
			// The builder still gets a context: the summary and the window,
			// and the reason nothing earlier could be searched.
			s.log.Warn().Str("event", "context_recall_failed").Str("session", r.Session).Err(err).
				Msg("question-aware context without earlier excerpts: the session's turns could not be searched")
			out.Missing = &client.MissingTurns{From: 0, To: cp.Cursor, Reason: "the session's turns could not be read: " + err.Error()}
		} else {
			defer h.release()
		}
	}
	var pk *picker
	if h != nil {
		pk = s.newPicker(ctx, h, cp, checkpointed, r.Query, terms, r.RecallTurns, out)
	}

	if budgeted && pk != nil {
		// One ranking of every candidate by value (pack_value.go).
		if err := s.packByValue(ctx, cp, tail, h, pk, total, out); err != nil {
			return err
		}
		if out.Chars == 0 {
			return s.tooSmall(ctx, r, cp, tail, h)
		}
		return nil
	}

	// 1. The summary, or the eviction note in its place.
	if budgeted && !cp.SummaryIsNote && cp.Summary != "" {
		s.packSummarySections(cp, out, pk, total)
	} else {
		s.packSummary(cp, out, func(chars, tokens int) bool { return take(chars, tokens, total) })
	}

	// The window's lower end (floor) and the recalled layers' room: the
	// window first keeps its share of the budget, at least the last
	// exchange; the recalled layers may have the rest.
	windowTurn := func(i int) (client.ContextTurn, error) { return s.windowTurn(ctx, cp, tail, h, i) }
	floor := cp.Cursor
	recalled := &meter{}
	if budgeted {
		keep := meter{maxChars: percent(total.maxChars, windowShare), maxTokens: percent(total.maxTokens, windowShare)}
		rest := *total
		floor = cp.Total
		hc, ht := s.lineCost(client.RecentHeader)
		kept := 0
		if take(hc, ht, &rest) {
			keep.chars, keep.tokens = hc, ht
			for i := len(cp.Turns) - 1; i >= 0; i-- {
				ct, err := windowTurn(i)
				if err != nil {
					return err
				}
				if kept >= lastExchange && !keep.fits(ct.Chars, ct.Tokens) || !take(ct.Chars, ct.Tokens, &rest) {
					break
				}
				keep.chars, keep.tokens = keep.chars+ct.Chars, keep.tokens+ct.Tokens
				floor = ct.Index
				kept++
			}
		}
		if total.maxChars != 0 {
			recalled.maxChars = max(1, total.maxChars-rest.chars)
		}
		if total.maxTokens != 0 {
			recalled.maxTokens = max(1, total.maxTokens-rest.tokens)
		}
	}

	// 2. Memories that match the query.
	var mems []client.RecalledItem
	if h != nil {
		mems = s.packMemories(h, terms, total, recalled)
		for _, m := range mems {
			pk.show(m)
		}
	}

	// 3. Earlier excerpts.
	if pk != nil {
		pk.fill(floor, false, total, recalled)
	}
	recalledAny := len(mems) > 0 || pk != nil && len(pk.chosen) > 0

	// 4. The verbatim window, newest first, above the newest excerpt.
	lo := cp.Cursor
	if pk != nil {
		lo = max(lo, pk.newest+1)
	}
	header := recalledAny
	picked := make([]client.ContextTurn, 0, len(cp.Turns))
	for i := len(cp.Turns) - 1; i >= 0; i-- {
		if cp.Cursor+int64(i) < lo {
			out.DroppedTurns = i + 1
			break
		}
		ct, err := windowTurn(i)
		if err != nil {
			return err
		}
		chars, tokens := ct.Chars, ct.Tokens
		if header {
			hc, ht := s.lineCost(client.RecentHeader)
			chars, tokens = chars+hc, tokens+ht
		}
		if !take(chars, tokens, total) {
			out.DroppedTurns = i + 1
			break
		}
		header = false
		picked = append(picked, ct)
	}
	for i := len(picked) - 1; i >= 0; i-- {
		out.Turns = append(out.Turns, picked[i])
	}

	// 5. Room the window did not need goes to more excerpts, from before
	// its first turn.
	start := cp.Total
	if len(out.Turns) > 0 {
		start = out.Turns[0].Index
	}
	if pk != nil && (total.maxChars != 0 || total.maxTokens != 0) {
		pk.fill(min(start, lo), !recalledAny && len(out.Turns) > 0, total)
	}
	out.Recalled = mems
	if pk != nil {
		out.Recalled = append(out.Recalled, pk.items()...)
		out.RecallDropped = pk.dropped()
		out.RecallSearched = pk.searched(start)
	}
	out.Chars, out.Tokens = total.chars, total.tokens
	if out.Chars == 0 && (total.maxChars != 0 || total.maxTokens != 0) {
		return s.tooSmall(ctx, r, cp, tail, h)
	}
	return nil
}

// tooSmall is the 400 for a question-aware request whose budget holds
// nothing of a session that has something: it names the budget that is
// short and the smallest it must be (the newest turn's line, or the
// summary's if that is smaller). A session with nothing to pack yet gets
// its empty context.
func (s *server) tooSmall(ctx context.Context, r client.ContextRequest, cp *state.Session, tail map[uint64]*events.Turn, h *indexHandle) error {
	minChars, minTokens := 0, 0
	consider := func(chars, tokens int) {
		if minChars == 0 || chars < minChars {
			minChars, minTokens = chars, tokens
		}
	}
	if cp.Summary != "" {
		text := cp.Summary
		if !cp.SummaryIsNote {
			text = client.SummaryPrefix + text
		}
		consider(s.lineCost(text))
	}
	if n := len(cp.Turns); n > 0 {
		ct, err := s.windowTurn(ctx, cp, tail, h, n-1)
		if err != nil {
			return err
		}
		consider(ct.Chars, ct.Tokens)
	}
	switch {
	case minChars == 0:
		return nil
	case r.BudgetChars != 0 && minChars > r.BudgetChars:
		return badRequest("bad budget: field \"budget_chars\": expected at least %d for this session (its smallest layer, the newest turn or the summary, costs that), got %d", minChars, r.BudgetChars)
	default:
		return badRequest("bad budget: field \"budget_tokens\": expected at least %d for this session (its smallest layer, the newest turn or the summary, costs that), got %d", minTokens, r.BudgetTokens)
	}
}

// packSummary adds the summary layer (or mode evict's note) if take
// accepts its cost.
func (s *server) packSummary(cp *state.Session, out *client.Context, take func(chars, tokens int) bool) {
	switch {
	case cp.Summary == "":
	case cp.SummaryIsNote:
		note := evictionNote(cp)
		note.Chars, note.Tokens = s.lineCost(cp.Summary)
		if take(note.Chars, note.Tokens) {
			out.Evictions = append(out.Evictions, note)
		} else {
			out.EvictionDropped = true
		}
	default:
		text := client.SummaryPrefix + cp.Summary
		layer := &client.SummaryLayer{Text: text, Summary: cp.Summary, Version: cp.Version, CoveredThroughTurn: cp.CoveredThrough}
		layer.Chars, layer.Tokens = s.lineCost(text)
		if take(layer.Chars, layer.Tokens) {
			out.Summary = layer
		} else {
			out.SummaryDropped = true
		}
	}
}

// windowTurn is verbatim turn i (from the cursor) of cp, read from the
// tail, the index, or else the stream.
func (s *server) windowTurn(ctx context.Context, cp *state.Session, tail map[uint64]*events.Turn, h *indexHandle, i int) (client.ContextTurn, error) {
	ref := cp.Turns[i]
	t, ok := tail[ref.Seq]
	if !ok && h != nil {
		if d, found := h.r.idx.bySeq(ref.Seq); found {
			t, ok = h.r.idx.turn(d), true
		}
	}
	if !ok {
		var err error
		if t, err = s.readTurn(ctx, ref.Seq); err != nil {
			return client.ContextTurn{}, err
		}
	}
	ct := client.ContextTurn{
		Index: cp.Cursor + int64(i), TurnID: t.TurnID, Speaker: t.Speaker, Role: t.Role, Text: t.Text,
		At: t.At, Kind: t.Kind, Tool: t.Tool,
	}
	line := ct.Line()
	ct.Chars = client.LineChars(line)
	ct.Tokens = t.Tokens
	if ct.Tokens == 0 {
		ct.Tokens = s.tokens.Count(line)
	}
	return ct, nil
}

// fitLast is turn ct of the last exchange as a question-aware context
// under budget (characters, or four per token) shows it: whole when its
// line costs at most 1/lastTurnShare of the budget, else its last
// sentences that fit in that share after trimMark (tailText), marked
// Trimmed. The end of a long turn is kept because it is what was said
// last, what the next reply answers.
func (s *server) fitLast(ct client.ContextTurn, budget int) client.ContextTurn {
	limit := budget / lastTurnShare
	if budget == 0 || ct.Chars <= limit {
		return ct
	}
	label := ct.Chars - client.LineChars(ct.Text) // "Speaker: "
	text, ok := tailText(ct.Text, limit-label-1)
	if !ok {
		return ct
	}
	ct.Text, ct.Trimmed = text, true
	ct.Chars, ct.Tokens = s.lineCost(ct.Line())
	return ct
}

// picker chooses the earlier turns for a query: the best matches among
// the searched turns, each with the neighbours that make it readable, in
// rank order while they fit, at most want matches.
type picker struct {
	s        *server
	x        *turnIndex
	a        anchoring
	lo, n    int   // docs searched: [lo, n)
	hits     []hit // best first
	want     int
	matches  int
	chosen   map[int]*client.RecalledItem
	order    []int           // the chosen docs, in transcript order
	labelled map[int]bool    // chosen docs whose line carries the date and time (client.ExcerptRun)
	counted  map[lineKey]int // tokens of a doc's line, by lineKey
	// lineChars are the characters of those lines, by the same key, and
	// speakers those of the speakers' labels.
	lineChars map[lineKey]int
	speakers  speakerChars
	tried     map[int]bool // matches that did not fit
	newest    int64        // the newest chosen turn's index, -1 if none
	excerpts  bool         // the excerpts header is charged
	// shown are the turns (by turn id) the reply already shows as a
	// memory, and shownTerms those memories' content terms: not recalled
	// again as excerpts (show).
	shown      map[string]bool
	shownTerms []map[string]bool
	// terms are the query's terms and feedback the terms its ranking
	// added (index.expand): what an excerpt is trimmed around.
	terms, feedback []string
	// weights weighs terms and feedback for trimming (trimWeights).
	weights map[string]float64
	// when: the question asks when (asksWhen); resolved caches text's
	// relative dates resolved then, by doc.
	when     bool
	resolved map[int]string
	// content caches each considered doc's content terms (evidence.go).
	content map[int]*docTerms
	// forms caches item's texts and characters.
	forms map[itemKey]itemForm
	// relabelled is relabel's result's space.
	relabelled []relabelled
	// perDay counts the chosen matches by day (diversity).
	perDay map[int64]int
	// hybrid: the hits were fused with the turns nearest the question by
	// meaning, which may share no word with it.
	hybrid bool
	// nameTerms are the speakers' names as index terms (names).
	nameTerms map[string]bool
	// namedSpeaker caches byNamed by speaker.
	namedSpeaker map[string]bool
	// budget is the request's character budget (0: none), or its token
	// budget times four.
	budget int
}

func (s *server) newPicker(ctx context.Context, h *indexHandle, cp *state.Session, checkpointed bool, query string, terms []string, want int, out *client.Context) *picker {
	rp := h.r
	a := rp.anchor(cp, checkpointed)
	x := rp.idx
	lo, n := rp.live(), x.below(cp.Total-a.offset)
	if a.offset < 0 {
		// The replay counts more turns than the processor: they cannot be
		// placed on its transcript, so none is recalled rather than one at
		// a wrong index.
		s.log.Warn().Str("event", "recall_index_offset").Str("session", rp.session).Int64("checkpoint_total", cp.Total).
			Int64("offset", a.offset).Msg("replayed turn count exceeds the checkpoint's; no earlier turns recalled")
		a.inEpoch = false
	}
	if !a.inEpoch {
		// A reset after the context's view of the session: the replay is
		// of a newer epoch than the turns packed; recall nothing.
		n = lo
	}
	if gone := min(rp.missing(a), cp.Total); gone > 0 && a.inEpoch {
		out.Missing = &client.MissingTurns{From: 0, To: gone,
			Reason: "no longer in stream " + s.layout.In + " (removed by its max-age or by hand): these turns cannot be recalled"}
	}
	p := &picker{s: s, x: x, a: a, lo: lo, n: n, want: want, chosen: map[int]*client.RecalledItem{},
		labelled: map[int]bool{}, counted: map[lineKey]int{}, lineChars: map[lineKey]int{}, speakers: speakerChars{}, tried: map[int]bool{}, newest: -1,
		shown: map[string]bool{}, terms: terms, content: map[int]*docTerms{}, forms: map[itemKey]itemForm{}, perDay: map[int64]int{}}
	p.budget = cmp.Or(out.BudgetChars, 4*out.BudgetTokens)
	p.when = asksWhen(query)
	var hits []hit
	hits, p.feedback = x.expand(terms, lo, n)
	p.hits = passages(hits)
	if s.vec != nil && len(rp.vecs) > 0 && n > lo {
		// Hybrid: BM25 fused with the turns nearest to the question.
		if q, err := s.vec.embed(ctx, []string{query}); err != nil {
			s.vec.failures.Inc()
			s.log.Warn().Str("event", "recall_embeddings_failed").Str("session", rp.session).Err(err).
				Msg("question not embedded; ranked by BM25 alone")
		} else {
			p.hits = fuse(rp, p.hits, q[0], lo, n)
			p.hybrid = true
		}
	}
	return p
}

// searched is how many turns before the window starting at start the
// picker could choose from.
func (p *picker) searched(start int64) int {
	return max(0, min(p.n, p.x.below(start-p.a.offset))-p.lo)
}

func (p *picker) item(d int, score float64, neighbour bool) client.RecalledItem {
	doc, t := p.x.doc(d), p.x.turn(d)
	key := itemKey{d, neighbour}
	f, ok := p.forms[key]
	if !ok {
		f.text = p.text(d)
		if !neighbour {
			f.text, f.trimmed = p.trim(d)
		}
	}
	it := client.RecalledItem{Kind: client.RecalledTurn, TurnID: t.TurnID, Index: doc.raw + p.a.offset, Seq: doc.seq,
		Speaker: t.Speaker, Role: t.Role, At: t.At.UTC(), Score: score, Neighbour: neighbour, Text: f.text, Trimmed: f.trimmed}
	if !ok {
		f.chars, _ = p.speakers.line(&it, true)
		p.forms[key] = f
	}
	it.Chars = f.chars
	it.Tokens = -1 // counted once the characters fit (costing tokens is the expensive part)
	return it
}

// itemKey is a doc as a match (neighbour false) or a neighbour, and
// itemForm its item's text and line's characters (picker.item: the same
// every time for a picker).
type itemKey struct {
	d         int
	neighbour bool
}

type itemForm struct {
	text    string
	trimmed bool
	chars   int
}

// lineCost is the cost of doc d's excerpt line (it), labelled with its
// date and time or not; tokens only if count (they are counted once per
// doc and form: whole, or trimmed to some of its sentences).
func (p *picker) lineCost(d int, it *client.RecalledItem, labelled, count bool) (chars, tokens int) {
	key := lineKey(d) << 33
	if labelled {
		key |= 1 << 32
	}
	if it.Trimmed {
		key |= lineKey(uint32(1 + len(it.Text)))
	}
	line := func() string {
		if labelled {
			return it.Line()
		}
		return it.RunLine()
	}
	chars, ok := p.lineChars[key]
	if !ok {
		if chars, ok = p.speakers.line(it, labelled); !ok {
			chars = client.LineChars(line())
		}
		p.lineChars[key] = chars
	}
	if !count {
		return chars, 0
	}
	tokens, ok = p.counted[key]
	if !ok {
		tokens = p.s.tokens.Count(line())
		p.counted[key] = tokens
	}
	return chars, tokens
}

// lineKey is a doc's line's key: the doc, labelled (1) or not (0), and
// whole (0) or trimmed (1 + the trimmed text's length: the forms of a
// doc's text differ in length), as d<<33 | labelled<<32 | trimmed.
type lineKey uint64

// relabel is what adding unit (docs, consecutive, in transcript order,
// none chosen) changes: each new line with its label, and the chosen
// line after it if its label changes. A line's label depends only on the
// line before it (client.ExcerptRun), so only the chosen turns around
// the unit are looked at. The slice is the picker's, valid until the
// next call.
func (p *picker) relabel(unit []client.RecalledItem, docs []int) []relabelled {
	out := p.relabelled[:0]
	at, _ := slices.BinarySearch(p.order, docs[0])
	var run client.ExcerptRun
	if at > 0 {
		_, run = run.Labels(*p.chosen[p.order[at-1]])
	}
	var lab bool
	for j, d := range docs {
		lab, run = run.Labels(unit[j])
		out = append(out, relabelled{doc: d, it: &unit[j], labelled: lab, isNew: true})
	}
	if at < len(p.order) {
		d := p.order[at]
		if lab, _ = run.Labels(*p.chosen[d]); lab != p.labelled[d] {
			out = append(out, relabelled{doc: d, it: p.chosen[d], labelled: lab})
		}
	}
	p.relabelled = out[:0]
	return out
}

// relabelled is a line that adding a unit changes (picker.relabel).
type relabelled struct {
	doc      int
	it       *client.RecalledItem
	labelled bool
	isNew    bool
}

// fill adds matches (and neighbours) with an index below floor while
// they fit every meter. The first excerpt also pays the section's header,
// and the window's header when recent says the window was packed without
// one.
func (p *picker) fill(floor int64, recent bool, ms ...*meter) {
	limit := min(p.n, p.x.below(floor-p.a.offset))
	charge := func(unit []client.RecalledItem, docs []int) bool { return p.charge(unit, docs, recent, ms...) }
	// Past maxMisses matches that did not fit, the rest (lower ranked)
	// are not worth their cost: the room is as good as full.
	misses := 0
	considered := map[int]bool{}
	for p.matches < p.want && misses < maxMisses {
		i := p.next(limit, considered)
		if i < 0 {
			break
		}
		considered[i] = true
		hit := p.hits[i]
		if it, ok := p.chosen[hit.doc]; ok {
			// Already in as a neighbour: now a match in its own right.
			it.Score, it.Neighbour = hit.score, false
			p.matches++
			p.perDay[day(it.At)]++
			delete(p.tried, hit.doc)
			continue
		}
		if !p.evidence(hit.doc) {
			continue
		}
		unit, docs := p.unit(hit, limit)
		if !charge(unit, docs) {
			// Without its neighbours, the match alone may still fit, or
			// the sentences of it that carry the match.
			at := slices.Index(docs, hit.doc)
			alone := unit[at : at+1]
			if len(unit) == 1 || !charge(alone, docs[at:at+1]) {
				cut := alone[0]
				if !cut.Trimmed {
					cut.Text, cut.Trimmed = p.cut(hit.doc)
					cut.Chars = client.LineChars(cut.Line())
				}
				if !cut.Trimmed || !charge([]client.RecalledItem{cut}, docs[at:at+1]) {
					p.tried[hit.doc] = true
					misses++
					continue
				}
				alone = []client.RecalledItem{cut}
			}
			unit, docs = alone, docs[at:at+1]
		}
		p.add(unit, docs, hit.doc)
	}
}

// unit is a match as the picker recalls it: with the turn before it when
// that turn asks a question, or when the match is a fragment and that
// turn was said in its sitting (the evening before says nothing of the
// next day's first words), and the turn after it (below limit) when the
// match asks one, each unless chosen, shown as a memory, or a turn that
// says nothing ("{vocalsound}").
func (p *picker) unit(hit hit, limit int) ([]client.RecalledItem, []int) {
	unit := []client.RecalledItem{p.item(hit.doc, hit.score, false)}
	docs := []int{hit.doc}
	text := p.text(hit.doc)
	// The cheap tests first: a neighbour's display text is made only for
	// a turn that may join the unit.
	if d := hit.doc - 1; d >= p.lo && p.chosen[d] == nil &&
		(runes(text) < fragmentChars && sameSitting(p.x.turn(d).At, p.x.turn(hit.doc).At) || p.asks(d)) &&
		!p.isShown(d) && !p.saysNothing(d) {
		unit = append([]client.RecalledItem{p.item(d, 0, true)}, unit...)
		docs = append([]int{d}, docs...)
	}
	if d := hit.doc + 1; d < limit && strings.HasSuffix(text, "?") && p.chosen[d] == nil && !p.isShown(d) && !p.saysNothing(d) {
		unit = append(unit, p.item(d, 0, true))
		docs = append(docs, d)
	}
	return unit, docs
}

// unitChars is what adding unit (docs, in transcript order, none chosen)
// costs in characters: its lines, the labels it changes, and the
// section's header if it is the first excerpt (and the window's when
// recent says the window was packed without one).
func (p *picker) unitChars(unit []client.RecalledItem, docs []int, recent bool) int {
	var chars int
	if !p.excerpts {
		chars = client.LineChars(client.ExcerptsHeader)
		if recent {
			chars += client.LineChars(client.RecentHeader)
		}
	}
	for _, c := range p.relabel(unit, docs) {
		n, _ := p.lineCost(c.doc, c.it, c.labelled, false)
		chars += n
		if !c.isNew {
			chars -= c.it.Chars
		}
	}
	return chars
}

// charge charges unit (docs, in transcript order, none chosen) to every
// meter if it fits, with the lines whose label it changes (unitChars).
func (p *picker) charge(unit []client.RecalledItem, docs []int, recent bool, ms ...*meter) bool {
	chars := p.unitChars(unit, docs, recent)
	for _, m := range ms {
		if !m.fits(chars, 0) {
			return false
		}
	}
	var tokens int
	if !p.excerpts {
		tokens = p.s.tokens.Count(client.ExcerptsHeader)
		if recent {
			tokens += p.s.tokens.Count(client.RecentHeader)
		}
	}
	changes := p.relabel(unit, docs)
	for _, c := range changes {
		_, n := p.lineCost(c.doc, c.it, c.labelled, true)
		tokens += n
		if !c.isNew {
			tokens -= c.it.Tokens
		}
	}
	if !take(chars, tokens, ms...) {
		return false
	}
	for _, c := range changes {
		c.it.Chars, c.it.Tokens = p.lineCost(c.doc, c.it, c.labelled, true)
		p.labelled[c.doc] = c.labelled
	}
	p.excerpts = true
	return true
}

// add records a charged unit (docs, in transcript order) whose match is
// doc match.
func (p *picker) add(unit []client.RecalledItem, docs []int, match int) {
	delete(p.tried, match)
	for i, d := range docs {
		p.chosen[d] = &unit[i]
		at, _ := slices.BinarySearch(p.order, d)
		p.order = slices.Insert(p.order, at, d)
		p.newest = max(p.newest, unit[i].Index)
	}
	p.matches++
	p.perDay[day(p.x.turn(match).At)]++
}

// next is the index in p.hits of the match to consider next, -1 if none:
// among the first diversityWindow of those not considered yet, below
// limit and not chosen as a match, the best by its score lowered by
// dayDecay for each match already chosen on its day (maximal marginal
// relevance across days: five excerpts should not all repeat one
// evening when the question's evidence is spread over several).
func (p *picker) next(limit int, considered map[int]bool) int {
	best, bestScore, seen := -1, 0.0, 0
	for i := 0; i < len(p.hits) && seen < diversityWindow; i++ {
		h := p.hits[i]
		if considered[i] || h.doc >= limit || p.chosen[h.doc] != nil && !p.chosen[h.doc].Neighbour {
			continue
		}
		seen++
		score := h.score * math.Pow(dayDecay, float64(p.perDay[day(p.x.turn(h.doc).At)]))
		if best < 0 || score > bestScore {
			best, bestScore = i, score
		}
	}
	return best
}

// items are the chosen turns in transcript order, each costed as its
// line in that order (labelled where it starts a run).
func (p *picker) items() []client.RecalledItem {
	out := make([]client.RecalledItem, 0, len(p.order))
	for _, d := range p.order {
		out = append(out, *p.chosen[d])
	}
	return out
}

// dropped is how many matches did not fit.
func (p *picker) dropped() int { return len(p.tried) }
