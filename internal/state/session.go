// Package state holds a session's checkpointed state and the KV store that
// keeps it. The checkpoint references turns and notes by inbound stream
// sequence instead of copying their text: the stream is the log, the
// checkpoint only says where in it the session stands.
package state

import (
	"hash/fnv"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
)

// TurnRef points at one unfolded turn in the inbound stream.
type TurnRef struct {
	Seq    uint64 `json:"s"`
	At     int64  `json:"t"`           // unix millis, for the folded window's time range
	Tokens int    `json:"k,omitempty"` // bot-reported tokens, 0 = count at fold time
}

// NoteRef points at one pending note in the inbound stream.
type NoteRef struct {
	Seq uint64 `json:"s"`
	At  int64  `json:"t"`
}

// Lease marks a fold in flight. It is a deadline, not a flag: a fold whose
// owner crashed stops blocking the session once Deadline passes.
type Lease struct {
	FoldID   string    `json:"fold_id"`
	Owner    string    `json:"owner"`
	Deadline time.Time `json:"deadline"`
	From     int64     `json:"from"`
	To       int64     `json:"to"`
	Notes    int       `json:"notes"` // pending notes included in the fold
}

// Held reports whether the lease still blocks other folds at now.
func (l *Lease) Held(now time.Time) bool { return l != nil && now.Before(l.Deadline) }

// Session is the checkpoint of one session: its summary, where the
// summary ends in its transcript, and what stream processing needs. Its
// fold outcomes go through Land, Adopt and Fail (transition.go).
type Session struct {
	ID      string `json:"id"`
	Summary string `json:"summary,omitempty"`
	Version uint64 `json:"version,omitempty"` // summary version; 0 = none yet
	// SummarySeq is the outbound stream sequence of the session's last
	// summary-updated (0: none, or a checkpoint written before it was
	// kept). The next one is published expecting it as the subject's last
	// sequence, so two owners can never both publish version v+1.
	SummarySeq uint64 `json:"summary_seq,omitempty"`
	// Cursor is the index of the first unfolded turn: everything before it
	// is in Summary, everything from it on is verbatim.
	Cursor int64 `json:"cursor"`
	// Total is the number of distinct turns applied.
	Total int64 `json:"total"`
	// CoveredThrough is the highest turn index in the summary, -1 if none.
	CoveredThrough int64     `json:"covered_through"`
	LastFoldAt     time.Time `json:"last_fold_at,omitzero"`
	Compactions    int       `json:"compactions,omitempty"`
	Lease          *Lease    `json:"lease,omitempty"`
	// Turns are the unfolded turns [Cursor, Total) in order. In KV only
	// [max(Cursor, Sealed), Total) is inline; the rest is in sealed chunks.
	Turns TurnRefs `json:"turns,omitempty"`
	// Sealed: refs of turns below it (and at or after Cursor) are in
	// sealed chunk keys of this Epoch (see chunks.go).
	Sealed int64  `json:"sealed,omitempty"`
	Epoch  uint32 `json:"epoch,omitempty"`
	// PendingNotes were evicted by the bot and wait for the next fold; they
	// are cleared only when a fold that included them succeeds.
	PendingNotes []NoteRef `json:"pending_notes,omitempty"`
	// RecentIDs are hashes of the last turn ids, for dedup beyond the
	// stream's duplicate window.
	RecentIDs IDHashes `json:"recent_ids,omitempty"`
	// LastSeq is the last applied inbound stream sequence: apply is a no-op
	// for anything at or below it, so redelivery changes nothing.
	LastSeq uint64 `json:"last_seq"`

	// Failure backoff after a failed fold.
	Failures     int       `json:"failures,omitempty"`
	RetryAfter   time.Time `json:"retry_after,omitzero"`
	OriginalToks int       `json:"original_tokens,omitempty"`
	SummaryToks  int       `json:"summary_tokens,omitempty"`
	LastActivity time.Time `json:"last_activity,omitzero"`

	Ended  bool                  `json:"ended,omitempty"`
	Config *events.SessionConfig `json:"config,omitempty"`
	// Archived: the ended session's final state was written to its archive
	// key and the checkpoint cleared; only a reset revives it.
	Archived bool `json:"archived,omitempty"`

	// Exchanges counts assistant turns ever applied (completed exchanges); ExchangesFolded is its
	// value when the last fold started (mode interval folds every N).
	Exchanges       int `json:"exchanges,omitempty"`
	ExchangesFolded int `json:"exchanges_folded,omitempty"`
	// ContextTokens is the provider-reported prompt size the bot sent with
	// its latest turn since the last fold: the best estimate of the context
	// the bot sends, when it reports one.
	ContextTokens int `json:"context_tokens,omitempty"`
	// LastEventAt is the bot's timestamp of the latest event (unix millis):
	// reset policies use event time so the processor, the context service
	// and a replay agree on when a session was reset.
	LastEventAt int64 `json:"last_event_at,omitempty"`

	// Mode evict: what was dropped so far, for the cumulative eviction note.
	Evicted        int64 `json:"evicted,omitempty"`
	EvictedTokens  int64 `json:"evicted_tokens,omitempty"`
	FirstEvictedAt int64 `json:"first_evicted_at,omitempty"`
	LastEvictedAt  int64 `json:"last_evicted_at,omitempty"`
	// SummaryIsNote: Summary is mode evict's eviction note, not a summary
	// of the turns (the context service renders it as an eviction layer).
	SummaryIsNote bool `json:"summary_is_note,omitempty"`

	// MemoryIDs are hashes of the memories already published, so a fact
	// the model extracts again is not published twice.
	MemoryIDs IDHashes `json:"memory_ids,omitempty"`

	// SummaryState is the summarizer's own record of what Summary holds
	// (fold.Result.State), passed back to it on the next fold and never
	// read here; nil when the summarizer keeps none or Summary did not
	// come from it.
	SummaryState []byte `json:"summary_state,omitempty"`

	// Tools follows the session's tool exchanges so that no fold ends
	// inside one; nil while the session has no tool traffic unfolded.
	Tools *ToolPairs `json:"tools,omitempty"`
}

// ToolPairs is the tool-exchange state of a session (fold.ToolExchange):
// where the last exchange stands, and which unfolded turns are joined to
// the turn before them, so that a fold may not end right before them.
type ToolPairs struct {
	Open int `json:"open,omitempty"` // tool calls awaiting a result
	Run  int `json:"run,omitempty"`  // joined turns in a row up to the newest
	// Joined are transcript indexes (at or after Cursor), ascending.
	Joined []int64 `json:"joined,omitempty"`
}

// noteTool records the turn about to get index s.Total in the session's
// tool-exchange state. A session without tool traffic keeps Tools nil.
func (s *Session) noteTool(role, kind string) {
	if s.Tools == nil {
		if !fold.IsToolCall(role, kind) && !fold.IsToolResult(role, kind) {
			return
		}
		s.Tools = &ToolPairs{}
	}
	x := fold.ToolExchange{Open: s.Tools.Open, Run: s.Tools.Run}
	if x.Next(role, kind) {
		s.Tools.Joined = append(s.Tools.Joined, s.Total)
	}
	s.Tools.Open, s.Tools.Run = x.Open, x.Run
}

// Joined reports whether the turn at transcript index i is joined to the
// one before it by a tool exchange: no fold may end right before it.
func (s *Session) Joined(i int64) bool {
	if s.Tools == nil {
		return false
	}
	_, found := slices.BinarySearch(s.Tools.Joined, i)
	return found
}

// New returns the state of a session never seen before.
func New(id string) *Session { return &Session{ID: id, CoveredThrough: -1} }

// maxRecentIDs bounds the dedup memory per session; older duplicates are
// caught by the stream's Nats-Msg-Id window.
const maxRecentIDs = 64

// HashID is the dedup key of a turn id.
func HashID(turnID string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(turnID))
	return h.Sum64()
}

// SeenTurn reports whether turnID was applied recently.
func (s *Session) SeenTurn(h uint64) bool {
	for _, x := range s.RecentIDs {
		if x == h {
			return true
		}
	}
	return false
}

// AddTurn appends a turn; the caller has checked SeenTurn.
func (s *Session) AddTurn(h uint64, ref TurnRef) {
	s.Turns = append(s.Turns, ref)
	s.Total++
	if len(s.RecentIDs) >= maxRecentIDs {
		copy(s.RecentIDs, s.RecentIDs[1:])
		s.RecentIDs = s.RecentIDs[:maxRecentIDs-1]
	}
	s.RecentIDs = append(s.RecentIDs, h)
}

// Advance applies a successful fold of turns [Cursor, to) and the first
// notes pending notes.
func (s *Session) Advance(to int64, notes int) {
	n := int(to - s.Cursor)
	n = max(0, min(n, len(s.Turns)))
	// Reslicing keeps this O(1) while a backlog is folded batch by batch;
	// append reallocates (and drops the folded head) as turns arrive.
	s.Turns = s.Turns[n:]
	s.Cursor = to
	s.CoveredThrough = to - 1
	if t := s.Tools; t != nil {
		k, _ := slices.BinarySearch(t.Joined, to)
		t.Joined = t.Joined[k:]
		if len(t.Joined) == 0 && t.Open == 0 && t.Run == 0 {
			s.Tools = nil
		}
	}
	notes = max(0, min(notes, len(s.PendingNotes)))
	s.PendingNotes = s.PendingNotes[notes:]
}

// CountEvicted adds refs, the oldest unfolded turns, to the eviction
// totals the next eviction note reports.
func (s *Session) CountEvicted(refs []TurnRef) {
	if len(refs) == 0 {
		return
	}
	if s.Evicted == 0 {
		s.FirstEvictedAt = refs[0].At
	}
	for _, r := range refs {
		s.EvictedTokens += int64(r.Tokens)
	}
	s.Evicted += int64(len(refs))
	s.LastEvictedAt = refs[len(refs)-1].At
}

// Reset forgets the transcript and summary but keeps the stream position,
// so redelivered events before the reset stay applied, and the summary
// version, so versions stay increasing for builders and the outbound
// stream's message-id dedup never drops a post-reset summary.
func (s *Session) Reset() {
	last, cfg, epoch, version, summarySeq, lastAt := s.LastSeq, s.Config, s.Epoch, s.Version, s.SummarySeq, s.LastEventAt
	*s = *New(s.ID)
	s.LastSeq = last
	s.Config = cfg
	s.Epoch = epoch + 1
	s.Version = version
	s.SummarySeq = summarySeq
	s.LastEventAt = lastAt
}

// maxMemoryIDs bounds the memory dedup set per session.
const maxMemoryIDs = 256

// NewMemories returns the memories not published before for this session
// and records them. Memories compare case- and space-insensitively.
func (s *Session) NewMemories(mems []string) []string {
	var out []string
	for _, m := range mems {
		h := memoryID(m)
		if m == "" || slices.Contains(s.MemoryIDs, h) {
			continue
		}
		if len(s.MemoryIDs) >= maxMemoryIDs {
			s.MemoryIDs = s.MemoryIDs[1:]
		}
		s.MemoryIDs = append(s.MemoryIDs, h)
		out = append(out, m)
	}
	return out
}

// ForgetMemories removes mems from the memories recorded as published
// (their publish failed): a later fold that extracts them again publishes
// them.
func (s *Session) ForgetMemories(mems []string) {
	for _, m := range mems {
		h := memoryID(m)
		s.MemoryIDs = slices.DeleteFunc(s.MemoryIDs, func(x uint64) bool { return x == h })
	}
}

// memoryID is a memory's dedup key: the HashID of the memory with
// surrounding space and trailing full stops trimmed, lower-cased, and its
// words joined by single spaces (strings.ToLower, then strings.Fields and
// Join; TestMemoryIDNormalizes keeps the two equal). It hashes as it
// reads, without building that string: a fold of the offline summarizer
// brings a dozen memories, and building that string takes three
// allocations a memory, as much as publishing it costs the shard.
func memoryID(m string) uint64 {
	const offset64, prime64 = 14695981039346656037, 1099511628211 // FNV-1a, as HashID
	h := uint64(offset64)
	started, space := false, false // a word was hashed; a space is due before the next
	var enc [utf8.UTFMax]byte
	for _, c := range strings.TrimRight(strings.TrimSpace(m), ".") {
		var b []byte
		if c < utf8.RuneSelf {
			x := byte(c)
			if asciiSpace(x) {
				space = true
				continue
			}
			if 'A' <= x && x <= 'Z' {
				x += 'a' - 'A'
			}
			enc[0] = x
			b = enc[:1]
		} else {
			// An invalid byte reads as utf8.RuneError, which ToLower
			// writes as its encoding: so does this.
			r := unicode.ToLower(c)
			if unicode.IsSpace(r) {
				space = true
				continue
			}
			b = enc[:utf8.EncodeRune(enc[:], r)]
		}
		if started && space {
			h = (h ^ ' ') * prime64
		}
		started, space = true, false
		for _, x := range b {
			h = (h ^ uint64(x)) * prime64
		}
	}
	return h
}

// asciiSpace reports whether an ASCII byte is white space (unicode.IsSpace).
func asciiSpace(x byte) bool {
	return x == ' ' || (x >= '\t' && x <= '\r')
}

// ResetDue reports why the session's reset policy resets it before an
// event at time at (bot time), or "" when it does not. Daily resets at the
// first event after reset_hour UTC that follows an event before it; idle
// resets at the first event after reset_idle_minutes of silence.
func (s *Session) ResetDue(at time.Time) string {
	c := s.Config
	if c == nil || s.LastEventAt == 0 || at.IsZero() {
		return ""
	}
	last := time.UnixMilli(s.LastEventAt).UTC()
	switch c.ResetPolicy {
	case events.ResetIdle:
		if c.ResetIdleMinutes > 0 && at.Sub(last) >= time.Duration(c.ResetIdleMinutes)*time.Minute {
			return events.ResetIdle
		}
	case events.ResetDaily:
		if c.ResetHour == nil {
			return ""
		}
		at = at.UTC()
		boundary := time.Date(at.Year(), at.Month(), at.Day(), *c.ResetHour, 0, 0, 0, time.UTC)
		if boundary.After(at) {
			boundary = boundary.AddDate(0, 0, -1)
		}
		if last.Before(boundary) {
			return events.ResetDaily
		}
	}
	return ""
}
