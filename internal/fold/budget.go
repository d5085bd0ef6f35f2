package fold

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/retry"
)

// Tier reports how a summary met its char budget (seed 000's order: output
// cap, then one re-compaction pass, then a sentence clamp).
type Tier string

const (
	TierFull        Tier = "full"        // fit on the first call
	TierRecompacted Tier = "recompacted" // needed the re-compaction pass
	TierClamped     Tier = "clamped"     // still over budget: clamped at a sentence boundary
)

// Outcome is a summary that fits the budget, with what it cost.
type Outcome struct {
	Summary      string
	Tier         Tier
	Memories     []string
	Model        string
	InputTokens  int
	OutputTokens int
	Calls        int // summarizer calls made (1 or 2)
}

// Summarize runs one fold through s and enforces req.MaxChars the same way
// for every backend. A failure of the first call is returned as is
// (classified by the backend); an empty first answer fails with class
// invalid_output. Once a usable first answer exists the fold never fails
// because of the budget: if the re-compaction call fails or returns
// nothing, the first answer is clamped instead. MaxChars <= 0 means no
// budget.
func Summarize(ctx context.Context, s Summarizer, req Request) (Outcome, error) {
	res, err := s.Summarize(ctx, req)
	if err != nil {
		return Outcome{}, fmt.Errorf("fold: summarize with %s: %w", s.Name(), err)
	}
	out := Outcome{
		Summary:      strings.TrimSpace(res.Summary),
		Tier:         TierFull,
		Memories:     mergeMemories(nil, res.Memories),
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
		if short := strings.TrimSpace(re.Summary); short != "" {
			if runeLen(short) <= req.MaxChars {
				out.Summary, out.Tier = short, TierRecompacted
				if re.Model != "" {
					out.Model = re.Model
				}
				return out, nil
			}
			// Still over: clamp whichever is shorter, it loses less.
			if runeLen(short) < runeLen(long) {
				long = short
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

// ClampSentence cuts s to at most maxChars runes, at the last sentence end
// (".", "!" or "?", optionally followed by closing quotes or brackets, then
// a space or the end of s) that keeps at least half the budget. Failing
// that it cuts at the last word boundary and appends "…", still within
// maxChars. The result is never empty for non-blank s and maxChars >= 1.
func ClampSentence(s string, maxChars int) string {
	s = strings.TrimSpace(s)
	if maxChars <= 0 {
		return ""
	}
	r := []rune(s)
	if len(r) <= maxChars {
		return s
	}

	// Sentence boundary: end index e (exclusive) <= maxChars.
	for e := maxChars; e >= 1; e-- {
		if e < maxChars/2 {
			break
		}
		if !sentenceEnd(r, e) {
			continue
		}
		if out := strings.TrimSpace(string(r[:e])); out != "" {
			return out
		}
	}

	// Word boundary, leaving room for the ellipsis.
	limit := maxChars - 1
	if limit == 0 {
		return "…"
	}
	cut := limit
	for i := limit; i > 0; i-- {
		if unicode.IsSpace(r[i]) {
			cut = i
			break
		}
	}
	out := strings.TrimRightFunc(string(r[:cut]), func(c rune) bool {
		return unicode.IsSpace(c) || strings.ContainsRune(",;:-–—", c)
	})
	if out == "" {
		// One long word: a hard cut is the only option.
		out = string(r[:limit])
	}
	return out + "…"
}

// sentenceEnd reports whether r[:e] ends a sentence: r[e-1] is a closing
// quote/bracket or terminal punctuation, the run of closers is preceded by
// . ! or ?, and r[e] (if any) is a space.
func sentenceEnd(r []rune, e int) bool {
	if e < len(r) && !unicode.IsSpace(r[e]) {
		return false
	}
	i := e - 1
	for i >= 0 && strings.ContainsRune(`"'”’)]»`, r[i]) {
		i--
	}
	return i >= 0 && strings.ContainsRune(".!?", r[i])
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// mergeMemories appends the new memories not already present (trimmed,
// exact match), keeping first-seen order.
func mergeMemories(have, add []string) []string {
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
