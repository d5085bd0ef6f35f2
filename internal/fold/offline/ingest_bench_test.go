package offline

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/benchtext"
	"github.com/foldstream/foldstream/internal/fold"
)

// ingestLines are the lines cmd/bench's ingest section sends in turn.
func ingestLines(tb testing.TB) [][2]string {
	tb.Helper()
	return benchtext.Lines()
}

// ingestSessions and ingestFolds shape ingestRequests: cmd/bench's ingest
// section at 1,000 sessions of 100 turns, with the processor's defaults
// (window 50, batch 10, 1,200 characters), folds turns 0-9 ... 40-49 of
// every session.
const ingestSessions, ingestFolds, ingestBatch = 1000, 5, 10

// ingestRequests are the folds of cmd/bench's ingest section in the order
// of its lock-step run: every session's first fold, then every session's
// second, and so on. Each session says the 50 lines in turn from its own
// starting line, one turn every 1,000 s. PreviousSummary is left empty: the
// caller carries each session's last summary.
func ingestRequests(tb testing.TB) []fold.Request {
	lines := ingestLines(tb)
	base := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	reqs := make([]fold.Request, 0, ingestSessions*ingestFolds)
	for k := range ingestFolds {
		for s := range ingestSessions {
			ts := make([]fold.Turn, ingestBatch)
			for i := range ts {
				t := k*ingestBatch + i
				l := lines[(s*7+t)%len(lines)]
				ts[i] = fold.Turn{Index: int64(t), At: base.Add(time.Duration(t*ingestSessions+s) * time.Second),
					Speaker: l[0], Role: "user", Text: l[1]}
			}
			reqs = append(reqs, fold.Request{Session: fmt.Sprintf("sess-%05d", s),
				Turns: ts, MaxChars: 1200, From: ts[0].At, To: ts[len(ts)-1].At})
		}
	}
	return reqs
}

// BenchmarkSummarizeIngestFold replays the folds of cmd/bench's ingest
// section (ingestRequests) through fold.Summarize as the processor calls
// it, each fold carrying its session's previous summary and state. ns/op is per fold.
// The folds come in rounds (every session's first, then every second, ...)
// and later rounds cost more (a longer previous summary, period lines):
// run it for a multiple of 5,000 folds (-benchtime 5000x) to weigh them as
// the ingest section does.
func BenchmarkSummarizeIngestFold(b *testing.B) {
	reqs := ingestRequests(b)
	ctx := context.Background()
	b.ReportAllocs()
	var s *Summarizer
	prev := make([]string, ingestSessions)
	states := make([][]byte, ingestSessions)
	i := 0
	for b.Loop() {
		if i%len(reqs) == 0 {
			s, i = New(), 0
			clear(prev)
			clear(states)
		}
		req := reqs[i]
		req.PreviousSummary, req.PreviousState = prev[i%ingestSessions], states[i%ingestSessions]
		out, err := fold.Summarize(ctx, s, req)
		if err != nil {
			b.Fatal(err)
		}
		prev[i%ingestSessions], states[i%ingestSessions] = out.Summary, out.State
		i++
	}
}
