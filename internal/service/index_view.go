package service

import "strings"

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
	// view's scratch space: the terms met, and the terms' string as it
	// is built (then copied at its size).
	seen map[string]bool
	buf  []byte
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

// view is doc d's display text and terms, computed at its first use.
func (x *turnIndex) view(d int) docView {
	if v, ok := x.viewed(d); ok {
		return v
	}
	vs := &x.views
	t := x.turn(d)
	var v docView
	v.text, v.wordless = displayText(t)
	if v.text == t.Text {
		v.text = t.Text // not held twice
	}
	if vs.seen == nil {
		vs.seen = map[string]bool{}
	}
	clear(vs.seen)
	b := vs.buf[:0]
	x.an.each(v.text, func(term string) {
		if term == "" || vs.seen[term] {
			return
		}
		vs.seen[term] = true
		b = append(b, term...)
		b = append(b, 0)
	})
	v.terms = string(b)
	if vs.buf = b; cap(b) > 1024 {
		vs.buf = nil // not kept past a long turn's (not counted in bytes)
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

// eachTerm calls fn with each of the view's terms, in order.
func (v docView) eachTerm(fn func(term string)) {
	s := v.terms
	for len(s) > 0 {
		i := strings.IndexByte(s, 0)
		fn(s[:i])
		s = s[i+1:]
	}
}
