package service

import (
	"sort"
	"time"

	"github.com/foldstream/foldstream/internal/state"
)

// replay applies one session's inbound events, in stream order, with the
// processor's own rules (state.Admission, state.Session.Apply), and
// indexes the turns it adds: validation, dedup by turn_id, end and reset
// are exactly what the processor applied, and a turn's raw index is the
// Total it was added at.
//
// A reset met during the replay, by control or by policy, clears the
// index: nothing of an earlier epoch can be recalled afterwards.
//
// Raw indices are the replay's count, not necessarily the processor's: if
// the stream lost the session's oldest events (max-age), the replay counts
// from the first it could read. anchor maps them to the processor's with
// the checkpoint.
type replay struct {
	session string
	adm     state.Admission
	sess    *state.Session
	idx     *turnIndex
	// raws counts the raw turns of the current epoch, repeated turn_ids
	// included (the processor counts a turn_id again once it left its
	// bounded dedup memory; recall returns it once, as its first doc);
	// dups are the stream sequences of the repeats, in order. A raw
	// turn is a doc or a repeat.
	raws int64
	dups []uint64
	// seen holds every turn_id hash of the epoch, beyond the processor's
	// bounded window; nil after a load until an event is applied (the
	// indexed turns' ids are the set: seenIDs).
	seen map[uint64]struct{}
	// from is the first stream sequence the replay read; next the one it
	// reads next.
	from, next uint64
	// lastReset is the sequence of the last reset the replay applied (0:
	// none), resetAt its stream time: memories published before it belong
	// to an earlier epoch.
	lastReset uint64
	resetAt   time.Time
	// applied counts the events Apply accepted, read every event applied.
	applied, read int
	// mems are the session's memories read from the outbound stream,
	// memNext the outbound sequence to read from next (index_memory.go);
	// memBytes their estimated size.
	mems     []memory
	memNext  uint64
	memBytes int64
	// firstSeq is the inbound stream's first sequence at the request:
	// turns indexed from below it have expired from the stream since
	// (max-age) and are left out, as a fresh build would leave them.
	firstSeq uint64
	// vecs are the turns' embeddings by stream sequence (hybrid ranking,
	// index_vectors.go), nil until loaded; vecBytes their size.
	vecs     map[uint64]turnVector
	vecBytes int64
}

func newReplay(an *analyzer, adm state.Admission, session string, from uint64) *replay {
	return &replay{session: session, adm: adm, sess: state.New(session), idx: newTurnIndex(an),
		seen: map[uint64]struct{}{}, from: from, next: from, memNext: 1}
}

// apply applies the inbound event stored at seq (stream time at) with
// subject kind; events the processor dead-letters or refuses change
// nothing.
func (r *replay) apply(seq uint64, at time.Time, kind string, data []byte) {
	r.next = seq + 1
	r.read++
	in, _, err := r.adm.Admit(r.sess, kind, r.session, data, at)
	if err != nil {
		return // dead-lettered by the processor
	}
	epoch := r.sess.Epoch
	effect, err := r.sess.Apply(seq, in)
	if err != nil {
		return // refused: the session had ended
	}
	r.applied++
	// The replay needs the counts and the reset rules, not the refs the
	// processor keeps for folding: drop them so a long session costs only
	// its index.
	r.sess.Turns = r.sess.Turns[:0]
	r.sess.PendingNotes = r.sess.PendingNotes[:0]
	if r.sess.Epoch != epoch {
		// Reset (by control or by policy): the transcript starts over.
		r.lastReset, r.resetAt = seq, at
		r.raws, r.dups = 0, r.dups[:0]
		r.seen = map[uint64]struct{}{}
		r.idx.clear()
		r.mems, r.memBytes = nil, 0
		r.vecs, r.vecBytes = nil, 0
	}
	if effect != state.EffectTurn {
		return
	}
	raw := r.raws
	r.raws++
	h := state.HashID(in.Turn.TurnID)
	if r.seen == nil {
		r.seen = r.idx.seenIDs()
	}
	if _, dup := r.seen[h]; dup {
		r.dups = append(r.dups, seq)
		return // counted again by the processor, the same turn: indexed once
	}
	r.seen[h] = struct{}{}
	r.idx.fillTurns()
	r.idx.add(raw, seq, in.Turn)
}

// bytes estimates the replay's memory: its index, the sequence list and
// the dedup set.
func (r *replay) bytes() int64 {
	return r.idx.bytes + int64(cap(r.dups))*8 + int64(len(r.seen))*16 + r.memBytes + r.vecBytes + 512
}

// live is the first doc still in the stream (see firstSeq).
func (r *replay) live() int {
	i, _ := r.idx.bySeq(r.firstSeq)
	return i
}

// missing is the range of processor indices [0, to) of the epoch that the
// replay cannot search (gone from the stream), given its anchoring.
func (r *replay) missing(a anchoring) int64 {
	if lo := r.live(); lo < r.idx.ndocs() {
		return r.idx.docs.raw(lo) + a.offset
	}
	return r.raws + a.offset
}

// anchoring maps the replay's raw indices onto the processor's for one
// checkpoint.
type anchoring struct {
	// inEpoch: the checkpoint is of the replay's epoch (it covers the
	// last reset). If not, a reset it has not applied yet moved the cursor
	// to 0.
	inEpoch bool
	// cursor is the processor's cursor for the replay's epoch.
	cursor int64
	// offset is added to a raw index to give the processor's index: 0
	// unless the stream lost the session's oldest turns.
	offset int64
}

// anchor places cp (with cp.LastSeq ≤ the replay's position) on the
// replay: the replay's count at cp.LastSeq is the checkpoint's Total.
func (r *replay) anchor(cp *state.Session, checkpointed bool) anchoring {
	var a anchoring
	// An archived session's checkpoint is a tombstone (its transcript
	// went to the archive): nothing of the replay is its turns.
	a.inEpoch = checkpointed && !cp.Archived && cp.LastSeq >= r.lastReset
	if !a.inEpoch {
		return a
	}
	a.cursor = cp.Cursor
	// The raw turns at or before cp.LastSeq: the docs and the repeats.
	docs := sort.Search(r.idx.ndocs(), func(i int) bool { return r.idx.docs.seq(i) > cp.LastSeq })
	dups := sort.Search(len(r.dups), func(i int) bool { return r.dups[i] > cp.LastSeq })
	atCP := int64(docs + dups)
	a.offset = cp.Total - atCP
	return a
}
