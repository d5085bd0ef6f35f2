package processor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// waitPacked waits until n sessions are in their compact idle form.
func (r *rig) waitPacked(p *Processor, n int) {
	r.t.Helper()
	r.Eventually(fmt.Sprintf("%d sessions packed", n), func() bool { return testutil.ToFloat64(p.m.packedSess) == float64(n) })
}

// packedAfter starts a processor that packs a session at every sweep once
// it is quiet, and waits until session id, given n turns, is applied and
// packed.
func packedAfter(t *testing.T, id string, n int) (*rig, *Processor) {
	t.Helper()
	r := newRig(t)
	p, _ := r.start(Config{IdleCompact: time.Nanosecond})
	r.Turns(id, n)
	r.Settled(id, int64(n), 0)
	r.waitPacked(p, 1)
	return r, p
}

// A packed session behaves exactly as an unpacked one: later turns apply
// in order, folds carry the right batch (read from the stream, the cached
// payloads are gone), a repeated turn id is still a duplicate, a rejected
// event still reports the session's position, reset and end still work.
// The session is never reloaded from KV: it stays in memory throughout.
func TestPackedSessionBehavesAsBefore(t *testing.T) {
	const id = "pk"
	r, p := packedAfter(t, id, 55)

	// dedup survives packing: a turn id applied before, without the
	// stream's Nats-Msg-Id dedup
	r.Publish(r.Layout.Subjects.In(id, events.KindTurn), events.Turn{V: 1, Session: id, TurnID: id + "-t003", At: t0,
		Speaker: "Alice", Role: "user", Text: "message number 003 from Alice"}, "")
	r.Eventually("duplicate ignored", func() bool { return testutil.ToFloat64(p.m.duplicates) == 1 })
	r.waitPacked(p, 1)
	if s := r.Checkpoint(id); s.Total != 55 {
		t.Fatalf("a duplicate turn was applied: total %d", s.Total)
	}

	// turns after packing apply in order; the fold reads turns 0..9 from
	// the stream
	r.Turns(id, 6) // 61
	s := r.Settled(id, 61, 10)
	if s.Version != 1 || s.Summary != "Alice and Bob discussed messages 000 to 009." || len(s.Turns) != 51 {
		t.Fatalf("after 61: version %d summary %q verbatim %d", s.Version, s.Summary, len(s.Turns))
	}
	for i := 1; i < len(s.Turns); i++ {
		if s.Turns[i].Seq <= s.Turns[i-1].Seq || s.Turns[i].At <= s.Turns[i-1].At {
			t.Fatalf("turn refs out of order at %d: %+v then %+v", i, s.Turns[i-1], s.Turns[i])
		}
	}
	if first, last := foldedRange(r.llm.Requests()[0]); first != "000" || last != "009" {
		t.Fatalf("first fold carried messages %s..%s, want 000..009", first, last)
	}
	r.waitPacked(p, 1)
	r.Turns(id, 10) // 71: folds 10..19, received before the session was packed
	s = r.Settled(id, 71, 20)
	reqs := r.llm.Requests()
	if first, last := foldedRange(reqs[1]); first != "010" || last != "019" || s.Version != 2 {
		t.Fatalf("second fold carried messages %s..%s (version %d), want 010..019", first, last, s.Version)
	}
	if !strings.Contains(reqs[1].Content(), "messages 000 to 009") {
		t.Fatal("second fold did not carry the previous summary")
	}

	// reset of a packed session
	r.waitPacked(p, 1)
	r.Control(id, events.OpReset, nil)
	r.Eventually("reset", func() bool {
		s := r.Checkpoint(id)
		return s.Total == 0 && s.Summary == "" && s.Epoch == 1 && s.Version == 2
	})
	if !hasType(r.Lifecycle(id), events.EventSessionReset, "") {
		t.Fatal("no session_reset event")
	}
	r.waitPacked(p, 1)
	r.Turns(id, 3)
	r.Settled(id, 3, 0)

	// a rejected event of a packed session still reports its position
	r.waitPacked(p, 1)
	r.Publish(r.Layout.Subjects.In(id, "shout"), []byte(`{"v":1}`), "")
	r.Eventually("event_rejected", func() bool { return len(lifecycleOf(r.Lifecycle(id), events.EventRejected)) == 1 })
	if ev := lifecycleOf(r.Lifecycle(id), events.EventRejected)[0]; ev.Reason != events.CodeUnknownType || ev.TotalTurns != 3 {
		t.Fatalf("event_rejected: %+v", ev)
	}

	// end of a packed session: final fold, archive, later events refused
	r.waitPacked(p, 1)
	r.Control(id, events.OpEnd, nil)
	r.Eventually("archived", func() bool { return r.Checkpoint(id).Archived })
	arch, err := r.Store.LoadArchive(context.Background(), id, 1)
	if err != nil || arch == nil || arch.Total != 3 || arch.Cursor != 3 || arch.Version != 3 {
		t.Fatalf("archive: %+v %v", arch, err)
	}
	r.waitPacked(p, 1)
	r.Turns(id, 1)
	r.Eventually("turn after end refused", func() bool {
		for _, m := range r.DeadLetters() {
			if m.Header.Get(events.HeaderErrorCode) == events.CodeSessionEnded {
				return true
			}
		}
		return false
	})

	if got := testutil.ToFloat64(p.m.liveSess); got != 1 {
		t.Fatalf("sessions in memory %v, want 1: the session was evicted or reloaded", got)
	}
	if got := testutil.ToFloat64(p.m.unpacked); got < 7 {
		t.Fatalf("%v unpacks, want at least one per step", got)
	}
}

// A packed session's next fold asks for the batch it no longer keeps all
// at once: one direct get per turn, sent on one reply subject, whose
// answers are taken as they come, not one request and its answer after
// another.
func TestPackedSessionFoldAsksForItsBatchAtOnce(t *testing.T) {
	const id = "pk"
	r, _ := packedAfter(t, id, 60)
	gets, err := r.NC.SubscribeSync("$JS.API.DIRECT.GET." + r.Layout.In)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	r.Turns(id, 1) // 61: folds turns 0..9, all read from the stream
	r.Settled(id, 61, 10)
	if first, last := foldedRange(r.llm.Requests()[0]); first != "000" || last != "009" {
		t.Fatalf("the fold carried messages %s..%s, want 000..009", first, last)
	}
	replies := map[string]int{}
	for {
		m, err := gets.NextMsg(0)
		if err != nil {
			break
		}
		replies[m.Reply]++
	}
	if len(replies) != 1 {
		t.Fatalf("direct gets for the fold's 10 turns on %d reply subjects (%v), want 10 on one", len(replies), replies)
	}
	for _, n := range replies {
		if n != 10 {
			t.Fatalf("%d direct gets for the fold's 10 turns, want 10", n)
		}
	}
}

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// idleShard is a shard that is not running: the test drives it from its
// own goroutine, so it may look at the shard's sessions.
func idleShard(t *testing.T, r *rig, cfg Config) (*shard, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: t0}
	p, err := New(cfg, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return newShard(p, 0, context.Background()), clk
}

// The shard's side of packing: which sessions are packed, that get
// returns the same session with the same state, and that a packed form
// that does not unpack is replaced by the checkpoint.
func TestCompactIdleShard(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	base := state.New("a")
	for i := range 12 {
		base.AddTurn(state.HashID(fmt.Sprint(i)), state.TurnRef{Seq: uint64(i + 1), At: t0.UnixMilli() + int64(i)})
	}
	base.LastSeq, base.Summary, base.LastActivity = 12, "Alice and Bob talked.", t0
	for _, id := range []string{"a", "b"} {
		c := *base
		c.ID = id
		if _, err := r.Store.Save(ctx, &c, 0); err != nil {
			t.Fatal(err)
		}
	}
	sh, clk := idleShard(t, r, Config{IdleCompact: time.Second})
	m := sh.m
	a, err := sh.get("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := sh.get("b")
	if err != nil {
		t.Fatal(err)
	}
	a.touched, b.touched = clk.Now(), clk.Now()
	a.remember(1, []byte(`{"v":1}`))
	b.dirty = true // an unwritten change: never packed
	sh.compactIdle()
	if a.s == nil || testutil.ToFloat64(m.packedSess) != 0 {
		t.Fatal("packed a session touched just now")
	}
	clk.add(time.Second)
	sh.compactIdle()
	if a.s != nil || a.packed == nil || a.payloads != nil || b.s == nil || testutil.ToFloat64(m.packedSess) != 1 {
		t.Fatalf("after IdleCompact: a packed %v (payloads %v), b packed %v", a.s == nil, a.payloads, b.s == nil)
	}

	got, err := sh.get("a")
	if err != nil || got != a || a.s == nil || a.packed != nil {
		t.Fatalf("get of a packed session: same %v, err %v", got == a, err)
	}
	want := *base
	want.ID = "a"
	if a.s.Total != 12 || a.s.Summary != want.Summary || !a.s.LastActivity.Equal(t0) || !a.s.SeenTurn(state.HashID("3")) {
		t.Fatalf("unpacked state %+v", a.s)
	}
	if testutil.ToFloat64(m.packedSess) != 0 || testutil.ToFloat64(m.unpacked) != 1 || testutil.ToFloat64(m.liveSess) != 2 {
		t.Fatal("gauges after unpacking")
	}

	// a packed form that does not unpack: the checkpoint is reloaded
	sh.compactIdle()
	if a.s != nil {
		t.Fatal("not packed again")
	}
	a.packed[0] = 0xee
	got, err = sh.get("a")
	if err != nil || got == a || got.s.Total != 12 || got.rev == 0 {
		t.Fatalf("reload after a bad packed form: %+v %v", got, err)
	}
	if testutil.ToFloat64(m.packedSess) != 0 || testutil.ToFloat64(m.liveSess) != 2 {
		t.Fatal("gauges after the reload")
	}

	// evictIdle drops packed sessions like unpacked ones
	b.dirty = false
	clk.add(time.Second)
	sh.compactIdle()
	if testutil.ToFloat64(m.packedSess) != 2 {
		t.Fatal("not both packed")
	}
	clk.add(sh.idleEvict + time.Second)
	sh.evictIdle()
	if len(sh.sessions) != 0 || sh.nPacked != 0 || testutil.ToFloat64(m.packedSess) != 0 || testutil.ToFloat64(m.liveSess) != 0 {
		t.Fatalf("after evictIdle: %d sessions, %d packed", len(sh.sessions), sh.nPacked)
	}
}

// Sessions with anything pending or in flight are never packed, and
// IdleCompact < 0 turns packing off.
func TestCompactIdleLeavesBusySessions(t *testing.T) {
	r := newRig(t)
	sh, clk := idleShard(t, r, Config{})
	busy := map[string]func(*live){
		"dirty":   func(ls *live) { ls.dirty = true },
		"writing": func(ls *live) { ls.writing = true },
		"landing": func(ls *live) { ls.landing = true },
		"acks":    func(ls *live) { ls.acks = make([]pendingAck, 1) },
		"folding": func(ls *live) { ls.cancel = func() {} },
		"lease":   func(ls *live) { ls.s.Lease = &state.Lease{FoldID: "f", Deadline: t0.Add(time.Hour)} },
	}
	for id, set := range busy {
		ls, err := sh.get(id)
		if err != nil {
			t.Fatal(err)
		}
		set(ls)
	}
	clk.add(time.Hour)
	sh.compactIdle()
	for id, ls := range sh.sessions {
		if ls.s == nil {
			t.Errorf("session %s packed", id)
		}
	}

	off, clk := idleShard(t, r, Config{IdleCompact: -1})
	if _, err := off.get("quiet"); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Hour)
	off.compactIdle()
	if off.sessions["quiet"].s == nil {
		t.Error("packed with IdleCompact < 0")
	}
}

// A release of freed memory runs once a wave of packing is over, when it
// freed enough, and waits for its own cost a hundred times over.
func TestMemReleasePolicy(t *testing.T) {
	var m memRelease
	now := t0
	if m.due(now) {
		t.Fatal("due with nothing freed")
	}
	m.compacted(now, releaseMinBytes/2)
	now = now.Add(time.Second)
	if m.due(now) {
		t.Fatal("due below releaseMinBytes")
	}
	m.compacted(now, releaseMinBytes/2)
	if m.due(now.Add(releaseQuiet / 2)) {
		t.Fatal("due while sessions are still being packed")
	}
	now = now.Add(releaseQuiet)
	if !m.due(now) {
		t.Fatal("not due after the wave")
	}
	if m.due(now.Add(time.Hour)) {
		t.Fatal("due again while running")
	}
	// a release that took 50 ms: the next one waits 5 s
	m.pending.Store(0)
	m.lastCost.Store(int64(50 * time.Millisecond))
	m.running.Store(false)
	m.compacted(now, releaseMinBytes)
	if m.due(now.Add(4 * time.Second)) {
		t.Fatal("due within a hundred times the last release's cost")
	}
	if !m.due(now.Add(5 * time.Second)) {
		t.Fatal("not due after a hundred times the last release's cost")
	}
	// a cheap release: releaseMinGap holds
	m.running.Store(false)
	m.lastCost.Store(int64(time.Millisecond))
	m.compacted(now.Add(5*time.Second), releaseMinBytes)
	if m.due(now.Add(5*time.Second + releaseMinGap/2)) {
		t.Fatal("due within releaseMinGap")
	}
	if !m.due(now.Add(5*time.Second + releaseMinGap)) {
		t.Fatal("not due after releaseMinGap")
	}
}

// BenchmarkPackedSessionHeap reports the live heap one idle session costs
// a shard, packed and not: sessions shaped like cmd/bench's memory section
// (10 turns, their ids in the dedup ring, no summary), payloads cached.
// The with-state cases also carry the offline summarizer's state as a
// checkpoint load leaves it (each session its own 12,963 bytes).
func BenchmarkPackedSessionHeap(b *testing.B) {
	sumState, err := os.ReadFile("../state/testdata/offline_state.json")
	if err != nil {
		b.Fatal(err)
	}
	// The shard's checkpoint writer holds the connection; nothing here
	// writes, so it is never connected.
	js, err := jetstream.New(new(nats.Conn))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		pack  bool
		state []byte
		n     int
	}{
		{"unpacked", false, nil, 10000},
		{"packed", true, nil, 10000},
		{"unpacked-with-state", false, sumState, 2000},
		{"packed-with-state", true, sumState, 2000},
	} {
		n := c.n
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				p := &Processor{cfg: Config{IdleCompact: time.Nanosecond}.withDefaults(), m: newMetrics(nil), mem: new(memRelease), clock: SystemClock{}, js: js, sum: offline.New()}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				sh := newShard(p, 0, context.Background())
				for i := range n {
					id := fmt.Sprintf("sess-%05d", i)
					s := state.New(id)
					ls := &live{s: s}
					for j := range 10 {
						seq := uint64(j*n + i + 1)
						s.AddTurn(state.HashID(fmt.Sprintf("%s-%d", id, j)), state.TurnRef{Seq: seq, At: t0.UnixMilli() + int64(seq)*1000, Tokens: 40})
						s.LastSeq = seq
						ls.remember(seq, make([]byte, 230))
					}
					if c.state != nil {
						s.SummaryState = bytes.Clone(c.state)
					}
					s.LastActivity, s.LastEventAt, ls.touched = t0, t0.UnixMilli(), t0
					sh.sessions[id] = ls
				}
				if c.pack {
					sh.compactIdle()
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "heap-B/session")
				runtime.KeepAlive(sh)
			}
		})
	}
}

// get is the session's live state for a test driving a shard without its
// loop: from memory, else read from its checkpoint now and installed.
func (sh *shard) get(id string) (*live, error) {
	if ls, ok := sh.sessions[id]; ok && sh.inflate(id, ls) {
		return ls, nil
	}
	s, rev, err := sh.store.Load(context.Background(), id)
	if err != nil {
		return nil, err
	}
	return sh.install(id, s, rev), nil
}
