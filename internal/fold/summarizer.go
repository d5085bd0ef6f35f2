package fold

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/contextsource"
)

// Summarizer turns a batch of old turns (plus the previous summary and any
// pending notes) into a new running summary. Backends: offline (extractive,
// no network) and openai (any OpenAI-compatible chat-completions API).
//
// A Summarizer must not enforce the char budget by truncation: the engine
// owns budget policy (re-compaction pass, then sentence clamp) so that every
// backend is treated the same and the tier used is reported.
type Summarizer interface {
	Summarize(ctx context.Context, req Request) (Result, error)
	// Name identifies the backend and model in events and logs, e.g.
	// "offline" or "openai:gpt-4o-mini".
	Name() string
}

// Profile selects the default prompt: voice sessions or agent
// sessions with tool calls.
type Profile string

const (
	ProfileVoice Profile = "voice"
	ProfileAgent Profile = "agent"
)

// Turn is one transcript turn as the summarizer sees it.
type Turn struct {
	Index   int64     // position in the session transcript (0-based)
	TurnID  string    // bot-assigned idempotency key
	At      time.Time // when it was said
	Speaker string    // display name, e.g. "Alice"
	Role    string    // user | assistant | system | tool
	Text    string
	Kind    string // optional: speech, chat, tool_call, tool_result, ...
	Tool    string // tool name for tool_call / tool_result turns
	Tokens  int    // token count if known (0 = unknown)
}

// Note is a screen-watch / visual note the bot evicted from its live buffer.
type Note struct {
	NoteID string
	At     time.Time
	Source string // who was sharing / which feed, when known
	Text   string
}

// Request is one summarization call.
type Request struct {
	Session         string
	Profile         Profile
	PreviousSummary string // "" on the first fold
	Turns           []Turn
	Notes           []Note
	// MaxChars is the summary budget. Backends aim below it (the openai
	// backend derives its max output tokens from it).
	MaxChars int
	// Recompact is set on the re-compaction pass: PreviousSummary holds the
	// over-long output and Turns/Notes are empty; the backend must condense.
	Recompact bool
	// From/To bound the folded window in time (first/last turn or note).
	From, To time.Time
	// PreviousState is what the backend returned as Result.State with
	// PreviousSummary, carried unread by the processor in the checkpoint
	// (nil on the first fold, after a backend without state, and in
	// checkpoints written before it existed). It is opaque to everyone
	// but the backend that wrote it, which versions it and must cope with
	// one it cannot decode.
	PreviousState []byte
	// Evicted are the session's evictions before this fold (mode evict's
	// note is cumulative); zero for a session that never evicted.
	Evicted Eviction
	// Sources asks the deployment's context sources about the folded
	// window, for a mode that merges their answers (interval); nil when
	// none is configured.
	Sources func(ctx context.Context, from, to time.Time) []contextsource.Answer
	// Earlier reads again the session's turns before Turns, oldest first
	// from the first the session has (index 0, or the first after its last
	// reset): what PreviousState covers. A backend that cannot decode
	// PreviousState returns ErrStateUnreadable while Earlier is set, and
	// Summarize builds the state again from these turns (Rebuild); why is
	// that error. It fails when the inbound stream no longer holds them
	// all. nil where the stream is not at hand (replay, what-if): the
	// backend then makes do with PreviousSummary. The notes are those the
	// earlier folds took, oldest first.
	Earlier func(ctx context.Context, why error) ([]Turn, []Note, error)
}

// ErrStateUnreadable is what a backend returns (Unreadable) for a request
// whose PreviousState it cannot decode (a bug, or a state a newer version
// wrote) while the request's Earlier can give the turns to build it again.
var ErrStateUnreadable = errors.New("summarizer state unreadable")

// Unreadable is ErrStateUnreadable for the decode error err.
func Unreadable(err error) error { return fmt.Errorf("%w: %w", ErrStateUnreadable, err) }

// Result is what a backend returns.
type Result struct {
	Summary string
	// Memories are durable facts extracted alongside the summary;
	// optional, may be nil.
	Memories []string
	// MemoryItems, when a backend has them, are Memories with their
	// structure: one item per memory text, in the same order. Optional
	// (the openai backend has none).
	MemoryItems []Memory
	// State is the backend's own record of what the summary holds, handed
	// back as the next fold's Request.PreviousState (nil: none, the next
	// fold starts from PreviousSummary alone).
	State []byte
	// Model that produced the summary ("offline" for the offline backend).
	Model string
	// Provider-reported usage; zero when the backend has none.
	InputTokens  int
	OutputTokens int
}

// Memory is one durable fact with where it came from: who said it, in which
// turn, when; and which earlier memory of the session it replaces, when a
// later turn changed that fact.
type Memory struct {
	ID      string // stable within the session: the same fact gets the same ID
	Speaker string
	Text    string // the fact as a sentence, attributed ("Marco moved from Sweden.")
	TurnID  string
	At      time.Time
	// Supersedes is the ID of the earlier memory this one replaces ("" for
	// none): the older fact stays true of its time, not of now.
	Supersedes string
}
