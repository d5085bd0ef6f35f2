package processor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/state"
)

// Each summary-updated is published expecting the session's last recorded
// summary as the subject's last message. When the stream holds a summary
// the checkpoint does not know of, the publish is refused and the
// processor reads the subject: it adopts a summary of the session as it
// stands, or publishes after one it cannot take, with a higher version.
// Either way the stream never holds two summaries of one version.
func TestSummaryPublishAfterTheSubjectsLast(t *testing.T) {
	const foreign = "Folded by an owner that stopped before its checkpoint."
	summary := func(version uint64, cursor int64, epoch uint32, text string) events.SummaryUpdated {
		return events.SummaryUpdated{V: 1, Session: "s1", Version: version, Summary: text, Cursor: cursor,
			CoveredThroughTurn: cursor - 1, Compactions: int(version), Epoch: epoch}
	}
	tests := []struct {
		name string
		// on the stream before the processor starts, then the checkpoint
		// (stored with the last of them's sequence when recorded is set)
		published []events.SummaryUpdated
		recorded  int // how many of published the checkpoint knows of (0: none)
		edit      func(*state.Session)
		turns     int // turns on the stream at start (all in the checkpoint)
		more      int // turns sent after start
		cursor    int64
		version   uint64
		text      string // the summary at the end ("" : the model's)
		calls     int    // summarizer calls
		versions  []uint64
	}{
		{
			// A crash between the summary and the checkpoint, before the
			// lease was ever checkpointed: the refused publish finds it.
			name:      "a stopped owner's summary is adopted",
			published: []events.SummaryUpdated{summary(1, 10, 0, foreign)},
			turns:     61, more: 1, cursor: 10, version: 1, text: foreign, calls: 1, versions: []uint64{1},
		},
		{
			// A checkpoint written before summary_seq was kept: the first
			// publish learns the sequence of the session's own summary.
			name:      "a checkpoint without summary_seq publishes after its own summary",
			published: []events.SummaryUpdated{summary(1, 10, 0, "Turns 0 to 9.")},
			edit: func(s *state.Session) {
				s.Summary, s.Version, s.Compactions = "Turns 0 to 9.", 1, 1
				s.Advance(10, 0)
			},
			turns: 61, more: 11, cursor: 20, version: 2, calls: 1, versions: []uint64{1, 2},
		},
		{
			// A summary made before a reset (epoch 0) landed after it: the
			// session (epoch 1) does not take it and publishes above it.
			name:      "a summary from before a reset is published after, not adopted",
			published: []events.SummaryUpdated{summary(1, 10, 0, "Before the reset."), summary(2, 20, 0, "Also before the reset.")},
			recorded:  1,
			edit: func(s *state.Session) {
				s.Version, s.Epoch = 1, 1
			},
			turns: 61, more: 1, cursor: 10, version: 3, calls: 1, versions: []uint64{1, 2, 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRig(t)
			r.Turns("s1", tt.turns)
			var seqs []uint64
			for _, ev := range tt.published {
				r.Publish(r.Layout.Subjects.Out("s1", events.KindSummary), ev, events.RecordID("s1", events.KindSummary, ev.Version))
				out := r.Outbound("s1", events.KindSummary)
				seqs = append(seqs, out[len(out)-1].Sequence)
			}
			r.checkpointWith("s1", func(s *state.Session) {
				if tt.edit != nil {
					tt.edit(s)
				}
				if tt.recorded > 0 {
					s.SummarySeq = seqs[tt.recorded-1]
				}
			})
			r.start(Config{})
			r.Turns("s1", tt.more)
			got := r.Settled("s1", int64(tt.turns+tt.more), tt.cursor)
			summaries := r.Summaries("s1")
			var versions []uint64
			for _, ev := range summaries {
				versions = append(versions, ev.Version)
			}
			if !slices.Equal(versions, tt.versions) {
				t.Fatalf("summary versions on the stream %v, want %v", versions, tt.versions)
			}
			text := tt.text
			if text == "" {
				text = summaries[len(summaries)-1].Summary
				if text == foreign || text == tt.published[len(tt.published)-1].Summary {
					t.Fatalf("last summary %q is not the model's", text)
				}
			}
			out := r.Outbound("s1", events.KindSummary)
			if got.Summary != text || got.Version != tt.version || got.SummarySeq != out[len(out)-1].Sequence {
				t.Fatalf("checkpoint: summary %q version %d summary_seq %d; want %q, %d, %d", got.Summary, got.Version, got.SummarySeq, text, tt.version, out[len(out)-1].Sequence)
			}
			if calls := r.llm.Calls(); calls != tt.calls {
				t.Fatalf("%d summarizer calls, want %d", calls, tt.calls)
			}
			// The session goes on folding from there.
			r.Turns("s1", 10)
			after := r.Settled("s1", int64(tt.turns+tt.more+10), tt.cursor+10)
			if after.Version != tt.version+1 {
				t.Fatalf("next fold: version %d, want %d", after.Version, tt.version+1)
			}
			if n := len(r.Summaries("s1")); n != len(tt.versions)+1 {
				t.Fatalf("%d summaries on the stream after the next fold, want %d", n, len(tt.versions)+1)
			}
		})
	}
}

// A reset while the session's fold waits for a summarizer that does not
// heed cancellation (an in-process one, say): the fold is abandoned and
// its answer, when it comes, is never published. The stream then holds no
// summary of the turns before the reset, and the first summary after it is
// version 1 of the new turns, of epoch 1.
func TestAbandonedFoldPublishesNothing(t *testing.T) {
	r := newRig(t)
	gate, canceled := make(chan struct{}), make(chan struct{})
	r.sum = gated{Summarizer: r.sum, gate: gate, canceled: canceled}
	r.start(Config{})
	r.Turns("s1", 61)
	r.Eventually("fold in flight", func() bool {
		s := r.Checkpoint("s1")
		return s.Total == 61 && s.Lease != nil
	})
	r.Control("s1", events.OpReset, nil)
	// The old fold's answer arrives once the reset has canceled it (and
	// not before: a fold that lands before the reset is seen may publish).
	select {
	case <-canceled:
	case <-time.After(15 * time.Second):
		t.Fatal("the reset did not cancel the fold in flight")
	}
	close(gate)
	r.Eventually("reset", func() bool {
		s := r.Checkpoint("s1")
		return s.Total == 0 && s.Summary == "" && s.Lease == nil && s.Epoch == 1
	})
	r.Turns("s1", 61) // numbered on from 61: messages 061.. are after the reset
	got := r.Settled("s1", 61, 10)
	summaries := r.Summaries("s1")
	if len(summaries) != 1 || summaries[0].Version != 1 || summaries[0].Epoch != 1 || got.Version != 1 {
		t.Fatalf("summaries %+v, checkpoint version %d; want only v1 of epoch 1", summaries, got.Version)
	}
	if want := "Alice and Bob discussed messages 061 to 070."; got.Summary != want {
		t.Fatalf("summary %q, want %q", got.Summary, want)
	}
}

// gated answers only once gate is closed, whatever its context says; it
// closes canceled when its context ends first (one call at a time).
type gated struct {
	fold.Summarizer
	gate, canceled chan struct{}
}

func (g gated) Summarize(ctx context.Context, req fold.Request) (fold.Result, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		close(g.canceled)
		<-g.gate
	}
	return g.Summarizer.Summarize(context.Background(), req)
}

// An eviction publishes its note the way a fold publishes a summary,
// expecting the session's last summary as the subject's last message. A
// refused publish adopts a note of the session as it stands, counters
// included, or publishes once more after one it cannot take.
func TestEvictionPublishAfterTheSubjectsLast(t *testing.T) {
	evictCfg := Config{
		Mode: fold.ModeEvict, RecallEnabled: true,
		Tokens: fold.TokenPolicy{ContextWindow: 2000, ReserveTokens: 200},
		Evict:  fold.EvictPolicy{TargetUtilization: 0.5, MinKeepMessages: 4},
	}
	// What an owner that stopped before its checkpoint published for the
	// first eviction of turns 0..8 (9 × 100 tokens).
	note := func(version uint64, epoch uint32) events.SummaryUpdated {
		return events.SummaryUpdated{V: 1, Session: "ev", Version: version, Cursor: 9, CoveredThroughTurn: 8,
			Summary: fmt.Sprintf("[Context rolled: 9 messages evicted (900 tokens). Published by a stopped owner, epoch %d]", epoch),
			From:    t0, To: t0.Add(80 * time.Second), FoldedTurns: 9, OriginalTokens: 900, Mode: string(fold.ModeEvict),
			Tier: "evicted", Compactions: 1, Epoch: epoch, Model: "none"}
	}
	t.Run("a stopped owner's eviction is adopted with its counts", func(t *testing.T) {
		r := newRig(t)
		foreign := note(1, 0)
		r.Publish(r.Layout.Subjects.Out("ev", events.KindSummary), foreign, events.RecordID("ev", events.KindSummary, 1))
		r.start(evictCfg)
		r.sizedTurns("ev", 0, 20, 100) // turn 18 brings 1900 > 1800 tokens: evict 0..8
		s := r.Settled("ev", 20, 9)
		out := r.Outbound("ev", events.KindSummary)
		if len(out) != 1 || s.Summary != foreign.Summary || s.Version != 1 || s.SummarySeq != out[0].Sequence {
			t.Fatalf("%d summaries on the stream; checkpoint summary %q version %d summary_seq %d; want the stopped owner's v1 adopted",
				len(out), s.Summary, s.Version, s.SummarySeq)
		}
		if s.Evicted != 9 || s.EvictedTokens != 900 || s.FirstEvictedAt != t0.UnixMilli() || s.LastEvictedAt != t0.Add(80*time.Second).UnixMilli() {
			t.Fatalf("evicted counters %d turns, %d tokens, first %d, last %d; want the adopted eviction's 9, 900, %d, %d",
				s.Evicted, s.EvictedTokens, s.FirstEvictedAt, s.LastEvictedAt, t0.UnixMilli(), t0.Add(80*time.Second).UnixMilli())
		}
		// The next eviction counts on from the adopted one.
		r.sizedTurns("ev", 20, 30, 100)
		r.Eventually("second eviction", func() bool { return len(r.Summaries("ev")) == 2 })
		sums := r.Summaries("ev")
		// Every turn before the note's cursor is evicted, 100 tokens each.
		want := fmt.Sprintf("[Context rolled: %d messages evicted (%d tokens).", sums[1].Cursor, 100*sums[1].Cursor)
		if sums[1].Version != 2 || !strings.HasPrefix(sums[1].Summary, want) || !strings.Contains(sums[1].Summary, "Evicted range: 2026-11-22T20:00:00Z to") {
			t.Fatalf("second eviction: v%d %q; want v2 starting %q, from the first evicted turn", sums[1].Version, sums[1].Summary, want)
		}
	})
	t.Run("an eviction from before a reset is published after, not adopted", func(t *testing.T) {
		r := newRig(t)
		r.start(evictCfg)
		r.sizedTurns("ev", 0, 20, 100)
		r.Settled("ev", 20, 9)
		r.Control("ev", events.OpReset, nil)
		r.Eventually("reset", func() bool { s := r.Checkpoint("ev"); return s.Epoch == 1 && s.Total == 0 })
		// An owner that still held the session before the reset lands its
		// second eviction now.
		r.Publish(r.Layout.Subjects.Out("ev", events.KindSummary), note(2, 0), events.RecordID("ev", events.KindSummary, 2))
		r.sizedTurns("ev", 20, 40, 100)
		s := r.Settled("ev", 20, 9)
		sums := r.Summaries("ev")
		var versions []uint64
		for _, ev := range sums {
			versions = append(versions, ev.Version)
		}
		if !slices.Equal(versions, []uint64{1, 2, 3}) {
			t.Fatalf("summary versions on the stream %v, want [1 2 3]", versions)
		}
		out := r.Outbound("ev", events.KindSummary)
		if s.Version != 3 || s.SummarySeq != out[2].Sequence || sums[2].Epoch != 1 {
			t.Fatalf("checkpoint version %d summary_seq %d, last epoch %d; want 3, %d, 1", s.Version, s.SummarySeq, sums[2].Epoch, out[2].Sequence)
		}
		if s.Evicted != 9 || !strings.HasPrefix(s.Summary, "[Context rolled: 9 messages evicted (900 tokens).") {
			t.Fatalf("after the reset: evicted %d, note %q; want the 9 turns evicted since the reset only", s.Evicted, s.Summary)
		}
		evs := decodeAll[events.Evicted](r, "ev", events.KindEvicted)
		if len(evs) != 2 || evs[1].Version != 3 {
			t.Fatalf("evicted events %+v; want the second one at version 3", evs)
		}
	})
}

// A rewind (checkpoints failing while a cluster loses its KV leader, say)
// reloads a session from a checkpoint older than the summaries it has
// published since, and its turns come again. Folding them again would
// record batches the stream already holds under new versions: every later
// summary would then be one batch behind its version (TestClusterFailover
// caught this). The session must wait for the turns the stream's last
// summary covers and adopt it, so the stream and the checkpoint end as
// the first pass left them.
func TestReplayBehindTheRecordAdoptsIt(t *testing.T) {
	evictCfg := Config{
		Mode: fold.ModeEvict, RecallEnabled: true,
		Tokens: fold.TokenPolicy{ContextWindow: 2000, ReserveTokens: 200},
		Evict:  fold.EvictPolicy{TargetUtilization: 0.5, MinKeepMessages: 4},
	}
	tests := []struct {
		name        string
		cfg         Config
		early       int   // turns the old checkpoint has applied
		earlyCursor int64 // its cursor
		total       int
		cursor      int64 // once every turn is applied, as the first pass left it
		// lease: the old checkpoint holds a dead owner's lease, so the
		// record is read when the session loads and no fold is wasted.
		lease    bool
		maxCalls int // summarizer calls during the replay
	}{
		{name: "window folds", cfg: Config{Window: fold.Window{Recent: 6, Batch: 4}}, early: 12, earlyCursor: 4, total: 40, cursor: 32, maxCalls: 1},
		{name: "window folds, the old checkpoint with a lease", cfg: Config{Window: fold.Window{Recent: 6, Batch: 4}}, early: 12, earlyCursor: 4,
			total: 40, cursor: 32, lease: true},
		{name: "evictions", cfg: evictCfg, early: 12, earlyCursor: 0, total: 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const id = "rw"
			ctx := context.Background()
			r := newRig(t)
			_, stop := r.start(tt.cfg)
			r.sizedTurns(id, 0, tt.early, 100)
			old := r.Settled(id, int64(tt.early), tt.earlyCursor)
			// Six turns at a time, each batch applied and its fold landed
			// before the next: how many summaries the first pass publishes
			// must not depend on how fast the processor takes the turns (a
			// faster one folds more turns at once, into fewer summaries).
			for from := tt.early; from < tt.total; from += 6 {
				to := min(from+6, tt.total)
				r.sizedTurns(id, from, to, 100)
				r.Eventually(fmt.Sprintf("turns up to %d applied, no fold in flight", to), func() bool {
					s := r.Checkpoint(id)
					return s.Total == int64(to) && s.Lease == nil
				})
			}
			var want *state.Session
			if tt.cursor > 0 {
				want = r.Settled(id, int64(tt.total), tt.cursor)
			} else {
				// Evictions happen as the turns are applied.
				r.Eventually("every turn applied", func() bool { s := r.Checkpoint(id); return s.Total == int64(tt.total) })
				want = r.Checkpoint(id)
			}
			stop()
			wantSums := r.Summaries(id)
			if len(wantSums) < 3 || wantSums[len(wantSums)-1].Cursor <= int64(tt.early) {
				t.Fatalf("first pass: %d summaries, the last ending at %d turns; the test needs the record well ahead of the old checkpoint",
					len(wantSums), want.Cursor)
			}
			calls := r.llm.Calls()

			// The rewind: the old checkpoint is back and the consumer
			// redelivers every turn after it.
			_, rev, err := r.Store.Load(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if tt.lease {
				old.Lease = &state.Lease{FoldID: "dead", Owner: "gone", Deadline: time.Now().Add(-time.Minute), From: old.Cursor, To: old.Cursor + 4}
			}
			if _, err := r.Store.Save(ctx, old, rev); err != nil {
				t.Fatal(err)
			}
			if err := r.JS.DeleteConsumer(ctx, r.Layout.In, "foldstream"); err != nil {
				t.Fatal(err)
			}
			// Few turns at a time, as under load: the first fold after
			// the old cursor learns of the record while the session is
			// still short of its cursor.
			cfg := tt.cfg
			cfg.MaxAckPending = 2
			r.start(cfg)
			got := r.Settled(id, int64(tt.total), want.Cursor)
			gotSums := r.Summaries(id)
			if len(gotSums) != len(wantSums) {
				var vs []string
				for _, ev := range gotSums {
					vs = append(vs, fmt.Sprintf("v%d@%d", ev.Version, ev.Cursor))
				}
				t.Fatalf("%d summaries on the stream after the replay (%s), want the first pass's %d", len(gotSums), strings.Join(vs, " "), len(wantSums))
			}
			if got.Version != want.Version || got.Summary != want.Summary || got.SummarySeq != want.SummarySeq || got.SummaryIsNote != want.SummaryIsNote ||
				got.Evicted != want.Evicted || got.EvictedTokens != want.EvictedTokens || got.Compactions != want.Compactions {
				t.Fatalf("checkpoint after the replay: version %d summary_seq %d evicted %d/%d compactions %d note %v %q;\nwant %d %d %d/%d %d %v %q",
					got.Version, got.SummarySeq, got.Evicted, got.EvictedTokens, got.Compactions, got.SummaryIsNote, got.Summary,
					want.Version, want.SummarySeq, want.Evicted, want.EvictedTokens, want.Compactions, want.SummaryIsNote, want.Summary)
			}
			if want.SummaryIsNote != (tt.cfg.Mode == fold.ModeEvict) {
				t.Fatalf("first pass: summary_is_note %v in mode %q", want.SummaryIsNote, tt.cfg.Mode)
			}
			// At most the one fold that learned of the record was wasted.
			if extra := r.llm.Calls() - calls; extra > tt.maxCalls {
				t.Fatalf("%d summarizer calls during the replay, want at most %d", extra, tt.maxCalls)
			}
		})
	}
}
