package main

import (
	"slices"
	"strings"
	"time"

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
}

// excerptsHeader introduces the recalled turns.
const excerptsHeader = "Earlier excerpts (in transcript order):"

// excerptLine is a recalled turn as a prompt line, with the time it was
// said (the replay's clock).
func excerptLine(i int, l line) string {
	return "[" + T0.Add(turnGap*time.Duration(i)).Format("15:04") + "] " + l.String()
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
	cost := 0
	headerCost := client.LineChars(excerptsHeader)
	n := 0
	for _, h := range hits {
		if o.excerpts < 0 || o.excerpts > 0 && n >= o.excerpts {
			break
		}
		from, to := h.from-o.neighbours, h.to+o.neighbours
		if o.prevOnly {
			to = h.to
		}
		from, to = max(0, from), min(cursor-1, to)
		add := 0
		for i := from; i <= to; i++ {
			if !picked[i] {
				add += client.LineChars(excerptLine(i, m.Turns[i]))
			}
		}
		if cost == 0 {
			add += headerCost
		}
		if cost+add > room {
			continue // a smaller later hit may still fit
		}
		for i := from; i <= to; i++ {
			picked[i] = true
		}
		cost += add
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
			b.WriteString(excerptLine(i, m.Turns[i]) + "\n")
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
