package service

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Recall (seed 001: "evicted turns stay searchable") answers "which turns
// of this session match this query?" by reading the session's turns from
// the inbound stream and ranking them with BM25.
//
// How a turn gets its index: the session's inbound events are applied to
// a fresh state.Session with Session.Apply, the processor's own rules, so
// validation, dedup by turn_id, end and reset are exactly what the
// processor applied, and a turn's index is the Total it was added at. Only
// the events since the session's last valid reset control are read: a
// reset forgets the transcript and the dedup memory, so nothing before it
// can change a later index. (A session that was ever configured with a
// reset policy, daily or idle, is replayed from its start instead: Apply
// may reset it on an event's time, which depends on earlier events.) A
// reset met during the replay, by control or by policy, starts the
// transcript over. The replayed count is anchored to the checkpoint
// (its Total at its LastSeq), so that the scope boundary stays right even
// when the oldest turns are gone from the stream (--max-age).
//
// Cost, per request, with no index kept between requests:
//
//   - one stream info and one scan of the session's control subject (to
//     find the last reset): O(control events), usually a handful;
//   - one scan of the session's inbound events from the last reset (or
//     the start, with a reset policy) up to
//     the checkpoint's LastSeq (scope evicted) or the end of the stream
//     (scope all), through an ephemeral pull consumer (memory storage,
//     deleted afterwards) that pipelines recallFetch messages per round
//     trip: O(events since the last reset) messages, decoding and
//     tokenizing each turn once;
//   - memory: 4 bytes and a dedup hash per turn scanned, plus the turns
//     that contain a query term (their text is needed for the reply);
//   - the ranking: O(matching turns × query terms) + a sort.
//
// On an in-process server a 10,000-turn session answers in 60-75 ms
// (BenchmarkRecall10k); over a network the scan is bound by throughput,
// not round trips. A scope evicted request on a session whose cursor is 0
// reads nothing but the controls. The scan is capped at maxRecallScan
// events; a longer session since its last reset is refused with a 500
// that says so, instead of tying up the endpoint.
const (
	// maxRecallScan bounds the inbound events one recall reads.
	maxRecallScan = 250_000
	// recallFetch is how many messages the scan asks for at a time.
	recallFetch = 1000
	// recallIdle bounds the wait for the next message of a scan the
	// stream info said exists; it only trips if messages disappear
	// mid-scan (max-age, a purge).
	recallIdle = 5 * time.Second
	// maxQueryTerms bounds the distinct terms of a query.
	maxQueryTerms = 64
	// BM25 parameters (the usual defaults).
	bm25K1 = 1.2
	bm25B  = 0.75
)

func (s *server) handleRecall(ctx context.Context, req micro.Request) {
	started := time.Now()
	var r client.RecallRequest
	err := decode(req.Data(), &r, func() string { return r.Session })
	var reply *client.Recall
	if err == nil {
		if verr := client.CheckRecall(&r); verr != nil {
			err = badRequest("bad request: %v", verr)
		} else {
			rctx, cancel := context.WithTimeout(ctx, requestTimeout)
			reply, err = s.recall(rctx, r)
			cancel()
		}
	}
	s.respond(req, client.EndpointRecall, r.Session, started, reply, err)
}

// candidate is a turn that contains at least one query term.
type candidate struct {
	raw  int64 // index as replayed, before anchoring
	turn *events.Turn
	tf   []int32 // per query term
	len  int32   // tokens in the turn
}

// recall answers a checked request.
func (s *server) recall(ctx context.Context, r client.RecallRequest) (*client.Recall, error) {
	terms := queryTerms(r.Query)
	if len(terms) == 0 {
		return nil, badRequest("bad request: field \"query\": expected at least one word (letters or digits), got %q", r.Query)
	}
	cp, rev, err := s.store.Load(ctx, r.Session)
	if err != nil {
		return nil, checkpointError(r.Session, err)
	}
	out := &client.Recall{V: events.Version, Session: r.Session, Query: r.Query, Scope: r.Scope, Results: []client.RecallResult{}}

	info, err := s.in.Info(ctx, jetstream.WithSubjectFilter(s.subj.InSession(r.Session)))
	if err != nil {
		return nil, internal(err, "reading stream %s info", s.layout.In)
	}
	streamLast := info.State.LastSeq
	var stored uint64
	for _, n := range info.State.Subjects {
		stored += n
	}
	if rev == 0 && stored == 0 {
		return nil, unknownSession(r.Session, "has no checkpoint and no events in stream "+s.layout.In)
	}

	if r.Scope == client.RecallScopeEvicted && rev > 0 && cp.Cursor == 0 {
		return out, nil // nothing evicted in this epoch, nor after a later reset
	}

	// The last valid reset control, and whether a configure ever set a
	// reset policy (daily, idle): then Apply may also reset the session on
	// an event's time, which only a replay from the start can tell.
	var (
		resetSeq uint64
		policy   bool
	)
	if info.State.Subjects[s.subj.In(r.Session, events.KindControl)] > 0 {
		err := s.scanInbound(ctx, s.subj.In(r.Session, events.KindControl), 1, streamLast, func(seq uint64, kind string, data []byte) bool {
			in, err := events.DecodeInbound(kind, r.Session, data, events.Limits{})
			switch {
			case err != nil:
			case in.Control.Op == events.OpReset:
				resetSeq = seq
			case in.Control.Op == events.OpConfigure && in.Control.Config != nil:
				if p := in.Control.Config.ResetPolicy; p == events.ResetDaily || p == events.ResetIdle {
					policy = true
				}
			}
			return true
		})
		if err != nil {
			return nil, err
		}
	}
	// Without a reset policy, nothing before the last reset control can
	// change a later index (a reset forgets the transcript and the dedup
	// memory): start there. With one, replay from the start.
	start := uint64(1)
	if !policy {
		start = max(resetSeq, 1)
	}
	// Scope evicted needs nothing after the checkpoint, unless a reset
	// there (a control, or a policy's) moved the cursor back to 0.
	end := streamLast
	if r.Scope == client.RecallScopeEvicted && rev > 0 && cp.LastSeq >= resetSeq && !policy {
		end = cp.LastSeq
	}

	// Replay [start, end] with the processor's rules.
	sess := state.New(r.Session)
	var (
		lens        []int32             // tokens per turn, by replayed index; -1: a repeated turn_id
		cands       []candidate         // turns with at least one query term
		seen        = map[uint64]bool{} // every turn_id hash, beyond the processor's window
		anchorTotal = int64(-1)         // replayed Total at cp.LastSeq
		lastReset   uint64              // sequence of the last reset the replay applied
		applied     int
		scanned     int
		tooLong     bool
	)
	termIdx := make(map[string]int, len(terms))
	for i, t := range terms {
		termIdx[t] = i
	}
	err = s.scanInbound(ctx, s.subj.InSession(r.Session), start, end, func(seq uint64, kind string, data []byte) bool {
		if scanned++; scanned > maxRecallScan {
			tooLong = true
			return false
		}
		if anchorTotal < 0 && seq > cp.LastSeq {
			anchorTotal = sess.Total
		}
		in, err := events.DecodeInbound(kind, r.Session, data, events.Limits{})
		if err != nil {
			return true // dead-lettered by the processor
		}
		epoch := sess.Epoch
		effect, err := sess.Apply(seq, in)
		if err != nil {
			return true // refused: the session had ended
		}
		applied++
		if sess.Epoch != epoch {
			// Reset (by control or by policy): the transcript starts over.
			lastReset = seq
			lens, cands = lens[:0], cands[:0]
			clear(seen)
		}
		if effect != state.EffectTurn {
			return true
		}
		raw := sess.Total - 1
		h := state.HashID(in.Turn.TurnID)
		if seen[h] {
			// Counted again by the processor (its dedup memory is bounded)
			// but the same turn: return it once, at its first index.
			lens = append(lens, -1)
			return true
		}
		seen[h] = true
		c := candidate{raw: raw, turn: in.Turn}
		var n int32
		forEachToken(in.Turn.Speaker+" "+in.Turn.Tool+" "+in.Turn.Text, func(tok string) {
			n++
			if i, ok := termIdx[tok]; ok {
				if c.tf == nil {
					c.tf = make([]int32, len(terms))
				}
				c.tf[i]++
			}
		})
		lens = append(lens, n)
		if c.tf != nil {
			c.len = n
			cands = append(cands, c)
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if tooLong {
		return nil, internal(errors.New("too many events"), "session %q has more than %d inbound events since its last reset; recall reads at most that many per request", r.Session, maxRecallScan)
	}
	if rev == 0 && applied == 0 {
		return nil, unknownSession(r.Session, "has no checkpoint and no valid events in stream "+s.layout.In)
	}
	if anchorTotal < 0 {
		anchorTotal = sess.Total
	}
	// The cursor applies only if the checkpoint is of the current epoch
	// (it covers the last reset); a reset it has not applied yet moves the
	// cursor to 0. Without a checkpoint nothing has been folded.
	inEpoch := rev > 0 && cp.LastSeq >= lastReset
	if inEpoch {
		out.Cursor = cp.Cursor
	}
	// offset maps a replayed index to the processor's: 0 unless the
	// stream lost the session's oldest turns (or the processor counted
	// differently, e.g. with other size limits).
	var offset int64
	if inEpoch {
		offset = cp.Total - anchorTotal
		if offset != 0 {
			s.log.Warn().Str("event", "recall_index_offset").Str("session", r.Session).Int64("checkpoint_total", cp.Total).
				Int64("replayed_total", anchorTotal).Msg("replayed turn count differs from the checkpoint; indices anchored to the checkpoint")
		}
	}
	// Scope: replayed indices [0, limit).
	limit := int64(len(lens))
	if r.Scope == client.RecallScopeEvicted {
		limit = min(limit, max(0, out.Cursor-offset))
	}

	// BM25 over the turns in scope.
	var docs, totalLen int64
	for _, n := range lens[:limit] {
		if n >= 0 {
			docs++
			totalLen += int64(n)
		}
	}
	out.Searched = int(docs)
	if docs == 0 {
		return out, nil
	}
	avgLen := float64(totalLen) / float64(docs)
	df := make([]int64, len(terms))
	inScope := cands[:0]
	for _, c := range cands {
		if c.raw < limit {
			inScope = append(inScope, c)
			for i, f := range c.tf {
				if f > 0 {
					df[i]++
				}
			}
		}
	}
	idf := make([]float64, len(terms))
	for i := range terms {
		idf[i] = math.Log(1 + (float64(docs)-float64(df[i])+0.5)/(float64(df[i])+0.5))
	}
	type scored struct {
		c     candidate
		score float64
	}
	ranked := make([]scored, 0, len(inScope))
	for _, c := range inScope {
		var score float64
		norm := bm25K1 * (1 - bm25B + bm25B*float64(c.len)/avgLen)
		for i, f := range c.tf { // terms in a fixed order: the sum is deterministic
			if f > 0 {
				tf := float64(f)
				score += idf[i] * tf * (bm25K1 + 1) / (tf + norm)
			}
		}
		ranked = append(ranked, scored{c, score})
	}
	slices.SortFunc(ranked, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.c.raw, a.c.raw))
	})
	for _, sc := range ranked[:min(len(ranked), r.Limit)] {
		t := sc.c.turn
		out.Results = append(out.Results, client.RecallResult{
			TurnID: t.TurnID, Index: sc.c.raw + offset, At: t.At.UTC(), Speaker: t.Speaker, Role: t.Role, Text: t.Text,
			Score: sc.score,
		})
	}
	return out, nil
}

// scanInbound reads the messages on filter with stream sequence in
// [from, to], in stream order, until fn returns false, through an ephemeral pull consumer that is
// deleted afterwards. The caller knows at least one message matches at or
// after from (the stream info said so), so the wait for the next message
// is bounded by recallIdle only against messages vanishing mid-scan.
func (s *server) scanInbound(ctx context.Context, filter string, from, to uint64, fn func(seq uint64, kind string, data []byte) bool) error {
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     filter,
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 30 * time.Second, // if the delete below is lost
	}
	cons, err := s.in.CreateConsumer(ctx, cfg)
	if err != nil {
		return internal(err, "creating a consumer on stream %s for %s", s.layout.In, filter)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.in.DeleteConsumer(dctx, cons.CachedInfo().Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			s.log.Debug().Err(err).Str("event", "recall_consumer_delete_failed").Msg("recall consumer left to expire")
		}
	}()
	it, err := cons.Messages(jetstream.PullMaxMessages(recallFetch))
	if err != nil {
		return internal(err, "reading stream %s for %s", s.layout.In, filter)
	}
	defer it.Stop()
	for {
		nctx, cancel := context.WithTimeout(ctx, recallIdle)
		m, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return internal(ctx.Err(), "reading stream %s for %s (the session is too long to scan within %s?)", s.layout.In, filter, requestTimeout)
			}
			return internal(err, "reading stream %s for %s: messages disappeared mid-scan (max-age or a purge?)", s.layout.In, filter)
		}
		md, err := m.Metadata()
		if err != nil {
			return internal(err, "metadata of a message on stream %s", s.layout.In)
		}
		seq := md.Sequence.Stream
		if seq > to {
			return nil
		}
		if _, kind, err := s.subj.ParseIn(m.Subject()); err == nil && !fn(seq, kind, m.Data()) {
			return nil
		}
		if seq >= to || md.NumPending == 0 {
			return nil
		}
	}
}

// queryTerms are the query's distinct normalised tokens, in order of
// first appearance (at most maxQueryTerms).
func queryTerms(q string) []string {
	var terms []string
	seen := map[string]bool{}
	forEachToken(q, func(tok string) {
		if !seen[tok] && len(terms) < maxQueryTerms {
			seen[tok] = true
			terms = append(terms, tok)
		}
	})
	return terms
}

// forEachToken calls fn with each normalised word token of text: maximal
// runs of letters and digits, lower-cased; an apostrophe inside a word is
// dropped ("don't" → "dont") and a possessive 's with it ("Bob's" →
// "bob"); a plural s is folded ("wins" → "win", not "class" or "bus"), so
// that a query and a turn meet on the same word in most forms.
func forEachToken(text string, fn func(string)) {
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			fn(foldPlural(b.String()))
			b.Reset()
		}
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(unicode.ToLower(r))
		case (r == '\'' || r == '’') && b.Len() > 0 && i < len(text):
			next, nsize := utf8.DecodeRuneInString(text[i:])
			if !unicode.IsLetter(next) && !unicode.IsDigit(next) {
				flush()
				continue
			}
			if next == 's' || next == 'S' {
				after, _ := utf8.DecodeRuneInString(text[i+nsize:])
				if i+nsize >= len(text) || !unicode.IsLetter(after) && !unicode.IsDigit(after) {
					i += nsize // possessive: drop the 's
				}
			}
		default:
			flush()
		}
	}
	flush()
}

// foldPlural strips a plural "s" from words of four or more letters
// ("wins", "games"), leaving "ss", "us" and "is" endings alone.
func foldPlural(tok string) string {
	if len(tok) < 4 || tok[len(tok)-1] != 's' {
		return tok
	}
	switch tok[len(tok)-2] {
	case 's', 'u', 'i':
		return tok
	}
	return tok[:len(tok)-1]
}
