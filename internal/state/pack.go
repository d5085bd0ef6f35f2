package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// Pack and Unpack are the in-memory form of an idle session: the processor
// keeps a session that has been quiet for a moment as these bytes instead
// of the decoded Session (internal/processor/idle.go), and unpacks it on
// its next event. They are not the KV form (Encode), for two
// reasons: decoding a typical checkpoint with encoding/json is about ten
// times slower than Unpack (BenchmarkCheckpointDecode, BenchmarkUnpack),
// and the rest of this form is smaller: turn refs without base64, no
// JSON keys, no RFC 3339 text, absent fields cost nothing. The
// summarizer's state, most of a session that has one, is the same bytes
// in both forms (below), so such a session packs little smaller. Unlike the
// KV form it keeps every turn ref, sealed ones too, so a session with a
// sealed backlog unpacks without reading its chunks.
//
// The summarizer's state is packed as a checkpoint stores it (storedState:
// s2-compressed from compressMin bytes, behind stateMagic), and Unpack
// expands it, so the session in memory holds the backend's own bytes.
// The offline summarizer's state is most of a packed session that
// has one: its 13 KiB packs into ~6 KiB (BenchmarkPackedSessionHeap in
// internal/processor). The processor packs with the state's stored form
// its checkpoints keep (PackReusing) and unpacks into a new one
// (UnpackReusing), so that neither packing nor the checkpoint after a wake
// compresses the state again: an unpack, a checkpoint and a pack of a
// session with that state cost ~1.1× what the same with the state left
// uncompressed costs, where compressing it each time costs ~1.7×.
//
// The layout is private to this process and never stored: a version byte,
// a uvarint bitmask of the fields that are not zero, then those fields in
// the order of packFields. TestPackEveryField fails when Session gains a
// field that Pack does not carry.

const packVersion = 2

// Field bits of the packed form, in the order the fields are written.
const (
	pSummary = iota
	pVersion
	pCursor
	pTotal
	pCoveredThrough
	pLastFoldAt
	pCompactions
	pLease
	pTurns
	pSealed
	pEpoch
	pPendingNotes
	pRecentIDs
	pLastSeq
	pFailures
	pRetryAfter
	pOriginalToks
	pSummaryToks
	pLastActivity
	pEnded
	pConfig
	pArchived
	pExchanges
	pExchangesFolded
	pContextTokens
	pLastEventAt
	pEvicted
	pEvictedTokens
	pFirstEvictedAt
	pLastEvictedAt
	pMemoryIDs
	pSummarySeq
	pSummaryIsNote
	pTools
	pSummaryState
	packFields
)

// Pack appends the packed form of s to buf. The session's ID is not in
// it: the caller keeps it (it is the key the packed form is found by).
func (s *Session) Pack(buf []byte) ([]byte, error) { return s.PackReusing(buf, nil) }

// PackReusing is Pack of a session whose checkpoints keep its state's
// stored form in st (EncodeReusing): the packed state is those bytes,
// not compressed again. nil keeps nothing.
func (s *Session) PackReusing(buf []byte, st *StateText) ([]byte, error) {
	var cfg []byte
	if s.Config != nil {
		var err error
		if cfg, err = json.Marshal(s.Config); err != nil { // set by a configure control: rare, and small
			return buf, fmt.Errorf("pack session %s: config: %w", s.ID, err)
		}
	}
	var mask uint64
	set := func(bit int, nonzero bool) {
		if nonzero {
			mask |= 1 << bit
		}
	}
	set(pSummary, s.Summary != "")
	set(pVersion, s.Version != 0)
	set(pCursor, s.Cursor != 0)
	set(pTotal, s.Total != 0)
	set(pCoveredThrough, s.CoveredThrough != 0)
	set(pLastFoldAt, !s.LastFoldAt.IsZero())
	set(pCompactions, s.Compactions != 0)
	set(pLease, s.Lease != nil)
	set(pTurns, len(s.Turns) > 0)
	set(pSealed, s.Sealed != 0)
	set(pEpoch, s.Epoch != 0)
	set(pPendingNotes, len(s.PendingNotes) > 0)
	set(pRecentIDs, len(s.RecentIDs) > 0)
	set(pLastSeq, s.LastSeq != 0)
	set(pFailures, s.Failures != 0)
	set(pRetryAfter, !s.RetryAfter.IsZero())
	set(pOriginalToks, s.OriginalToks != 0)
	set(pSummaryToks, s.SummaryToks != 0)
	set(pLastActivity, !s.LastActivity.IsZero())
	set(pEnded, s.Ended)
	set(pConfig, s.Config != nil)
	set(pArchived, s.Archived)
	set(pExchanges, s.Exchanges != 0)
	set(pExchangesFolded, s.ExchangesFolded != 0)
	set(pContextTokens, s.ContextTokens != 0)
	set(pLastEventAt, s.LastEventAt != 0)
	set(pEvicted, s.Evicted != 0)
	set(pEvictedTokens, s.EvictedTokens != 0)
	set(pFirstEvictedAt, s.FirstEvictedAt != 0)
	set(pLastEvictedAt, s.LastEvictedAt != 0)
	set(pMemoryIDs, len(s.MemoryIDs) > 0)
	set(pSummarySeq, s.SummarySeq != 0)
	set(pSummaryIsNote, s.SummaryIsNote)
	set(pTools, s.Tools != nil)
	set(pSummaryState, len(s.SummaryState) > 0)

	buf = append(buf, packVersion)
	buf = binary.AppendUvarint(buf, mask)
	has := func(bit int) bool { return mask&(1<<bit) != 0 }
	if has(pSummary) {
		buf = packString(buf, s.Summary)
	}
	if has(pVersion) {
		buf = binary.AppendUvarint(buf, s.Version)
	}
	if has(pCursor) {
		buf = binary.AppendVarint(buf, s.Cursor)
	}
	if has(pTotal) {
		buf = binary.AppendVarint(buf, s.Total)
	}
	if has(pCoveredThrough) {
		buf = binary.AppendVarint(buf, s.CoveredThrough)
	}
	if has(pLastFoldAt) {
		buf = packTime(buf, s.LastFoldAt)
	}
	if has(pCompactions) {
		buf = binary.AppendVarint(buf, int64(s.Compactions))
	}
	if l := s.Lease; has(pLease) {
		buf = packString(buf, l.FoldID)
		buf = packString(buf, l.Owner)
		buf = packTime(buf, l.Deadline)
		buf = binary.AppendVarint(buf, l.From)
		buf = binary.AppendVarint(buf, l.To)
		buf = binary.AppendVarint(buf, int64(l.Notes))
	}
	if has(pTurns) {
		buf = binary.AppendUvarint(buf, uint64(len(s.Turns)))
		buf = s.Turns.appendBinary(buf) // varint deltas, as in the KV form
	}
	if has(pSealed) {
		buf = binary.AppendVarint(buf, s.Sealed)
	}
	if has(pEpoch) {
		buf = binary.AppendUvarint(buf, uint64(s.Epoch))
	}
	if has(pPendingNotes) {
		buf = binary.AppendUvarint(buf, uint64(len(s.PendingNotes)))
		for _, n := range s.PendingNotes {
			buf = binary.AppendUvarint(buf, n.Seq)
			buf = binary.AppendVarint(buf, n.At)
		}
	}
	if has(pRecentIDs) {
		buf = packHashes(buf, s.RecentIDs)
	}
	if has(pLastSeq) {
		buf = binary.AppendUvarint(buf, s.LastSeq)
	}
	if has(pFailures) {
		buf = binary.AppendVarint(buf, int64(s.Failures))
	}
	if has(pRetryAfter) {
		buf = packTime(buf, s.RetryAfter)
	}
	if has(pOriginalToks) {
		buf = binary.AppendVarint(buf, int64(s.OriginalToks))
	}
	if has(pSummaryToks) {
		buf = binary.AppendVarint(buf, int64(s.SummaryToks))
	}
	if has(pLastActivity) {
		buf = packTime(buf, s.LastActivity)
	}
	if has(pConfig) {
		buf = packString(buf, string(cfg))
	}
	for _, f := range []struct {
		bit int
		v   int64
	}{
		{pExchanges, int64(s.Exchanges)}, {pExchangesFolded, int64(s.ExchangesFolded)}, {pContextTokens, int64(s.ContextTokens)},
		{pLastEventAt, s.LastEventAt}, {pEvicted, s.Evicted}, {pEvictedTokens, s.EvictedTokens},
		{pFirstEvictedAt, s.FirstEvictedAt}, {pLastEvictedAt, s.LastEvictedAt},
	} {
		if has(f.bit) {
			buf = binary.AppendVarint(buf, f.v)
		}
	}
	if has(pMemoryIDs) {
		buf = packHashes(buf, s.MemoryIDs)
	}
	if has(pSummarySeq) {
		buf = binary.AppendUvarint(buf, s.SummarySeq)
	}
	if t := s.Tools; has(pTools) {
		buf = binary.AppendVarint(buf, int64(t.Open))
		buf = binary.AppendVarint(buf, int64(t.Run))
		buf = binary.AppendUvarint(buf, uint64(len(t.Joined)))
		var prev int64
		for _, j := range t.Joined {
			buf = binary.AppendVarint(buf, j-prev)
			prev = j
		}
	}
	if has(pSummaryState) {
		if st != nil {
			buf = packBytes(buf, st.of(s.SummaryState))
		} else {
			sp := statePool.Get().(*[]byte)
			buf = packBytes(buf, storedState(sp, s.SummaryState))
			statePool.Put(sp)
		}
	}
	return buf, nil
}

var errPacked = errors.New("corrupt packed session")

// Unpack decodes what Pack wrote for session id. Slices are allocated at
// their exact length (the session grows them again as it goes on).
func Unpack(id string, data []byte) (*Session, error) { return UnpackReusing(id, data, nil) }

// UnpackReusing is Unpack that also leaves in st (when not nil) the
// summarizer state's stored form, for the session's next checkpoint
// (EncodeReusing): a copy of the packed bytes, so that checkpoint does
// not compress the state again.
func UnpackReusing(id string, data []byte, st *StateText) (*Session, error) {
	s := &Session{ID: id}
	d := unpacker{b: data}
	if v := d.byte(); v != packVersion {
		return nil, fmt.Errorf("packed session %s: version %d, want %d", id, v, packVersion)
	}
	mask := d.uvarint()
	if mask>>packFields != 0 {
		return nil, fmt.Errorf("packed session %s: unknown fields %#x: %w", id, mask, errPacked)
	}
	has := func(bit int) bool { return mask&(1<<bit) != 0 }
	if has(pSummary) {
		s.Summary = d.string()
	}
	if has(pVersion) {
		s.Version = d.uvarint()
	}
	if has(pCursor) {
		s.Cursor = d.varint()
	}
	if has(pTotal) {
		s.Total = d.varint()
	}
	if has(pCoveredThrough) {
		s.CoveredThrough = d.varint()
	}
	if has(pLastFoldAt) {
		s.LastFoldAt = d.time()
	}
	if has(pCompactions) {
		s.Compactions = d.int()
	}
	if has(pLease) {
		s.Lease = &Lease{FoldID: d.string(), Owner: d.string(), Deadline: d.time(), From: d.varint(), To: d.varint(), Notes: d.int()}
	}
	if has(pTurns) {
		n := d.count(3) // at least 3 bytes a ref
		s.Turns = make(TurnRefs, 0, n)
		var seq uint64
		var at int64
		for range n {
			seq += d.uvarint()
			at += d.varint()
			s.Turns = append(s.Turns, TurnRef{Seq: seq, At: at, Tokens: int(d.uvarint())})
		}
	}
	if has(pSealed) {
		s.Sealed = d.varint()
	}
	if has(pEpoch) {
		s.Epoch = uint32(d.uvarint())
	}
	if has(pPendingNotes) {
		n := d.count(2)
		s.PendingNotes = make([]NoteRef, n)
		for i := range s.PendingNotes {
			s.PendingNotes[i] = NoteRef{Seq: d.uvarint(), At: d.varint()}
		}
	}
	if has(pRecentIDs) {
		s.RecentIDs = d.hashes()
	}
	if has(pLastSeq) {
		s.LastSeq = d.uvarint()
	}
	if has(pFailures) {
		s.Failures = d.int()
	}
	if has(pRetryAfter) {
		s.RetryAfter = d.time()
	}
	if has(pOriginalToks) {
		s.OriginalToks = d.int()
	}
	if has(pSummaryToks) {
		s.SummaryToks = d.int()
	}
	if has(pLastActivity) {
		s.LastActivity = d.time()
	}
	s.Ended = has(pEnded)
	if has(pConfig) {
		raw := d.bytes()
		if d.err == nil {
			s.Config = new(events.SessionConfig)
			if err := json.Unmarshal(raw, s.Config); err != nil {
				return nil, fmt.Errorf("packed session %s: config: %w", id, err)
			}
		}
	}
	s.Archived = has(pArchived)
	s.SummaryIsNote = has(pSummaryIsNote)
	varint := func(bit int) int64 {
		if has(bit) {
			return d.varint()
		}
		return 0
	}
	s.Exchanges = int(varint(pExchanges))
	s.ExchangesFolded = int(varint(pExchangesFolded))
	s.ContextTokens = int(varint(pContextTokens))
	s.LastEventAt = varint(pLastEventAt)
	s.Evicted = varint(pEvicted)
	s.EvictedTokens = varint(pEvictedTokens)
	s.FirstEvictedAt = varint(pFirstEvictedAt)
	s.LastEvictedAt = varint(pLastEvictedAt)
	if has(pMemoryIDs) {
		s.MemoryIDs = d.hashes()
	}
	if has(pSummarySeq) {
		s.SummarySeq = d.uvarint()
	}
	if has(pTools) {
		s.Tools = &ToolPairs{Open: d.int(), Run: d.int()}
		if n := d.count(1); n > 0 {
			s.Tools.Joined = make([]int64, n)
			var at int64
			for i := range s.Tools.Joined {
				at += d.varint()
				s.Tools.Joined[i] = at
			}
		}
	}
	var stored []byte
	if has(pSummaryState) {
		stored = d.bytes()
	}
	if d.err == nil && d.i != len(d.b) {
		d.err = errPacked
	}
	if d.err != nil {
		return nil, fmt.Errorf("packed session %s: %w", id, d.err)
	}
	if stored != nil {
		raw, err := expandState(stored)
		if err != nil {
			return nil, fmt.Errorf("packed session %s: %w", id, err)
		}
		if len(raw) == 0 {
			return nil, fmt.Errorf("packed session %s: summary_state: empty: %w", id, errPacked)
		}
		if &raw[0] == &stored[0] { // kept as it is: not the caller's bytes
			raw = bytes.Clone(raw)
		}
		s.SummaryState = raw
		if st != nil {
			st.set(raw, stored)
		}
	}
	return s, nil
}

func packString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

func packBytes(buf, b []byte) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	return append(buf, b...)
}

// packTime keeps the instant (not the monotonic reading, nor the
// location: an unpacked time is in time.Local, like the clock's).
func packTime(buf []byte, t time.Time) []byte {
	buf = binary.AppendVarint(buf, t.Unix())
	return binary.AppendUvarint(buf, uint64(t.Nanosecond()))
}

func packHashes(buf []byte, h IDHashes) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(h)))
	return h.appendBinary(buf)
}

// unpacker reads the packed form; the first error sticks and every later
// read returns zero, so Unpack checks once at the end.
type unpacker struct {
	b   []byte
	i   int
	err error
}

func (d *unpacker) fail() {
	if d.err == nil {
		d.err = errPacked
	}
	d.i = len(d.b)
}

func (d *unpacker) byte() byte {
	if d.i >= len(d.b) {
		d.fail()
		return 0
	}
	d.i++
	return d.b[d.i-1]
}

func (d *unpacker) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.i += n
	return v
}

func (d *unpacker) varint() int64 {
	v, n := binary.Varint(d.b[d.i:])
	if n <= 0 {
		d.fail()
		return 0
	}
	d.i += n
	return v
}

func (d *unpacker) int() int { return int(d.varint()) }

// count reads an element count, bounded by what the remaining bytes can
// hold at min bytes an element (a corrupt count allocates nothing huge).
func (d *unpacker) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)-d.i)/uint64(min) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *unpacker) bytes() []byte {
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	d.i += n
	return d.b[d.i-n : d.i]
}

func (d *unpacker) string() string { return string(d.bytes()) }

func (d *unpacker) time() time.Time {
	sec, nsec := d.varint(), d.uvarint()
	if nsec >= 1e9 {
		d.fail()
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec))
}

func (d *unpacker) hashes() IDHashes {
	n := d.count(8)
	if d.err != nil || n == 0 {
		d.fail()
		return nil
	}
	h := make(IDHashes, n)
	for i := range h {
		h[i] = binary.LittleEndian.Uint64(d.b[d.i:])
		d.i += 8
	}
	return h
}
