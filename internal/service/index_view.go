package service

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/foldstream/foldstream/internal/events"
)

// docViews keeps, for the docs of an index that requests looked at, what
// every request derives alike from a doc's turn: its text as an excerpt
// shows it (displayText) and that text's distinct index terms. A
// question-aware context looks at a few hundred of the best matches and
// their neighbours, and the questions of a session meet the same turns
// again: a warm request mostly finds them here instead of cleaning and
// tokenizing each turn again.
//
// Bounded: past maxDocViews docs it starts over; a view costs about half
// what its turn does (its terms, and its text only where cleaning changed
// it: a turn's own text is the turn's, or, for a turn of an index loaded
// from the store, read again with the turn when a request asks for it),
// counted in the index's bytes (turnIndex.bytes). Like the index, it is
// used only by the request that holds the session's replay.
type docViews struct {
	views map[int32]docView
	bytes int64
	// scratch is view's scratch space.
	scratch viewScratch
	// ahead are views made before their first use (viewAhead), not
	// kept nor counted yet.
	ahead map[int32]docView
}

// docView is one doc's display text and terms.
type docView struct {
	text string
	// wordless: a turn of speech with no word once cleaned (shown as it
	// is; picker.saysNothing).
	wordless bool
	// turnText: text is the turn's own, not held by the view (a turn
	// read from the store's encoding is not kept: turnIndex.forget).
	turnText bool
	// terms are text's distinct index terms (stop words left out), in
	// the order the text first says them, each followed by a 0 byte.
	terms string
}

// maxDocViews bounds the docs docViews holds.
const maxDocViews = 1 << 14

// docViewBytes estimates a view's fixed cost (its map entry).
const docViewBytes = 48

// viewed is doc d's view if it was made already.
func (x *turnIndex) viewed(d int) (docView, bool) {
	v, ok := x.views.views[int32(d)]
	if ok && v.turnText {
		v.text = x.turn(d).Text
	}
	return v, ok
}

// view is doc d's display text and terms, computed at its first use
// (or taken from those made ahead for it, viewAhead).
func (x *turnIndex) view(d int) docView {
	if v, ok := x.viewed(d); ok {
		return v
	}
	vs := &x.views
	t := x.turn(d)
	v, ok := vs.ahead[int32(d)]
	if !ok {
		v = vs.scratch.make(x.an, t)
	}
	if vs.views == nil || len(vs.views) >= maxDocViews {
		x.bytes -= vs.bytes
		vs.views, vs.bytes = map[int32]docView{}, 0
	}
	n := int64(docViewBytes + len(v.terms))
	kept := v
	switch {
	case v.text != t.Text:
		n += int64(len(v.text))
	case x.base != nil && d < x.base.docs:
		kept.text, kept.turnText = "", true
	}
	vs.views[int32(d)] = kept
	vs.bytes += n
	x.bytes += n
	return v
}

// viewScratch is what making a view reuses: the terms met (in a list
// while they are few: a turn holds a few dozen, and a scan of a short
// list costs less than a map), and the terms' string as it is built
// (then copied at its size).
type viewScratch struct {
	met  []string
	seen map[string]bool
	buf  []byte
}

// maxMetList is how many terms the list holds before the map takes
// over.
const maxMetList = 32

// meet reports whether term was met already, and marks it met.
func (sc *viewScratch) meet(term string) bool {
	if len(sc.met) < maxMetList {
		for _, t := range sc.met {
			if t == term {
				return true
			}
		}
		if sc.met = append(sc.met, term); len(sc.met) == maxMetList {
			if sc.seen == nil {
				sc.seen = map[string]bool{}
			}
			clear(sc.seen)
			for _, t := range sc.met {
				sc.seen[t] = true
			}
		}
		return false
	}
	if sc.seen[term] {
		return true
	}
	sc.seen[term] = true
	return false
}

// make is turn t's view (its text as shown and that text's terms).
func (sc *viewScratch) make(an *analyzer, t *events.Turn) docView {
	var v docView
	v.text, v.wordless = displayText(t)
	if v.text == t.Text {
		v.text = t.Text // not held twice
	}
	sc.met = sc.met[:0]
	b := sc.buf[:0]
	an.each(v.text, func(term string) {
		if term == "" || sc.meet(term) {
			return
		}
		b = append(b, term...)
		b = append(b, 0)
	})
	v.terms = string(b)
	if sc.buf = b; cap(b) > 1024 {
		sc.buf = nil // not kept past a long turn's (not counted in bytes)
	}
	return v
}

// viewAhead starts making the views of docs that have none yet on
// another goroutine, before the request asks for them one by one (the
// value packing's candidates: a request's largest share of views);
// finish makes those not started yet on this goroutine, waits for the
// others, and keeps them aside until aheadDone: view takes a doc's from
// there at its first use, and keeps and counts it then as it would have
// made it, so the views held are the same as without. Until finish
// returns, the request may read turns but not ask for views. Must be
// called by the request that holds the index.
func (x *turnIndex) viewAhead(docs []int) (finish func()) {
	vs := &x.views
	var turns []*events.Turn
	var at []int32
	for _, d := range docs {
		if _, ok := x.viewed(d); ok {
			continue
		}
		if _, ok := vs.ahead[int32(d)]; ok || slices.Contains(at, int32(d)) {
			continue
		}
		turns = append(turns, x.turn(d))
		at = append(at, int32(d))
	}
	if len(turns) < minViewsAhead {
		return func() {}
	}
	made := make([]docView, len(turns))
	var next atomic.Int32
	work := func(sc *viewScratch) {
		for i := int(next.Add(1) - 1); i < len(turns); i = int(next.Add(1) - 1) {
			made[i] = sc.make(x.an, turns[i])
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() { work(&viewScratch{}) })
	return func() {
		work(&vs.scratch)
		wg.Wait()
		if vs.ahead == nil {
			vs.ahead = make(map[int32]docView, len(made))
		}
		for i, d := range at {
			vs.ahead[d] = made[i]
		}
	}
}

// aheadDone drops the views viewAhead made that were not asked for.
func (x *turnIndex) aheadDone() { x.views.ahead = nil }

// minViewsAhead: fewer views are made where they are asked for (a
// goroutine's start would cost more than it saves).
const minViewsAhead = 16

// eachTerm calls fn with each of the view's terms, in order.
func (v docView) eachTerm(fn func(term string)) {
	s := v.terms
	for len(s) > 0 {
		i := strings.IndexByte(s, 0)
		fn(s[:i])
		s = s[i+1:]
	}
}
