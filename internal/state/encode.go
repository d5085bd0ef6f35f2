package state

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// Encode writes the checkpoint as JSON by hand. It runs once per changed
// session per flush, which with many sessions is about once per turn:
// encoding/json is several times slower here (it re-scans and compacts
// what custom marshalers return; BenchmarkCheckpointEncodeJSON against
// BenchmarkCheckpointEncode). The JSON is decoded by encoding/json with
// the struct tags (TestEncodeRoundTrip keeps the two in step); a
// compressed summarizer state follows it as it is (summary_state.go).
func (s *Session) Encode(buf []byte) ([]byte, error) { return s.EncodeReusing(buf, nil) }

// EncodeReusing is Encode for a session checkpointed again and again: st
// keeps the summarizer's state as stored (StateText) from one write to the
// next, so that a state is compressed once, not once per checkpoint. nil
// keeps nothing.
func (s *Session) EncodeReusing(buf []byte, st *StateText) ([]byte, error) {
	s = s.stored()
	// The summarizer's state as stored: compressed when that saves bytes,
	// and then after the JSON (tail), else in it, in base64.
	var text, tail []byte
	if len(s.SummaryState) > 0 {
		if st == nil {
			st = new(StateText)
		}
		if stored := st.of(s.SummaryState); bytes.HasPrefix(stored, stateMagic) {
			tail = stored
		} else {
			text = stored
		}
	}
	// One allocation for the whole value, not a dozen regrowths (half of
	// the encoder's time went to growing buf): the fixed fields take well
	// under 512 bytes, escapes rarely add a sixteenth to the summary, and a
	// ref is at most 3 varints of 10 bytes but ~6 bytes in practice.
	buf = slices.Grow(buf, 512+len(s.ID)+len(s.Summary)+len(s.Summary)/16+
		b64Len(len(s.Turns)*8)+b64Len(len(text))+len(tail)+b64Len(len(s.RecentIDs)*8)+b64Len(len(s.MemoryIDs)*8)+len(s.PendingNotes)*48)
	// The refs and ids in binary, before base64: on the stack unless large.
	var scratch [1024]byte
	buf = append(buf, `{"id":`...)
	buf = events.AppendJSONString(buf, s.ID)
	if s.Summary != "" {
		buf = append(buf, `,"summary":`...)
		buf = events.AppendJSONString(buf, s.Summary)
	}
	buf = appendUint(buf, "version", s.Version, true)
	buf = appendUint(buf, "summary_seq", s.SummarySeq, true)
	buf = appendInt(buf, "cursor", s.Cursor, false)
	buf = appendInt(buf, "total", s.Total, false)
	buf = appendInt(buf, "covered_through", s.CoveredThrough, false)
	buf = appendTime(buf, "last_fold_at", s.LastFoldAt)
	buf = appendInt(buf, "compactions", int64(s.Compactions), true)
	if s.Lease != nil {
		lease, err := json.Marshal(s.Lease) // only while a fold is in flight
		if err != nil {
			return nil, err
		}
		buf = append(buf, `,"lease":`...)
		buf = append(buf, lease...)
	}
	if len(s.Turns) > 0 {
		buf = append(buf, `,"turns":"`...)
		buf = appendB64(buf, s.Turns.appendBinary(scratch[:0]))
		buf = append(buf, '"')
	}
	buf = appendInt(buf, "sealed", s.Sealed, true)
	buf = appendUint(buf, "epoch", uint64(s.Epoch), true)
	if len(s.PendingNotes) > 0 {
		buf = append(buf, `,"pending_notes":[`...)
		for i, n := range s.PendingNotes {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"s":`...)
			buf = strconv.AppendUint(buf, n.Seq, 10)
			buf = append(buf, `,"t":`...)
			buf = strconv.AppendInt(buf, n.At, 10)
			buf = append(buf, '}')
		}
		buf = append(buf, ']')
	}
	if len(s.RecentIDs) > 0 {
		buf = append(buf, `,"recent_ids":"`...)
		buf = appendB64(buf, s.RecentIDs.appendBinary(scratch[:0]))
		buf = append(buf, '"')
	}
	buf = appendUint(buf, "last_seq", s.LastSeq, false)
	buf = appendInt(buf, "failures", int64(s.Failures), true)
	buf = appendTime(buf, "retry_after", s.RetryAfter)
	buf = appendInt(buf, "original_tokens", int64(s.OriginalToks), true)
	buf = appendInt(buf, "summary_tokens", int64(s.SummaryToks), true)
	buf = appendTime(buf, "last_activity", s.LastActivity)
	if s.Ended {
		buf = append(buf, `,"ended":true`...)
	}
	if s.Archived {
		buf = append(buf, `,"archived":true`...)
	}
	buf = appendInt(buf, "exchanges", int64(s.Exchanges), true)
	buf = appendInt(buf, "exchanges_folded", int64(s.ExchangesFolded), true)
	buf = appendInt(buf, "context_tokens", int64(s.ContextTokens), true)
	buf = appendInt(buf, "last_event_at", s.LastEventAt, true)
	buf = appendInt(buf, "evicted", s.Evicted, true)
	buf = appendInt(buf, "evicted_tokens", s.EvictedTokens, true)
	buf = appendInt(buf, "first_evicted_at", s.FirstEvictedAt, true)
	buf = appendInt(buf, "last_evicted_at", s.LastEvictedAt, true)
	if s.SummaryIsNote {
		buf = append(buf, `,"summary_is_note":true`...)
	}
	if len(s.MemoryIDs) > 0 {
		buf = append(buf, `,"memory_ids":"`...)
		buf = appendB64(buf, s.MemoryIDs.appendBinary(scratch[:0]))
		buf = append(buf, '"')
	}
	if len(text) > 0 {
		buf = append(buf, `,"summary_state":"`...)
		buf = base64.StdEncoding.AppendEncode(buf, text)
		buf = append(buf, '"')
	}
	if s.Tools != nil {
		tools, err := json.Marshal(s.Tools) // only in sessions with tool traffic unfolded
		if err != nil {
			return nil, err
		}
		buf = append(buf, `,"tools":`...)
		buf = append(buf, tools...)
	}
	if s.Config != nil {
		cfg, err := json.Marshal(s.Config)
		if err != nil {
			return nil, err
		}
		buf = append(buf, `,"config":`...)
		buf = append(buf, cfg...)
	}
	buf = append(buf, '}')
	return append(buf, tail...), nil
}

func appendInt(buf []byte, key string, v int64, omitZero bool) []byte {
	if omitZero && v == 0 {
		return buf
	}
	buf = append(buf, ',', '"')
	buf = append(buf, key...)
	buf = append(buf, '"', ':')
	return strconv.AppendInt(buf, v, 10)
}

func appendUint(buf []byte, key string, v uint64, omitZero bool) []byte {
	if omitZero && v == 0 {
		return buf
	}
	buf = append(buf, ',', '"')
	buf = append(buf, key...)
	buf = append(buf, '"', ':')
	return strconv.AppendUint(buf, v, 10)
}

func appendTime(buf []byte, key string, t time.Time) []byte {
	if t.IsZero() {
		return buf
	}
	buf = append(buf, ',', '"')
	buf = append(buf, key...)
	buf = append(buf, `":"`...)
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	return append(buf, '"')
}

func b64Len(n int) int { return base64.RawStdEncoding.EncodedLen(n) }

func appendB64(buf, raw []byte) []byte {
	n := base64.RawStdEncoding.EncodedLen(len(raw))
	buf = append(buf, make([]byte, n)...)
	base64.RawStdEncoding.Encode(buf[len(buf)-n:], raw)
	return buf
}

func (r TurnRefs) appendBinary(buf []byte) []byte {
	var prevSeq uint64
	var prevAt int64
	for _, t := range r {
		buf = binary.AppendUvarint(buf, t.Seq-prevSeq)
		buf = binary.AppendVarint(buf, t.At-prevAt)
		buf = binary.AppendUvarint(buf, uint64(max(t.Tokens, 0)))
		prevSeq, prevAt = t.Seq, t.At
	}
	return buf
}

func (h IDHashes) appendBinary(buf []byte) []byte {
	for _, x := range h {
		buf = binary.LittleEndian.AppendUint64(buf, x)
	}
	return buf
}
