package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
)

// foldSection measures fold overhead: from the trigger check that starts a
// fold to its summary-updated stored on the outbound stream, with a
// summarizer that answers at once, while the processor ingests at full
// speed; and ingest with those folds against ingest with folding off, on
// the same data in the same run.
func foldSection(ctx context.Context, w io.Writer, o opts) error {
	const sessions = 1000
	n := o.turns
	fmt.Fprintf(w, "fold overhead: trigger -> summary-updated stored, instant summarizer, under full ingest (%d turns over %d sessions)\n", n, sessions)
	var p50s, p99s, maxs, folds, withRates, withoutRates, ratios, startP50, startP99, landP50, landP99 []float64
	type key struct {
		session string
		from    int64
	}
	for range o.runs {
		var mu sync.Mutex
		var lat, toCall, fromCall []time.Duration
		calls := map[key]time.Time{}
		with, err := processorRate(ctx, procRun{n: n, sessions: sessions, summarizer: "instant", flush: o.flushInterval,
			called: func(session string, from int64) {
				now := time.Now()
				mu.Lock()
				calls[key{session, from}] = now
				mu.Unlock()
			},
			observe: func(t processor.FoldTiming) {
				mu.Lock()
				lat = append(lat, t.Published.Sub(t.Triggered))
				if c, ok := calls[key{t.Session, t.From}]; ok {
					toCall, fromCall = append(toCall, c.Sub(t.Triggered)), append(fromCall, t.Published.Sub(c))
				}
				mu.Unlock()
			}})
		if err != nil {
			return fmt.Errorf("with folds: %w", err)
		}
		// Folding off: a recent window no session reaches.
		without, err := processorRate(ctx, procRun{n: n, sessions: sessions, summarizer: "instant", flush: o.flushInterval,
			window: fold.Window{Recent: 1 << 30, Batch: 10}})
		if err != nil {
			return fmt.Errorf("without folds: %w", err)
		}
		mu.Lock()
		slices.Sort(lat)
		p50s = append(p50s, ms(quantile(lat, 0.50)))
		p99s = append(p99s, ms(quantile(lat, 0.99)))
		if len(lat) > 0 {
			maxs = append(maxs, ms(lat[len(lat)-1]))
		}
		slices.Sort(toCall)
		slices.Sort(fromCall)
		startP50, startP99 = append(startP50, ms(quantile(toCall, 0.5))), append(startP99, ms(quantile(toCall, 0.99)))
		landP50, landP99 = append(landP50, ms(quantile(fromCall, 0.5))), append(landP99, ms(quantile(fromCall, 0.99)))
		mu.Unlock()
		folds = append(folds, float64(with.folds))
		withRates, withoutRates = append(withRates, with.rate), append(withoutRates, without.rate)
		ratios = append(ratios, with.rate/without.rate)
	}
	fmt.Fprintf(w, "  %-44s %s\n", "folds landed during ingest", medSpread(folds, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "fold overhead p50 ms", medSpread(p50s, "%.2f"))
	fmt.Fprintf(w, "  %-44s %s\n", "fold overhead p99 ms (target < 5)", medSpread(p99s, "%.2f"))
	fmt.Fprintf(w, "  %-44s %s\n", "fold overhead max ms", medSpread(maxs, "%.2f"))
	fmt.Fprintf(w, "  %-44s %s / %s\n", "  trigger -> summarizer called p50 / p99 ms", medSpread(startP50, "%.2f"), medSpread(startP99, "%.2f"))
	fmt.Fprintf(w, "  %-44s %s / %s\n", "  summarizer called -> stored p50 / p99 ms", medSpread(landP50, "%.2f"), medSpread(landP99, "%.2f"))
	fmt.Fprintf(w, "  %-44s %s\n", "ingest turns/s with folds", medSpread(withRates, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "ingest turns/s with folding off", medSpread(withoutRates, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "ratio with/without (1 = folds cost ingest nothing)", medSpread(ratios, "%.2f"))
	return nil
}
