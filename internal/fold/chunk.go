package fold

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/tokens"
)

// Tiers added for the tokens mode (three-tier fallback: full →
// partial → placeholder), reported in Outcome.Tier.
const (
	// TierPartial: some chunks were skipped (over ChunkOptions.OversizedTokens,
	// or rejected by the model with retry.ContextLength); the summary covers
	// the others and carries one note line per gap.
	TierPartial Tier = "partial"
	// TierPlaceholder: nothing could be summarised; the previous summary is
	// kept with a note saying how many messages were compacted.
	TierPlaceholder Tier = "placeholder"
)

// ChunkOptions configures SummarizeChunked.
type ChunkOptions struct {
	// ChunkTokens is the target size of a chunk in tokens (about
	// 25% of the context window). <= 0: no splitting, all turns form one
	// chunk.
	ChunkTokens int
	// OversizedTokens: a chunk above this many tokens (50% of the
	// window) is skipped with a note instead of being sent. <= 0: no limit.
	OversizedTokens int
	// Count counts the tokens of a turn's text when Turn.Tokens is 0; nil
	// means tokens.Heuristic (chars/4 × 1.2).
	Count func(string) int
}

// SummarizeChunked folds req.Turns into a new summary in chunks.
//
// Chunking: turns are taken in order and grouped greedily into chunks of at
// most ChunkTokens tokens (Turn.Tokens when known, else Count(Turn.Text));
// a single turn over ChunkTokens is a chunk by itself. A chunk does not end
// inside a tool exchange (a call and its results stay together, see
// toolpairs.go) unless keeping it whole would make the chunk oversized. The
// previous summary
// and the prompt are not counted. req.Notes ride with the first chunk that
// is actually sent to the model (so a skipped first chunk does not lose
// them).
//
// Rolling context: chunks are summarised sequentially, each through
// Summarize (so every chunk's summary meets the char budget), with the
// summary of the last summarised chunk as the PreviousSummary of the next;
// the first gets req.PreviousSummary. Each chunk's From/To are the times of
// its own turns and notes. With a single chunk the request is passed
// through unchanged, and the outcome equals Summarize's apart from Chunks.
//
// Outcome (Summary is the last summarised chunk's summary; Memories,
// tokens and Calls are merged/summed over all calls, a call rejected with
// retry.ContextLength included; Chunks counts all chunks, SkippedTurns the
// turns of skipped ones):
//
//   - every chunk summarised: Tier is the worst budget tier among the
//     chunks (full < recompacted < clamped), so a clamp anywhere along the
//     way is visible;
//   - some chunks skipped, because they exceed OversizedTokens (never
//     sent) or the model rejected them with retry.ContextLength: TierPartial.
//     Each run of adjacent skipped chunks gets a line
//     "[N messages (~T tokens) from <from> to <to> were too large to
//     summarise and were skipped]" ("[1 message (~T tokens) at <at> was
//     too large to summarise and was skipped]"; RFC 3339 UTC times, "turn
//     #i" when a turn has no time) appended to the summary, so the gap is never
//     silent. Once a gap exists the following chunks are asked for a
//     summary short enough to leave room for the lines; the total still
//     fits req.MaxChars (the summary part is clamped at a sentence if
//     needed; if the lines would take over half the budget they collapse
//     into one line over all skipped turns);
//   - every chunk skipped: no error, the outcome of Placeholder (tier
//     TierPlaceholder) with Chunks and SkippedTurns set. Retrying could
//     not help (the same turns would be too large again), so the caller may
//     advance its cursor.
//
// Any other failure of a chunk (including cancellation of ctx) returns
// an error wrapping the *retry.Error of the failure (retry.Classify finds
// it) and no partial result: the caller keeps the old summary and cursor.
// With no turns SummarizeChunked is Summarize (one call on req).
func SummarizeChunked(ctx context.Context, s Summarizer, req Request, opt ChunkOptions) (Outcome, error) {
	if len(req.Turns) == 0 {
		out, err := Summarize(ctx, s, req)
		if err != nil {
			return Outcome{}, classified(err)
		}
		out.Chunks = 1
		return out, nil
	}
	chunks := splitChunks(req.Turns, opt)

	var (
		out     = Outcome{Chunks: len(chunks)}
		prev    = req.PreviousSummary
		state   = req.PreviousState
		notes   = req.Notes
		done    int // chunks summarised
		worst   Tier
		gaps    []gap
		summary string
	)
	for i, c := range chunks {
		if err := ctx.Err(); err != nil {
			return Outcome{}, fmt.Errorf("fold: chunk %d of %d: %w", i+1, len(chunks), retry.Classify(err))
		}
		if opt.OversizedTokens > 0 && c.tokens > opt.OversizedTokens {
			gaps = addGap(gaps, i, c)
			continue
		}
		creq := req
		if len(chunks) > 1 {
			creq = chunkRequest(req, c, prev, notes, i == 0, i == len(chunks)-1)
			creq.PreviousState = state
		}
		if len(gaps) > 0 && req.MaxChars > 0 {
			// Leave room for the gap lines already known.
			creq.MaxChars = max(req.MaxChars-runeLen(gapBlock(gaps, req.MaxChars))-1, 1)
		}
		co, err := Summarize(ctx, s, creq)
		if err != nil {
			if retry.Classify(err).Class == retry.ContextLength {
				out.Calls++ // the rejected call
				gaps = addGap(gaps, i, c)
				continue
			}
			return Outcome{}, fmt.Errorf("fold: chunk %d of %d: %w", i+1, len(chunks), classified(err))
		}
		done++
		notes = nil
		prev, summary, state = co.Summary, co.Summary, co.State
		worst = worseTier(worst, co.Tier)
		out.Memories = mergeMemories(out.Memories, co.Memories)
		out.MemoryItems = mergeMemoryItems(out.MemoryItems, co.MemoryItems)
		if co.Model != "" {
			out.Model = co.Model
		}
		out.InputTokens += co.InputTokens
		out.OutputTokens += co.OutputTokens
		out.Calls += co.Calls
	}
	if done == 0 {
		ph := Placeholder(req.PreviousSummary, req.Turns, req.Notes, req.MaxChars)
		ph.Chunks = len(chunks)
		ph.Memories, ph.MemoryItems, ph.Model = out.Memories, out.MemoryItems, out.Model
		ph.InputTokens, ph.OutputTokens, ph.Calls = out.InputTokens, out.OutputTokens, out.Calls
		return ph, nil
	}
	if len(gaps) == 0 {
		out.Summary, out.Tier, out.State = summary, worst, state
		return out, nil
	}
	for _, g := range gaps {
		out.SkippedTurns += g.turns
	}
	out.Tier = TierPartial
	out.Summary = withGaps(summary, gapBlock(gaps, req.MaxChars), req.MaxChars)
	return out, nil
}

// Placeholder is the third tier: the previous summary kept as it is,
// plus the note "[Context contained N messages that were compacted (from
// <from> to <to>). Summary unavailable due to size limits.]" (" and M
// notes" after the messages when notes are given; no time range when no
// turn or note has a time). The result fits maxChars (<= 0: no limit), in
// this order of preference:
//
//  1. the whole previous summary with the longest note form that fits: the
//     one above, then without the time range, then "[N messages compacted;
//     no summary]";
//  2. the previous summary clamped at a sentence (from its end: its start
//     is never dropped) with the longest note form that takes at most half
//     of maxChars;
//  3. for budgets too small for both: the previous summary's start alone,
//     or the short note clamped when there is no previous summary.
//
// The summary is never empty for maxChars >= 1. Calls is 0 and
// SkippedTurns is len(turns).
func Placeholder(prev string, turns []Turn, notes []Note, maxChars int) Outcome {
	prev = strings.TrimSpace(prev)
	what := plural(len(turns), "message")
	if len(notes) > 0 {
		what += " and " + plural(len(notes), "note")
	}
	var span string
	if from, to, ok := timeSpan(turns, notes); ok {
		span = " (from " + from + " to " + to + ")"
	}
	forms := []string{
		"[Context contained " + what + " that were compacted" + span + ". Summary unavailable due to size limits.]",
		"[Context contained " + what + " that were compacted. Summary unavailable due to size limits.]",
		"[" + what + " compacted; no summary]",
	}
	out := Outcome{Tier: TierPlaceholder, SkippedTurns: len(turns)}
	join := func(note string) string {
		if prev == "" {
			return note
		}
		return prev + "\n" + note
	}
	if maxChars <= 0 {
		out.Summary = join(forms[0])
		return out
	}
	// Everything fits with the longest note that fits.
	for _, f := range forms {
		if s := join(f); runeLen(s) <= maxChars {
			out.Summary = s
			return out
		}
	}
	// The previous summary must be cut: give the note at most half.
	for _, f := range forms {
		if runeLen(f)+1 <= maxChars/2 {
			out.Summary = ClampSentence(prev, maxChars-runeLen(f)-1) + "\n" + f
			return out
		}
	}
	// Absurdly small budget: the previous summary's start, else the note.
	if prev != "" {
		out.Summary = ClampSentence(prev, maxChars)
	} else {
		out.Summary = ClampSentence(forms[len(forms)-1], maxChars)
	}
	return out
}

// chunk is a run of consecutive turns.
type chunk struct {
	turns  []Turn
	tokens int
}

func splitChunks(turns []Turn, opt ChunkOptions) []chunk {
	count := opt.Count
	if count == nil {
		count = tokens.Heuristic
	}
	var (
		out    []chunk
		start  int // first turn of the current chunk
		toks   int
		joined = joinedTurns(turns)
	)
	for i, t := range turns {
		n := t.Tokens
		if n <= 0 {
			n = count(t.Text)
		}
		// A tool exchange stays in one chunk (toolpairs.go) as long as
		// that does not make the chunk oversized, which would skip it.
		whole := joined[i] && (opt.OversizedTokens <= 0 || toks+n <= opt.OversizedTokens)
		if i > start && opt.ChunkTokens > 0 && toks+n > opt.ChunkTokens && !whole {
			out = append(out, chunk{turns: turns[start:i:i], tokens: toks})
			start, toks = i, 0
		}
		toks += n
	}
	return append(out, chunk{turns: turns[start:len(turns):len(turns)], tokens: toks})
}

// chunkRequest is req narrowed to one chunk, with the rolling summary.
func chunkRequest(req Request, c chunk, prev string, notes []Note, first, last bool) Request {
	r := req
	r.PreviousSummary = prev
	if !first {
		r.Earlier = nil // (the turns before the first chunk are not those before this one)
	}
	r.Turns = c.turns
	r.Notes = notes
	r.From, r.To = time.Time{}, time.Time{}
	for _, t := range c.turns {
		r.From, r.To = widen(r.From, r.To, t.At)
	}
	for _, n := range notes {
		r.From, r.To = widen(r.From, r.To, n.At)
	}
	if r.From.IsZero() && first {
		r.From = req.From
	}
	if r.To.IsZero() && last {
		r.To = req.To
	}
	return r
}

func widen(from, to, at time.Time) (time.Time, time.Time) {
	if at.IsZero() {
		return from, to
	}
	if from.IsZero() || at.Before(from) {
		from = at
	}
	if to.IsZero() || at.After(to) {
		to = at
	}
	return from, to
}

// gap is a run of adjacent skipped chunks.
type gap struct {
	firstChunk, lastChunk int
	turns, tokens         int
	from, to              Turn
}

func addGap(gaps []gap, i int, c chunk) []gap {
	if n := len(gaps); n > 0 && gaps[n-1].lastChunk == i-1 {
		g := &gaps[n-1]
		g.lastChunk = i
		g.turns += len(c.turns)
		g.tokens += c.tokens
		g.to = c.turns[len(c.turns)-1]
		return gaps
	}
	return append(gaps, gap{firstChunk: i, lastChunk: i, turns: len(c.turns), tokens: c.tokens,
		from: c.turns[0], to: c.turns[len(c.turns)-1]})
}

// line renders one gap; between is the wording of the collapsed line,
// whose range also spans the summarised chunks in between.
func (g gap) line(between bool) string {
	if g.turns == 1 {
		return fmt.Sprintf("[1 message (~%d tokens) at %s %s]", g.tokens, point(g.from), skippedVerb(1))
	}
	from, to := "from", "to"
	if between {
		from, to = "between", "and"
	}
	return fmt.Sprintf("[%s (~%d tokens) %s %s %s %s %s]",
		plural(g.turns, "message"), g.tokens, from, point(g.from), to, point(g.to), skippedVerb(g.turns))
}

func skippedVerb(n int) string {
	if n == 1 {
		return "was too large to summarise and was skipped"
	}
	return "were too large to summarise and were skipped"
}

// gapBlock renders the gap lines; if they would take more than half of
// maxChars they collapse into one line over all skipped turns, then into
// a line without times.
func gapBlock(gaps []gap, maxChars int) string {
	lines := make([]string, len(gaps))
	for i, g := range gaps {
		lines[i] = g.line(false)
	}
	block := strings.Join(lines, "\n")
	if maxChars <= 0 || runeLen(block) <= maxChars/2 {
		return block
	}
	all := gaps[0]
	for _, g := range gaps[1:] {
		all.turns += g.turns
		all.tokens += g.tokens
		all.to = g.to
	}
	if len(gaps) > 1 {
		if l := all.line(true); runeLen(l) <= maxChars/2 {
			return l
		}
	}
	return "[" + plural(all.turns, "message") + " " + skippedVerb(all.turns) + "]"
}

// withGaps appends the gap block to summary within maxChars, clamping the
// summary part first; the block is kept whole unless it alone exceeds the
// budget.
func withGaps(summary, block string, maxChars int) string {
	s := summary + "\n" + block
	if maxChars <= 0 || runeLen(s) <= maxChars {
		return s
	}
	if room := maxChars - runeLen(block) - 1; room >= 1 {
		if c := ClampSentence(summary, room); c != "" {
			return c + "\n" + block
		}
	}
	return ClampSentence(block, maxChars)
}

// point names a turn's position for a note: its time, else its index.
func point(t Turn) string {
	if t.At.IsZero() {
		return "turn #" + strconv.FormatInt(t.Index, 10)
	}
	return t.At.UTC().Format(time.RFC3339)
}

// timeSpan formats the earliest and latest known times of turns and notes.
func timeSpan(turns []Turn, notes []Note) (string, string, bool) {
	var from, to time.Time
	for _, t := range turns {
		from, to = widen(from, to, t.At)
	}
	for _, n := range notes {
		from, to = widen(from, to, n.At)
	}
	if from.IsZero() {
		return "", "", false
	}
	return from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), true
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

var tierRank = map[Tier]int{TierFull: 1, TierRecompacted: 2, TierClamped: 3}

func worseTier(a, b Tier) Tier {
	if tierRank[b] > tierRank[a] {
		return b
	}
	return a
}

// classified makes sure err's chain holds a *retry.Error.
func classified(err error) error {
	var ce *retry.Error
	if errors.As(err, &ce) {
		return err
	}
	return retry.Classify(err)
}
