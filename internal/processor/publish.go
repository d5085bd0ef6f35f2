package processor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishSummary records a fold on the outbound stream without blocking
// the shard: a goroutine waits for the stream's ack (the summary exists
// only once it is stored) and hands the result back to the shard, which
// then moves the cursor (applyResult). The message id makes a re-publish
// of the same version a no-op. Until then the session counts as a fold in
// flight and keeps its lease, so nothing else can fold it, and a reset or
// end waits for the landing (abandon).
func (sh *shard) publishSummary(ls *live, r foldResult, latency time.Duration) {
	p := sh.p
	version := r.job.prevVer + 1
	ev := events.SummaryUpdated{
		V: events.Version, Session: ls.s.ID, Version: version, Summary: r.out.Summary,
		Cursor: r.job.to, CoveredThroughTurn: r.job.to - 1, From: r.fromT, To: r.toT,
		FoldedTurns: r.nTurns, FoldedNotes: r.nNotes,
		SummaryChars: utf8.RuneCountInString(r.out.Summary), SummaryTokens: r.sumToks, OriginalTokens: r.origToks,
		Mode: string(r.job.policy.Mode), Tier: string(r.out.Tier), Compactions: r.job.compactns + 1, Model: r.out.Model,
		LatencyMS: latency.Milliseconds(), At: p.clock.Now().UTC(),
	}
	sh.inFlight++ // the result comes back once more
	p.m.inFlight.Inc()
	ls.landing = true
	r.published = true
	back := func(err error) {
		if err != nil {
			r.err = fmt.Errorf("publish summary-updated v%d: %w", version, err)
		}
		sh.results <- r
	}
	data, err := json.Marshal(ev)
	if err != nil {
		go back(fmt.Errorf("encode: %w", err))
		return
	}
	msg := nats.NewMsg(p.subj.Out(ls.s.ID, events.KindSummary))
	msg.Data = data
	f, err := p.foldJS.PublishMsgAsync(msg, jetstream.WithMsgID(events.RecordID(ls.s.ID, events.KindSummary, version)))
	if err != nil {
		go back(err)
		return
	}
	timing := FoldTiming{Session: ls.s.ID, From: r.job.from, Triggered: r.job.started, LeaseSent: r.job.leaseSent, Leased: r.leased}
	go func() {
		select {
		case <-f.Ok():
			if p.foldObs != nil {
				timing.Published = time.Now()
				p.foldObs(timing)
			}
			back(nil)
		case err := <-f.Err():
			back(err)
		case <-time.After(10 * time.Second):
			back(errors.New("no acknowledgement in 10s"))
		}
	}()
}

// awaitLanding waits until a summary being published for ls has come back
// and landed (or failed), handling other fold results meanwhile.
func (sh *shard) awaitLanding(ls *live) {
	for ls.landing {
		sh.applyResult(<-sh.results)
	}
}

// writeLease starts the compare-and-set write of a checkpoint holding a new
// fold lease; the fold goroutine waits for it (awaitLease). A backlog that
// needs sealing is written synchronously (chunks first).
func (sh *shard) writeLease(ls *live) (*leaseWrite, bool) {
	if !sh.settle(ls) {
		return nil, false
	}
	if ls.s.NeedsSeal() {
		return nil, sh.checkpoint(ls)
	}
	f, err := sh.p.writer.SaveAsync(ls.s, ls.rev)
	if err != nil {
		return nil, sh.saved(ls, 0, err)
	}
	ls.writing = true
	sh.writes++
	return &leaseWrite{f: f, done: saveDone{ls: ls, id: ls.s.ID, rev: ls.rev, acks: len(ls.acks)}}, true
}

// leaseWrite is a lease checkpoint in flight.
type leaseWrite struct {
	f    jetstream.PubAckFuture
	done saveDone
}

// awaitLease runs on the fold goroutine: it waits for the lease write,
// hands its outcome to the shard like any pipelined checkpoint, and says
// whether the fold may go on.
func (sh *shard) awaitLease(lw *leaseWrite) error {
	if lw == nil {
		return nil // written synchronously
	}
	done := []saveDone{lw.done}
	sh.awaitSaves([]jetstream.PubAckFuture{lw.f}, done)
	if err := done[0].err; err != nil {
		return fmt.Errorf("write the fold lease: %w", err)
	}
	return nil
}

// FoldTiming is when a fold was triggered (the check that started it) and
// when its summary-updated was stored on the outbound stream.
type FoldTiming struct {
	Session   string
	From      int64 // first turn folded
	Triggered time.Time
	// LeaseSent: the lease write left (later than Triggered when the
	// session's previous checkpoint write was still in flight); Leased:
	// its acknowledgement came back and the fold went on.
	LeaseSent, Leased time.Time
	Published         time.Time
}

// ObserveFolds has fn called each time a summary-updated is stored, from
// the goroutine that saw the stream's ack (cmd/bench measures fold
// overhead with it). Set it before Run; fn must be quick and safe for
// concurrent use.
func (p *Processor) ObserveFolds(fn func(FoldTiming)) { p.foldObs = fn }

// publishLifecycle sends a lifecycle event without waiting: observers want
// it, but session state never depends on it.
func (sh *shard) publishLifecycle(ls *live, ev events.Lifecycle) {
	p := sh.p
	ev.V = events.Version
	ev.Session = ls.s.ID
	ev.At = p.clock.Now().UTC()
	ev.Cursor = ls.s.Cursor
	ev.TotalTurns = ls.s.Total
	data, err := json.Marshal(ev)
	if err != nil {
		p.log.Error().Err(err).Str("event", "encode_failed").Msg("encode lifecycle event")
		return
	}
	msg := nats.NewMsg(p.subj.Out(ls.s.ID, events.KindEvent))
	msg.Data = data
	if _, err := p.js.PublishMsgAsync(msg); err != nil {
		p.log.Warn().Err(err).Str("event", "publish_failed").Str("session", ls.s.ID).Str("type", ev.Type).Msg("lifecycle event not published")
	}
}

// reject keeps a bad inbound message on the dead-letter stream with the
// reason in headers, then acks it: it is never silently dropped, and it
// never blocks the session's later events.
func (sh *shard) reject(m inMsg, cause error) {
	p := sh.p
	ve, ok := events.AsValidation(cause)
	if !ok {
		ve = &events.ValidationError{Code: "invalid", Reason: cause.Error()}
	}
	dl := nats.NewMsg(p.subj.DeadLetter(m.session))
	dl.Data = m.msg.Data()
	for k, v := range m.msg.Headers() {
		dl.Header[k] = v
	}
	dl.Header.Del(jetstream.MsgIDHeader)
	dl.Header.Set(events.HeaderErrorCode, ve.Code)
	dl.Header.Set(events.HeaderErrorField, ve.Field)
	dl.Header.Set(events.HeaderError, cause.Error())
	dl.Header.Set(events.HeaderOriginalSubject, p.subj.Published(m.msg.Subject())) // as the bot sent it, not as partitioned
	seq := m.seq
	dl.Header.Set(events.HeaderOriginalSeq, strconv.FormatUint(seq, 10))
	ctx, cancel := sh.ctx()
	defer cancel()
	// Dedup by original sequence: a redelivered bad message is kept once.
	if _, err := p.js.PublishMsg(ctx, dl, jetstream.WithMsgID("dlq:"+strconv.FormatUint(seq, 10))); err != nil {
		p.log.Error().Err(err).Str("event", "dead_letter_failed").Str("subject", m.msg.Subject()).Msg("could not dead-letter a rejected event")
		p.requestRewind("dead_letter_failed", err)
		return
	}
	_ = m.msg.Ack()
	p.m.rejected.WithLabelValues(ve.Code).Inc()
	p.log.Warn().Str("event", "event_rejected").Str("session", m.session).Str("subject", m.msg.Subject()).Uint64("seq", seq).
		Str("code", ve.Code).Str("field", ve.Field).Str("reason", ve.Reason).Str("dead_letter", dl.Subject).Msg("inbound event rejected")
	if events.ValidSession(m.session) {
		ev := events.Lifecycle{V: events.Version, Session: m.session, Type: events.EventRejected, At: p.clock.Now().UTC(),
			Reason: ve.Code, Error: cause.Error()}
		if ls, ok := sh.sessions[m.session]; ok && sh.inflate(m.session, ls) {
			ev.Cursor, ev.TotalTurns = ls.s.Cursor, ls.s.Total
		}
		data, _ := json.Marshal(ev)
		if _, err := p.js.PublishAsync(p.subj.Out(m.session, events.KindEvent), data); err != nil {
			p.log.Warn().Err(err).Str("event", "publish_failed").Msg("event_rejected not published")
		}
	}
}

// lastSummary returns the newest summary-updated of a session, nil if none.
func (p *Processor) lastSummary(ctx context.Context, session string) (*events.SummaryUpdated, error) {
	raw, err := p.outStrm.GetLastMsgForSubject(ctx, p.subj.Out(session, events.KindSummary))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ev events.SummaryUpdated
	if err := json.Unmarshal(raw.Data, &ev); err != nil {
		return nil, fmt.Errorf("decode last summary of %s: %w", session, err)
	}
	return &ev, nil
}

// saveDone is the outcome of one pipelined checkpoint write.
type saveDone struct {
	ls   *live
	id   string
	rev  uint64 // the revision it was written on (0: a first write)
	acks int    // how many of ls.acks it covers
	seq  uint64 // the new revision
	err  error
}

// awaitSaves waits, off the shard goroutine, for the writes of one flush
// and hands their outcomes back to the shard: the shard keeps applying
// events meanwhile instead of idling for a round trip per flush. Outcomes
// go back as they come, not once the last write of the flush is stored: a
// session waiting for its write (a fold due) waits for its own only.
func (sh *shard) awaitSaves(futures []jetstream.PubAckFuture, done []saveDone) {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	from := 0 // first outcome not handed back yet
wait:
	for i, f := range futures {
		select {
		case pa := <-f.Ok():
			done[i].seq = pa.Sequence
			continue
		case err := <-f.Err():
			done[i].err = err
			continue
		default:
		}
		if i > from {
			sh.saves <- done[from:i]
			from = i
		}
		select {
		case pa := <-f.Ok():
			done[i].seq = pa.Sequence
		case err := <-f.Err():
			done[i].err = err
		case <-deadline.C:
			for j := i; j < len(done); j++ {
				done[j].err = fmt.Errorf("save session %s: no acknowledgement in 10s", done[j].id)
			}
			break wait
		}
	}
	sh.saves <- done[from:]
}

// landSaves acks what each confirmed write covers; a failed one drops the
// session and rewinds, as a synchronous checkpoint would.
func (sh *shard) landSaves(done []saveDone) {
	p := sh.p
	sh.writes -= len(done)
	var due []*live
	defer func() {
		// Folds that came due while their session's write was in flight.
		for _, ls := range due {
			if sh.sessions[ls.s.ID] == ls && !ls.writing && !ls.dueAt.IsZero() {
				sh.evaluate(ls, ls.dueCheck, ls.dueForce)
			}
		}
	}()
	for _, d := range done {
		ls := d.ls
		ls.writing = false
		if sh.sessions[d.id] != ls {
			continue // dropped meanwhile (rewind, conflict): its messages come again
		}
		if d.err != nil {
			if d.rev == 0 && state.IsConflict(d.err) {
				// The key has history (a deleted session's marker): the
				// synchronous create knows how to handle it.
				sh.checkpoint(ls)
				continue
			}
			err := d.err
			if state.IsConflict(err) {
				err = fmt.Errorf("save session %s at revision %d: %w (%w)", d.id, d.rev, state.ErrConflict, err)
			}
			sh.saved(ls, 0, err)
			continue
		}
		p.m.checkpoints.WithLabelValues("ok").Inc()
		ls.rev = d.seq
		for _, m := range ls.acks[:d.acks] {
			_ = m.Ack()
		}
		sh.pending -= d.acks
		if rest := ls.acks[d.acks:]; len(rest) > 0 {
			ls.acks = append([]jetstream.Msg(nil), rest...)
		} else {
			ls.acks = nil
		}
		if !ls.dueAt.IsZero() {
			due = append(due, ls)
		}
	}
}

// settle waits for the session's pipelined write, if any, before a
// synchronous one; false if that write failed and the session was dropped.
func (sh *shard) settle(ls *live) bool {
	for ls.writing {
		sh.landSaves(<-sh.saves)
	}
	return sh.sessions[ls.s.ID] == ls
}

// flushAll writes every dirty session and waits for every write: the end
// of a shard's life.
func (sh *shard) flushAll() {
	for {
		sh.flush(true)
		if sh.writes == 0 {
			if len(sh.dirty) == 0 {
				return
			}
			continue
		}
		sh.landSaves(<-sh.saves)
	}
}
