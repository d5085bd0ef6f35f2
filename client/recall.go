package client

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/sentence"
	"github.com/foldstream/foldstream/internal/speaker"
)

// EndpointRecall answers a RecallRequest with a Recall: the turns of a
// session that best match a query (evicted and folded turns stay
// searchable).
const EndpointRecall = "recall"

// Recall scopes: which turns a recall searches.
const (
	// RecallScopeEvicted searches the turns before the session's cursor:
	// folded into the summary (mode window) or dropped (mode evict), in
	// either case no longer verbatim in the bot's prompt. The default.
	RecallScopeEvicted = "evicted"
	// RecallScopeAll searches every turn since the session's last reset.
	RecallScopeAll = "all"
)

// Recall limits: a request without a limit gets DefaultRecallLimit
// results at most; a limit must be within 1..MaxRecallLimit.
const (
	DefaultRecallLimit = 10
	MaxRecallLimit     = 50
	// MaxRecallQueryChars bounds a query, in characters (runes).
	MaxRecallQueryChars = 1024
)

// RecallRequest asks for the turns of Session that best match Query.
type RecallRequest struct {
	V       int    `json:"v"`
	Session string `json:"session"`
	Query   string `json:"query"`
	// Limit is the most results wanted, 1..MaxRecallLimit; 0 (omitted)
	// means DefaultRecallLimit.
	Limit int `json:"limit,omitempty"`
	// Scope is RecallScopeEvicted (the default when empty) or
	// RecallScopeAll.
	Scope string `json:"scope,omitempty"`
}

// RecallOptions are the optional parts of a recall: zero values mean
// DefaultRecallLimit and RecallScopeEvicted.
type RecallOptions struct {
	Limit int
	Scope string
}

// Recall is the reply of the recall endpoint.
type Recall struct {
	V       int    `json:"v"`
	Session string `json:"session"`
	Query   string `json:"query"`
	// Scope is the scope that was searched (the default filled in).
	Scope string `json:"scope"`
	// Cursor is the session's first unfolded turn when the request was
	// answered: scope evicted searches the turns with Index < Cursor.
	Cursor int64 `json:"cursor"`
	// Results are best first: highest score, ties broken by recency
	// (higher index first). Never null.
	Results []RecallResult `json:"results"`
	// Searched is how many distinct turns were in scope and scored.
	Searched int `json:"searched"`
}

// RecallResult is one matching turn.
type RecallResult struct {
	TurnID string `json:"turn_id"`
	// Index is the turn's position in the session's transcript as the
	// processor counts it (0-based, duplicates not counted, restarted by
	// a reset): the index cursors and summaries refer to.
	Index   int64     `json:"index"`
	At      time.Time `json:"at"`
	Speaker string    `json:"speaker"`
	Role    string    `json:"role"`
	Text    string    `json:"text"`
	// Score is the turn's BM25 relevance to the query (higher is better;
	// comparable only within one reply).
	Score float64 `json:"score"`
}

// CheckRecall validates a recall request the way the service does and
// fills in its defaults (V, Limit, Scope). A problem is an error that
// names the field.
func CheckRecall(r *RecallRequest) error {
	if r.V == 0 {
		r.V = WireVersion
	}
	if r.V != WireVersion {
		return fmt.Errorf("field \"v\": expected %d, got %d", WireVersion, r.V)
	}
	if err := events.CheckSession("session", r.Session); err != nil {
		return err
	}
	if strings.TrimSpace(r.Query) == "" {
		return fmt.Errorf("field \"query\": expected a non-empty query, got %q", r.Query)
	}
	if n := len([]rune(r.Query)); n > MaxRecallQueryChars {
		return fmt.Errorf("field \"query\": expected at most %d characters, got %d", MaxRecallQueryChars, n)
	}
	switch {
	case r.Limit == 0:
		r.Limit = DefaultRecallLimit
	case r.Limit < 1 || r.Limit > MaxRecallLimit:
		return fmt.Errorf("field \"limit\": expected 1..%d (omit it for %d), got %d", MaxRecallLimit, DefaultRecallLimit, r.Limit)
	}
	switch r.Scope {
	case "":
		r.Scope = RecallScopeEvicted
	case RecallScopeEvicted, RecallScopeAll:
	default:
		return fmt.Errorf("field \"scope\": expected %q or %q, got %q", RecallScopeEvicted, RecallScopeAll, r.Scope)
	}
	return nil
}

// Recall asks the service for the turns of session that best match query,
// best first. By default it searches the turns before the cursor (folded
// or evicted, no longer verbatim in the prompt); opts.Scope RecallScopeAll
// searches every turn since the last reset. A request the service would
// refuse is an error naming the field and nothing is sent; an unknown
// session is a *ServiceError for which IsUnknownSession holds.
func (b *Builder) Recall(ctx context.Context, session, query string, opts RecallOptions) (*Recall, error) {
	req := RecallRequest{V: WireVersion, Session: session, Query: query, Limit: opts.Limit, Scope: opts.Scope}
	if err := CheckRecall(&req); err != nil {
		return nil, fmt.Errorf("foldstream client: recall: %w", err)
	}
	var out Recall
	if err := b.request(ctx, EndpointRecall, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Question-aware context (ContextRequest.Query): limits and layout.
const (
	// MaxContextQueryChars bounds ContextRequest.Query, in characters
	// (runes).
	MaxContextQueryChars = 4096
	// DefaultRecallTurns is how many best-matching earlier turns a
	// question-aware context without a budget recalls when RecallTurns is
	// 0 (their neighbours not counted); with a budget the default is
	// MaxRecallTurns, i.e. as many as fit. MaxRecallTurns is the most a
	// request may ask.
	DefaultRecallTurns = 10
	MaxRecallTurns     = 50

	// RecalledTurn and RecalledMemory are the kinds of a RecalledItem.
	RecalledTurn   = "turn"
	RecalledMemory = "memory"

	// The header lines Prompt puts before each recalled section, and
	// before the verbatim turns when anything was recalled, so that a
	// model tells earlier excerpts from the live conversation.
	// They are short: a header is paid in every reply's budget.
	MemoriesHeader = "Remembered facts:"
	ExcerptsHeader = "Earlier excerpts (in order):"
	RecentHeader   = "Recent turns:"

	// RecallTimeLayout is how a recalled line gives the day it was said
	// (UTC): the day, as a builder that dates a transcript gives it, once
	// per day of excerpts (ExcerptRun), in the words people give a date
	// in ("22 Nov 2026", as a memory resolves "yesterday"), so that an
	// answer's date is found as it is said.
	RecallTimeLayout = "2 Jan 2006"
)

// RecalledItem is a memory or an earlier turn packed into a question-aware
// context.
type RecalledItem struct {
	// Kind is RecalledMemory or RecalledTurn.
	Kind string `json:"kind"`
	// TurnID and Index identify a turn (Index as in ContextTurn, always
	// sent: 0 is the first turn; a memory has 0); Seq is its inbound
	// stream sequence. MemoryID identifies a memory: the
	// item's id when the fold gave one, else "<version>.<n>" (the n-th
	// memory of the summary version that published it).
	TurnID   string `json:"turn_id,omitempty"`
	Index    int64  `json:"index"`
	MemoryID string `json:"memory_id,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
	Speaker  string `json:"speaker,omitempty"`
	Role     string `json:"role,omitempty"`
	// At is when the turn was said (the bot's timestamp) or when the
	// memory's fact was stated (else when it was published).
	At time.Time `json:"at,omitzero"`
	// Score is the item's relevance to the query (higher is better,
	// comparable only within one reply); 0 for a turn recalled as the
	// neighbour of a match (Neighbour true).
	Score     float64 `json:"score"`
	Neighbour bool    `json:"neighbour,omitempty"`
	// Text is the turn's text, or, Trimmed, the sentences of a long
	// matching turn that hold the match, with "…" where sentences were
	// left out. A turn of speech is shown without what its transcript
	// carries besides the words: annotation tags ("{disfmarker}",
	// "[laughter]"), fillers ("um", "uh"), words said twice and
	// broken-off starts (a tool's turn is shown as it is).
	Text    string `json:"text"`
	Trimmed bool   `json:"trimmed,omitempty"`
	// Chars and Tokens are the item's cost as its prompt line in the
	// reply's Prompt: labelled with its day (Line) for a memory
	// and for the first turn of a run of excerpts, "Speaker: text" for a
	// turn that continues a run (ExcerptRun).
	Chars  int `json:"chars"`
	Tokens int `json:"tokens"`
}

// Line is the item as one labelled prompt line: "[22 Nov 2026] Alice:
// text" for a turn; the same after "- " for a memory, without the speaker
// when it has none and without the day when it has no time. In a prompt a
// turn has this line only when it starts a run of excerpts of one day
// (ExcerptRun).
func (r RecalledItem) Line() string {
	var b strings.Builder
	if r.Kind == RecalledMemory {
		b.WriteString("- ")
	}
	if !r.At.IsZero() {
		b.WriteString("[" + r.At.UTC().Format(RecallTimeLayout) + "] ")
	}
	b.WriteString(r.RunLine())
	return b.String()
}

// MissingTurns are turns of the session that a question-aware context
// could not search: [From, To) by turn index, with the reason (usually
// the inbound stream's max-age removed them).
type MissingTurns struct {
	From   int64  `json:"from"`
	To     int64  `json:"to"`
	Reason string `json:"reason"`
}

// CheckContext validates a context request the way the service does and
// fills in its defaults (RecallTurns with a query). A problem is an error
// that names the field and the limit.
func CheckContext(r *ContextRequest) error {
	if err := events.CheckSession("session", r.Session); err != nil {
		return err
	}
	if r.BudgetChars < 0 {
		return fmt.Errorf("field \"budget_chars\": expected a non-negative integer (0 = unlimited), got %d", r.BudgetChars)
	}
	if r.BudgetTokens < 0 {
		return fmt.Errorf("field \"budget_tokens\": expected a non-negative integer (0 = unlimited), got %d", r.BudgetTokens)
	}
	if n := len([]rune(r.Query)); n > MaxContextQueryChars {
		return fmt.Errorf("field \"query\": expected 1..%d characters, got %d", MaxContextQueryChars, n)
	}
	if r.Query != "" && strings.TrimSpace(r.Query) == "" {
		return fmt.Errorf("field \"query\": expected 1..%d characters with at least one that is not a space, got %q", MaxContextQueryChars, r.Query)
	}
	switch {
	case r.RecallTurns < 0 || r.RecallTurns > MaxRecallTurns:
		return fmt.Errorf("field \"recall_turns\": expected 1..%d (omit it for %d), got %d", MaxRecallTurns, DefaultRecallTurns, r.RecallTurns)
	case r.RecallTurns > 0 && r.Query == "":
		return fmt.Errorf("field \"recall_turns\": only applies with a query (field \"query\" is empty)")
	case r.RecallTurns == 0 && r.Query != "" && r.BudgetChars == 0 && r.BudgetTokens == 0:
		r.RecallTurns = DefaultRecallTurns
	case r.RecallTurns == 0 && r.Query != "":
		r.RecallTurns = MaxRecallTurns // as many as fit the budget
	}
	return nil
}

// ExcerptRun is where a prompt's section of recalled lines stands, so that
// the excerpts said on one day are labelled with that day once, on the
// first line, rather than on every line (a label costs ~14 characters a
// line, the room of a few words of evidence), as a builder that dates a
// transcript gives a date line per day. The zero value is before a
// section's first line.
//
// A turn continues the run of the line before it when that line is a turn
// said on the same day (UTC); its line is then "Speaker: text". Any other
// turn starts a run: its line is Line, labelled. A memory is always its
// own Line and ends the run; so does a turn without a time.
type ExcerptRun struct {
	day  int // the run's label: the day of its first turn (UTC), as year*10000+month*100+day
	open bool
}

// Next is r's prompt line after the lines before it (run), and the state
// after it. It does not change run: a renderer that leaves a line out
// keeps the old state, so the next line it keeps is labelled if need be.
func (run ExcerptRun) Next(r RecalledItem) (string, ExcerptRun) {
	labelled, next := run.Labels(r)
	if labelled {
		return r.Line(), next
	}
	return r.RunLine(), next
}

// RunLine is a turn's line where it continues a run of excerpts: Line
// without the day, "Alice: text". A turn's line is its
// ContextTurn's (the speaker's name normalised, else its role, else
// "unknown"; line breaks shown as " ⏎ "), so that neither a name nor a
// text forges a line of its own; a memory's is its speaker's normalised
// name, if any, and its text on one line.
func (r RecalledItem) RunLine() string {
	if r.Kind == RecalledTurn {
		return ContextTurn{Speaker: r.Speaker, Role: r.Role, Text: r.Text}.Line()
	}
	text := sentence.ShowBreaks(r.Text)
	if name := speaker.Name(r.Speaker); name != "" {
		return name + ": " + text
	}
	return text
}

// Labels reports whether r's line after the lines before it (run) carries
// its day (always for a memory, a turn that starts a run, or a
// turn without a time, which has none to carry), and the state after it.
func (run ExcerptRun) Labels(r RecalledItem) (bool, ExcerptRun) {
	if r.Kind != RecalledTurn || r.At.IsZero() {
		return true, ExcerptRun{}
	}
	y, m, d := r.At.UTC().Date()
	day := y*10000 + int(m)*100 + d
	if run.open && day == run.day {
		return false, run
	}
	return true, ExcerptRun{day: day, open: true}
}
