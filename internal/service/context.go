package service

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
)

// assemble builds a session's context with no gap between the summary and
// the verbatim turns, whatever the processor is doing:
//
//  1. The KV checkpoint gives summary and cursor as one consistent pair
//     (the processor writes them in one compare-and-set after a fold), the
//     unfolded turns by stream sequence, and LastSeq, the last inbound
//     sequence it covers. While a fold is in flight the checkpoint still
//     holds the old summary and every turn from the old cursor: the
//     elastic window.
//  2. Everything the stream accepted after LastSeq (not applied yet, or
//     applied but not checkpointed) is read from the inbound stream and
//     applied to that copy the way the processor applies it: validated,
//     turns deduplicated by turn_id, end and reset honoured.
//
// Reading the checkpoint before the stream is what makes this gap-free:
// the stream only grows, so a turn stored before the request is either
// covered by the checkpoint or comes after its LastSeq.
func (s *server) assemble(ctx context.Context, r client.ContextRequest) (*client.Context, error) {
	var early *earlyUnpack
	if r.Query != "" {
		// A session held packed is unpacked while its checkpoint and
		// tail are read (index_pack.go).
		early = s.unpackEarly(r.Session)
	}
	cp, rev, err := s.store.Load(ctx, r.Session)
	if err != nil {
		return nil, checkpointError(r.Session, err)
	}
	checkpointSeq := cp.LastSeq
	tail, err := s.applyTail(ctx, cp)
	if err != nil {
		return nil, err
	}
	if rev == 0 && cp.LastSeq == checkpointSeq && cp.Total == 0 {
		// No checkpoint and nothing the processor would apply: a session
		// the stream never saw (rejected events don't count).
		return nil, unknownSession(r.Session, "has no checkpoint and no events in stream "+s.layout.In)
	}
	out := &client.Context{
		V: events.Version, Session: r.Session, Cursor: cp.Cursor, TotalTurns: cp.Total,
		Turns: []client.ContextTurn{}, Evictions: []client.EvictionNote{},
		BudgetChars: r.BudgetChars, BudgetTokens: r.BudgetTokens,
		FoldInFlight: cp.Lease.Held(s.now()), Ended: cp.Ended,
		CheckpointSeq: checkpointSeq, ThroughSeq: cp.LastSeq,
	}
	if r.Query != "" {
		// A question-aware context: other layers, in another priority
		// order (pack.go).
		if err := s.packQuery(ctx, r, cp, rev > 0 || cp.LastSeq > checkpointSeq, tail, early, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	// take charges a layer item to the context if it fits the budget.
	take := func(chars, tokens int) bool {
		if r.BudgetChars != 0 && out.Chars+chars > r.BudgetChars || r.BudgetTokens != 0 && out.Tokens+tokens > r.BudgetTokens {
			return false
		}
		out.Chars += chars
		out.Tokens += tokens
		return true
	}

	// The budget priority: the freshest verbatim turns first, so
	// fill from the newest turn backwards and stop at the first that does
	// not fit (skipping it to fit an older one would open a gap).
	picked := make([]client.ContextTurn, 0, len(cp.Turns))
	for i := len(cp.Turns) - 1; i >= 0; i-- {
		ct, err := s.windowTurn(ctx, cp, tail, nil, i)
		if err != nil {
			return nil, err
		}
		if !take(ct.Chars, ct.Tokens) {
			out.DroppedTurns = i + 1
			break
		}
		picked = append(picked, ct)
	}
	for i := len(picked) - 1; i >= 0; i-- {
		out.Turns = append(out.Turns, picked[i])
	}

	// Then the summary, only in the room the turns left: it restores
	// long-range continuity and must never crowd out the immediate moment.
	// In mode evict the summary is the eviction note (it takes
	// the summary's place), so it is the eviction layer instead, with the
	// same priority.
	s.packSummary(cp, out, take)
	return out, nil
}

// evictionNote is mode evict's note layer for cp, costs not counted.
func evictionNote(cp *state.Session) client.EvictionNote {
	return client.EvictionNote{
		Count: int(cp.Evicted), EvictedTokens: int(cp.EvictedTokens), Version: cp.Version,
		From: time.UnixMilli(cp.FirstEvictedAt).UTC(), To: time.UnixMilli(cp.LastEvictedAt).UTC(),
		Text: cp.Summary,
	}
}

// applyTail reads the session's inbound events after cp.LastSeq and
// applies them to cp like the processor would. It returns the decoded
// turns it added, by stream sequence, so they are not read twice.
func (s *server) applyTail(ctx context.Context, cp *state.Session) (map[uint64]*events.Turn, error) {
	added := map[uint64]*events.Turn{}
	err := s.eachTail(ctx, cp, func(seq uint64, in *events.Inbound, effect state.Effect) {
		switch {
		case effect == state.EffectTurn:
			added[seq] = in.Turn
		case effect == state.EffectControl && in.Control.Op == events.OpReset:
			clear(added)
		}
	})
	if err != nil {
		return nil, err
	}
	return added, nil
}

// eachTail applies the session's inbound events after cp.LastSeq to cp
// like the processor would and calls applied for each it applies; those
// it would reject (by s.adm's rules, or for an ended session) are
// skipped.
func (s *server) eachTail(ctx context.Context, cp *state.Session, applied func(seq uint64, in *events.Inbound, effect state.Effect)) error {
	// Direct gets, "next message at or after seq on the session's
	// subjects" under every layout: the tail is normally a few events (the
	// processor writes a session's checkpoint once its oldest change is
	// --flush-interval old, 1 s by default), and longer only while the
	// processor is down or behind.
	tail := broker.NewSessionEvents(s.in, s.subj, cp.ID, cp.LastSeq+1)
	for {
		msg, err := tail.Next(ctx)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil
		}
		if err != nil {
			return internal(err, "reading stream %s after sequence %d", s.layout.In, cp.LastSeq)
		}
		session, kind, err := s.subj.ParseIn(msg.Subject)
		if err != nil || session != cp.ID {
			continue // the processor dead-letters it
		}
		in, _, err := s.adm.Admit(cp, kind, session, msg.Data, msg.Time)
		if err != nil {
			continue // dead-lettered too
		}
		// The processor's own state rules, so the context matches what it
		// will checkpoint.
		effect, err := cp.Apply(msg.Sequence, in)
		if err != nil {
			continue // rejected as session_ended
		}
		applied(msg.Sequence, &in, effect)
	}
}

// pendingEvents counts the session's events after cp.LastSeq that change
// its state when applied (applyTail's rules): what the processor has yet
// to checkpoint. It applies them to cp.
func (s *server) pendingEvents(ctx context.Context, cp *state.Session) (int, error) {
	n := 0
	err := s.eachTail(ctx, cp, func(_ uint64, _ *events.Inbound, effect state.Effect) {
		if effect != state.EffectDuplicate {
			n++
		}
	})
	return n, err
}

// readTurn reads a checkpointed turn by its inbound stream sequence.
func (s *server) readTurn(ctx context.Context, seq uint64) (*events.Turn, error) {
	raw, err := s.in.GetMsg(ctx, seq)
	if err != nil {
		return nil, internal(err, "reading turn at sequence %d of stream %s (removed by max-age or by hand?)", seq, s.layout.In)
	}
	var t events.Turn
	if err := json.Unmarshal(raw.Data, &t); err != nil {
		return nil, internal(err, "decoding turn at sequence %d", seq)
	}
	return &t, nil
}
