package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/foldstream/foldstream/internal/processor"
)

// foldStages name the parts of a fold's overhead, in order.
var foldStages = []string{"trigger -> summarizer called", "summarizer called -> returned", "summarizer returned -> publish sent", "publish sent -> stored"}

// foldRun is what one processor run with folds gave.
type foldRun struct {
	res    procResult
	lat    []time.Duration   // trigger -> stored, sorted
	stages [][]time.Duration // per foldStages, sorted
}

// foldsUnderIngest runs the processor with the instant summarizer over n
// turns of sessions and times every fold, stage by stage.
func foldsUnderIngest(ctx context.Context, o opts, n, sessions int, staggered bool) (foldRun, error) {
	type key struct {
		session string
		from    int64
	}
	var mu sync.Mutex
	fr := foldRun{stages: make([][]time.Duration, len(foldStages))}
	calls := map[key]time.Time{}
	res, err := processorRate(ctx, procRun{n: n, sessions: sessions, summarizer: "instant", flush: o.flushInterval, probe: true, repeated: o.repeated, staggered: staggered,
		called: func(session string, from int64) {
			now := time.Now()
			mu.Lock()
			calls[key{session, from}] = now
			mu.Unlock()
		},
		observe: func(t processor.FoldTiming) {
			mu.Lock()
			defer mu.Unlock()
			fr.lat = append(fr.lat, t.Published.Sub(t.Triggered))
			if c, ok := calls[key{t.Session, t.From}]; ok {
				for i, d := range []time.Duration{c.Sub(t.Triggered), t.Summarized.Sub(c), t.Sent.Sub(t.Summarized), t.Published.Sub(t.Sent)} {
					fr.stages[i] = append(fr.stages[i], d)
				}
			}
		}})
	if err != nil {
		return fr, err
	}
	mu.Lock()
	defer mu.Unlock()
	fr.res = res
	slices.Sort(fr.lat)
	for i := range fr.stages {
		slices.Sort(fr.stages[i])
	}
	return fr, nil
}

// latencies collects one figure per run.
type latencies struct{ p50, p99, max []float64 }

func (l *latencies) add(sorted []time.Duration) {
	l.p50 = append(l.p50, ms(quantile(sorted, 0.50)))
	l.p99 = append(l.p99, ms(quantile(sorted, 0.99)))
	if len(sorted) > 0 {
		l.max = append(l.max, ms(sorted[len(sorted)-1]))
	}
}

// stageFigures holds each stage's p50 and p99, one figure per run.
type stageFigures []latencies

func newStageFigures() stageFigures { return make(stageFigures, len(foldStages)) }

func (f stageFigures) add(stages [][]time.Duration) {
	for i := range f {
		f[i].add(stages[i])
	}
}

func (f stageFigures) print(w io.Writer) {
	for i, name := range foldStages {
		fmt.Fprintf(w, "    %-58s %s / %s\n", name, medSpread(f[i].p50, "%.2f"), medSpread(f[i].p99, "%.2f"))
	}
}

// foldSection measures fold overhead: from the trigger check that starts a
// fold to its summary-updated stored on the outbound stream, with a
// summarizer that answers at once, while the processor ingests at full
// speed; and ingest with those folds against ingest with folding off, on
// the same data in the same run. Two load shapes: sessions in lock-step
// (every session folds within the same few milliseconds, the worst burst)
// and staggered (independent bots). A probe publishing to the outbound
// stream meanwhile gives the floor of any fold's publish.
func foldSection(ctx context.Context, w io.Writer, o opts) error {
	const sessions = 1000
	n := o.turns
	fmt.Fprintf(w, "fold overhead: trigger -> summary-updated stored, instant summarizer, under full ingest (%d turns over %d sessions)\n", n, sessions)
	var lockstep, staggered, probeFolds, probeStaggered, probeIngest latencies
	var folds, foldsStaggered, withRates, withoutRates, ratios []float64
	// Over the p99 of the probe in the same run: the fold's p99 and its
	// publish sent -> stored p99 (how much of the fold's multiple of the
	// reference is the publish itself), per shape.
	var overLock, overStag, pubLock, pubStag []float64
	// The fold's p99 and its floor, the p99 of its publish sent -> stored
	// alone, in the same run, per shape: what the fold adds to its
	// publish.
	var floorLock, floorStag, foldOverFloorLock, foldOverFloorStag []float64
	stagesLock, stagesStag := newStageFigures(), newStageFigures()
	for range o.runs {
		with, err := foldsUnderIngest(ctx, o, n, sessions, false)
		if err != nil {
			return fmt.Errorf("with folds: %w", err)
		}
		stag, err := foldsUnderIngest(ctx, o, n, sessions, true)
		if err != nil {
			return fmt.Errorf("with folds, staggered: %w", err)
		}
		// Folding off: folds due only on generate controls, never sent.
		without, err := processorRate(ctx, procRun{n: n, sessions: sessions, summarizer: "instant", flush: o.flushInterval, probe: true, repeated: o.repeated, foldingOff: true})
		if err != nil {
			return fmt.Errorf("without folds: %w", err)
		}
		lockstep.add(with.lat)
		staggered.add(stag.lat)
		slices.Sort(with.res.probes)
		probeFolds.add(with.res.probes)
		slices.Sort(without.probes)
		probeIngest.add(without.probes)
		slices.Sort(stag.res.probes)
		probeStaggered.add(stag.res.probes)
		refLock, refStag := float64(quantile(with.res.probes, 0.99)), float64(quantile(stag.res.probes, 0.99))
		sent := len(foldStages) - 1 // publish sent -> stored
		overLock = append(overLock, float64(quantile(with.lat, 0.99))/refLock)
		overStag = append(overStag, float64(quantile(stag.lat, 0.99))/refStag)
		pubLock = append(pubLock, float64(quantile(with.stages[sent], 0.99))/refLock)
		pubStag = append(pubStag, float64(quantile(stag.stages[sent], 0.99))/refStag)
		floorL, floorS := quantile(with.stages[sent], 0.99), quantile(stag.stages[sent], 0.99)
		floorLock, floorStag = append(floorLock, ms(floorL)), append(floorStag, ms(floorS))
		foldOverFloorLock = append(foldOverFloorLock, float64(quantile(with.lat, 0.99))/float64(floorL))
		foldOverFloorStag = append(foldOverFloorStag, float64(quantile(stag.lat, 0.99))/float64(floorS))
		stagesLock.add(with.stages)
		stagesStag.add(stag.stages)
		folds = append(folds, float64(with.res.folds))
		foldsStaggered = append(foldsStaggered, float64(stag.res.folds))
		withRates, withoutRates = append(withRates, with.res.rate), append(withoutRates, without.rate)
		ratios = append(ratios, with.res.rate/without.rate)
	}
	line := func(name, v string) { fmt.Fprintf(w, "  %-50s %s\n", name, v) }
	fmt.Fprintf(w, "  sessions in lock-step (round-robin: all 1000 reach each fold threshold within ~10 ms, the worst burst)\n")
	line("folds landed during ingest", medSpread(folds, "%.0f"))
	line("fold overhead p50 ms", medSpread(lockstep.p50, "%.2f"))
	line("fold overhead p99 ms (target < 5)", medSpread(lockstep.p99, "%.2f"))
	line("fold overhead max ms", medSpread(lockstep.max, "%.2f"))
	fmt.Fprintf(w, "  sessions staggered (each at its own point of the 10-turn fold cycle, as independent bots)\n")
	line("folds landed during ingest", medSpread(foldsStaggered, "%.0f"))
	line("fold overhead p50 ms", medSpread(staggered.p50, "%.2f"))
	line("fold overhead p99 ms (target < 5)", medSpread(staggered.p99, "%.2f"))
	line("fold overhead max ms", medSpread(staggered.max, "%.2f"))
	fmt.Fprintf(w, "  reference: one publish to the outbound stream every 2 ms from its own connection, waiting for its ack (a fold's floor)\n")
	line("p50 / p99 ms, during the lock-step run", medSpread(probeFolds.p50, "%.2f")+" / "+medSpread(probeFolds.p99, "%.2f"))
	line("p50 / p99 ms, during the staggered run", medSpread(probeStaggered.p50, "%.2f")+" / "+medSpread(probeStaggered.p99, "%.2f"))
	line("p50 / p99 ms, during ingest with folding off", medSpread(probeIngest.p50, "%.2f")+" / "+medSpread(probeIngest.p99, "%.2f"))
	fmt.Fprintf(w, "  p99 over the reference p99 of the same run (target fold <= 1.5x), fold / its publish sent -> stored alone\n")
	line("lock-step", medSpread(overLock, "%.2f")+" / "+medSpread(pubLock, "%.2f"))
	line("staggered", medSpread(overStag, "%.2f")+" / "+medSpread(pubStag, "%.2f"))
	fmt.Fprintf(w, "  fold p99 ms / its floor (the summary's publish sent -> stored alone) p99 ms / fold over floor, same run (target <= 1.2x)\n")
	line("lock-step", medSpread(lockstep.p99, "%.2f")+" / "+medSpread(floorLock, "%.2f")+" / "+medSpread(foldOverFloorLock, "%.2f"))
	line("staggered", medSpread(staggered.p99, "%.2f")+" / "+medSpread(floorStag, "%.2f")+" / "+medSpread(foldOverFloorStag, "%.2f"))
	fmt.Fprintf(w, "  stages, p50 / p99 ms, lock-step:\n")
	stagesLock.print(w)
	fmt.Fprintf(w, "  stages, p50 / p99 ms, staggered:\n")
	stagesStag.print(w)
	line("ingest turns/s with folds (lock-step)", medSpread(withRates, "%.0f"))
	line("ingest turns/s with folding off", medSpread(withoutRates, "%.0f"))
	line("ratio with/without (1 = folds cost ingest nothing)", medSpread(ratios, "%.2f"))
	return nil
}
