package offline

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/foldstream/foldstream/internal/fold"
)

// TestDumpFolds is a tool, not a check: with FOLDSTREAM_OFFLINE_DUMP set to
// a file it writes every fold's summary and memories over the ingest
// bench's folds (ingestRequests, each carrying its session's state), synthetic sessions and, with
// FOLDSTREAM_QMSUM set, the QMSum meetings (folds of 10 and 40, 1,200 and
// 400 characters, voice and agent profiles), so that two builds of the
// summarizer can be compared byte for byte (cmp).
func TestDumpFolds(t *testing.T) {
	path := os.Getenv("FOLDSTREAM_OFFLINE_DUMP")
	if path == "" {
		t.Skip("FOLDSTREAM_OFFLINE_DUMP not set")
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	defer w.Flush()
	ctx := context.Background()
	dump := func(label string, out fold.Outcome) {
		fmt.Fprintf(w, "%s\t%q\n  state %s\n", label, out.Summary, out.State)
		for _, m := range out.MemoryItems {
			fmt.Fprintf(w, "  mem %+v\n", m)
		}
	}
	// The ingest bench's folds.
	s := New()
	prev, states := map[string]string{}, map[string][]byte{}
	for i, r := range ingestRequests(t) {
		r.PreviousSummary, r.PreviousState = prev[r.Session], states[r.Session]
		out, err := fold.Summarize(ctx, s, r)
		if err != nil {
			t.Fatal(err)
		}
		prev[r.Session], states[r.Session] = out.Summary, out.State
		dump(fmt.Sprintf("ingest %d %s", i, r.Session), out)
	}
	// Rolling synthetic sessions, and the same turns as one-shot folds.
	roll := func(label string, s *Summarizer, turns []fold.Turn, notes []fold.Note, batch, budget int, profile fold.Profile) {
		summary, ni := "", 0
		var state []byte
		for c := 0; c < len(turns); c += batch {
			b := turns[c:min(c+batch, len(turns))]
			var bn []fold.Note
			for ni < len(notes) && !notes[ni].At.After(b[len(b)-1].At) {
				bn = append(bn, notes[ni])
				ni++
			}
			out, err := fold.Summarize(ctx, s, fold.Request{Session: label, Profile: profile, PreviousSummary: summary, PreviousState: state,
				Turns: b, Notes: bn, MaxChars: budget, From: b[0].At, To: b[len(b)-1].At})
			if err != nil {
				t.Fatal(err)
			}
			summary, state = out.Summary, out.State
			dump(fmt.Sprintf("%s %d", label, c), out)
		}
	}
	for seed := uint64(1); seed <= 6; seed++ {
		ts, notes := synthSession(seed, 600)
		for _, batch := range []int{10, 40} {
			for _, budget := range []int{1200, 400} {
				roll(fmt.Sprintf("synth %d/%d/%d", seed, batch, budget), New(), ts, notes, batch, budget, fold.ProfileVoice)
			}
		}
	}
	dir := os.Getenv("FOLDSTREAM_QMSUM")
	if dir == "" {
		return
	}
	for _, m := range loadQMSum(t, dir) {
		file, turns := m.file, m.turns
		s := New() // one per meeting and shared by its runs, as in a processor
		for _, batch := range []int{10, 40} {
			for _, budget := range []int{1200, 400} {
				for _, p := range []fold.Profile{fold.ProfileVoice, fold.ProfileAgent} {
					roll(fmt.Sprintf("qmsum %s %d/%d/%s", filepath.Base(file), batch, budget, p), s, turns, nil, batch, budget, p)
				}
			}
		}
	}
}
