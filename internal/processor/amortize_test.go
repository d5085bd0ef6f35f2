package processor

import (
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/retry"
)

// generateSkip waits for the want-th compaction_skipped of session asked
// for with generate, and returns it.
func (r *rig) generateSkip(session string, want int) events.Lifecycle {
	r.t.Helper()
	var skips []events.Lifecycle
	r.Eventually("generate's skip", func() bool {
		skips = skips[:0]
		for _, e := range lifecycleOf(r.Lifecycle(session), events.EventCompactionSkipped) {
			if e.Trigger == "generate" {
				skips = append(skips, e)
			}
		}
		return len(skips) >= want
	})
	return skips[want-1]
}

// Window mode with min_fold_tokens: a fold that would start without it waits
// until the eligible turns hold the tokens, then one summarizer call takes
// all of them and the cursor moves past them; a fold in flight meanwhile
// keeps the verbatim window elastic, and the catch-up after it takes the
// next run that holds the tokens. A session configured with 0 folds seed
// 000's batches.
func TestMinFoldTokensAmortizesFolds(t *testing.T) {
	r := newRig(t)
	// A generous client timeout: the first call is held until the test
	// has published more turns.
	sum, err := openai.New(openai.Config{BaseURL: r.llm.URL, APIKey: "k", Model: "fold-mini", Timeout: time.Minute, Retry: retry.Policy{MaxAttempts: 1}}, r.Log)
	if err != nil {
		t.Fatal(err)
	}
	r.sum = sum
	release := make(chan struct{})
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply {
		if n == 0 {
			<-release
		}
		return openaitest.OK(echoSummary(req))
	})
	// Window mode with recent 6 and batch 2 folds [0,2) at 9 turns; with 100
	// tokens and 10-token turns the fold waits for 10 eligible turns.
	r.start(Config{Window: fold.Window{Recent: 6, Batch: 2, MinFoldTokens: 100}, FoldTimeout: time.Minute})

	r.sizedTurns("mf", 0, 15, 10) // 9 eligible turns, 90 tokens
	r.Control("mf", events.OpGenerate, nil)
	skip := r.generateSkip("mf", 1)
	if skip.Reason != string(fold.SkipBelowThreshold) || skip.Estimate != 90 || skip.Limit != 100 || skip.Eligible != 9 {
		t.Fatalf("at 15 turns: %+v, want below_threshold with 90 of 100 tokens over 9 eligible turns", skip)
	}
	if n := r.llm.Calls(); n != 0 {
		t.Fatalf("%d summarizer calls before the eligible turns held 100 tokens", n)
	}

	r.sizedTurn("mf", 15, 10) // 10 eligible turns, 100 tokens: fold [0,10) in one call
	r.Eventually("the fold's call", func() bool { return r.llm.Calls() == 1 })
	r.sizedTurns("mf", 16, 31, 10) // in flight: the verbatim window grows to 31 turns
	r.Control("mf", events.OpGenerate, nil)
	if skip := r.generateSkip("mf", 2); skip.Reason != string(fold.SkipAlreadyInFlight) {
		t.Fatalf("while the fold is in flight: %+v", skip)
	}
	if s := r.Checkpoint("mf"); s.Cursor != 0 {
		t.Fatalf("cursor %d before the fold landed", s.Cursor)
	}
	close(release)
	// Lands at cursor 10; the catch-up sees 15 eligible turns (150 tokens)
	// and folds the first 10 that hold 100; then 5 are left, 50 tokens.
	s := r.Settled("mf", 31, 20)
	if s.Summary != "Alice and Bob discussed messages 010 to 019." {
		t.Fatalf("summary %q", s.Summary)
	}
	reqs := r.llm.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d summarizer calls, want 2", len(reqs))
	}
	for i, want := range [][2]string{{"000", "009"}, {"010", "019"}} {
		if from, to := foldedRange(reqs[i]); from != want[0] || to != want[1] {
			t.Errorf("call %d folded messages %s..%s, want %s..%s", i, from, to, want[0], want[1])
		}
		if n := len(msgNum.FindAllString(reqs[i].Content(), -1)); n != 10 {
			t.Errorf("call %d carried %d turns, want 10", i, n)
		}
	}
	sums := r.Summaries("mf")
	if len(sums) != 2 || sums[0].Cursor != 10 || sums[0].FoldedTurns != 10 || sums[1].Cursor != 20 || sums[1].FoldedTurns != 10 {
		t.Fatalf("summary-updated: %+v", sums)
	}
	started := lifecycleOf(r.Lifecycle("mf"), events.EventCompactionStarted)
	if len(started) != 2 || started[0].BatchFrom != 0 || started[0].BatchTo != 9 || started[0].BatchSize != 10 ||
		started[0].Estimate != 100 || started[0].Limit != 100 || started[1].Trigger != "catch_up" || started[1].BatchFrom != 10 || started[1].BatchTo != 19 {
		t.Fatalf("compaction_started: %+v", started)
	}
	r.Control("mf", events.OpGenerate, nil)
	if skip := r.generateSkip("mf", 3); skip.Reason != string(fold.SkipBelowThreshold) || skip.Estimate != 50 || skip.Eligible != 5 {
		t.Fatalf("after the catch-up: %+v", skip)
	}

	// A manual compact folds what has left the window now.
	r.Control("mf", events.OpCompact, nil)
	r.Settled("mf", 31, 25)
	if from, to := foldedRange(r.llm.Requests()[2]); from != "020" || to != "024" {
		t.Fatalf("compact folded %s..%s, want 020..024", from, to)
	}

	// min_fold_tokens 0 for one session: fixed batches again.
	off := 0
	r.Control("exact", events.OpConfigure, &events.SessionConfig{MinFoldTokens: &off})
	r.sizedTurns("exact", 0, 9, 10)
	r.Settled("exact", 9, 2)
	if sums := r.Summaries("exact"); len(sums) != 1 || sums[0].FoldedTurns != 2 {
		t.Fatalf("fixed-batch session: %+v", sums)
	}
}

// A configure with a negative min_fold_tokens is rejected by field and
// changes nothing.
func TestMinFoldTokensConfigureRejected(t *testing.T) {
	r := newRig(t)
	r.start(Config{Window: fold.Window{Recent: 6, Batch: 2}})
	bad := -5
	r.Control("neg", events.OpConfigure, &events.SessionConfig{MinFoldTokens: &bad})
	r.Eventually("dead letter", func() bool {
		for _, m := range r.DeadLetters() {
			if m.Header.Get("Foldstream-Error-Field") == "config.min_fold_tokens" {
				return true
			}
		}
		return false
	})
	r.sizedTurns("neg", 0, 9, 10)
	r.Settled("neg", 9, 2)
	if s := r.Checkpoint("neg"); s.Config != nil {
		t.Fatalf("rejected configure applied: %+v", s.Config)
	}
}
