package processor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// recorder makes every publish of a shard's outbound stream: a fold's
// summary-updated (on the fold's goroutine, waiting for the stream's ack
// and expecting the session's last summary), an eviction's records,
// lifecycle events and memories (without waiting: their acks are checked
// at each sweep, sent; most lifecycle events have none, event), and it
// reads a session's last summary back when a publish was refused or a
// lease is reconciled. It holds no session state: the session machine
// decides what a refusal means.
type recorder struct {
	js     jetstream.JetStream // lifecycle events, memories, eviction records
	foldJS jetstream.JetStream // summary-updated (Deps.FoldJS)
	out    jetstream.Stream    // the outbound stream, to read a subject's last summary
	subj   events.Subjects
	clock  Clock
	log    zerolog.Logger
	obs    func(FoldTiming) // ObserveFolds
	// sent: events published without waiting, whose acks are checked at
	// each sweep. Loop only.
	sent sentEvents
	// confirmedAt is the At (clock) of the last lifecycle event sent with an
	// ack left, and unconfirmed counts those sent without one since (event).
	// Loop only.
	confirmedAt time.Time
	unconfirmed int
	// buf holds the last lifecycle event encoded, for the next one: a
	// plain publish copies the bytes it sends, so most events need no
	// buffer of their own. Loop only.
	buf []byte
}

// newRecorder is a shard's recorder, on the processor's connections.
func (p *Processor) newRecorder() *recorder {
	return &recorder{js: p.js, foldJS: p.foldJS, out: p.outStrm, subj: p.subj, clock: p.clock, log: p.log, obs: p.foldObs,
		sent: sentEvents{log: p.log}}
}

// sendSummary records a fold on the outbound stream and waits for the
// stream's ack: the summary exists only once it is stored. It runs on the
// fold's goroutine, so the summary leaves as soon as the summarizer
// returns, without waiting for the event loop; the coordinator then moves
// the cursor on the loop (machine.land). Until the result is back the session counts as a fold in
// flight and keeps its lease, so this owner folds nothing else of it, and
// a reset or end waits for the result (abandon).
//
// The publish expects the session's last recorded summary (expect) to be
// the subject's last message (Nats-Expected-Last-Subject-Sequence), so the
// server stores at most one version v+1: a second owner's publish, or one
// from a checkpoint that never recorded the summary its crashed owner
// published, is refused and comes back as a conflict (machine.conflict).
// The message id also makes a re-publish of the same version a no-op.
func (p *recorder) sendSummary(r *foldResult, expect uint64) {
	version := r.job.prevVer + 1
	latency := p.clock.Now().Sub(r.job.started)
	r.summary = &events.SummaryUpdated{
		V: events.Version, Session: r.job.session, Version: version, Summary: r.out.Summary,
		Cursor: r.job.to, CoveredThroughTurn: r.job.to - 1, From: r.fromT, To: r.toT,
		FoldedTurns: r.nTurns, FoldedNotes: r.nNotes,
		SummaryChars: utf8.RuneCountInString(r.out.Summary), SummaryTokens: r.sumToks, OriginalTokens: r.origToks,
		Mode: string(r.job.policy.Mode), Tier: string(r.out.Tier), Compactions: r.job.compactns + 1, Epoch: r.job.epoch, Model: r.out.Model,
		LatencyMS: latency.Milliseconds(), At: p.clock.Now().UTC(),
	}
	fail := func(err error) { r.err = fmt.Errorf("publish summary-updated v%d: %w", version, err) }
	// One allocation, sized for the summary and the fields around it: the
	// buffer is the message's until the stream acks it (a retried publish
	// sends it again), so it is not pooled.
	data, err := r.summary.AppendJSON(make([]byte, 0, len(r.out.Summary)+512))
	if err != nil {
		fail(fmt.Errorf("encode: %w", err))
		return
	}
	msg := nats.NewMsg(p.subj.Out(r.job.session, events.KindSummary))
	msg.Data = data
	r.sent = time.Now()
	f, err := p.foldJS.PublishMsgAsync(msg, jetstream.WithMsgID(events.RecordID(r.job.session, events.KindSummary, version)),
		jetstream.WithExpectLastSequencePerSubject(expect))
	if err != nil {
		fail(err)
		return
	}
	// Not bounded by the fold's context: once sent, whether it was stored
	// must be known, or an abandoned fold's summary could land unseen.
	select {
	case pa := <-f.Ok():
		if !pa.Duplicate {
			r.seq = pa.Sequence
			if ev := r.out.Evicted; ev != nil {
				// The turns a note stands for, once the note is stored.
				e := *ev
				e.V, e.Session, e.Version, e.At = events.Version, r.job.session, version, r.summary.At
				if _, err := p.publishRecord(r.job.session, events.KindEvicted, version, &e); err != nil {
					r.err = err
					return
				}
			}
			if p.obs != nil {
				p.obs(FoldTiming{Session: r.job.session, From: r.job.from, Triggered: r.job.started, Summarized: r.summarized, Sent: r.sent, Published: time.Now()})
			}
			return
		}
		// Someone else's version v+1, within the dedup window.
	case err := <-f.Err():
		if !state.IsConflict(err) {
			fail(err)
			return
		}
	case <-time.After(10 * time.Second):
		fail(errors.New("no acknowledgement in 10s"))
		return
	}
	// Refused: read what the subject holds now, for the coordinator to
	// decide (machine.conflict).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := p.lastSummary(ctx, r.job.session)
	if err != nil {
		fail(fmt.Errorf("refused as a conflict, then reading the last summary: %w", err))
		return
	}
	r.conflict, r.last = true, last
}

// republish sends a refused summary once more, after the subject's last
// sequence was learned (machine.conflict), off the loop's goroutine.
// Must be called on the loop.
func (c *coordinator) republish(r foldResult) {
	c.inFlight++ // the result comes back once more
	c.p.m.inFlight.Inc()
	go func() {
		c.rec.sendSummary(&r, r.job.summarySeq)
		c.results <- r
	}()
}

// FoldTiming is when a fold was triggered (the check that started it),
// when the summarizer returned, when its summary-updated left for the
// outbound stream and when the stream stored it.
type FoldTiming struct {
	Session                     string
	From                        int64 // first turn folded
	Triggered, Summarized, Sent time.Time
	Published                   time.Time
}

// ObserveFolds has fn called each time a summary-updated is stored, from
// the goroutine that saw the stream's ack (cmd/bench measures fold
// overhead with it). Set it before Run; fn must be quick and safe for
// concurrent use.
func (p *Processor) ObserveFolds(fn func(FoldTiming)) { p.foldObs = fn }

// lifecycle sends a lifecycle event of session s without waiting:
// observers want it, but session state never depends on it. Must be
// called on the loop.
func (p *recorder) lifecycle(s *state.Session, ev events.Lifecycle) {
	ev.Cursor = s.Cursor
	ev.TotalTurns = s.Total
	p.event(s.ID, ev)
}

// confirmEvery: a lifecycle event is sent with an ack of its own at most
// this often (event); the sweep checks it.
const confirmEvery = 250 * time.Millisecond

// event sends a lifecycle event of session id, its cursor and turn count
// set, without waiting. Must be called on the loop.
//
// Most go out as plain messages, without an ack: on an in-process server
// a publish with an ack cost 26-29 µs of process CPU against 11-13 µs
// without (300-byte messages to the outbound stream), and a fold sends
// two or three of them. One event every confirmEvery, and every event
// that carries an error, asks for an ack, checked at the sweep (sent):
// the events sent without one before it went over the same connection,
// to the same stream, in order, so on a single server its ack stands for
// them, and a refusal (no stream for the subject, the stream's limits) is
// logged with their number. Connected to a cluster, every event asks for
// its own: there a plain publish sent while the stream's leader changes
// (or its server is away) is dropped without an error and a later ack
// does not stand for it, and the stream may be replicated or scaled at
// any time. Session state never depends on a lifecycle event.
func (p *recorder) event(id string, ev events.Lifecycle) {
	ev.V = events.Version
	ev.Session = id
	ev.At = p.clock.Now().UTC()
	data, err := ev.AppendJSON(p.buf[:0])
	if err != nil {
		p.log.Error().Err(err).Str("event", "encode_failed").Msg("encode lifecycle event")
		return
	}
	p.buf = data
	subject := p.subj.Out(id, events.KindEvent)
	if conn := p.js.Conn(); ev.Error == "" && ev.At.Sub(p.confirmedAt) < confirmEvery && conn.ConnectedClusterName() == "" {
		if err := conn.Publish(subject, data); err != nil {
			p.log.Warn().Err(err).Str("event", "publish_failed").Str("session", id).Str("type", ev.Type).Msg("lifecycle event not published")
			return
		}
		p.unconfirmed++
		return
	}
	msg := nats.NewMsg(subject)
	msg.Data = bytes.Clone(data) // the message's until the stream acks it
	f, err := p.js.PublishMsgAsync(msg)
	if err != nil {
		p.log.Warn().Err(err).Str("event", "publish_failed").Str("session", id).Str("type", ev.Type).Msg("lifecycle event not published")
		return
	}
	p.sent.add(sentEvent{f: f, session: id, typ: ev.Type, at: time.Now(), before: p.unconfirmed}) // (the sweep's wall time)
	p.confirmedAt, p.unconfirmed = ev.At, 0
}

// sentEvents are outbound events published without waiting (lifecycle
// events, memories), whose acks the coordinator checks at each sweep (and
// when many are waiting): an event the stream refused, or did not confirm
// in ackDeadline, has its failed run, or is logged as a publish that
// failed at once is.
type sentEvents struct {
	log     zerolog.Logger
	waiting []sentEvent
}

type sentEvent struct {
	f       jetstream.PubAckFuture
	session string
	typ     string
	at      time.Time   // wall time it was sent
	failed  func(error) // on the loop, if it was not stored; nil: logged
	// before: lifecycle events sent without an ack just before this one,
	// whose storing its ack stands for (recorder.event).
	before int
}

// ackDeadline: a lifecycle event not confirmed by then counts as lost
// (async publishes have no timeout of their own).
const ackDeadline = 10 * time.Second

// maxSentEvents: past this many waiting, each new event checks the acks.
const maxSentEvents = 4096

func (se *sentEvents) add(e sentEvent) {
	se.waiting = append(se.waiting, e)
	if len(se.waiting) >= maxSentEvents {
		se.check(e.at)
	}
}

// check drops the confirmed events and logs the refused and the overdue.
func (se *sentEvents) check(now time.Time) {
	kept := se.waiting[:0]
	for _, e := range se.waiting {
		var err error
		select {
		case <-e.f.Ok():
			continue
		case err = <-e.f.Err():
		default:
			if now.Sub(e.at) < ackDeadline {
				kept = append(kept, e)
				continue
			}
			err = fmt.Errorf("no acknowledgement in %s", ackDeadline)
		}
		if e.failed != nil {
			e.failed(err)
			continue
		}
		se.log.Warn().Err(err).Str("event", "publish_failed").Str("session", e.session).Str("type", e.typ).Int("unconfirmed_before", e.before).
			Msg("lifecycle event not stored (nor, perhaps, the unconfirmed_before events sent without an ack before it)")
	}
	clear(se.waiting[len(kept):])
	se.waiting = kept
}

// summaryRecord is a session's last summary-updated on the outbound
// stream and its sequence there (ev nil and seq 0: none).
type summaryRecord struct {
	ev  *events.SummaryUpdated
	seq uint64
}

// lastSummary returns the newest summary-updated of a session.
func (p *recorder) lastSummary(ctx context.Context, session string) (summaryRecord, error) {
	raw, err := p.out.GetLastMsgForSubject(ctx, p.subj.Out(session, events.KindSummary))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return summaryRecord{}, nil
	}
	if err != nil {
		return summaryRecord{}, err
	}
	var ev events.SummaryUpdated
	if err := json.Unmarshal(raw.Data, &ev); err != nil {
		return summaryRecord{}, fmt.Errorf("decode last summary of %s at sequence %d: %w", session, raw.Sequence, err)
	}
	return summaryRecord{ev: &ev, seq: raw.Sequence}, nil
}

// publishRecord publishes an outbound record and waits for the stream: it
// must exist before the checkpoint that depends on it. The message id
// makes a re-publish after a crash a no-op.
func (p *recorder) publishRecord(session, kind string, version uint64, v any, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", kind, err)
	}
	msg := nats.NewMsg(p.subj.Out(session, kind))
	msg.Data = data
	ctx, cancel := opCtx()
	defer cancel()
	pa, err := p.js.PublishMsg(ctx, msg, append(opts, jetstream.WithMsgID(events.RecordID(session, kind, version)))...)
	if err != nil {
		return nil, fmt.Errorf("publish %s v%d: %w", kind, version, err)
	}
	return pa, nil
}

// publishMemories publishes the memories of a landed fold that were not
// published before for the session, and records them as published. A
// failure costs those memories a later re-extraction, never the fold.
// Must be called on the loop.
func (c *coordinator) publishMemories(ls *live, r foldResult, version uint64) {
	p := c.p
	if len(r.out.Memories) == 0 {
		return
	}
	fresh := ls.s.NewMemories(r.out.Memories)
	if len(fresh) == 0 {
		p.log.Debug().Str("event", "memories_deduplicated").Str("session", ls.s.ID).Int("extracted", len(r.out.Memories)).Msg("every extracted memory was published before")
		return
	}
	ev := events.Memories{V: events.Version, Session: ls.s.ID, Version: version, FoldID: r.job.foldID, Memories: fresh,
		Items: memoryItems(r.out.MemoryItems, fresh), Model: r.out.Model, At: p.clock.Now().UTC()}
	id := ls.s.ID
	lost := func(err error) { c.memoriesLost(ls, id, fresh, err) }
	if err := c.rec.publishAsync(ls.s.ID, events.KindMemory, version, &ev, lost); err != nil {
		lost(err)
		return
	}
	p.m.memories.Add(float64(len(fresh)))
	p.log.Info().Str("event", "memories_extracted").Str("session", ls.s.ID).Str("fold_id", r.job.foldID).
		Int("extracted", len(r.out.Memories)).Int("new", len(fresh)).Msg("memories published")
}

// memoriesLost forgets memories whose publish failed, so that a later fold
// that extracts them again publishes them; a session packed or gone from
// memory meanwhile keeps them recorded, and this log line is what says
// they were lost.
// Must be called on the loop.
func (c *coordinator) memoriesLost(ls *live, id string, fresh []string, err error) {
	if ls.s != nil && c.loop.holds(ls) {
		ls.s.ForgetMemories(fresh)
		c.w.markDirty(ls)
	}
	c.p.log.Warn().Err(err).Str("event", "memory_publish_failed").Str("session", id).Int("memories", len(fresh)).
		Msg("memories not published; they are published when a later fold extracts them again")
}

// publishAsync publishes an outbound record without waiting for the
// stream; its ack is checked at the next sweep (sentEvents), and failed
// runs on the loop if the stream refused it or did not confirm it. The
// message id makes a re-publish after a crash a no-op. v encodes itself
// (events.Memories.AppendJSON: encoding/json's bytes without its
// reflection, on the loop once per fold). Must be called on the loop.
func (p *recorder) publishAsync(session, kind string, version uint64, v jsonAppender, failed func(error)) error {
	data, err := v.AppendJSON(make([]byte, 0, 2048)) // a fold's memories, texts twice: ~2 KB
	if err != nil {
		return fmt.Errorf("encode %s event: %w", kind, err)
	}
	msg := nats.NewMsg(p.subj.Out(session, kind))
	msg.Data = data
	f, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(events.RecordID(session, kind, version)))
	if err != nil {
		return fmt.Errorf("publish %s v%d: %w", kind, version, err)
	}
	p.sent.add(sentEvent{f: f, session: session, typ: kind, at: time.Now(), failed: failed})
	return nil
}

// jsonAppender is an outbound record that encodes itself.
type jsonAppender interface {
	AppendJSON([]byte) ([]byte, error)
}

// memoryItems returns the items of the memories in fresh, in fresh's
// order, or nil unless every one has its item (Items is one per text).
func memoryItems(items []fold.Memory, fresh []string) []events.MemoryItem {
	if len(items) == 0 {
		return nil
	}
	byText := make(map[string]fold.Memory, len(items))
	for _, m := range items {
		byText[strings.TrimSpace(m.Text)] = m
	}
	out := make([]events.MemoryItem, 0, len(fresh))
	for _, f := range fresh {
		m, ok := byText[strings.TrimSpace(f)]
		if !ok {
			return nil
		}
		var at time.Time
		if !m.At.IsZero() {
			at = m.At.UTC()
		}
		out = append(out, events.MemoryItem{ID: m.ID, Speaker: m.Speaker, Text: m.Text, TurnID: m.TurnID, At: at, Supersedes: m.Supersedes})
	}
	return out
}
