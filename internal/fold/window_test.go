package fold

import "testing"

func TestWindowEvaluateSeed000(t *testing.T) {
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
