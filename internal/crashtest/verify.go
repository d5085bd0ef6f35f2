package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go/jetstream"
)

// Env is what the checks read: the streams and the checkpoint store.
type Env struct {
	JS     jetstream.JetStream
	Layout broker.Layout
	Store  *state.Store
}

// Expect describes one session: how many distinct turns were published
// (and acknowledged by the stream) and the window it is folded with.
type Expect struct {
	Session         string
	Turns           int
	Recent, Batch   int
	MaxSummaryChars int
}

// FinalCursor is where window mode leaves the cursor of a
// session with total turns once every fold has landed: folds continue
// while total − cursor > recent + batch.
func FinalCursor(total, recent, batch int) int64 {
	c := 0
	for total-c > recent+batch {
		c += batch
	}
	return int64(c)
}

// Settled reports whether the checkpoint shows every turn applied, the
// cursor where window mode puts it and no fold in flight.
func Settled(s *state.Session, e Expect) bool {
	return s.Total == int64(e.Turns) && s.Cursor == FinalCursor(e.Turns, e.Recent, e.Batch) && s.Lease == nil
}

// Summaries returns the session's summary-updated events, in stream order.
func Summaries(ctx context.Context, env Env, session string) ([]events.SummaryUpdated, error) {
	msgs, err := testenv.ReadSubject(ctx, env.JS, env.Layout.Out, env.Layout.Subjects.Out(session, events.KindSummary))
	if err != nil {
		return nil, err
	}
	out := make([]events.SummaryUpdated, 0, len(msgs))
	for _, m := range msgs {
		var ev events.SummaryUpdated
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			return nil, fmt.Errorf("summary at %d: %w", m.Sequence, err)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != fmt.Sprintf("%s:summary:%d", session, ev.Version) {
			return nil, fmt.Errorf("summary v%d carries Nats-Msg-Id %q", ev.Version, id)
		}
		out = append(out, ev)
	}
	return out, nil
}

// Lifecycle returns the session's lifecycle events, in stream order.
func Lifecycle(ctx context.Context, env Env, session string) ([]events.Lifecycle, error) {
	msgs, err := testenv.ReadSubject(ctx, env.JS, env.Layout.Out, env.Layout.Subjects.Out(session, events.KindEvent))
	if err != nil {
		return nil, err
	}
	out := make([]events.Lifecycle, 0, len(msgs))
	for _, m := range msgs {
		var ev events.Lifecycle
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			return nil, fmt.Errorf("lifecycle event at %d: %w", m.Sequence, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

func span(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// Verify checks a settled session end to end and returns every problem
// found (none means it holds):
//
//   - the checkpoint counts every published turn exactly once (Total), its
//     verbatim turns are exactly turns Cursor..Total−1 in order, the cursor
//     is where window mode puts it and no lease is left;
//   - the summary-updated events carry versions 1, 2, 3, … with no gap or
//     repeat, version v covers exactly batch v (cursor v·batch), each is
//     non-empty and within budget, and the last one is the checkpoint's;
//   - every fold the model was asked for (m may be nil) was a whole batch
//     whose transcript indexes equal the message numbers in the text: no
//     turn was lost or applied twice before it was folded.
func Verify(ctx context.Context, env Env, m *Model, e Expect) []string {
	var p []string
	bad := func(format string, args ...any) { p = append(p, e.Session+": "+fmt.Sprintf(format, args...)) }
	s, _, err := env.Store.Load(ctx, e.Session)
	if err != nil {
		return []string{err.Error()}
	}
	want := FinalCursor(e.Turns, e.Recent, e.Batch)
	if s.Total != int64(e.Turns) {
		bad("checkpoint counts %d turns, %d distinct turns were published and acknowledged", s.Total, e.Turns)
	}
	if s.Cursor+int64(len(s.Turns)) != s.Total {
		bad("cursor %d + %d verbatim turns != total %d", s.Cursor, len(s.Turns), s.Total)
	}
	if s.Cursor != want {
		bad("cursor %d, want %d for %d turns (recent %d, batch %d)", s.Cursor, want, e.Turns, e.Recent, e.Batch)
	}
	if s.Lease != nil {
		bad("lease %+v left (now %s)", *s.Lease, time.Now().UTC().Format(time.RFC3339Nano))
	}
	if e.Batch > 0 && s.Version != uint64(s.Cursor)/uint64(e.Batch) {
		bad("version %d at cursor %d, want %d", s.Version, s.Cursor, s.Cursor/int64(e.Batch))
	}
	// The verbatim part: read each referenced turn back from the stream.
	in, err := env.JS.Stream(ctx, env.Layout.In)
	if err != nil {
		return append(p, err.Error())
	}
	for i, ref := range s.Turns {
		if i > 0 && ref.Seq <= s.Turns[i-1].Seq {
			bad("verbatim turn %d at sequence %d after %d", i, ref.Seq, s.Turns[i-1].Seq)
		}
		raw, err := in.GetMsg(ctx, ref.Seq)
		if err != nil {
			bad("verbatim turn %d: %v", i, err)
			continue
		}
		var t events.Turn
		_ = json.Unmarshal(raw.Data, &t)
		if want := Turn(e.Session, int(s.Cursor)+i); t.Session != e.Session || t.Text != want.Text {
			bad("verbatim turn %d (index %d) is %q, want %q", i, s.Cursor+int64(i), t.Text, want.Text)
		}
	}

	sums, err := Summaries(ctx, env, e.Session)
	if err != nil {
		return append(p, err.Error())
	}
	if uint64(len(sums)) != s.Version {
		bad("%d summary-updated events, checkpoint at version %d", len(sums), s.Version)
	}
	for i, ev := range sums {
		v := uint64(i + 1)
		if ev.Version != v {
			bad("summary #%d has version %d (versions must be 1, 2, 3, … with no gap or repeat)", i+1, ev.Version)
			continue
		}
		if e.Batch > 0 {
			if ev.Cursor != int64(v)*int64(e.Batch) || ev.CoveredThroughTurn != ev.Cursor-1 || ev.FoldedTurns != e.Batch {
				bad("summary v%d: cursor %d covered %d folded %d, want cursor %d", v, ev.Cursor, ev.CoveredThroughTurn, ev.FoldedTurns, int64(v)*int64(e.Batch))
			}
		}
		n := utf8.RuneCountInString(ev.Summary)
		if ev.Summary == "" || ev.SummaryChars != n || (e.MaxSummaryChars > 0 && n > e.MaxSummaryChars) {
			bad("summary v%d: %d chars (reported %d, budget %d)", v, n, ev.SummaryChars, e.MaxSummaryChars)
		}
		switch ev.Tier {
		case "full", "recompacted", "clamped":
		default:
			bad("summary v%d: tier %q", v, ev.Tier)
		}
		if m != nil && e.Batch > 0 {
			sess, nums, ok := ParseSummary(ev.Summary)
			if wantNums := span((int(v)-1)*e.Batch, e.Batch); !ok || sess != e.Session || !slices.Equal(nums, wantNums) {
				bad("summary v%d folded %s %v, want the next batch %v", v, sess, nums, wantNums)
			}
		}
	}
	if len(sums) > 0 && sums[len(sums)-1].Summary != s.Summary {
		bad("checkpoint summary %q is not the last published one %q", s.Summary, sums[len(sums)-1].Summary)
	}
	if m != nil {
		for _, c := range m.SessionCalls(e.Session) {
			if !slices.Equal(c.Numbers, toInts(c.Indexes)) {
				bad("model call %d: transcript indexes %v but message numbers %v (a turn was lost or applied twice)", c.N, c.Indexes, c.Numbers)
			}
			if e.Batch > 0 && (len(c.Numbers) != e.Batch || c.Numbers[0]%e.Batch != 0) {
				bad("model call %d folded %v, not a whole batch of %d", c.N, c.Numbers, e.Batch)
			}
		}
	}
	return p
}

func toInts(xs []int64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

// Refolds counts batches of session the model was asked to fold more than
// once (allowed after a crash or a failed fold: only one result lands).
func Refolds(m *Model, session string) int {
	seen := map[int]int{}
	for _, c := range m.SessionCalls(session) {
		if len(c.Numbers) > 0 {
			seen[c.Numbers[0]]++
		}
	}
	n := 0
	for _, k := range seen {
		if k > 1 {
			n += k - 1
		}
	}
	return n
}

// Watcher checks every checkpoint write as it happens: per session the
// cursor, version, total and last applied sequence never go back, the
// cursor moves only together with a new summary version (one batch per
// version when batch > 0), and a version is never reused for another
// summary.
type Watcher struct {
	mu       sync.Mutex
	batch    int
	last     map[string]*state.Session
	problems []string
	updates  int
	history  map[string][]string
	stop     func()
	done     chan struct{}
}

// Watch starts a Watcher on the checkpoint bucket. batch is the fixed
// batch size of the sessions, or 0 if it varies.
func Watch(ctx context.Context, kv jetstream.KeyValue, batch int) (*Watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	kw, err := kv.WatchAll(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	w := &Watcher{batch: batch, last: map[string]*state.Session{}, history: map[string][]string{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-ctx.Done():
				_ = kw.Stop()
				return
			case e, ok := <-kw.Updates():
				if !ok {
					return
				}
				if e != nil && e.Operation() == jetstream.KeyValuePut {
					w.observe(e.Key(), e.Revision(), e.Value())
				}
			}
		}
	}()
	return w, nil
}

func (w *Watcher) observe(key string, rev uint64, val []byte) {
	if !events.ValidSession(key) {
		return // a sealed chunk of turn refs (<session>.refs.<epoch>.<k>)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.updates++
	bad := func(format string, args ...any) {
		if len(w.problems) < 50 {
			w.problems = append(w.problems, key+": "+fmt.Sprintf(format, args...))
		}
	}
	s, err := state.Decode(key, val)
	if err != nil {
		bad("undecodable checkpoint: %v", err)
		return
	}
	if h := w.history[key]; len(h) < 10000 {
		w.history[key] = append(h, fmt.Sprintf("rev %d: total %d cursor %d version %d last seq %d lease %v", rev, s.Total, s.Cursor, s.Version, s.LastSeq, s.Lease != nil))
	}
	// Inline are the refs from max(cursor, sealed) on; the rest are in
	// sealed chunks.
	if from := max(s.Cursor, s.Sealed); from+int64(len(s.Turns)) != s.Total {
		bad("inline refs from %d + %d != total %d", from, len(s.Turns), s.Total)
	}
	if w.batch > 0 && uint64(s.Cursor) != s.Version*uint64(w.batch) {
		bad("cursor %d at version %d: the cursor moved without a summary (or by more than a batch)", s.Cursor, s.Version)
	}
	prev := w.last[key]
	w.last[key] = s
	if prev == nil {
		return
	}
	switch {
	case s.Cursor < prev.Cursor:
		bad("cursor went back from %d to %d", prev.Cursor, s.Cursor)
	case s.Version < prev.Version:
		bad("summary version went back from %d to %d", prev.Version, s.Version)
	case s.Total < prev.Total:
		bad("total went back from %d to %d", prev.Total, s.Total)
	case s.LastSeq < prev.LastSeq:
		bad("last applied sequence went back from %d to %d", prev.LastSeq, s.LastSeq)
	case s.Version == prev.Version && s.Summary != prev.Summary:
		bad("version %d was reused for another summary", s.Version)
	case s.Cursor != prev.Cursor && s.Version == prev.Version:
		bad("cursor moved from %d to %d without a new summary version", prev.Cursor, s.Cursor)
	}
}

// Poll is Watch for a cluster under failover, where a KV watch (an
// ordered consumer) can stall for a while when the node serving it goes
// away: it reads the given sessions' checkpoints every interval instead.
// It samples the writes, so it sees fewer of them, but it keeps checking
// through every failure.
func Poll(ctx context.Context, kv jetstream.KeyValue, sessions []string, batch int, every time.Duration) *Watcher {
	ctx, cancel := context.WithCancel(ctx)
	w := &Watcher{batch: batch, last: map[string]*state.Session{}, history: map[string][]string{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		revs := map[string]uint64{}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for _, s := range sessions {
				gctx, gcancel := context.WithTimeout(ctx, time.Second)
				e, err := kv.Get(gctx, s)
				gcancel()
				// Reads may be served by a replica that lags (direct get):
				// only a newer revision than the last seen is a new write.
				if err == nil && e.Revision() > revs[s] {
					revs[s] = e.Revision()
					w.observe(s, e.Revision(), e.Value())
				}
			}
		}
	}()
	return w
}

// History returns the checkpoint writes of session seen, oldest first,
// one line each (revision, total, cursor, version, last applied sequence).
func (w *Watcher) History(session string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.history[session]...)
}

// Updates is the number of checkpoint writes observed so far.
func (w *Watcher) Updates() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.updates
}

// Stop ends the watch and returns the problems seen and the number of
// checkpoint writes observed.
func (w *Watcher) Stop() ([]string, int) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.problems...), w.updates
}
