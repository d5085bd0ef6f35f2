package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/replay"
	"github.com/nats-io/nats.go/jetstream"
)

// Item is one timeline entry as the page gets it: replay's entry, its
// position, and what the inspector adds.
type Item struct {
	N int `json:"n"` // position in the whole timeline
	replay.Entry
	// FoldedBy is, for a turn, the summary version whose fold covered it
	// (0: still verbatim). The page draws a fold boundary where it changes.
	FoldedBy uint64 `json:"folded_by,omitempty"`
	// Diff is, for a summary, the word diff against the previous version
	// of the same epoch (PrevVersion, 0 for the first).
	Diff        []DiffOp `json:"diff,omitempty"`
	PrevVersion uint64   `json:"prev_version,omitempty"`
	// Memory is, for a memory event, its facts as the page shows them.
	Memory *MemoryView `json:"memory,omitempty"`
	// Redacted says transcript text was removed for this reader.
	Redacted bool `json:"redacted,omitempty"`
}

// MemoryView is a memory event (events.Memories) as the page shows it:
// each durable fact with who said it, in which turn and when, and the
// earlier fact it replaces.
type MemoryView struct {
	Version uint64           `json:"version"`
	Model   string           `json:"model,omitempty"`
	Items   []MemoryViewItem `json:"items"`
}

// MemoryViewItem is one fact of a MemoryView.
type MemoryViewItem struct {
	events.MemoryItem
	// Replaces is the text of the memory Supersedes names, when the
	// session's timeline holds it (empty otherwise: the page shows the
	// ID).
	Replaces string `json:"replaces,omitempty"`
}

// TimelinePage is the reply of /api/sessions/{id}/timeline.
type TimelinePage struct {
	Session string        `json:"session"`
	Total   int           `json:"total"` // entries matching the filter
	Offset  int           `json:"offset"`
	Items   []Item        `json:"items"`
	Totals  replay.Totals `json:"totals"`
	// Counts are the entries per page group (see group), for the filter.
	Counts map[string]int `json:"counts"`
}

// group is the filter group of an entry kind.
func group(kind string) string {
	switch kind {
	case replay.KindTurn:
		return "turns"
	case replay.KindNote:
		return "notes"
	case replay.KindSummary:
		return "summaries"
	case replay.KindRejected:
		return "rejected"
	case replay.KindMemory:
		return "memories"
	case replay.KindEvicted:
		return "evictions"
	case replay.KindWarning:
		return "warnings"
	case events.EventCompactionSkipped:
		return "skips"
	}
	return "events"
}

// timelineView is a loaded timeline and what is derived once per load.
type timelineView struct {
	tl       *replay.Timeline
	mems     []*events.Memories // per entry: a memory event decoded (nil: not one, or undecodable)
	memText  map[string]string  // memory ID → its text, over the whole timeline
	counts   [3]uint64          // the session's messages per stream when loaded
	foldedBy []uint64           // per entry: for turns, the version that folded it
	prev     []int              // per entry: for summaries, the previous summary's entry (-1: none)
	used     time.Time
}

// timelineCache keeps the last few sessions' timelines. A cached timeline
// is reused while the session's message count on each stream is unchanged
// (a filtered stream info per stream, far cheaper than reading the
// session again); a 10,000-turn session is read once, then paged.
type timelineCache struct {
	js     jetstream.JetStream
	layout broker.Layout
	max    int

	mu      sync.Mutex
	entries map[string]*timelineView
	loading map[string]*sync.Mutex // one load per session at a time
}

func newTimelineCache(js jetstream.JetStream, l broker.Layout, max int) *timelineCache {
	return &timelineCache{js: js, layout: l, max: max, entries: map[string]*timelineView{}, loading: map[string]*sync.Mutex{}}
}

func (c *timelineCache) get(ctx context.Context, id string) (*timelineView, error) {
	counts, err := c.count(ctx, id)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	lm := c.loading[id]
	if lm == nil {
		lm = new(sync.Mutex)
		c.loading[id] = lm
	}
	c.mu.Unlock()
	lm.Lock()
	defer lm.Unlock()
	c.mu.Lock()
	if v := c.entries[id]; v != nil && v.counts == counts {
		v.used = time.Now()
		c.mu.Unlock()
		return v, nil
	}
	c.mu.Unlock()
	tl, err := replay.Load(ctx, c.js, c.layout, id)
	if err != nil {
		return nil, err
	}
	v := derive(tl)
	// The counts read before the load are a lower bound of what it read:
	// if more arrived meanwhile the next request sees other counts and
	// loads again, never the reverse.
	v.counts = counts
	v.used = time.Now()
	c.mu.Lock()
	c.entries[id] = v
	if len(c.entries) > c.max {
		var oldest string
		for k, e := range c.entries {
			if oldest == "" || e.used.Before(c.entries[oldest].used) {
				oldest = k
			}
		}
		delete(c.entries, oldest)
		// Its load lock goes too, or the map would grow with every session
		// ever opened; a load still holding it just finishes unserialized.
		delete(c.loading, oldest)
	}
	c.mu.Unlock()
	return v, nil
}

// count returns the session's stored message count on each stream.
func (c *timelineCache) count(ctx context.Context, id string) ([3]uint64, error) {
	var out [3]uint64
	subj := c.layout.Subjects
	filters := [3][]string{subj.InSessionAll(id), {subj.OutSession(id)}, {subj.DeadLetter(id)}}
	for i, name := range []string{c.layout.In, c.layout.Out, c.layout.DLQ} {
		st, err := c.js.Stream(ctx, name)
		if err != nil {
			return out, fmt.Errorf("stream %s: %w", name, err)
		}
		for _, f := range filters[i] {
			info, err := st.Info(ctx, jetstream.WithSubjectFilter(f))
			if err != nil {
				return out, fmt.Errorf("stream %s info for %s: %w", name, f, err)
			}
			for _, n := range info.State.Subjects {
				out[i] += n
			}
		}
	}
	return out, nil
}

// derive computes fold membership of turns and each summary's previous
// version. Turns are numbered per epoch (a reset starts again at 0) and a
// summary carries the epoch it was made in, so a turn is matched with the
// first summary of its epoch whose folded range [FoldedFrom, Cursor)
// holds its index.
func derive(tl *replay.Timeline) *timelineView {
	n := len(tl.Entries)
	v := &timelineView{tl: tl, foldedBy: make([]uint64, n), prev: make([]int, n), mems: make([]*events.Memories, n), memText: map[string]string{}}
	for i := range tl.Entries {
		if m := decodeMemories(&tl.Entries[i]); m != nil {
			v.mems[i] = m
			for _, it := range m.Items {
				v.memText[it.ID] = it.Text
			}
		}
	}
	type key struct {
		epoch uint32
		index int64
	}
	folded := map[key]uint64{}
	lastSummary := map[uint32]int{}
	for i := range tl.Entries {
		v.prev[i] = -1
		e := &tl.Entries[i]
		if e.Kind != replay.KindSummary || e.Summary == nil {
			continue
		}
		sm := e.Summary
		if j, ok := lastSummary[sm.Epoch]; ok {
			v.prev[i] = j
		}
		lastSummary[sm.Epoch] = i
		for idx := max(0, sm.FoldedFrom); idx < sm.Cursor; idx++ {
			k := key{sm.Epoch, idx}
			if _, ok := folded[k]; !ok {
				folded[k] = sm.Version
			}
		}
	}
	var epoch uint32
	for i := range tl.Entries {
		e := &tl.Entries[i]
		switch {
		case e.Kind == replay.KindControl && e.Control != nil && e.Invalid == "" && e.Control.Op == events.OpReset:
			epoch++
		case e.Kind == replay.KindTurn && e.Turn != nil && e.Turn.Index >= 0:
			v.foldedBy[i] = folded[key{epoch, e.Turn.Index}]
		}
	}
	return v
}

// item builds entry i for the page, with its diff, and without text when
// the reader may not see it.
func (v *timelineView) item(i int, text bool) Item {
	e := v.tl.Entries[i]
	it := Item{N: i, Entry: e, FoldedBy: v.foldedBy[i]}
	if e.Kind == replay.KindSummary && e.Summary != nil {
		prev := ""
		if j := v.prev[i]; j >= 0 {
			p := v.tl.Entries[j].Summary
			prev = p.Summary
			it.PrevVersion = p.Version
		}
		it.Diff = WordDiff(prev, e.Summary.Summary)
	}
	if m := v.mems[i]; m != nil {
		it.Memory = v.memoryView(m)
	}
	if !text {
		redact(&it)
	}
	return it
}

// decodeMemories is e's memory event, nil if e is not one or its payload
// does not decode (the page then shows the payload as it is).
func decodeMemories(e *replay.Entry) *events.Memories {
	if e.Kind != replay.KindMemory || len(e.Raw) == 0 {
		return nil
	}
	var m events.Memories
	if err := json.Unmarshal(e.Raw, &m); err != nil || len(m.Items) == 0 && len(m.Memories) == 0 {
		return nil
	}
	return &m
}

// memoryView is m as the page shows it: its items, or, from a backend
// without them, its texts alone.
func (v *timelineView) memoryView(m *events.Memories) *MemoryView {
	out := &MemoryView{Version: m.Version, Model: m.Model, Items: make([]MemoryViewItem, 0, max(len(m.Items), len(m.Memories)))}
	if len(m.Items) == 0 {
		for _, text := range m.Memories {
			out.Items = append(out.Items, MemoryViewItem{MemoryItem: events.MemoryItem{Text: text}})
		}
		return out
	}
	for _, it := range m.Items {
		out.Items = append(out.Items, MemoryViewItem{MemoryItem: it, Replaces: v.memText[it.Supersedes]})
	}
	return out
}

// redact removes transcript text from an item, keeping its shape: lengths
// stay (a summary's chars, a diff's word counts) so the structure reads.
func redact(it *Item) {
	e := &it.Entry
	if e.Turn != nil {
		t := *e.Turn
		t.Text = ""
		e.Turn = &t
		it.Redacted = true
	}
	if e.Note != nil {
		n := *e.Note
		n.Text = ""
		e.Note = &n
		it.Redacted = true
	}
	if e.Summary != nil {
		s := *e.Summary
		s.Summary = ""
		e.Summary = &s
		it.Redacted = true
	}
	if e.Event != nil && e.Event.Error != "" {
		ev := *e.Event
		ev.Error = "" // a model's error may quote the prompt
		e.Event = &ev
		it.Redacted = true
	}
	if len(e.Raw) > 0 || e.Payload != "" {
		e.Raw, e.Payload = nil, ""
		it.Redacted = true
	}
	if it.Memory != nil {
		// Who said it and when stay, as a turn's speaker does.
		m := *it.Memory
		m.Items = slices.Clone(m.Items)
		for i := range m.Items {
			m.Items[i].Text, m.Items[i].Replaces = "", ""
		}
		it.Memory = &m
		it.Redacted = true
	}
	// A validation reason may quote the input it refused (got "…"); the
	// field it names stays.
	field := ""
	if e.Rejected != nil {
		rj := *e.Rejected
		field = rj.Field
		rj.Reason = redactQuoted(rj.Reason, field)
		e.Rejected = &rj
	}
	if e.Invalid != "" {
		e.Invalid = redactQuoted(e.Invalid, field)
		if e.Turn != nil {
			// Fields of a refused turn that are otherwise names from a
			// fixed set may hold anything.
			t := *e.Turn
			t.Role, t.Kind, t.Tool = "", "", ""
			e.Turn = &t
			it.Redacted = true
		}
	}
	for i, d := range it.Diff {
		it.Diff[i].Text = fmt.Sprintf("(%d words)", len(strings.Fields(d.Text)))
	}
}

// quoted matches a Go-quoted string (%q), the form in which errors quote
// input.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// redactQuoted replaces every quoted string of s but the field name keep
// with its length, keeping the rest of the message (the field, what was
// expected).
func redactQuoted(s, keep string) string {
	if !strings.Contains(s, `"`) {
		return s
	}
	return quoted.ReplaceAllStringFunc(s, func(q string) string {
		u, err := strconv.Unquote(q)
		if err != nil {
			return fmt.Sprintf("(%d characters)", len(q)-2)
		}
		if keep != "" && u == keep {
			return q
		}
		return fmt.Sprintf("(%d characters)", utf8.RuneCountInString(u))
	})
}

// handleTimeline serves one page of a session's timeline: offset and
// limit (at most 1,000) over the entries whose group is in kinds (all by
// default); tail=1 serves the last page.
func (s *Server) handleTimeline(w http.ResponseWriter, r *http.Request) {
	id, ok := sessionParam(w, r)
	if !ok {
		return
	}
	offset, err := intParam(r, "offset", 0, 0)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	limit, err := intParam(r, "limit", 200, 1000)
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	var kinds map[string]bool
	if k := r.URL.Query().Get("kinds"); k != "" {
		kinds = map[string]bool{}
		for _, g := range strings.Split(k, ",") {
			kinds[strings.TrimSpace(g)] = true
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 60*time.Second)
	defer cancel()
	v, err := s.cache.get(ctx, id)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, context.DeadlineExceeded) {
			status = http.StatusGatewayTimeout
		}
		httpError(w, status, err.Error())
		return
	}
	page := v.page(id, kinds, offset, limit, r.URL.Query().Get("tail") == "1", s.textAllowed(r))
	writeJSON(w, http.StatusOK, page)
}

// page selects one page; the cost is one pass over the entries' kinds plus
// the page's items (their diffs are computed here, not at load).
func (v *timelineView) page(id string, kinds map[string]bool, offset, limit int, tail, text bool) TimelinePage {
	p := TimelinePage{Session: id, Totals: v.tl.Totals, Counts: map[string]int{}, Items: []Item{}}
	var match []int
	for i := range v.tl.Entries {
		g := group(v.tl.Entries[i].Kind)
		p.Counts[g]++
		if kinds == nil || kinds[g] {
			match = append(match, i)
		}
	}
	p.Total = len(match)
	if tail {
		offset = max(0, len(match)-limit)
	}
	p.Offset = offset
	if offset < len(match) {
		for _, i := range match[offset:min(len(match), offset+limit)] {
			p.Items = append(p.Items, v.item(i, text))
		}
	}
	return p
}
