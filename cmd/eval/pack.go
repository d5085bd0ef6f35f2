package main

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/foldstream/foldstream/client"
)

// packOpts are the packing choices measured (-explore).
type packOpts struct {
	budget     int  // chars of the whole context
	summary    bool // the summary line first
	neighbours int  // turns before and after each hit
	prevOnly   bool // neighbours before the hit only (the question before an answer)
	excerpts   int  // most hits packed; 0 = as many as fit, -1 = none
	windowMin  int  // chars kept for the newest verbatim turns before excerpts are packed
	// clip, if positive, cuts an excerpt turn longer than clip chars to
	// its sentences that best match terms (rankOpts.terms of the query).
	clip  int
	terms map[string]bool
	stem  rankOpts
	// groupLabels labels a run of consecutive excerpt turns once (its
	// first turn's time) instead of every turn; noLabels labels none.
	groupLabels, noLabels bool
	// dateLabels labels with the service's day (client.RecallTimeLayout)
	// instead of "[15:04]".
	dateLabels bool
}

// excerptsHeader introduces the recalled turns.
const excerptsHeader = "Earlier excerpts (in transcript order):"

// excerptLine is a recalled turn as a prompt line, with the time it was
// said (the replay's clock).
func (m *meeting) excerptLine(i int, l line) string {
	return "[" + m.at(i).Format("15:04") + "] " + l.String()
}

// pack builds a context the way DESIGN.md's continuity section orders it:
// the summary, the best-matching earlier turns (with neighbours), in
// transcript order and labelled with their time, then the newest turns
// verbatim in what is left. It is the evaluation's reference packer, to
// measure choices, not the service's.
func pack(m *meeting, summary string, cursor int, hits []hit, o packOpts) string {
	left := o.budget
	var head string
	if o.summary && summary != "" {
		if l := client.LineChars(client.SummaryPrefix + summary); l <= left {
			head = client.SummaryPrefix + summary + "\n"
			left -= l
		}
	}
	// Excerpts, best hit first, charged as they are added.
	reserve := min(o.windowMin, left)
	room := left - reserve
	picked := map[int]bool{}
	text := func(i int) string {
		l := m.Turns[i]
		if o.clip > 0 {
			l.Text = clipText(l.Text, o.clip, o.terms, o.stem)
		}
		if o.noLabels || o.groupLabels && picked[i-1] {
			return l.String()
		}
		if o.dateLabels {
			return "[" + m.at(i).Format(client.RecallTimeLayout) + "] " + l.String()
		}
		return m.excerptLine(i, l)
	}
	// costIn is what the excerpt lines of turns [from, to] cost with set
	// picked (a group label depends on the turn before).
	costIn := func(set map[int]bool, from, to int) int {
		saved := picked
		picked = set
		c := 0
		for i := from; i <= to; i++ {
			if set[i] {
				c += client.LineChars(text(i))
			}
		}
		picked = saved
		return c
	}
	cost, n := 0, 0
	for _, h := range hits {
		if o.excerpts < 0 || o.excerpts > 0 && n >= o.excerpts {
			break
		}
		from, to := h.from-o.neighbours, h.to+o.neighbours
		if o.prevOnly {
			to = h.to
		}
		from, to = max(0, from), min(cursor-1, to)
		next := maps.Clone(picked) // small: the excerpts of one context
		for i := from; i <= to; i++ {
			next[i] = true
		}
		// Adding [from, to] changes the lines from..to+1 only.
		c := cost + costIn(next, from, to+1) - costIn(picked, from, to+1)
		if cost == 0 {
			c += client.LineChars(excerptsHeader)
		}
		if c > room {
			continue // a smaller later hit may still fit
		}
		picked, cost = next, c
		n++
	}
	left -= cost
	var b strings.Builder
	b.WriteString(head)
	if len(picked) > 0 {
		b.WriteString(excerptsHeader + "\n")
		idx := make([]int, 0, len(picked))
		for i := range picked {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		for _, i := range idx {
			b.WriteString(text(i) + "\n")
		}
	}
	// The window: newest first, no gap.
	from := len(m.Turns)
	for from > 0 {
		c := client.LineChars(m.Turns[from-1].String())
		if c > left {
			break
		}
		left -= c
		from--
	}
	b.WriteString(render(m.Turns[from:]))
	return b.String()
}

// sentenceEnd splits text after ".", "?" or "!" followed by a space.
var sentenceEnd = regexp.MustCompile(`[.?!]+\s+`)

// clipText keeps, of a text longer than clip chars, the sentence that
// holds the most of terms and its neighbours while they fit, marking cuts
// with "…"; a single sentence over clip is cut at a word.
func clipText(text string, clip int, terms map[string]bool, o rankOpts) string {
	if runes(text) <= clip {
		return text
	}
	var sents []string
	last := 0
	for _, loc := range sentenceEnd.FindAllStringIndex(text, -1) {
		sents = append(sents, text[last:loc[1]])
		last = loc[1]
	}
	if last < len(text) {
		sents = append(sents, text[last:])
	}
	best, bestScore := 0, -1
	for i, s := range sents {
		n := 0
		for _, t := range o.terms(s) {
			if terms[t] {
				n++
			}
		}
		if n > bestScore {
			best, bestScore = i, n
		}
	}
	from, to := best, best
	used := runes(sents[best])
	for {
		grew := false
		if to+1 < len(sents) && used+runes(sents[to+1]) <= clip {
			to++
			used += runes(sents[to])
			grew = true
		}
		if from > 0 && used+runes(sents[from-1]) <= clip {
			from--
			used += runes(sents[from])
			grew = true
		}
		if !grew {
			break
		}
	}
	out := strings.TrimSpace(strings.Join(sents[from:to+1], ""))
	if runes(out) > clip {
		r := []rune(out)[:clip]
		if i := strings.LastIndexByte(string(r), ' '); i > 0 {
			out = string(r)[:i]
		} else {
			out = string(r)
		}
	}
	if from > 0 {
		out = "… " + out
	}
	if to < len(sents)-1 || runes(out) < runes(strings.Join(sents[from:to+1], "")) {
		out += " …"
	}
	return out
}
