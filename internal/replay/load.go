// Package replay rebuilds one session's timeline from foldstream's streams:
// what the bot sent (inbound), what the processor did about it (outbound
// summaries and lifecycle events) and what it refused (dead letters), merged
// in time order. It is the operator's debugging view ("processor replay"):
// it only reads, and it reads the streams rather than the KV checkpoint so
// that it shows what actually happened, not what the processor believes.
package replay

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Entry kinds that are not lifecycle types (lifecycle entries use the
// event's own type, e.g. compaction_started).
const (
	KindTurn     = events.KindTurn
	KindNote     = events.KindNote
	KindControl  = events.KindControl
	KindSummary  = events.KindSummary
	KindMemory   = events.KindMemory
	KindEvicted  = events.KindEvicted
	KindRejected = "rejected"
	KindWarning  = "warning"
	// KindUnknown is a message whose subject replay does not recognise, or
	// an event payload that is not the JSON it should be.
	KindUnknown = "unknown"
	// KindTotals is the kind of the final JSON Lines object.
	KindTotals = "totals"
)

// idleTimeout bounds the wait for the next message once the stream info said
// more are there. It only matters when messages disappear between the info
// and the read (max-age expiry, a purge); the read then ends with what it has
// and the timeline says it may be incomplete, rather than hanging.
const idleTimeout = 5 * time.Second

// Entry is one event of the session.
type Entry struct {
	Kind    string    `json:"kind"`
	Stream  string    `json:"stream"`
	Seq     uint64    `json:"seq"`
	Time    time.Time `json:"time"` // stream timestamp, the merge order
	Subject string    `json:"subject"`

	Turn     *TurnInfo         `json:"turn,omitempty"`
	Note     *events.Note      `json:"note,omitempty"`
	Control  *events.Control   `json:"control,omitempty"`
	Summary  *SummaryInfo      `json:"summary,omitempty"`
	Event    *events.Lifecycle `json:"event,omitempty"`
	Rejected *Rejection        `json:"rejected,omitempty"`
	Raw      json.RawMessage   `json:"raw,omitempty"`     // memory, evicted, unknown JSON payloads
	Payload  string            `json:"payload,omitempty"` // a payload that is not JSON
	Invalid  string            `json:"invalid,omitempty"` // why the payload failed to decode or validate
	Warning  string            `json:"warning,omitempty"`
}

// TurnInfo is a decoded turn with its position in the session.
type TurnInfo struct {
	// Index is the turn's position counted by distinct turn_id in stream
	// order, the same numbering as the processor's cursor. A duplicate
	// carries the index of the first occurrence.
	Index     int64     `json:"index"`
	Duplicate bool      `json:"duplicate,omitempty"`
	TurnID    string    `json:"turn_id"`
	At        time.Time `json:"at"`
	Speaker   string    `json:"speaker"`
	Role      string    `json:"role"`
	Text      string    `json:"text"`
	Kind      string    `json:"kind,omitempty"`
	Tool      string    `json:"tool,omitempty"`
}

// SummaryInfo is a summary-updated event plus the turn range it folded.
type SummaryInfo struct {
	events.SummaryUpdated
	// FoldedFrom is the first turn index of the fold that produced this
	// version (cursor − folded_turns).
	FoldedFrom int64 `json:"folded_from"`
}

// Rejection is a dead letter's reason, from its headers.
type Rejection struct {
	Code            string `json:"code"`
	Field           string `json:"field,omitempty"`
	Reason          string `json:"reason"`
	OriginalSubject string `json:"original_subject,omitempty"`
	OriginalStream  string `json:"original_stream,omitempty"`
	OriginalSeq     string `json:"original_seq,omitempty"`
}

// Totals summarises the timeline.
type Totals struct {
	Kind            string         `json:"kind"` // always "totals"
	Session         string         `json:"session"`
	Entries         int            `json:"entries"`
	InEvents        int            `json:"in_events"`
	OutEvents       int            `json:"out_events"`
	DeadLetters     int            `json:"dead_letters"`
	Turns           int            `json:"turns"` // distinct turn ids
	DuplicateTurns  int            `json:"duplicate_turns"`
	InvalidInbound  int            `json:"invalid_inbound"`
	Notes           int            `json:"notes"`
	Controls        map[string]int `json:"controls,omitempty"`
	FoldsStarted    int            `json:"folds_started"`
	FoldsCompleted  int            `json:"folds_completed"`
	FoldsFailed     int            `json:"folds_failed"`
	Skips           map[string]int `json:"skips,omitempty"`
	SummaryVersions []uint64       `json:"summary_versions"`
	// Cursor is the first unfolded turn after the last summary (or fold
	// completion, or reset) in the timeline; 0 when nothing was folded.
	Cursor   int64     `json:"cursor"`
	Warnings []string  `json:"warnings,omitempty"`
	First    time.Time `json:"first,omitzero"`
	Last     time.Time `json:"last,omitzero"`
	// Incomplete is set when a stream stopped delivering before the count
	// its info announced (messages expired or were purged mid-read).
	Incomplete bool `json:"incomplete,omitempty"`
}

// Timeline is one session's merged history.
type Timeline struct {
	Session string
	Streams [3]string // inbound, outbound, dead-letter stream names
	Entries []Entry
	Totals  Totals
}

// rawMsg is a message read from one stream, before decoding.
type rawMsg struct {
	stream  string
	rank    int // stream order for timestamp ties: in, out, dlq
	seq     uint64
	time    time.Time
	subject string
	data    []byte
	header  nats.Header
}

// Load reads everything stored for session on the three streams, up to the
// last message present when it starts, and merges it into a timeline. An
// unknown session is an empty timeline, not an error: "nothing happened" is
// an answer an operator needs.
func Load(ctx context.Context, js jetstream.JetStream, l broker.Layout, session string) (*Timeline, error) {
	if err := events.CheckSession("session", session); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	subj := l.Subjects
	// Inbound events are read under both layouts: the subject a bot
	// published, and its partitioned stored form (any partition count),
	// so a session's history reads whole across a migration to --partitions.
	sources := []struct {
		stream  string
		filters []string
	}{
		{l.In, subj.InSessionAll(session)},
		{l.Out, []string{subj.OutSession(session)}},
		{l.DLQ, []string{subj.DeadLetter(session)}},
	}
	t := &Timeline{Session: session, Streams: [3]string{l.In, l.Out, l.DLQ}}
	var perStream [3][]Entry
	for i, src := range sources {
		msgs, complete, err := readStream(ctx, js, src.stream, src.filters, i)
		if err != nil {
			return nil, err
		}
		if !complete {
			t.Totals.Incomplete = true
		}
		perStream[i] = decodeStream(subj, session, msgs)
	}
	// Annotations that depend on order within one stream (turn numbering,
	// version checks) are done per stream, in stream order, before the merge:
	// timestamps of different streams may tie or be skewed across a cluster,
	// but a stream's own order is the truth for its events.
	markRejected(perStream[0], perStream[2], l.In)
	numberTurns(perStream[0])
	warnings := checkVersions(perStream[1])

	all := slices.Concat(perStream[0], perStream[1], perStream[2])
	rank := map[string]int{l.In: 0, l.Out: 1, l.DLQ: 2}
	slices.SortStableFunc(all, func(a, b Entry) int {
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(rank[a.Stream], rank[b.Stream]), cmp.Compare(a.Seq, b.Seq))
	})
	t.Entries = insertWarnings(all, warnings)
	t.Totals = totals(t, t.Totals.Incomplete)
	return t, nil
}

// readStream reads the messages matching filter from stream with an ordered
// consumer, stopping at the last one present when the read started so that
// it terminates on a live stream. complete is false when the stream stopped
// delivering before that point.
func readStream(ctx context.Context, js jetstream.JetStream, stream string, filters []string, rank int) (msgs []rawMsg, complete bool, err error) {
	filter := strings.Join(filters, ", ") // for errors
	s, err := js.Stream(ctx, stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, false, fmt.Errorf("replay: stream %s not found (wrong --prefix, or the processor never provisioned it): %w", stream, err)
		}
		return nil, false, fmt.Errorf("replay: look up stream %s: %w", stream, err)
	}
	// The filtered info says how many messages match and where the stream
	// ends now; both bound the read.
	var want, last uint64
	for _, f := range filters {
		info, err := s.Info(ctx, jetstream.WithSubjectFilter(f))
		if err != nil {
			return nil, false, fmt.Errorf("replay: stream %s info for %s: %w", stream, f, err)
		}
		for _, n := range info.State.Subjects {
			want += n
		}
		last = max(last, info.State.LastSeq)
	}
	if want == 0 {
		return nil, true, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: filters,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, false, fmt.Errorf("replay: ordered consumer on %s for %s: %w", stream, filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, false, fmt.Errorf("replay: read %s for %s: %w", stream, filter, err)
	}
	defer it.Stop()
	msgs = make([]rawMsg, 0, want)
	for {
		nctx, cancel := context.WithTimeout(ctx, idleTimeout)
		m, err := it.Next(jetstream.NextContext(nctx))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil, false, fmt.Errorf("replay: read %s: %w", stream, ctx.Err())
			}
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
				return msgs, false, nil
			}
			return nil, false, fmt.Errorf("replay: read %s for %s: %w", stream, filter, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, false, fmt.Errorf("replay: metadata of a message on %s: %w", stream, err)
		}
		if md.Sequence.Stream > last {
			return msgs, true, nil
		}
		msgs = append(msgs, rawMsg{
			stream: stream, rank: rank, seq: md.Sequence.Stream, time: md.Timestamp,
			subject: m.Subject(), data: m.Data(), header: m.Headers(),
		})
		// NumPending is counted by the server at delivery: zero means every
		// matching message stored so far has been delivered.
		if md.Sequence.Stream >= last || md.NumPending == 0 {
			return msgs, true, nil
		}
	}
}

// decodeStream turns raw messages into entries; a payload that does not
// decode becomes an entry that says why instead of failing the replay,
// because a broken message is exactly what an operator replays to find.
func decodeStream(subj events.Subjects, session string, msgs []rawMsg) []Entry {
	out := make([]Entry, 0, len(msgs))
	for _, m := range msgs {
		e := Entry{Stream: m.stream, Seq: m.seq, Time: m.time.UTC(), Subject: m.subject}
		switch m.rank {
		case 0:
			decodeInbound(&e, subj, session, m.data)
		case 1:
			decodeOutbound(&e, subj, m.data)
		default:
			decodeDeadLetter(&e, m)
		}
		out = append(out, e)
	}
	return out
}

func decodeInbound(e *Entry, subj events.Subjects, session string, data []byte) {
	_, kind, err := subj.ParseIn(e.Subject)
	if err != nil {
		e.Kind = KindUnknown
		e.Invalid = err.Error()
		setRaw(e, data)
		return
	}
	e.Kind = kind
	in, verr := events.DecodeInbound(kind, session, data, events.Limits{})
	if verr == nil {
		switch kind {
		case events.KindTurn:
			e.Turn = turnInfo(in.Turn)
		case events.KindNote:
			e.Note = in.Note
		case events.KindControl:
			e.Control = in.Control
		}
		return
	}
	// The processor dead-letters this one; still show what it carried.
	e.Invalid = verr.Error()
	switch kind {
	case events.KindTurn:
		var t events.Turn
		if json.Unmarshal(data, &t) == nil {
			e.Turn = turnInfo(&t)
			e.Turn.Index = -1
		}
	case events.KindNote:
		var n events.Note
		if json.Unmarshal(data, &n) == nil {
			e.Note = &n
		}
	case events.KindControl:
		var c events.Control
		if json.Unmarshal(data, &c) == nil {
			e.Control = &c
		}
	}
	if e.Turn == nil && e.Note == nil && e.Control == nil {
		setRaw(e, data)
	}
}

func turnInfo(t *events.Turn) *TurnInfo {
	return &TurnInfo{TurnID: t.TurnID, At: t.At, Speaker: t.Speaker, Role: t.Role, Text: t.Text, Kind: t.Kind, Tool: t.Tool}
}

func decodeOutbound(e *Entry, subj events.Subjects, data []byte) {
	_, kind, ok := subj.ParseOut(e.Subject)
	if !ok {
		e.Kind = KindUnknown
		setRaw(e, data)
		return
	}
	switch kind {
	case events.KindSummary:
		e.Kind = KindSummary
		var s events.SummaryUpdated
		if err := json.Unmarshal(data, &s); err != nil {
			e.Invalid = "summary payload: " + err.Error()
			setRaw(e, data)
			return
		}
		e.Summary = &SummaryInfo{SummaryUpdated: s, FoldedFrom: s.Cursor - int64(s.FoldedTurns)}
	case events.KindEvent:
		var lc events.Lifecycle
		if err := json.Unmarshal(data, &lc); err != nil || lc.Type == "" {
			e.Kind = KindUnknown
			e.Invalid = "lifecycle payload without a type"
			if err != nil {
				e.Invalid = "lifecycle payload: " + err.Error()
			}
			setRaw(e, data)
			return
		}
		e.Kind = lc.Type
		e.Event = &lc
	default:
		// memory, evicted and anything newer: shown as published.
		e.Kind = kind
		setRaw(e, data)
	}
}

func decodeDeadLetter(e *Entry, m rawMsg) {
	e.Kind = KindRejected
	h := m.header
	e.Rejected = &Rejection{
		Code:            h.Get(events.HeaderErrorCode),
		Field:           h.Get(events.HeaderErrorField),
		Reason:          h.Get(events.HeaderError),
		OriginalSubject: h.Get(events.HeaderOriginalSubject),
		OriginalStream:  h.Get(events.HeaderOriginalStream),
		OriginalSeq:     h.Get(events.HeaderOriginalSeq),
	}
	if e.Rejected.Code == "" && e.Rejected.Reason == "" {
		e.Rejected.Reason = "dead letter without " + events.HeaderErrorCode + " headers"
	}
	setRaw(e, m.data)
}

// setRaw keeps a payload for display: as JSON when it is JSON, else as text
// (bounded, since a dead letter may be an oversized payload).
func setRaw(e *Entry, data []byte) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return
	}
	if json.Valid(data) {
		e.Raw = json.RawMessage(bytes.Clone(data))
		return
	}
	const max = 512
	if len(data) > max {
		e.Payload = string(data[:max]) + "…"
		return
	}
	e.Payload = string(data)
}

// markRejected marks the inbound events the processor dead-lettered
// although they decode (a turn dated beyond its --max-clock-skew, a
// configure its settings refuse, an event for an ended session): their
// dead letters name them by inbound stream and sequence. The processor
// never applied them, so numberTurns must not count them.
func markRejected(in, dead []Entry, inStream string) {
	rejected := map[uint64]*Rejection{}
	for _, d := range dead {
		if r := d.Rejected; r != nil && r.OriginalStream == inStream {
			if seq, err := strconv.ParseUint(r.OriginalSeq, 10, 64); err == nil {
				rejected[seq] = r
			}
		}
	}
	for i := range in {
		if r, ok := rejected[in[i].Seq]; ok && in[i].Invalid == "" {
			in[i].Invalid = "rejected by the processor: " + cmp.Or(r.Code, "dead letter") + ": " + r.Reason
			if in[i].Turn != nil {
				in[i].Turn.Index = -1
			}
		}
	}
}

// numberTurns gives each valid turn its index by distinct turn_id, the way
// the processor counts them (a turn published twice is counted once). A
// reset forgets the transcript, so numbering and dedup start over after one.
// Replay remembers every id, the processor only the last 64 plus the
// stream's duplicate window: a duplicate that replay flags but the
// processor counted would show as a cursor that runs ahead of replay's.
func numberTurns(in []Entry) {
	seen := map[string]int64{}
	var next int64
	for i := range in {
		e := &in[i]
		if e.Kind == KindControl && e.Control != nil && e.Invalid == "" && e.Control.Op == events.OpReset {
			clear(seen)
			next = 0
			continue
		}
		if e.Kind != KindTurn || e.Turn == nil || e.Invalid != "" {
			continue
		}
		if idx, dup := seen[e.Turn.TurnID]; dup {
			e.Turn.Index = idx
			e.Turn.Duplicate = true
			continue
		}
		seen[e.Turn.TurnID] = next
		e.Turn.Index = next
		next++
	}
}

// versionWarning is a warning to insert after the outbound entry seq.
type versionWarning struct {
	stream string
	seq    uint64
	text   string
}

// checkVersions flags summary versions that repeat or go backwards — two
// owners advancing one session, or a republish that escaped dedup — and
// gaps (a summary missing from the stream). A reset restarts versions.
func checkVersions(out []Entry) []versionWarning {
	var ws []versionWarning
	var prev uint64
	seen := map[uint64]bool{}
	for i := range out {
		e := &out[i]
		if e.Kind == events.EventSessionReset {
			prev = 0
			clear(seen)
			continue
		}
		if e.Kind != KindSummary || e.Summary == nil {
			continue
		}
		v := e.Summary.Version
		var msg string
		switch {
		case seen[v]:
			msg = fmt.Sprintf("summary version %d repeats (seq %d): versions must be strictly increasing; two owners may have folded this session", v, e.Seq)
		case prev != 0 && v < prev:
			msg = fmt.Sprintf("summary version %d after version %d (seq %d): versions must be strictly increasing", v, prev, e.Seq)
		case prev != 0 && v > prev+1:
			msg = fmt.Sprintf("summary version jumps from %d to %d (seq %d): %d version(s) missing from the stream", prev, v, e.Seq, v-prev-1)
		}
		if msg != "" {
			e.Warning = msg
			ws = append(ws, versionWarning{stream: e.Stream, seq: e.Seq, text: msg})
		}
		seen[v] = true
		prev = max(prev, v)
	}
	return ws
}

// insertWarnings places a warning entry right after the entry it is about,
// so it reads in context in the timeline.
func insertWarnings(all []Entry, ws []versionWarning) []Entry {
	if len(ws) == 0 {
		return all
	}
	type key struct {
		stream string
		seq    uint64
	}
	byKey := map[key][]string{}
	for _, w := range ws {
		k := key{w.stream, w.seq}
		byKey[k] = append(byKey[k], w.text)
	}
	out := make([]Entry, 0, len(all)+len(ws))
	for _, e := range all {
		out = append(out, e)
		for _, text := range byKey[key{e.Stream, e.Seq}] {
			out = append(out, Entry{Kind: KindWarning, Stream: e.Stream, Seq: e.Seq, Time: e.Time, Subject: e.Subject, Warning: text})
		}
	}
	return out
}

func totals(t *Timeline, incomplete bool) Totals {
	tt := Totals{Kind: KindTotals, Session: t.Session, Incomplete: incomplete, SummaryVersions: []uint64{}}
	for _, e := range t.Entries {
		if e.Kind == KindWarning {
			tt.Warnings = append(tt.Warnings, e.Warning)
			continue
		}
		tt.Entries++
		if tt.First.IsZero() {
			tt.First = e.Time
		}
		tt.Last = e.Time
		switch e.Stream {
		case t.Streams[0]:
			tt.InEvents++
		case t.Streams[1]:
			tt.OutEvents++
		case t.Streams[2]:
			tt.DeadLetters++
		}
		if e.Invalid != "" && e.Stream == t.Streams[0] {
			tt.InvalidInbound++
			continue
		}
		switch e.Kind {
		case KindTurn:
			if e.Turn.Duplicate {
				tt.DuplicateTurns++
			} else {
				tt.Turns++
			}
		case KindNote:
			tt.Notes++
		case KindControl:
			if tt.Controls == nil {
				tt.Controls = map[string]int{}
			}
			tt.Controls[e.Control.Op]++
		case KindSummary:
			if e.Summary != nil {
				tt.SummaryVersions = append(tt.SummaryVersions, e.Summary.Version)
				tt.Cursor = e.Summary.Cursor
			}
		case events.EventCompactionStarted:
			tt.FoldsStarted++
		case events.EventCompactionCompleted:
			tt.FoldsCompleted++
			if e.Event.NewCursor > 0 {
				tt.Cursor = e.Event.NewCursor
			}
		case events.EventCompactionFailed:
			tt.FoldsFailed++
		case events.EventCompactionSkipped:
			if tt.Skips == nil {
				tt.Skips = map[string]int{}
			}
			tt.Skips[cmp.Or(e.Event.Reason, "unspecified")]++
		case events.EventSessionReset:
			tt.Cursor = 0
		}
	}
	return tt
}

// Message is one message of a session's inbound stream as it is stored:
// what the bot sent, before any decoding.
type Message struct {
	Seq     uint64
	Time    time.Time
	Subject string // the stored subject (partitioned form under --partitions)
	Data    []byte
	Header  nats.Header
}

// Inbound reads the session's inbound messages, in stream order, up to the
// last one present when it starts: the input a what-if refold feeds to a
// scratch processor. complete is false when the stream stopped delivering
// early (messages expired or were purged during the read).
func Inbound(ctx context.Context, js jetstream.JetStream, l broker.Layout, session string) (msgs []Message, complete bool, err error) {
	if err := events.CheckSession("session", session); err != nil {
		return nil, false, fmt.Errorf("replay: %w", err)
	}
	raw, complete, err := readStream(ctx, js, l.In, l.Subjects.InSessionAll(session), 0)
	if err != nil {
		return nil, false, err
	}
	msgs = make([]Message, len(raw))
	for i, m := range raw {
		msgs[i] = Message{Seq: m.seq, Time: m.time, Subject: m.subject, Data: m.data, Header: m.header}
	}
	return msgs, complete, nil
}
