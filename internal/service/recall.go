package service

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Recall (evicted turns stay searchable) answers "which turns
// of this session match this query?" from the session's replay (a BM25
// index over its turns since the last reset, index_replay.go and
// index.go), anchored to its checkpoint: the replayed count at the
// checkpoint's LastSeq is its Total, so that the scope boundary stays
// right even when the oldest turns are gone from the stream (--max-age).
// The question-aware context (pack.go) searches the same replay.
//
// Cost, per request: building the replay (scanReplay: one scan of the
// session's events since its last reset, decoding and indexing each
// turn once), then the ranking: O(postings of the query terms) + a sort.
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

// recall answers a checked request: the session's replay (recallIndex),
// anchored to its checkpoint, searched within the scope.
func (s *server) recall(ctx context.Context, r client.RecallRequest) (*client.Recall, error) {
	terms := s.an.queryTerms(r.Query)
	if len(terms) == 0 {
		return nil, badRequest("bad request: field \"query\": expected at least one word (letters or digits), got %q", r.Query)
	}
	cp, rev, err := s.store.Load(ctx, r.Session)
	if err != nil {
		return nil, checkpointError(r.Session, err)
	}
	out := &client.Recall{V: events.Version, Session: r.Session, Query: r.Query, Scope: r.Scope, Results: []client.RecallResult{}}
	if r.Scope == client.RecallScopeEvicted && rev > 0 && cp.Cursor == 0 {
		return out, nil // nothing evicted in this epoch, nor after a later reset
	}
	rp, err := s.recallIndex(ctx, r.Session, nil)
	if err != nil {
		return nil, err
	}
	defer rp.release()
	if rev == 0 && rp.r.applied == 0 {
		return nil, unknownSession(r.Session, "has no checkpoint and no valid events in stream "+s.layout.In)
	}
	a := rp.r.anchor(cp, rev > 0)
	if a.offset < 0 {
		s.log.Warn().Str("event", "recall_index_offset").Str("session", r.Session).Int64("checkpoint_total", cp.Total).
			Int64("offset", a.offset).Msg("replayed turn count differs from the checkpoint; indices anchored to the checkpoint")
	}
	out.Cursor = a.cursor
	// Scope: raw indices [0, limit).
	lo, n := rp.r.live(), rp.r.idx.ndocs()
	if r.Scope == client.RecallScopeEvicted {
		n = rp.r.idx.below(a.cursor - a.offset)
	}
	out.Searched = max(0, n-lo)
	hits := rp.r.idx.search(terms, lo, n)
	for _, h := range hits[:min(r.Limit, len(hits))] {
		d, t := rp.r.idx.doc(h.doc), rp.r.idx.turn(h.doc)
		out.Results = append(out.Results, client.RecallResult{
			TurnID: t.TurnID, Index: d.raw + a.offset, At: t.At.UTC(), Speaker: t.Speaker, Role: t.Role, Text: t.Text,
			Score: h.score,
		})
	}
	return out, nil
}

// scanReplay builds a session's replay from the inbound stream, reading
// only the events since its last valid reset control: a reset forgets the
// transcript and the dedup memory, so nothing before it can change a later
// index. (A session that was ever configured with a reset policy, daily
// or idle, is replayed from its start instead: Apply may reset it on an
// event's time, which depends on earlier events.)
//
// Cost: one stream info, one scan of the session's control subject (to
// find the last reset; usually a handful of events), and one scan of its
// events since, through an ephemeral pull consumer that pipelines
// recallFetch messages per round trip, decoding and indexing each turn
// once. It reads at most maxRecallScan events; a longer session since
// its last reset is refused with a 500 that says so.
func (s *server) scanReplay(ctx context.Context, session string) (*replay, error) {
	subjects, streamLast, err := broker.SessionStored(ctx, s.in, s.subj, session)
	if err != nil {
		return nil, internal(err, "reading stream %s info", s.layout.In)
	}
	var (
		resetSeq uint64
		policy   bool
	)
	// The subjects its controls are stored under, in every layout.
	var controls []string
	for subject := range subjects {
		if _, kind, err := s.subj.ParseIn(subject); err == nil && kind == events.KindControl {
			controls = append(controls, subject)
		}
	}
	if len(controls) > 0 {
		err := s.scanInbound(ctx, controls, 1, streamLast, func(_ string, seq uint64, at time.Time, kind string, data []byte) bool {
			// A reset the processor rejected (dated beyond the clock
			// skew) must not cut the replay short.
			in, err := events.DecodeInbound(kind, session, data, s.adm.Limits)
			if err == nil {
				err = in.CheckClock(at, s.adm.MaxClockSkew)
			}
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
	start := uint64(1)
	if !policy {
		start = max(resetSeq, 1)
	}
	rp := newReplay(s.an, s.adm, session, start)
	var stored uint64
	for _, n := range subjects {
		stored += n
	}
	if stored == 0 {
		rp.next = streamLast + 1
		return rp, nil
	}
	// Room for every stored event as a turn: no regrowth while building.
	rp.idx.docs.reserve(int(stored))
	rp.idx.turns = make([]*events.Turn, 0, stored)
	if err := s.catchUp(ctx, rp, streamLast); err != nil {
		return nil, err
	}
	return rp, nil
}

// catchUp applies the session's events from rp.next through to (at most
// maxRecallScan of them).
func (s *server) catchUp(ctx context.Context, rp *replay, to uint64) error {
	if to < rp.next {
		return nil
	}
	scanned := 0
	tooLong := false
	err := s.scanInbound(ctx, s.subj.InSessionAll(rp.session), rp.next, to, func(_ string, seq uint64, at time.Time, kind string, data []byte) bool {
		if scanned++; scanned > maxRecallScan {
			tooLong = true
			return false
		}
		rp.apply(seq, at, kind, data)
		return true
	})
	if err != nil {
		return err
	}
	if tooLong {
		return internal(errors.New("too many events"), "session %q has more than %d inbound events to read at once; recall reads at most that many per request", rp.session, maxRecallScan)
	}
	// Everything on the session's subjects up to to was read (the
	// sequences after the last one of the session belong to others).
	rp.next = max(rp.next, to+1)
	return nil
}

// scanInbound reads the messages on filters with stream sequence in
// [from, to], in stream order, until fn returns false (with the session
// and kind of each message's subject), through an ephemeral pull consumer that is
// deleted afterwards. The caller knows at least one message matches at or
// after from (the stream info said so), so the wait for the next message
// is bounded by recallIdle (s.scanIdle if set) only against messages
// vanishing mid-scan.
func (s *server) scanInbound(ctx context.Context, filters []string, from, to uint64, fn func(session string, seq uint64, at time.Time, kind string, data []byte) bool) error {
	filter := strings.Join(filters, ", ") // for errors
	cfg := jetstream.ConsumerConfig{
		FilterSubjects:    filters,
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
	// One timer for the scan, reset at each message (a context per
	// message cost a timer allocation each): idle for recallIdle, it
	// stops the iterator, and Next fails.
	wait := cmp.Or(s.scanIdle, recallIdle)
	idle := time.AfterFunc(wait, it.Stop)
	defer idle.Stop()
	for {
		idle.Reset(wait)
		m, err := it.Next(jetstream.NextContext(ctx))
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
		if session, kind, err := s.subj.ParseIn(m.Subject()); err == nil && !fn(session, seq, md.Timestamp, kind, m.Data()) {
			return nil
		}
		if seq >= to || md.NumPending == 0 {
			return nil
		}
	}
}
