package fold

// Window is mode window's rolling compaction: keep the last Recent turns
// verbatim and fold the oldest Batch turns behind the cursor once they have
// fully left the recent window.
type Window struct {
	Recent          int // verbatim recent window (50)
	Batch           int // turns folded per run (10)
	MaxSummaryChars int // summary budget (1200)
	MaxNoteChars    int // per-note cap when folded (400)
	// MinFoldTokens amortizes folds (0 = off: folds of Batch turns): a fold
	// that is due waits until the eligible turns (those behind the recent
	// window) hold at least this many tokens, then folds them in one call:
	// the shortest run from the cursor that holds MinFoldTokens, and never
	// fewer than Batch turns. In steady state that is every eligible turn;
	// after a backlog each call stays near MinFoldTokens. Meanwhile the
	// verbatim window stays elastic, as it does while a fold is in
	// flight. Each call pays the prompt and the previous summary once, so
	// short turns need large folds to be cheap (docs/benchmarks.md).
	MinFoldTokens int
}

// DefaultWindow holds mode window's defaults: 50 verbatim, batches of 10,
// a 1,200-character summary, 400 characters per note.
func DefaultWindow() Window {
	return Window{Recent: 50, Batch: 10, MaxSummaryChars: 1200, MaxNoteChars: 400}
}

// SkipReason says why a trigger check did not start a fold.
type SkipReason string

// Skip reasons (the wire names of compaction_skipped).
const (
	NoSkip              SkipReason = ""
	SkipDisabled        SkipReason = "disabled"
	SkipSessionEnding   SkipReason = "session_ending"
	SkipBelowThreshold  SkipReason = "below_threshold"
	SkipAlreadyInFlight SkipReason = "already_in_flight"
	SkipRetryBackoff    SkipReason = "retry_backoff"
	SkipNoEligibleBatch SkipReason = "no_eligible_batch"
)

// Check is the input of a trigger evaluation.
type Check struct {
	Cursor   int64 // first unfolded turn
	Total    int64 // turns in the transcript
	InFlight bool  // a fold lease is held and not expired
	Backoff  bool  // the last fold failed and its retry backoff has not passed
	Ending   bool  // the session is ending / ended
	Disabled bool
	// Force is a manual compact: fold the eligible batch even when the
	// "more than recent+batch" threshold is not reached yet.
	Force bool

	// Inputs of the other modes (see Policy.Plan), and TurnTokens also of
	// mode window with MinFoldTokens.
	UnfoldedTokens  int             // tokens of the turns [Cursor, Total)
	SummaryTokens   int             // tokens of the running summary
	ReportedContext int             // the bot's provider-reported prompt size since the last fold, 0 = none
	TurnTokens      func(i int) int // tokens of unfolded turn i (0 = the turn at Cursor)
	Exchanges       int             // completed exchanges (assistant turns) since the last fold (mode interval)
	Idle            bool            // the session has been quiet long enough for an idle fold
	// Joined reports whether unfolded turn i (0 = the turn at Cursor) is
	// joined to the turn before it by a tool exchange (ToolExchange): no
	// fold may end right before it. nil = no tool traffic.
	Joined func(i int) bool
}

// Decision is the outcome: fold (or evict) [From, To) or skip with Reason.
type Decision struct {
	Fold        bool
	Action      Action
	Cause       string // which rule fired (Cause* constants)
	Reason      SkipReason
	Estimate    int // context estimate in tokens (modes tokens and evict)
	Limit       int // the threshold the estimate was held against
	RecentStart int64
	Eligible    int64
	From, To    int64
	// Model: the fold calls the summarizer, so the summarizer's breaker
	// and fold slots apply and the batch's text is read; false for a fold
	// whose summary needs no model (mode evict's note). Set by Policy.Plan.
	Model bool
	// Placeholder: the fold may land with the placeholder tier instead of
	// a summary when the summarizer cannot serve it (Engine.Placeholder).
	// Set by Policy.Plan.
	Placeholder bool
}

// Evaluate applies the window arithmetic:
//
//	trigger when total − cursor > recent + batch and no fold is in flight;
//	recentStart = max(cursor, total − recent); eligible = recentStart − cursor;
//	fold [cursor, cursor+batch) when eligible ≥ batch.
//
// DESIGN.md states only "eligible ≥ batch", which would fire at 60 turns;
// the progression 61 → fold 0..9, 71 → fold 10..19 needs the strict
// threshold as well, so both are checked, in this order.
//
// A fold never ends inside a tool exchange (Check.Joined): the batch grows
// up to the recent window to take the exchange whole, else shrinks.
//
// With MinFoldTokens the same fold also waits (below_threshold, with
// Estimate the eligible turns' tokens and Limit MinFoldTokens) until the
// eligible turns hold that many tokens, and then takes them all (see
// Window.MinFoldTokens); a forced compact takes them at once.
func (w Window) Evaluate(c Check) Decision {
	recentStart := max(c.Cursor, c.Total-int64(w.Recent))
	d := Decision{RecentStart: recentStart, Eligible: recentStart - c.Cursor}
	batch := int64(w.Batch)
	if w.MinFoldTokens > 0 && (c.Force || c.Total-c.Cursor > int64(w.Recent+w.Batch)) {
		var n int64
		n, d.Estimate = w.amortized(c, d.Eligible)
		d.Limit = w.MinFoldTokens
		batch = max(batch, n)
	}
	switch {
	case c.Disabled:
		d.Reason = SkipDisabled
	case c.Ending:
		d.Reason = SkipSessionEnding
	case !c.Force && c.Total-c.Cursor <= int64(w.Recent+w.Batch):
		d.Reason = SkipBelowThreshold
	case !c.Force && d.Estimate < w.MinFoldTokens:
		d.Reason = SkipBelowThreshold
	case c.InFlight:
		d.Reason = SkipAlreadyInFlight
	case c.Backoff && !c.Force:
		d.Reason = SkipRetryBackoff
	case d.Eligible < int64(w.Batch) && !(c.Force && d.Eligible > 0):
		d.Reason = SkipNoEligibleBatch
	default:
		// A boundary inside a tool exchange moves: the batch grows to
		// fold the exchange whole while it stays behind the recent
		// window, else shrinks to keep it verbatim whole.
		to := c.pairedEnd(c.Cursor, c.Cursor+min(batch, d.Eligible), recentStart)
		if to == c.Cursor {
			d.Reason = SkipNoEligibleBatch
			break
		}
		d.Fold = true
		d.From = c.Cursor
		d.To = to
	}
	return d
}

// amortized returns how many of the eligible turns, from the cursor, it
// takes to hold MinFoldTokens (all of them when they hold fewer), and how
// many tokens those turns hold.
func (w Window) amortized(c Check, eligible int64) (turns int64, tokens int) {
	for turns < eligible && tokens < w.MinFoldTokens {
		tokens += c.turnTokens(int(turns))
		turns++
	}
	return turns, tokens
}
