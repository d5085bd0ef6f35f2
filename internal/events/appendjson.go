package events

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends the event as encoding/json encodes it, byte for byte
// (TestAppendJSONAgrees, FuzzAppendJSONAgrees), without reflection: the
// processor publishes two lifecycle events per fold. The error is
// encoding/json's for a time it cannot encode (a year outside 0..9999).
func (ev *Lifecycle) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonObject{b: append(dst, '{')}
	o.int("v", int64(ev.V))
	o.str("session", ev.Session)
	o.str("type", ev.Type)
	o.time("at", ev.At)
	o.strOmit("fold_id", ev.FoldID)
	o.strOmit("reason", ev.Reason)
	o.strOmit("trigger", ev.Trigger)
	o.strOmit("mode", ev.Mode)
	o.strOmit("cause", ev.Cause)
	o.intOmit("estimate_tokens", int64(ev.Estimate))
	o.intOmit("limit_tokens", int64(ev.Limit))
	o.intOmit("chunks", int64(ev.Chunks))
	o.intOmit("skipped_turns", int64(ev.SkippedTurns))
	o.intOmit("masked_turns", int64(ev.MaskedTurns))
	o.int("cursor", ev.Cursor)
	o.int("total_turns", ev.TotalTurns)
	o.intOmit("recent_start", ev.RecentStart)
	o.intOmit("eligible", ev.Eligible)
	o.intOmit("batch_size", int64(ev.BatchSize))
	o.intOmit("batch_from", ev.BatchFrom)
	o.intOmit("batch_to", ev.BatchTo)
	o.intOmit("pending_note_count", int64(ev.PendingNoteCount))
	o.intOmit("old_cursor", ev.OldCursor)
	o.intOmit("new_cursor", ev.NewCursor)
	o.intOmit("covered_through_turn", ev.CoveredThroughTurn)
	o.intOmit("summary_chars", int64(ev.SummaryChars))
	if ev.Version != 0 {
		o.uint("version", ev.Version)
	}
	o.strOmit("tier", ev.Tier)
	o.intOmit("latency_ms", ev.LatencyMS)
	o.strOmit("model", ev.Model)
	o.strOmit("error_class", ev.ErrorClass)
	if ev.Retryable != nil {
		o.bool("retryable", *ev.Retryable)
	}
	o.strOmit("error", ev.Error)
	return o.end()
}

// AppendJSON appends the summary as encoding/json encodes it, byte for
// byte (TestAppendJSONAgrees): one per fold, on the fold's latency path.
func (s *SummaryUpdated) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonObject{b: append(dst, '{')}
	o.int("v", int64(s.V))
	o.str("session", s.Session)
	o.uint("version", s.Version)
	o.str("summary", s.Summary)
	o.int("cursor", s.Cursor)
	o.int("covered_through_turn", s.CoveredThroughTurn)
	o.time("from", s.From)
	o.time("to", s.To)
	o.int("folded_turns", int64(s.FoldedTurns))
	o.int("folded_notes", int64(s.FoldedNotes))
	o.int("summary_chars", int64(s.SummaryChars))
	o.int("summary_tokens", int64(s.SummaryTokens))
	o.int("original_tokens", int64(s.OriginalTokens))
	o.str("mode", s.Mode)
	o.str("tier", s.Tier)
	o.int("compactions", int64(s.Compactions))
	if s.Epoch != 0 {
		o.uint("epoch", uint64(s.Epoch))
	}
	o.str("model", s.Model)
	o.int("latency_ms", s.LatencyMS)
	o.time("at", s.At)
	return o.end()
}

// AppendJSON appends the memories as encoding/json encodes them, byte for
// byte (TestAppendJSONAgrees): one event per fold that extracted any, each
// memory's text in Memories and again in its item.
func (m *Memories) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonObject{b: append(dst, '{')}
	o.int("v", int64(m.V))
	o.str("session", m.Session)
	o.uint("version", m.Version)
	o.str("fold_id", m.FoldID)
	o.key("memories")
	if m.Memories == nil {
		o.b = append(o.b, "null"...)
	} else {
		o.b = append(o.b, '[')
		for i, text := range m.Memories {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			o.b = AppendJSONString(o.b, text)
		}
		o.b = append(o.b, ']')
	}
	if len(m.Items) > 0 {
		o.key("items")
		o.b = append(o.b, '[')
		for i := range m.Items {
			if i > 0 {
				o.b = append(o.b, ',')
			}
			it := &m.Items[i]
			io := jsonObject{b: append(o.b, '{')}
			io.str("id", it.ID)
			io.strOmit("speaker", it.Speaker)
			io.str("text", it.Text)
			io.strOmit("turn_id", it.TurnID)
			if !it.At.IsZero() {
				io.time("at", it.At)
			}
			io.strOmit("supersedes", it.Supersedes)
			b, err := io.end()
			if err != nil {
				return nil, err
			}
			o.b = b
		}
		o.b = append(o.b, ']')
	}
	o.strOmit("model", m.Model)
	o.time("at", m.At)
	return o.end()
}

// jsonObject appends one flat JSON object's members. Keys are written as
// given: callers pass plain ASCII names that need no escaping.
type jsonObject struct {
	b    []byte
	more bool // a member was written: the next needs a comma
	err  error
}

func (o *jsonObject) key(k string) {
	if o.more {
		o.b = append(o.b, ',')
	}
	o.more = true
	o.b = append(o.b, '"')
	o.b = append(o.b, k...)
	o.b = append(o.b, '"', ':')
}

func (o *jsonObject) str(k, v string) {
	o.key(k)
	o.b = AppendJSONString(o.b, v)
}

func (o *jsonObject) strOmit(k, v string) {
	if v != "" {
		o.str(k, v)
	}
}

func (o *jsonObject) int(k string, v int64) {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
}

func (o *jsonObject) intOmit(k string, v int64) {
	if v != 0 {
		o.int(k, v)
	}
}

func (o *jsonObject) uint(k string, v uint64) {
	o.key(k)
	o.b = strconv.AppendUint(o.b, v, 10)
}

func (o *jsonObject) bool(k string, v bool) {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
}

// time writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted), keeping its first error.
func (o *jsonObject) time(k string, t time.Time) {
	o.key(k)
	o.b = append(o.b, '"')
	var err error
	if o.b, err = t.AppendText(o.b); err != nil && o.err == nil {
		o.err = err
	}
	o.b = append(o.b, '"')
}

func (o *jsonObject) end() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return append(o.b, '}'), nil
}

const hexDigits = "0123456789abcdef"

// JSONPlain reports whether AppendJSONString writes s as it is (quoted):
// printable ASCII without ", \, <, > or &.
func JSONPlain(s string) bool {
	for s = s[plainRun(s):]; len(s) > 0; s = s[1:] {
		if s[0] >= utf8.RuneSelf || !jsonPlain[s[0]] {
			return false
		}
	}
	return true
}

// plainRun is the length of a prefix of s of jsonPlain bytes: all of s
// when they all are, else whole blocks of eight that are. Eight bytes are
// tested at once (sixteen while they all are plain); the last bytes of s
// in its last eight, and a shorter s in eight of its bytes (overlapping,
// or repeated). A block holding '^', '|' or '~' ends it too: plainBytes
// tests them with '<', '>' and '\\'; the caller reads those one at a time.
func plainRun(s string) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	n := len(s)
	switch {
	case n == 0:
		return 0
	case n < 8:
		x := uint64(s[0])*ones&^0xffff00 | uint64(s[n/2])<<8 | uint64(s[n-1])<<16 // (all of s when n < 4)
		if n >= 4 {
			x = uint64(load32(s)) | uint64(load32(s[n-4:]))<<32
		}
		if plainBytes(x)&highs == highs {
			return n
		}
		return 0
	}
	all := s
	for len(s) >= 16 && plainBytes(load64(s))&plainBytes(load64(s[8:16]))&highs == highs {
		s = s[16:]
	}
	if len(s) >= 8 && plainBytes(load64(s))&highs == highs {
		s = s[8:]
	}
	if len(s) < 8 && plainBytes(load64(all[n-8:]))&highs == highs {
		return n
	}
	return n - len(s)
}

// load32 is the first four bytes of s, little-endian.
func load32(s string) uint32 {
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// load64 is the first eight bytes of s, little-endian (constant indexes
// into eight bytes: one load, no bounds checks).
func load64(s string) uint64 {
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plainBytes has the high bit of each byte of x set where the byte is
// jsonPlain (or '^', '|' or '~'). A byte b below 0x80 has it in b+0x60
// where b >= 0x20, and in y+0x7f where y is not zero: y = b|4 ^ 0x26 is
// zero for '"' and '&', b|0x62 ^ 0x7e for '<', '>', '\\', '^', '|' and '~'
// (and control bytes); none of those sums carries into the next byte. A
// byte from 0x80 clears its bit with &^ x, whatever the sums carried.
func plainBytes(x uint64) uint64 {
	const ones = 0x0101010101010101
	return (x + 0x60*ones) & ((x | 4*ones) ^ 0x26*ones + 0x7f*ones) & ((x | 0x62*ones) ^ 0x7e*ones + 0x7f*ones) &^ x
}

// jsonPlain are the ASCII bytes a JSON string holds as they are.
var jsonPlain = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// AppendJSONString appends s as a JSON string, as encoding/json encodes
// it (the outbound events here, the checkpoint in state), with its default
// HTML escaping: <, > and & as \u003c, \u003e and \u0026, control
// characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func AppendJSONString(dst []byte, s string) []byte {
	dst, _ = AppendJSONStringUTF8(dst, s)
	return dst
}

// AppendJSONStringUTF8 is AppendJSONString, and whether s is valid UTF-8:
// when it is not, what it writes reads back as another string (with
// U+FFFD for what was not UTF-8).
func AppendJSONStringUTF8(dst []byte, s string) ([]byte, bool) {
	i := plainRun(s)
	if dst = append(dst, '"'); i == len(s) { // (most text: printable ASCII)
		return append(append(dst, s...), '"'), true
	}
	start, valid := 0, true
	for ; i < len(s); i += plainRun(s[i:]) {
		for end := min(i+8, len(s)); i < end; {
			if b := s[i]; b < utf8.RuneSelf {
				if jsonPlain[b] {
					i++
					continue
				}
				dst = append(dst, s[start:i]...)
				switch b {
				case '\\', '"':
					dst = append(dst, '\\', b)
				case '\b':
					dst = append(dst, '\\', 'b')
				case '\f':
					dst = append(dst, '\\', 'f')
				case '\n':
					dst = append(dst, '\\', 'n')
				case '\r':
					dst = append(dst, '\\', 'r')
				case '\t':
					dst = append(dst, '\\', 't')
				default:
					dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
				}
				i++
				start = i
				continue
			}
			c, size := utf8.DecodeRuneInString(s[i:])
			if c == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst, valid = append(dst, `\ufffd`...), false
				i += size
				start = i
				continue
			}
			if c == '\u2028' || c == '\u2029' {
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
				i += size
				start = i
				continue
			}
			i += size
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), valid
}
