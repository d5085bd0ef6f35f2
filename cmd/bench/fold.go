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
	var p50s, p99s, maxs, folds, withRates, withoutRates, ratios, probe50s, probe99s []float64
	// Where the time goes, stage by stage: p50 and p99 of each run.
	stages := []string{"trigger -> summarizer called", "summarizer called -> returned", "summarizer returned -> publish sent", "publish sent -> stored"}
	stageP50, stageP99 := make([][]float64, len(stages)), make([][]float64, len(stages))
	type key struct {
		session string
		from    int64
	}
	for range o.runs {
		var mu sync.Mutex
		var lat []time.Duration
		split := make([][]time.Duration, len(stages))
		calls := map[key]time.Time{}
		with, err := processorRate(ctx, procRun{n: n, sessions: sessions, summarizer: "instant", flush: o.flushInterval, probe: true,
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
					for i, d := range []time.Duration{c.Sub(t.Triggered), t.Summarized.Sub(c), t.Sent.Sub(t.Summarized), t.Published.Sub(t.Sent)} {
						split[i] = append(split[i], d)
					}
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
		slices.Sort(with.probes)
		probe50s = append(probe50s, ms(quantile(with.probes, 0.5)))
		probe99s = append(probe99s, ms(quantile(with.probes, 0.99)))
		mu.Lock()
		slices.Sort(lat)
		p50s = append(p50s, ms(quantile(lat, 0.50)))
		p99s = append(p99s, ms(quantile(lat, 0.99)))
		if len(lat) > 0 {
			maxs = append(maxs, ms(lat[len(lat)-1]))
		}
		for i := range split {
			slices.Sort(split[i])
			stageP50[i] = append(stageP50[i], ms(quantile(split[i], 0.5)))
			stageP99[i] = append(stageP99[i], ms(quantile(split[i], 0.99)))
		}
		mu.Unlock()
		folds = append(folds, float64(with.folds))
		withRates, withoutRates = append(withRates, with.rate), append(withoutRates, without.rate)
		ratios = append(ratios, with.rate/without.rate)
	}
	fmt.Fprintf(w, "  %-44s %s\n", "folds landed during ingest", medSpread(folds, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "fold overhead p50 ms", medSpread(p50s, "%.2f"))
	fmt.Fprintf(w, "  %-44s %s\n", "fold overhead p99 ms (target < 5)", medSpread(p99s, "%.2f"))
	fmt.Fprintf(w, "  %-44s %s\n", "fold overhead max ms", medSpread(maxs, "%.2f"))
	fmt.Fprintf(w, "  reference, the same load: one publish to the outbound stream, waiting for its ack (a fold's floor)\n")
	fmt.Fprintf(w, "  %-44s %s\n", "publish round trip p50 ms", medSpread(probe50s, "%.2f"))
	fmt.Fprintf(w, "  %-44s %s\n", "publish round trip p99 ms", medSpread(probe99s, "%.2f"))
	fmt.Fprintf(w, "  stages, p50 / p99 ms:\n")
	for i, name := range stages {
		fmt.Fprintf(w, "    %-58s %s / %s\n", name, medSpread(stageP50[i], "%.2f"), medSpread(stageP99[i], "%.2f"))
	}
	fmt.Fprintf(w, "  %-44s %s\n", "ingest turns/s with folds", medSpread(withRates, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "ingest turns/s with folding off", medSpread(withoutRates, "%.0f"))
	fmt.Fprintf(w, "  %-44s %s\n", "ratio with/without (1 = folds cost ingest nothing)", medSpread(ratios, "%.2f"))
	return nil
}
