package main

import (
	"context"
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
)

// offlineCPU replays folds of the ingest section's workload (n turns over
// sessions, the text payloads sends) through a fresh offline summarizer
// on this goroutine, with nothing else running, and returns the process
// CPU time they took: what the offline summarizer alone costs for that
// many folds. The folds are the processor's with the default window (each
// session's turns 0-9, then 10-19, ...), in lock-step order (every
// session's first fold, then every second, ...), each carrying its
// session's previous summary and state, through fold.Summarize as the processor's
// window mode calls it (voice profile, its default); it stops after folds folds, or when every session
// has folded all it can.
func offlineCPU(ctx context.Context, n, sessions, folds int, repeated bool) (time.Duration, int, error) {
	w := fold.DefaultWindow()
	perSession := n / sessions
	rounds := max(0, (perSession-w.Recent)/w.Batch)
	base := time.Now().UTC().Truncate(time.Second).Add(-time.Duration(n) * time.Second)
	var reqs []fold.Request // built before the clock starts
	for k := 0; k < rounds && len(reqs) < folds; k++ {
		for sess := 0; sess < sessions && len(reqs) < folds; sess++ {
			name := fmt.Sprintf("sess-%05d", sess)
			turns := make([]fold.Turn, w.Batch)
			for i := range turns {
				t := k*w.Batch + i
				turns[i] = fold.Turn{Index: int64(t), TurnID: fmt.Sprintf("%s-%d", name, t),
					At:      base.Add(time.Duration(t*sessions+sess) * time.Second),
					Speaker: "Alice", Role: "user", Text: benchText}
				if !repeated {
					l := benchLines[(sess*7+t)%len(benchLines)]
					turns[i].Speaker, turns[i].Text = l[0], l[1]
				}
			}
			reqs = append(reqs, fold.Request{Session: name, Profile: fold.ProfileVoice, Turns: turns, MaxChars: w.MaxSummaryChars,
				From: turns[0].At, To: turns[len(turns)-1].At})
		}
	}
	s := offline.New()
	// Each fold gets its session's previous summary and the state the
	// summarizer kept beside it, as the processor hands them on from the
	// checkpoint (without the state it would read the summary as prose).
	prev := make(map[string]fold.Outcome, sessions)
	cpu0 := cpuTime()
	for _, req := range reqs {
		p := prev[req.Session]
		req.PreviousSummary, req.PreviousState = p.Summary, p.State
		out, err := fold.Summarize(ctx, s, req)
		if err != nil {
			return 0, 0, fmt.Errorf("offline summarizer, %s turns %d-%d: %w", req.Session, req.Turns[0].Index, req.Turns[len(req.Turns)-1].Index, err)
		}
		prev[req.Session] = out
	}
	return cpuTime() - cpu0, len(reqs), nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
