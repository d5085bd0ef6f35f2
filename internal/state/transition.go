package state

import (
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
)

// Landing is a fold's outcome as the session records it: the summary
// (or mode evict's eviction note) stored on the outbound stream at Seq,
// which covers the turns before To and the first Notes pending notes.
type Landing struct {
	Summary       string
	Version       uint64
	Seq           uint64 // outbound stream sequence of its summary-updated
	To            int64  // the new cursor
	Notes         int    // pending notes folded with the turns
	At            time.Time
	SummaryTokens int
	// OriginalTokens are the summarized turns' tokens, added to the
	// session's total (not for a note); Exchanges is the exchange count
	// when the fold started.
	OriginalTokens int
	Exchanges      int
	// Note: Summary is an eviction note, not a summary of the turns; the
	// turns dropped are counted for the next note (CountEvicted).
	Note bool
	// State is the summarizer's state for Summary (fold.Outcome.State),
	// kept as the session's SummaryState; nil for none.
	State []byte
}

// Land records a fold whose summary is on the outbound stream: the cursor
// moves past what it covers, the lease and failure backoff end. It is the
// one place a session takes its own fold's outcome.
func (s *Session) Land(l Landing) {
	if l.Note {
		s.CountEvicted(s.Turns[:max(0, min(int(l.To-s.Cursor), len(s.Turns)))])
	} else {
		s.ExchangesFolded = l.Exchanges
		s.OriginalToks += l.OriginalTokens
	}
	s.Summary, s.SummaryIsNote, s.SummaryState = l.Summary, l.Note, l.State
	s.Version, s.SummarySeq = l.Version, l.Seq
	s.Advance(l.To, l.Notes)
	s.LastFoldAt = l.At
	s.Compactions++
	s.Lease = nil
	s.Failures, s.RetryAfter = 0, time.Time{}
	s.SummaryToks = l.SummaryTokens
	s.ContextTokens = 0 // the bot's next prompt is smaller; its old report no longer holds
}

// Adoptable reports whether ev, the subject's last summary, is a later one
// of the session as it stands (same reset epoch, a cursor within the turns
// it holds) that it can take as its own (Adopt). A summary that is not is
// still the subject's last: the next publish goes after it.
func (s *Session) Adoptable(ev *events.SummaryUpdated) bool {
	return ev != nil && ev.Version > s.Version && ev.Epoch == s.Epoch && ev.Cursor >= s.Cursor && ev.Cursor <= s.Total
}

// Behind reports whether ev is a later summary of the session made from
// turns it has not applied yet: the session was reloaded from a checkpoint
// older than the record (a rewind after failed checkpoints, a new owner)
// and its turns are coming again. Folding them again would record batches
// the stream already holds under new versions. An ended session does not
// wait: no turn is coming, so it folds and publishes after the record.
func (s *Session) Behind(ev *events.SummaryUpdated) bool {
	return ev != nil && ev.Version > s.Version && ev.Epoch == s.Epoch && ev.Cursor > s.Total && !s.Ended
}

// Adopt makes ev, a summary found on the outbound stream at seq, the
// session's own: its owner published it and stopped before a checkpoint
// recorded it. The stream is the record of what was folded, so the batch
// is not folded again. A summary of a mode that evicts instead of
// summarizing is an eviction note (fold.NoteMode): the turns it dropped
// are counted so the next note counts on from it. The caller has checked
// Adoptable.
func (s *Session) Adopt(ev *events.SummaryUpdated, seq uint64) {
	note := fold.NoteMode(ev.Mode)
	if n := int(min(ev.Cursor-s.Cursor, int64(len(s.Turns)))); n > 0 && note {
		s.CountEvicted(s.Turns[:n])
	}
	s.Summary, s.Version, s.SummarySeq = ev.Summary, ev.Version, seq
	s.SummaryState = nil // not in the event: the next fold starts from its prose
	s.SummaryIsNote = note
	s.Compactions = ev.Compactions
	s.Advance(ev.Cursor, ev.FoldedNotes)
	s.LastFoldAt = ev.At
	s.SummaryToks = ev.SummaryTokens
	s.Lease = nil
}

// Failure is why a fold did not land, for Fail.
type Failure uint8

const (
	// FailCanceled: the fold was abandoned or shut down; no backoff.
	FailCanceled Failure = iota
	// FailTransient: NATS trouble (an election, a lost route) is
	// short-lived: retried after the base backoff, without escalating.
	FailTransient
	// FailModel: the model failed; each failure in a row doubles the
	// backoff.
	FailModel
	// FailPersistent: a model error that repeats until someone changes
	// something (auth, bad request): the longest backoff at once.
	FailPersistent
)

// Fail records a fold that did not land: the lease is dropped, the cursor
// and summary stay, and RetryAfter says when the batch may be tried again
// (base and most bound the backoff).
func (s *Session) Fail(now time.Time, why Failure, base, most time.Duration) {
	s.Lease = nil
	switch why {
	case FailCanceled:
	case FailModel, FailPersistent:
		s.Failures++
		backoff := base << min(s.Failures-1, 16)
		if why == FailPersistent {
			backoff = most
		}
		s.RetryAfter = now.Add(min(backoff, most))
	default:
		s.RetryAfter = now.Add(base)
	}
}
