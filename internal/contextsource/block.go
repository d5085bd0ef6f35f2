package contextsource

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/sentence"
)

// headerPrefix starts the first line of a block.
const headerPrefix = "[Session summary"

// minSourceText is the fewest characters of text a source line is shrunk
// to before Block drops source lines instead.
const minSourceText = 12

// Block renders the session summary block:
//
//	[Session summary — 9:15 AM to 2:30 PM UTC]
//	Conversation: discussed enzymatic cleaners for cat-urine shoes, decided to order from Amazon.
//	Calendar: Edgewood Park hike 9am-12pm completed. Dentist at 2pm in 45 min.
//	Mail: (no answer within 2s)
//
// The header shows from and to in UTC, with dates when they fall on
// different days. The conversation summary and every answer are made one
// line each; the answers follow in their order, a source that did not
// answer as a short note (Answer.Line).
//
// maxChars (in characters; 0 = unlimited) bounds the block by shrinking
// the source lines: all of them to an equal share at a sentence boundary,
// and when even that does not fit, dropping the last ones. The header and
// the conversation line are never shortened or dropped: the caller budgets
// the conversation summary, so a block may exceed maxChars by what those
// two lines exceed it.
func Block(from, to time.Time, conversation string, answers []Answer, maxChars int) string {
	head := Header(from, to) + "\n" + conversationLabel + ":"
	if conv := singleLine(conversation); conv != "" {
		head += " " + conv
	}
	prefixes := make([]string, len(answers))
	texts := make([]string, len(answers))
	for i, a := range answers {
		prefixes[i] = singleLine(a.Label) + ": "
		texts[i] = singleLine(a.Line())
	}
	if maxChars > 0 {
		texts = fitLines(maxChars-runes(head), prefixes, texts)
	}
	var b strings.Builder
	b.WriteString(head)
	for i, t := range texts {
		b.WriteString("\n")
		b.WriteString(prefixes[i])
		b.WriteString(t)
	}
	return b.String()
}

// fitLines shrinks texts (one per line, each line "\n"+prefix+text) to
// budget characters in all, dropping lines from the end when shrinking
// each to minSourceText is not enough. It returns the texts to keep.
func fitLines(budget int, prefixes, texts []string) []string {
	for k := len(texts); k > 0; k-- {
		avail := budget
		for _, p := range prefixes[:k] {
			avail -= 1 + runes(p)
		}
		if avail < k*minSourceText {
			continue
		}
		limit, ok := waterLevel(avail, texts[:k])
		if ok {
			return texts[:k]
		}
		out := make([]string, k)
		for i, t := range texts[:k] {
			out[i] = t
			if runes(t) > limit {
				out[i] = sentence.Clamp(t, limit)
			}
		}
		return out
	}
	return nil
}

// waterLevel returns the largest per-text limit such that the texts, each
// cut to it, fit in avail characters; ok when they fit uncut.
func waterLevel(avail int, texts []string) (limit int, ok bool) {
	lens := make([]int, len(texts))
	for i, t := range texts {
		lens[i] = runes(t)
	}
	slices.Sort(lens)
	for j, l := range lens {
		share := avail / (len(lens) - j)
		if l > share {
			return share, false
		}
		avail -= l
	}
	return 0, true
}

// Header is a block's first line: "[Session summary — 9:15 AM to 2:30 PM
// UTC]", with dates when from and to (in UTC) fall on different days, and
// years when in different years. Zero times give "[Session summary]".
func Header(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return headerPrefix + "]"
	}
	from, to = from.UTC(), to.UTC()
	layout := "3:04 PM"
	switch {
	case from.Year() != to.Year():
		layout = "Jan 2 2006, 3:04 PM"
	case from.YearDay() != to.YearDay():
		layout = "Jan 2, 3:04 PM"
	}
	return headerPrefix + " — " + from.Format(layout) + " to " + to.Format(layout) + " UTC]"
}

// SourceLine is one source's line of a parsed block.
type SourceLine struct {
	Label string
	Text  string
}

// ParsedBlock is a block taken apart by SplitBlock.
type ParsedBlock struct {
	// Header is the first line, e.g. "[Session summary — 9:15 AM to 2:30 PM UTC]".
	Header string
	// Conversation is the conversation summary, without its label.
	Conversation string
	// Sources are the source lines, in order.
	Sources []SourceLine
}

// SplitBlock takes apart a block made by Block, so that the next fold
// summarises only the conversation part (the source lines are rebuilt
// with fresh answers). For a summary that is not a block (empty, or
// written by another mode) it returns the whole summary, trimmed, as the
// Conversation and false.
func SplitBlock(summary string) (ParsedBlock, bool) {
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(summary, "\r\n", "\n")), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], headerPrefix) || !strings.HasSuffix(strings.TrimSpace(lines[0]), "]") {
		return ParsedBlock{Conversation: strings.TrimSpace(summary)}, false
	}
	conv, ok := strings.CutPrefix(lines[1], conversationLabel+":")
	if !ok {
		return ParsedBlock{Conversation: strings.TrimSpace(summary)}, false
	}
	p := ParsedBlock{Header: strings.TrimSpace(lines[0]), Conversation: strings.TrimSpace(conv)}
	for _, l := range lines[2:] {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		label, text, ok := strings.Cut(l, ":")
		if !ok {
			// Not a source line (a block edited by hand, or cut): keep it
			// with the previous line rather than lose it.
			if n := len(p.Sources); n > 0 {
				p.Sources[n-1].Text = strings.TrimSpace(p.Sources[n-1].Text + " " + l)
			}
			continue
		}
		p.Sources = append(p.Sources, SourceLine{Label: strings.TrimSpace(label), Text: strings.TrimSpace(text)})
	}
	return p, true
}

func runes(s string) int { return utf8.RuneCountInString(s) }
