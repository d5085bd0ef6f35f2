package fold

import "testing"

func TestWindowEvaluateProgression(t *testing.T) {
	w := DefaultWindow()
	cases := []struct {
		name     string
		c        Check
		fold     bool
		reason   SkipReason
		from, to int64
		recent   int64
	}{
		{"short session", Check{Cursor: 0, Total: 30}, false, SkipBelowThreshold, 0, 0, 0},
		{"exactly 60 is not enough", Check{Cursor: 0, Total: 60}, false, SkipBelowThreshold, 0, 0, 10},
		{"61 folds 0..9", Check{Cursor: 0, Total: 61}, true, "", 0, 10, 11},
		{"after first fold at 61", Check{Cursor: 10, Total: 61}, false, SkipBelowThreshold, 0, 0, 11},
		{"70 still waits", Check{Cursor: 10, Total: 70}, false, SkipBelowThreshold, 0, 0, 20},
		{"71 folds 10..19", Check{Cursor: 10, Total: 71}, true, "", 10, 20, 21},
		{"in flight", Check{Cursor: 0, Total: 64, InFlight: true}, false, SkipAlreadyInFlight, 0, 0, 14},
		{"catch-up after outage", Check{Cursor: 0, Total: 200}, true, "", 0, 10, 150},
		{"catch-up continues", Check{Cursor: 140, Total: 200}, false, SkipBelowThreshold, 0, 0, 150},
		{"disabled", Check{Cursor: 0, Total: 200, Disabled: true}, false, SkipDisabled, 0, 0, 150},
		{"ending", Check{Cursor: 0, Total: 200, Ending: true}, false, SkipSessionEnding, 0, 0, 150},
		{"backoff", Check{Cursor: 0, Total: 200, Backoff: true}, false, SkipRetryBackoff, 0, 0, 150},
		{"force folds partial batch", Check{Cursor: 0, Total: 55, Force: true}, true, "", 0, 5, 5},
		{"force with nothing eligible", Check{Cursor: 0, Total: 40, Force: true}, false, SkipNoEligibleBatch, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := w.Evaluate(tc.c)
			if d.Fold != tc.fold || d.Reason != tc.reason || d.RecentStart != tc.recent {
				t.Fatalf("got %+v", d)
			}
			if d.Fold && (d.From != tc.from || d.To != tc.to) {
				t.Fatalf("batch [%d,%d), want [%d,%d)", d.From, d.To, tc.from, tc.to)
			}
		})
	}
}

// After an outage, each successful fold re-runs the check and folds the
// next batch until the recent window is reached.
func TestWindowCatchUp(t *testing.T) {
	w := DefaultWindow()
	cursor, folds := int64(0), 0
	for {
		d := w.Evaluate(Check{Cursor: cursor, Total: 200})
		if !d.Fold {
			break
		}
		cursor = d.To
		folds++
	}
	if folds != 14 || cursor != 140 {
		t.Fatalf("catch-up folded %d batches to cursor %d, want 14 to 140", folds, cursor)
	}
}

// tokensOf gives every turn from the cursor on the same size.
func tokensOf(n int) func(int) int { return func(int) int { return n } }

// With MinFoldTokens a due fold waits until the eligible turns hold that
// many tokens, then takes all of them in one fold; 0 folds batches of Batch turns.
func TestWindowMinFoldTokens(t *testing.T) {
	w := DefaultWindow()
	w.MinFoldTokens = 700
	cases := []struct {
		name      string
		c         Check
		fold      bool
		reason    SkipReason
		from, to  int64
		estimate  int
		eligibleN int64
	}{
		// 7-token voice turns: 700 tokens are 100 eligible turns.
		{"below seed threshold", Check{Cursor: 0, Total: 60, TurnTokens: tokensOf(7)}, false, SkipBelowThreshold, 0, 0, 0, 10},
		{"due by the window, waits for tokens", Check{Cursor: 0, Total: 61, TurnTokens: tokensOf(7)}, false, SkipBelowThreshold, 0, 0, 77, 11},
		{"still waiting at 149", Check{Cursor: 0, Total: 149, TurnTokens: tokensOf(7)}, false, SkipBelowThreshold, 0, 0, 693, 99},
		{"150: 100 eligible turns hold 700 tokens, all folded", Check{Cursor: 0, Total: 150, TurnTokens: tokensOf(7)}, true, "", 0, 100, 700, 100},
		{"after the fold it waits again", Check{Cursor: 100, Total: 161, TurnTokens: tokensOf(7)}, false, SkipBelowThreshold, 0, 0, 77, 11},
		// Long turns reach the tokens first: never fewer than Batch turns.
		{"long turns fold a whole batch", Check{Cursor: 0, Total: 61, TurnTokens: tokensOf(500)}, true, "", 0, 10, 1000, 11},
		{"long turns, more eligible: still one batch", Check{Cursor: 0, Total: 75, TurnTokens: tokensOf(500)}, true, "", 0, 10, 1000, 25},
		// After a backlog each fold takes the shortest run that holds the
		// tokens, so calls stay near MinFoldTokens.
		{"backlog: first 100 turns", Check{Cursor: 0, Total: 1000, TurnTokens: tokensOf(7)}, true, "", 0, 100, 700, 950},
		{"backlog continues", Check{Cursor: 900, Total: 1000, TurnTokens: tokensOf(7)}, false, SkipBelowThreshold, 0, 0, 350, 50},
		{"in flight", Check{Cursor: 0, Total: 150, InFlight: true, TurnTokens: tokensOf(7)}, false, SkipAlreadyInFlight, 0, 0, 700, 100},
		{"backoff", Check{Cursor: 0, Total: 150, Backoff: true, TurnTokens: tokensOf(7)}, false, SkipRetryBackoff, 0, 0, 700, 100},
		{"disabled", Check{Cursor: 0, Total: 150, Disabled: true, TurnTokens: tokensOf(7)}, false, SkipDisabled, 0, 0, 700, 100},
		// A manual compact folds what is eligible now, up to the tokens.
		{"force below the tokens folds everything eligible", Check{Cursor: 0, Total: 80, Force: true, TurnTokens: tokensOf(7)}, true, "", 0, 30, 210, 30},
		{"force with more than enough", Check{Cursor: 0, Total: 300, Force: true, TurnTokens: tokensOf(7)}, true, "", 0, 100, 700, 250},
		{"force with nothing eligible", Check{Cursor: 0, Total: 40, Force: true, TurnTokens: tokensOf(7)}, false, SkipNoEligibleBatch, 0, 0, 0, 0},
		// Without sizes nothing reaches the tokens (the processor always
		// passes them).
		{"no sizes", Check{Cursor: 0, Total: 500}, false, SkipBelowThreshold, 0, 0, 0, 450},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := w.Evaluate(tc.c)
			if d.Fold != tc.fold || d.Reason != tc.reason || d.Eligible != tc.eligibleN {
				t.Fatalf("got %+v", d)
			}
			if tc.estimate > 0 && (d.Estimate != tc.estimate || d.Limit != 700) {
				t.Fatalf("estimate %d / limit %d, want %d / 700", d.Estimate, d.Limit, tc.estimate)
			}
			if d.Fold && (d.From != tc.from || d.To != tc.to) {
				t.Fatalf("fold [%d,%d), want [%d,%d)", d.From, d.To, tc.from, tc.to)
			}
			p := DefaultPolicy()
			p.Window = w
			if pd := p.Plan(tc.c); pd.Fold != d.Fold || pd.From != d.From || pd.To != d.To || pd.Reason != d.Reason {
				t.Fatalf("Plan %+v differs from Evaluate %+v", pd, d)
			}
		})
	}
}

// Turn by turn, min_fold_tokens folds once per ~MinFoldTokens of turns
// instead of once per batch, and every turn is folded exactly once.
func TestWindowMinFoldTokensProgression(t *testing.T) {
	for _, min := range []int{0, 700, 2000} {
		w := DefaultWindow()
		w.MinFoldTokens = min
		var cursor int64
		var folds []int64
		for total := int64(1); total <= 600; total++ {
			d := w.Evaluate(Check{Cursor: cursor, Total: total, TurnTokens: tokensOf(7)})
			if d.Fold {
				if d.From != cursor {
					t.Fatalf("min %d: fold from %d, cursor %d", min, d.From, cursor)
				}
				folds = append(folds, d.To-d.From)
				cursor = d.To
			}
		}
		switch min {
		case 0:
			if len(folds) != 54 || cursor != 540 {
				t.Errorf("fixed batches: %d folds to %d, want 54 to 540", len(folds), cursor)
			}
		case 700:
			if len(folds) != 5 || cursor != 500 {
				t.Errorf("700 tokens: folds %v to %d, want 5 × 100 turns to 500", folds, cursor)
			}
		case 2000:
			// 286 turns hold 2002 tokens: at total 336, and again at 622.
			if len(folds) != 1 || folds[0] != 286 {
				t.Errorf("2000 tokens: folds %v, want one of 286 turns", folds)
			}
		}
	}
}
