package processor

import (
	"context"
	"fmt"
	"slices"
	"testing"

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
			r.turns("s1", tt.turns)
			var seqs []uint64
			for _, ev := range tt.published {
				r.publish(r.layout.Subjects.Out("s1", events.KindSummary), ev, events.RecordID("s1", events.KindSummary, ev.Version))
				out := r.outbound("s1", events.KindSummary)
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
			r.turns("s1", tt.more)
			got := r.waitSettled("s1", int64(tt.turns+tt.more), tt.cursor)
			summaries := r.summaries("s1")
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
			out := r.outbound("s1", events.KindSummary)
			if got.Summary != text || got.Version != tt.version || got.SummarySeq != out[len(out)-1].Sequence {
				t.Fatalf("checkpoint: summary %q version %d summary_seq %d; want %q, %d, %d", got.Summary, got.Version, got.SummarySeq, text, tt.version, out[len(out)-1].Sequence)
			}
			if calls := r.llm.Calls(); calls != tt.calls {
				t.Fatalf("%d summarizer calls, want %d", calls, tt.calls)
			}
			// The session goes on folding from there.
			r.turns("s1", 10)
			after := r.waitSettled("s1", int64(tt.turns+tt.more+10), tt.cursor+10)
			if after.Version != tt.version+1 {
				t.Fatalf("next fold: version %d, want %d", after.Version, tt.version+1)
			}
			if n := len(r.summaries("s1")); n != len(tt.versions)+1 {
				t.Fatal(fmt.Sprintf("%d summaries on the stream after the next fold, want %d", n, len(tt.versions)+1))
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
	gate := make(chan struct{})
	r.sum = gated{Summarizer: r.sum, gate: gate}
	r.start(Config{})
	r.turns("s1", 61)
	r.eventually("fold in flight", func() bool {
		s := r.checkpoint("s1")
		return s.Total == 61 && s.Lease != nil
	})
	r.control("s1", events.OpReset, nil)
	close(gate) // the old fold's answer arrives after the reset
	r.eventually("reset", func() bool {
		s := r.checkpoint("s1")
		return s.Total == 0 && s.Summary == "" && s.Lease == nil && s.Epoch == 1
	})
	r.turns("s1", 61) // numbered on from 61: messages 061.. are after the reset
	got := r.waitSettled("s1", 61, 10)
	summaries := r.summaries("s1")
	if len(summaries) != 1 || summaries[0].Version != 1 || summaries[0].Epoch != 1 || got.Version != 1 {
		t.Fatalf("summaries %+v, checkpoint version %d; want only v1 of epoch 1", summaries, got.Version)
	}
	if want := "Alice and Bob discussed messages 061 to 070."; got.Summary != want {
		t.Fatalf("summary %q, want %q", got.Summary, want)
	}
}

// gated answers only once gate is closed, whatever its context says.
type gated struct {
	fold.Summarizer
	gate chan struct{}
}

func (g gated) Summarize(_ context.Context, req fold.Request) (fold.Result, error) {
	<-g.gate
	return g.Summarizer.Summarize(context.Background(), req)
}
