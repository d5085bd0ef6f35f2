package service

import (
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// Packing a question-aware context (a request with a query).
//
// The layers, in priority order (each only in the room the ones before it
// left):
//
//  1. the summary (or, in mode evict, the eviction note in its place);
//  2. the memories that match the query (at most maxRecalledMemories,
//     best first);
//  3. earlier excerpts: the turns before the verbatim window that best
//     match the query (at most RecallTurns matches), each with the
//     neighbours that make it readable (the turn before a short match, and
//     the answer after a question), in transcript order;
//  4. the verbatim window, newest first, down to the newest excerpt.
//
// Layers 2 and 3 together take at most recallShare of a budget, so that a
// short budget still holds the live conversation: what they leave of their
// share goes to the window. The window's lower end is fixed before the
// excerpts are chosen (as if they used their whole share), so an excerpt
// is never also a window turn, and the window, which can only be longer,
// stops above the newest excerpt.
const (
	// recallShare is the most of a budget (chars and tokens alike) that
	// memories and excerpts take together, in percent.
	recallShare = 50
	// maxRecalledMemories bounds the memories a context recalls.
	maxRecalledMemories = 5
	// fragmentChars: a matching turn shorter than this is recalled with
	// the turn before it (an answer like "Yes, on Tuesday." says nothing
	// without its question).
	fragmentChars = 40
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

// share is recallShare of a limit (0: unlimited stays unlimited).
func share(limit int) int {
	if limit == 0 {
		return 0
	}
	return max(1, limit*recallShare/100)
}

// lineCost is a prompt line's cost: its characters with the newline, and
// its tokens.
func (s *server) lineCost(line string) (int, int) {
	return client.LineChars(line), s.tokens.Count(line)
}

// packQuery fills out (created by assemble, with nothing charged yet)
// with the question-aware layers. cp has the stream's tail applied; tail
// holds the turns that tail added.
func (s *server) packQuery(ctx context.Context, r client.ContextRequest, cp *state.Session, checkpointed bool, tail map[uint64]*events.Turn, out *client.Context) error {
	out.Query = r.Query
	total := &meter{maxChars: r.BudgetChars, maxTokens: r.BudgetTokens}
	recalled := &meter{maxChars: share(r.BudgetChars), maxTokens: share(r.BudgetTokens)}

	// 1. The summary, or the eviction note in its place.
	s.packSummary(cp, out, func(chars, tokens int) bool { return take(chars, tokens, total) })

	terms := queryTerms(r.Query)
	var h *indexHandle
	if len(terms) > 0 {
		var err error
		if h, err = s.recallIndex(ctx, r.Session); err != nil {
			// The builder still gets a context: the summary and the window,
			// and the reason nothing earlier could be searched.
			s.log.Warn().Str("event", "context_recall_failed").Str("session", r.Session).Err(err).
				Msg("question-aware context without earlier excerpts: the session's turns could not be searched")
			out.Missing = &client.MissingTurns{From: 0, To: cp.Cursor, Reason: "the session's turns could not be read: " + err.Error()}
		} else {
			defer h.release()
		}
	}

	// 2. Memories that match the query.
	var mems []client.RecalledItem
	if h != nil {
		mems = s.packMemories(h, terms, total, recalled)
	}

	// The window's lower end if the excerpts take their whole share.
	windowTurn := func(i int) (client.ContextTurn, error) { return s.windowTurn(ctx, cp, tail, h, i) }
	floor := cp.Cursor
	if r.BudgetChars != 0 || r.BudgetTokens != 0 {
		reserve := *total
		if reserve.maxChars != 0 {
			reserve.maxChars -= max(0, recalled.maxChars-recalled.chars)
		}
		if reserve.maxTokens != 0 {
			reserve.maxTokens -= max(0, recalled.maxTokens-recalled.tokens)
		}
		floor = cp.Total
		hc, ht := s.lineCost(client.RecentHeader)
		if take(hc, ht, &reserve) {
			for i := len(cp.Turns) - 1; i >= 0; i-- {
				ct, err := windowTurn(i)
				if err != nil {
					return err
				}
				if !take(ct.Chars, ct.Tokens, &reserve) {
					break
				}
				floor = ct.Index
			}
		}
	}

	// 3. Earlier excerpts.
	var excerpts []client.RecalledItem
	if h != nil {
		excerpts = s.packExcerpts(h, cp, checkpointed, terms, r.RecallTurns, floor, total, recalled, out)
	}
	out.Recalled = append(mems, excerpts...)

	// 4. The verbatim window, newest first, above the newest excerpt.
	lo := cp.Cursor
	if n := len(excerpts); n > 0 {
		lo = max(lo, excerpts[n-1].Index+1)
	}
	header := len(out.Recalled) > 0
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
	out.Chars, out.Tokens = total.chars, total.tokens
	return nil
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
			t, ok = h.r.idx.docs[d].turn, true
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

// packExcerpts chooses the earlier turns for the query among those before
// floor (the processor's index), charges them, and returns them in
// transcript order.
func (s *server) packExcerpts(h *indexHandle, cp *state.Session, checkpointed bool, terms []string, want int, floor int64, total, recalled *meter, out *client.Context) []client.RecalledItem {
	rp := h.r
	a := rp.anchor(cp, checkpointed)
	if !a.inEpoch {
		// A reset the checkpoint has not applied: the replay's epoch is
		// newer, and the context's turns are all after it.
		floor = min(floor, cp.Cursor)
	}
	x := rp.idx
	lo, n := rp.live(), x.below(floor-a.offset)
	if gone := min(rp.missing(a), floor); gone > 0 {
		out.Missing = &client.MissingTurns{From: 0, To: gone,
			Reason: "no longer in stream " + s.layout.In + " (removed by its max-age or by hand): these turns cannot be recalled"}
	}
	out.RecallSearched = max(0, n-lo)
	hits := x.search(terms, lo, n)

	chosen := map[int]*client.RecalledItem{}
	headerCharged := false
	item := func(d int, score float64, neighbour bool) client.RecalledItem {
		doc := x.docs[d]
		it := client.RecalledItem{Kind: client.RecalledTurn, TurnID: doc.turn.TurnID, Index: doc.raw + a.offset, Seq: doc.seq,
			Speaker: doc.turn.Speaker, Role: doc.turn.Role, At: doc.turn.At.UTC(), Score: score, Neighbour: neighbour, Text: doc.turn.Text}
		it.Chars, it.Tokens = s.lineCost(it.Line())
		return it
	}
	// charge takes a unit of items if it fits, with the section's header
	// before the first.
	charge := func(unit []client.RecalledItem) bool {
		var chars, tokens int
		if !headerCharged {
			chars, tokens = s.lineCost(client.ExcerptsHeader)
		}
		for _, it := range unit {
			chars += it.Chars
			tokens += it.Tokens
		}
		if !take(chars, tokens, total, recalled) {
			return false
		}
		headerCharged = true
		return true
	}
	matches := 0
	for _, hit := range hits {
		if matches >= want {
			break
		}
		if it, ok := chosen[hit.doc]; ok {
			// Already in as a neighbour: now a match in its own right.
			it.Score, it.Neighbour = hit.score, false
			matches++
			continue
		}
		unit := []client.RecalledItem{item(hit.doc, hit.score, false)}
		docs := []int{hit.doc}
		text := x.docs[hit.doc].turn.Text
		if p := hit.doc - 1; p >= 0 && chosen[p] == nil &&
			(utf8.RuneCountInString(text) < fragmentChars || strings.HasSuffix(strings.TrimSpace(x.docs[p].turn.Text), "?")) {
			unit = append([]client.RecalledItem{item(p, 0, true)}, unit...)
			docs = append([]int{p}, docs...)
		}
		if nx := hit.doc + 1; nx < n && chosen[nx] == nil && strings.HasSuffix(strings.TrimSpace(text), "?") {
			unit = append(unit, item(nx, 0, true))
			docs = append(docs, nx)
		}
		if !charge(unit) {
			// Without its neighbours, the match alone may still fit.
			if len(unit) == 1 || !charge(unit[slices.Index(docs, hit.doc):][:1]) {
				out.RecallDropped++
				continue
			}
			unit, docs = unit[slices.Index(docs, hit.doc):][:1], []int{hit.doc}
		}
		for i, d := range docs {
			chosen[d] = &unit[i]
		}
		matches++
	}
	keys := make([]int, 0, len(chosen))
	for d := range chosen {
		keys = append(keys, d)
	}
	slices.Sort(keys)
	items := make([]client.RecalledItem, 0, len(keys))
	for _, d := range keys {
		items = append(items, *chosen[d])
	}
	return items
}
