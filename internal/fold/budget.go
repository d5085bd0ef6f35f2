package fold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/sentence"
)

// Tier reports how a summary met its char budget (in order: output
// cap, then one re-compaction pass, then a sentence clamp).
type Tier string

const (
	TierFull        Tier = "full"        // fit on the first call
	TierRecompacted Tier = "recompacted" // needed the re-compaction pass
	TierClamped     Tier = "clamped"     // still over budget: clamped at a sentence boundary
)

// Outcome is a summary that fits the budget, with what it cost.
type Outcome struct {
	Summary     string
	Tier        Tier
	Memories    []string
	MemoryItems []Memory // structured Memories, when the backend had them
	// State is the backend's Result.State for Summary (nil when the
	// backend keeps none, or when Summary is not wholly the backend's).
	State        []byte
	Model        string
	InputTokens  int
	OutputTokens int
	Calls        int // summarizer calls made (1 or 2 per Summarize; summed by SummarizeChunked)
	// Chunks is the number of chunks SummarizeChunked split the turns into
	// (summarised or skipped); 0 from Summarize and Placeholder.
	Chunks int
	// SkippedTurns counts the turns that were folded without being
	// summarised: those of skipped chunks (TierPartial) or all of them
	// (TierPlaceholder). 0 otherwise.
	SkippedTurns int
	// Note: Summary is a note standing for dropped turns (mode evict), not
	// a summary of them; the session counts the turns as evicted.
	Note bool
	// Evicted is the record of the turns a note stands for, published
	// after the summary-updated that carries the note (the recorder fills
	// its envelope: version, session, time); nil for a summary.
	Evicted *events.Evicted
}

// Summarize runs one fold through s and enforces req.MaxChars the same way
// for every backend. A failure of the first call is returned as is
// (classified by the backend); an empty first answer fails with class
// invalid_output. Once a usable first answer exists the fold never fails
// because of the budget: if the re-compaction call fails or returns
// nothing, the first answer is clamped instead. MaxChars <= 0 means no
// budget.
//
// A backend that cannot read req.PreviousState (ErrStateUnreadable) gets
// it built again from the session's earlier turns first (Rebuild).
func Summarize(ctx context.Context, s Summarizer, req Request) (Outcome, error) {
	res, err := s.Summarize(ctx, req)
	if errors.Is(err, ErrStateUnreadable) && req.Earlier != nil {
		res, err = Rebuild(ctx, s, req, err)
	}
	if err != nil {
		return Outcome{}, fmt.Errorf("fold: summarize with %s: %w", s.Name(), err)
	}
	out := Outcome{
		Summary:      strings.TrimSpace(res.Summary),
		Tier:         TierFull,
		Memories:     mergeMemories(nil, res.Memories),
		MemoryItems:  mergeMemoryItems(nil, res.MemoryItems),
		State:        res.State,
		Model:        res.Model,
		InputTokens:  res.InputTokens,
		OutputTokens: res.OutputTokens,
		Calls:        1,
	}
	if out.Summary == "" {
		return Outcome{}, retry.New(retry.InvalidOutput, fmt.Errorf("fold: %s returned an empty summary", s.Name()))
	}
	if req.MaxChars <= 0 || runeLen(out.Summary) <= req.MaxChars {
		return out, nil
	}

	// One re-compaction pass with the over-long output as the previous
	// summary; the turns are already in it.
	re, err := s.Summarize(ctx, Request{
		Session:         req.Session,
		Profile:         req.Profile,
		PreviousSummary: out.Summary,
		PreviousState:   out.State,
		MaxChars:        req.MaxChars,
		Recompact:       true,
		From:            req.From,
		To:              req.To,
	})
	out.Calls = 2
	long := out.Summary
	if err == nil {
		out.InputTokens += re.InputTokens
		out.OutputTokens += re.OutputTokens
		out.Memories = mergeMemories(out.Memories, re.Memories)
		out.MemoryItems = mergeMemoryItems(out.MemoryItems, re.MemoryItems)
		if short := strings.TrimSpace(re.Summary); short != "" {
			if runeLen(short) <= req.MaxChars {
				out.Summary, out.Tier, out.State = short, TierRecompacted, re.State
				if re.Model != "" {
					out.Model = re.Model
				}
				return out, nil
			}
			// Still over: clamp whichever is shorter, it loses less.
			if runeLen(short) < runeLen(long) {
				long, out.State = short, re.State
				if re.Model != "" {
					out.Model = re.Model
				}
			}
		}
	}
	out.Summary, out.Tier = ClampSentence(long, req.MaxChars), TierClamped
	if out.Summary == "" {
		// Only reachable with a nonsensical budget; never report success
		// with nothing.
		return Outcome{}, retry.New(retry.InvalidOutput, errors.New("fold: summary clamped to nothing"))
	}
	return out, nil
}

// ClampSentence is the last-resort clamp of the budget policy; see
// sentence.Clamp.
func ClampSentence(s string, maxChars int) string { return sentence.Clamp(s, maxChars) }

func runeLen(s string) int { return sentence.RuneLen(s) }

// mergeMemories appends the new memories not already present (trimmed,
// exact match), keeping first-seen order.
func mergeMemories(have, add []string) []string {
	if len(add) == 0 {
		return have
	}
	// A fold's memories are few: a scan of what is kept finds a repeat
	// without building a set.
	if len(have)+len(add) <= smallMerge {
		for _, m := range add {
			if m = strings.TrimSpace(m); m != "" && !slices.Contains(have, m) {
				if have == nil {
					have = make([]string, 0, len(add))
				}
				have = append(have, m)
			}
		}
		return have
	}
	seen := make(map[string]bool, len(have))
	for _, m := range have {
		seen[m] = true
	}
	for _, m := range add {
		m = strings.TrimSpace(m)
		if m == "" || seen[m] {
			continue
		}
		seen[m] = true
		have = append(have, m)
	}
	return have
}

// smallMerge is the most memories mergeMemories and mergeMemoryItems
// deduplicate by scanning, without a set.
const smallMerge = 16

// sameMemoryKey reports whether a and b have the same key in
// mergeMemoryItems (the ID, or without one "\x00" and the trimmed text),
// without building the keys.
func sameMemoryKey(a, b Memory) bool {
	switch {
	case a.ID != "" && b.ID != "":
		return a.ID == b.ID
	case a.ID == "" && b.ID == "":
		return strings.TrimSpace(a.Text) == strings.TrimSpace(b.Text)
	case b.ID != "":
		a, b = b, a
	}
	id, ok := strings.CutPrefix(a.ID, "\x00") // a has the ID
	return ok && id == strings.TrimSpace(b.Text)
}

// mergeMemoryItems appends the items whose ID (or, without one, text) is
// not already present, keeping first-seen order.
func mergeMemoryItems(have, add []Memory) []Memory {
	if len(add) == 0 {
		return have
	}
	key := func(m Memory) string {
		if m.ID != "" {
			return m.ID
		}
		return "\x00" + strings.TrimSpace(m.Text)
	}
	if len(have)+len(add) <= smallMerge {
		for _, m := range add {
			if strings.TrimSpace(m.Text) == "" {
				continue
			}
			if !slices.ContainsFunc(have, func(h Memory) bool { return sameMemoryKey(h, m) }) {
				if have == nil {
					have = make([]Memory, 0, len(add))
				}
				have = append(have, m)
			}
		}
		return have
	}
	seen := make(map[string]bool, len(have))
	for _, m := range have {
		seen[key(m)] = true
	}
	for _, m := range add {
		if strings.TrimSpace(m.Text) == "" || seen[key(m)] {
			continue
		}
		seen[key(m)] = true
		have = append(have, m)
	}
	return have
}

// Rebuild answers req for a backend that could not read req.PreviousState:
// it folds the session's earlier turns (req.Earlier) from nothing through
// s, in batches of as many turns as req has, for the summary and state
// they make, then folds req on those (the memories of the earlier folds
// were returned when those turns were first folded, and are not again).
// Each earlier batch folds with the notes of its time. Building takes at
// most half the time ctx has left: when the earlier turns cannot be read,
// or folding them again takes longer, req is folded without PreviousState
// (the backend makes do with PreviousSummary). why is the backend's error,
// passed to req.Earlier.
func Rebuild(ctx context.Context, s Summarizer, req Request, why error) (Result, error) {
	rctx := ctx // half the fold's time left builds the state; the other half folds the batch on the prose if it cannot
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	prose := func() (Result, error) { // req on PreviousSummary alone
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		req.PreviousState = nil
		return s.Summarize(ctx, req)
	}
	turns, notes, err := req.Earlier(rctx, why)
	req.Earlier = nil
	if err != nil {
		return prose()
	}
	batch := max(len(req.Turns), 1)
	prev := Request{Session: req.Session, Profile: req.Profile, MaxChars: req.MaxChars}
	for c := 0; c < len(turns); c += batch {
		b := turns[c:min(c+batch, len(turns))]
		r := prev
		r.Turns, r.From, r.To = b, b[0].At, b[len(b)-1].At
		n := len(notes) // (a note goes with the first batch that ends after it, the rest with the last)
		if c+batch < len(turns) {
			n = sort.Search(len(notes), func(i int) bool { return notes[i].At.After(r.To) })
		}
		r.Notes, notes = notes[:n], notes[n:]
		res, err := s.Summarize(rctx, r)
		if err != nil && rctx.Err() != nil {
			return prose()
		}
		if err != nil {
			return Result{}, fmt.Errorf("build the state again from turn %d of %d: %w", c, len(turns), err)
		}
		prev.PreviousSummary, prev.PreviousState = res.Summary, res.State
	}
	if len(turns) > 0 {
		req.PreviousSummary, req.PreviousState = prev.PreviousSummary, prev.PreviousState
	} else {
		req.PreviousState = nil
	}
	return s.Summarize(ctx, req)
}
