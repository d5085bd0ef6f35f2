package fold

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/tokens"
)

// recorder is a test double of Summarizer for the chunking logic (pure
// logic, no HTTP; the go-openai path is covered in
// internal/fold/openai/chunk_test.go). It records every request and
// answers through fn, by default with a summary naming the chunk's turns.
type recorder struct {
	fn   func(n int, req Request) (Result, error)
	reqs []Request
}

func (r *recorder) Name() string { return "recorder" }

func (r *recorder) Summarize(_ context.Context, req Request) (Result, error) {
	r.reqs = append(r.reqs, req)
	if r.fn != nil {
		return r.fn(len(r.reqs)-1, req)
	}
	return Result{Summary: chunkSummary(req), Model: "m", InputTokens: 10, OutputTokens: 2}, nil
}

// chunkSummary names the turn indexes of req, e.g. "Covered 0-2.".
func chunkSummary(req Request) string {
	if len(req.Turns) == 0 {
		return "Covered nothing."
	}
	return fmt.Sprintf("Covered %d-%d.", req.Turns[0].Index, req.Turns[len(req.Turns)-1].Index)
}

var t0 = time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)

// chunkTurns makes one turn per token count, a minute apart, at index 0…
func chunkTurns(toks ...int) []Turn {
	out := make([]Turn, len(toks))
	for i, n := range toks {
		out[i] = Turn{Index: int64(i), TurnID: fmt.Sprint("t", i), At: t0.Add(time.Duration(i) * time.Minute),
			Speaker: "Alice", Role: "user", Text: fmt.Sprintf("turn %d", i), Tokens: n}
	}
	return out
}

func chunkReq(maxChars int, turns []Turn) Request {
	return Request{Session: "s1", Profile: ProfileAgent, PreviousSummary: "Earlier: setup.", Turns: turns,
		MaxChars: maxChars, From: t0, To: t0.Add(time.Hour)}
}

func indexes(turns []Turn) []int64 {
	out := make([]int64, len(turns))
	for i, t := range turns {
		out[i] = t.Index
	}
	return out
}

func stamp(i int) string { return t0.Add(time.Duration(i) * time.Minute).Format(time.RFC3339) }

func TestSummarizeChunkedSplitAndRollingContext(t *testing.T) {
	opt := ChunkOptions{ChunkTokens: 100, OversizedTokens: 200}
	tests := []struct {
		name       string
		toks       []int
		wantChunks [][]int64
	}{
		{"one chunk", []int{10, 20, 30}, [][]int64{{0, 1, 2}}},
		{"exact fit", []int{50, 50, 50, 50}, [][]int64{{0, 1}, {2, 3}}},
		{"greedy", []int{40, 40, 40, 10, 70}, [][]int64{{0, 1}, {2, 3}, {4}}},
		{"big turn alone", []int{40, 150, 10}, [][]int64{{0}, {1}, {2}}},
		{"big turn first", []int{150, 10, 10}, [][]int64{{0}, {1, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			req := chunkReq(1000, chunkTurns(tc.toks...))
			req.Notes = []Note{{NoteID: "n1", At: t0.Add(30 * time.Second), Text: "screen: editor"}}
			out, err := SummarizeChunked(context.Background(), rec, req, opt)
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.reqs) != len(tc.wantChunks) {
				t.Fatalf("%d calls, want %d", len(rec.reqs), len(tc.wantChunks))
			}
			prev := req.PreviousSummary
			for i, r := range rec.reqs {
				if got := indexes(r.Turns); !slices.Equal(got, tc.wantChunks[i]) {
					t.Errorf("chunk %d turns %v, want %v", i, got, tc.wantChunks[i])
				}
				if r.PreviousSummary != prev {
					t.Errorf("chunk %d PreviousSummary %q, want %q (rolling context)", i, r.PreviousSummary, prev)
				}
				prev = chunkSummary(r)
				if (len(r.Notes) > 0) != (i == 0) {
					t.Errorf("chunk %d has %d notes; notes go with the first chunk", i, len(r.Notes))
				}
				if r.MaxChars != 1000 || r.Session != "s1" || r.Profile != ProfileAgent {
					t.Errorf("chunk %d request %+v lost fields", i, r)
				}
			}
			if len(tc.wantChunks) > 1 {
				// Per-chunk time bounds.
				last := rec.reqs[len(rec.reqs)-1]
				if want := t0.Add(time.Duration(last.Turns[0].Index) * time.Minute); !last.From.Equal(want) {
					t.Errorf("last chunk From %v, want %v", last.From, want)
				}
				if want := t0.Add(time.Duration(len(tc.toks)-1) * time.Minute); !last.To.Equal(want) {
					t.Errorf("last chunk To %v, want %v", last.To, want)
				}
			}
			want := Outcome{Summary: prev, Tier: TierFull, Model: "m", InputTokens: 10 * len(tc.wantChunks),
				OutputTokens: 2 * len(tc.wantChunks), Calls: len(tc.wantChunks), Chunks: len(tc.wantChunks)}
			if !outcomeEqual(out, want) || out.Chunks != want.Chunks || out.SkippedTurns != 0 {
				t.Errorf("outcome %+v, want %+v", out, want)
			}
		})
	}
}

func TestSummarizeChunkedSingleChunkIsSummarize(t *testing.T) {
	req := chunkReq(40, chunkTurns(10, 10))
	long := "This first sentence is short. This second one runs well past the budget of forty."
	fn := func(n int, req Request) (Result, error) {
		return Result{Summary: long, Memories: []string{"fact"}, Model: "m", InputTokens: 5}, nil
	}
	a, errA := Summarize(context.Background(), &recorder{fn: fn}, req)
	recB := &recorder{fn: fn}
	b, errB := SummarizeChunked(context.Background(), recB, req, ChunkOptions{ChunkTokens: 100})
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if !outcomeEqual(a, b) || b.Chunks != 1 {
		t.Errorf("chunked %+v, Summarize %+v", b, a)
	}
	if !recB.reqs[0].From.Equal(req.From) || !recB.reqs[0].To.Equal(req.To) {
		t.Error("a single chunk must pass the request through")
	}
}

func TestSummarizeChunkedCount(t *testing.T) {
	turns := chunkTurns(0, 0, 0)
	turns[0].Text = strings.Repeat("a", 100) // heuristic: 30 tokens
	turns[1].Text = strings.Repeat("b", 100)
	turns[2].Text = strings.Repeat("c", 100)
	if tokens.Heuristic(turns[0].Text) != 30 {
		t.Fatal("heuristic changed")
	}
	tests := []struct {
		name  string
		count func(string) int
		calls int
	}{
		{"nil = heuristic", nil, 2}, // 30+30 fit in 60, then 30
		{"custom", func(string) int { return 1 }, 1},
		{"custom big", func(string) int { return 61 }, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			if _, err := SummarizeChunked(context.Background(), rec, chunkReq(500, turns), ChunkOptions{ChunkTokens: 60, Count: tc.count}); err != nil {
				t.Fatal(err)
			}
			if len(rec.reqs) != tc.calls {
				t.Errorf("%d calls, want %d", len(rec.reqs), tc.calls)
			}
		})
	}
}

func TestSummarizeChunkedPartial(t *testing.T) {
	ctxLen := retry.New(retry.ContextLength, errors.New("maximum context length is 8192 tokens"))
	rejectChunkWith := func(first int64) func(int, Request) (Result, error) {
		return func(_ int, req Request) (Result, error) {
			if req.Turns[0].Index == first {
				return Result{}, ctxLen
			}
			return Result{Summary: chunkSummary(req), Model: "m"}, nil
		}
	}
	gapLine := func(n, toks, from, to int) string {
		if n == 1 {
			return fmt.Sprintf("[1 message (~%d tokens) at %s was too large to summarise and was skipped]", toks, stamp(from))
		}
		return fmt.Sprintf("[%d messages (~%d tokens) from %s to %s were too large to summarise and were skipped]", n, toks, stamp(from), stamp(to))
	}
	tests := []struct {
		name     string
		toks     []int
		fn       func(int, Request) (Result, error)
		maxChars int
		calls    int     // requests reaching the summarizer
		sent     [][]int // turn indexes of the summarised chunks' requests
		summary  string
		skipped  int
	}{
		{
			name: "oversized middle chunk never sent", toks: []int{50, 50, 300, 50, 50}, maxChars: 1000,
			calls: 2, sent: [][]int{{0, 1}, {3, 4}}, skipped: 1,
			summary: "Covered 3-4.\n" + gapLine(1, 300, 2, 2),
		},
		{
			name: "adjacent oversized chunks make one line", toks: []int{50, 300, 250, 50}, maxChars: 1000,
			calls: 2, sent: [][]int{{0}, {3}}, skipped: 2,
			summary: "Covered 3-3.\n" + gapLine(2, 550, 1, 2),
		},
		{
			name: "two gaps two lines", toks: []int{300, 50, 300, 50}, maxChars: 1000,
			calls: 2, sent: [][]int{{1}, {3}}, skipped: 2,
			summary: "Covered 3-3.\n" + gapLine(1, 300, 0, 0) + "\n" + gapLine(1, 300, 2, 2),
		},
		{
			name: "context_length rejection skipped", toks: []int{50, 50, 50, 50, 50, 50}, fn: rejectChunkWith(2), maxChars: 1000,
			calls: 3, sent: [][]int{{0, 1}, {4, 5}}, skipped: 2,
			summary: "Covered 4-5.\n" + gapLine(2, 100, 2, 3),
		},
		{
			name: "trailing gap after the last summary", toks: []int{50, 50, 300}, maxChars: 1000,
			calls: 1, sent: [][]int{{0, 1}}, skipped: 1,
			summary: "Covered 0-1.\n" + gapLine(1, 300, 2, 2),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{fn: tc.fn}
			req := chunkReq(tc.maxChars, chunkTurns(tc.toks...))
			out, err := SummarizeChunked(context.Background(), rec, req, ChunkOptions{ChunkTokens: 100, OversizedTokens: 200})
			if err != nil {
				t.Fatal(err)
			}
			if out.Tier != TierPartial || out.SkippedTurns != tc.skipped {
				t.Errorf("tier %q skipped %d, want partial %d", out.Tier, out.SkippedTurns, tc.skipped)
			}
			if len(rec.reqs) != tc.calls {
				t.Errorf("%d calls, want %d", len(rec.reqs), tc.calls)
			}
			var sent [][]int
			prev := req.PreviousSummary
			for _, r := range rec.reqs {
				if r.PreviousSummary != prev {
					t.Errorf("request for %v has PreviousSummary %q, want %q", indexes(r.Turns), r.PreviousSummary, prev)
				}
				if tc.fn == nil || r.Turns[0].Index != 2 { // accepted
					ids := []int{}
					for _, x := range indexes(r.Turns) {
						ids = append(ids, int(x))
					}
					sent = append(sent, ids)
					prev = chunkSummary(r)
				}
			}
			if fmt.Sprint(sent) != fmt.Sprint(tc.sent) {
				t.Errorf("summarised chunks %v, want %v", sent, tc.sent)
			}
			if out.Summary != tc.summary {
				t.Errorf("summary\n%q\nwant\n%q", out.Summary, tc.summary)
			}
			if runeLen(out.Summary) > tc.maxChars {
				t.Errorf("summary %d chars over %d", runeLen(out.Summary), tc.maxChars)
			}
		})
	}
}

// TestSummarizeChunkedPartialNotesMove: notes of a skipped first chunk go
// with the next chunk that is sent.
func TestSummarizeChunkedPartialNotesMove(t *testing.T) {
	rec := &recorder{fn: func(n int, req Request) (Result, error) {
		if n == 0 {
			return Result{}, fmt.Errorf("wrapped: %w", retry.New(retry.ContextLength, errors.New("too long")))
		}
		return Result{Summary: chunkSummary(req)}, nil
	}}
	req := chunkReq(1000, chunkTurns(60, 60, 60))
	req.Notes = []Note{{NoteID: "n1", Text: "note"}}
	out, err := SummarizeChunked(context.Background(), rec, req, ChunkOptions{ChunkTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.reqs) != 3 || len(rec.reqs[0].Notes) != 1 || len(rec.reqs[1].Notes) != 1 || len(rec.reqs[2].Notes) != 0 {
		t.Errorf("notes per request: %d %d %d", len(rec.reqs[0].Notes), len(rec.reqs[1].Notes), len(rec.reqs[2].Notes))
	}
	if out.Tier != TierPartial || out.Chunks != 3 || out.SkippedTurns != 1 || out.Calls != 3 {
		t.Errorf("outcome %+v", out)
	}
}

// TestSummarizeChunkedAllSkipped: nothing summarisable is tier 3, not an
// error (retrying could not help).
func TestSummarizeChunkedAllSkipped(t *testing.T) {
	ctxLen := func(int, Request) (Result, error) {
		return Result{}, retry.New(retry.ContextLength, errors.New("too long"))
	}
	tests := []struct {
		name  string
		toks  []int
		fn    func(int, Request) (Result, error)
		calls int
	}{
		{"all oversized", []int{300, 300, 300}, nil, 0},
		{"all rejected", []int{60, 60, 60}, ctxLen, 3},
		{"mixed", []int{300, 60, 300}, ctxLen, 1},
		{"single chunk rejected", []int{10, 10, 10}, ctxLen, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{fn: tc.fn}
			req := chunkReq(1000, chunkTurns(tc.toks...))
			out, err := SummarizeChunked(context.Background(), rec, req, ChunkOptions{ChunkTokens: 100, OversizedTokens: 200})
			if err != nil {
				t.Fatal(err)
			}
			want := "Earlier: setup.\n[Context contained 3 messages that were compacted (from " + stamp(0) + " to " + stamp(2) +
				"). Summary unavailable due to size limits.]"
			if out.Tier != TierPlaceholder || out.Summary != want {
				t.Errorf("tier %q summary %q, want placeholder %q", out.Tier, out.Summary, want)
			}
			if out.SkippedTurns != 3 || out.Calls != tc.calls || len(rec.reqs) != tc.calls {
				t.Errorf("outcome %+v, %d requests, want %d calls", out, len(rec.reqs), tc.calls)
			}
			if wantChunks := map[bool]int{true: 1, false: 3}[tc.name == "single chunk rejected"]; out.Chunks != wantChunks {
				t.Errorf("Chunks %d, want %d", out.Chunks, wantChunks)
			}
		})
	}
}

func TestSummarizeChunkedErrors(t *testing.T) {
	plain := errors.New("boom")
	tests := []struct {
		name  string
		err   error
		class retry.Class
	}{
		{"server", retry.New(retry.Server, errors.New("500")), retry.Server},
		{"rate limited", retry.New(retry.RateLimited, errors.New("429")), retry.RateLimited},
		{"invalid output", retry.New(retry.InvalidOutput, errors.New("refusal")), retry.InvalidOutput},
		{"unclassified", plain, retry.Unknown},
		{"canceled", context.Canceled, retry.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{fn: func(n int, req Request) (Result, error) {
				if n == 1 {
					return Result{}, tc.err
				}
				return Result{Summary: chunkSummary(req)}, nil
			}}
			out, err := SummarizeChunked(context.Background(), rec, chunkReq(1000, chunkTurns(60, 60, 60)), ChunkOptions{ChunkTokens: 100})
			if err == nil {
				t.Fatal("no error")
			}
			var ce *retry.Error
			if !errors.As(err, &ce) || ce.Class != tc.class {
				t.Errorf("error %v: class %v, want %v", err, ce, tc.class)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("error %v does not wrap the cause", err)
			}
			if !strings.Contains(err.Error(), "chunk 2 of 3") {
				t.Errorf("error %q does not name the chunk", err)
			}
			if out.Summary != "" || out.Tier != "" || out.Calls != 0 || out.Chunks != 0 {
				t.Errorf("partial result returned with the error: %+v", out)
			}
			if len(rec.reqs) != 2 {
				t.Errorf("%d calls after the failure, want none", len(rec.reqs)-2)
			}
		})
	}

	t.Run("context canceled before a chunk", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		rec := &recorder{fn: func(n int, req Request) (Result, error) {
			cancel()
			return Result{Summary: chunkSummary(req)}, nil
		}}
		_, err := SummarizeChunked(ctx, rec, chunkReq(1000, chunkTurns(60, 60)), ChunkOptions{ChunkTokens: 100})
		if retry.Classify(err).Class != retry.Canceled || len(rec.reqs) != 1 {
			t.Errorf("err %v after %d calls", err, len(rec.reqs))
		}
	})
}

func TestSummarizeChunkedBudget(t *testing.T) {
	sentences := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "Sentence number %d is here. ", i)
		}
		return strings.TrimSpace(b.String())
	}
	tests := []struct {
		name     string
		toks     []int
		maxChars int
		fn       func(int, Request) (Result, error)
		tier     Tier
		contains []string
	}{
		{
			name: "worst tier reported", toks: []int{60, 60, 60}, maxChars: 200,
			fn: func(n int, req Request) (Result, error) {
				if n == 1 || n == 2 { // chunk 2 too long, twice (re-compaction pass): clamped
					return Result{Summary: sentences(20)}, nil
				}
				return Result{Summary: chunkSummary(req)}, nil
			},
			tier: TierClamped,
		},
		{
			name: "recompacted", toks: []int{60, 60}, maxChars: 200,
			fn: func(n int, req Request) (Result, error) {
				if n == 0 {
					return Result{Summary: sentences(20)}, nil
				}
				return Result{Summary: chunkSummary(req)}, nil
			},
			tier: TierRecompacted,
		},
		{
			// Every later chunk answers at its budget exactly, which must
			// leave room for the gap line.
			name: "partial reserves room for the gap", toks: []int{60, 300, 60, 60}, maxChars: 300,
			fn: func(n int, req Request) (Result, error) {
				return Result{Summary: strings.Repeat("x", req.MaxChars-1) + "."}, nil
			},
			tier: TierPartial, contains: []string{"[1 message (~300 tokens) at " + stamp(1) + " was too large to summarise and was skipped]"},
		},
		{
			// A gap found after the last summarised chunk: the summary is
			// clamped to make room.
			name: "partial clamps the summary for a late gap", toks: []int{60, 60, 300}, maxChars: 200,
			fn: func(n int, req Request) (Result, error) {
				return Result{Summary: sentences(7)}, nil // 195 chars
			},
			tier: TierPartial, contains: []string{"Sentence number 0 is here.", "\n[1 message (~300 tokens) at " + stamp(2)},
		},
		{
			// Many gaps would take most of a small budget: one line.
			name: "many gaps collapse", toks: []int{300, 60, 300, 60, 300, 60, 300}, maxChars: 300,
			tier: TierPartial,
			contains: []string{"Covered 5-5.\n[4 messages (~1200 tokens) between " + stamp(0) + " and " + stamp(6) +
				" were too large to summarise and were skipped]"},
		},
		{
			name: "many gaps tiny budget", toks: []int{300, 60, 300, 60, 300, 60, 300}, maxChars: 120,
			tier: TierPartial, contains: []string{"Covered 5-5.\n[4 messages were too large to summarise and were skipped]"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{fn: tc.fn}
			out, err := SummarizeChunked(context.Background(), rec, chunkReq(tc.maxChars, chunkTurns(tc.toks...)),
				ChunkOptions{ChunkTokens: 100, OversizedTokens: 200})
			if err != nil {
				t.Fatal(err)
			}
			if out.Tier != tc.tier {
				t.Errorf("tier %q, want %q", out.Tier, tc.tier)
			}
			if n := runeLen(out.Summary); n > tc.maxChars || n == 0 {
				t.Errorf("summary is %d chars, budget %d: %q", n, tc.maxChars, out.Summary)
			}
			for _, c := range tc.contains {
				if !strings.Contains(out.Summary, c) {
					t.Errorf("summary %q lacks %q", out.Summary, c)
				}
			}
			for _, r := range rec.reqs {
				if r.MaxChars > tc.maxChars || r.MaxChars < tc.maxChars/2-1 {
					t.Errorf("chunk request budget %d (overall %d)", r.MaxChars, tc.maxChars)
				}
			}
		})
	}
}

func TestSummarizeChunkedNoTurns(t *testing.T) {
	rec := &recorder{}
	req := chunkReq(500, nil)
	req.Notes = []Note{{Text: "a note"}}
	out, err := SummarizeChunked(context.Background(), rec, req, ChunkOptions{ChunkTokens: 100})
	if err != nil || len(rec.reqs) != 1 || out.Chunks != 1 || out.Tier != TierFull || len(rec.reqs[0].Notes) != 1 {
		t.Errorf("out %+v err %v, %d calls", out, err, len(rec.reqs))
	}
}

func TestPlaceholder(t *testing.T) {
	turns := chunkTurns(1, 1, 1)
	noTime := chunkTurns(1, 1)
	for i := range noTime {
		noTime[i].At = time.Time{}
	}
	prev := "Alice set up the repo. Bob wrote the parser. They argued about tabs."
	long := "[Context contained 3 messages that were compacted (from " + stamp(0) + " to " + stamp(2) + "). Summary unavailable due to size limits.]"
	short := "[Context contained 3 messages that were compacted. Summary unavailable due to size limits.]"
	tests := []struct {
		name     string
		prev     string
		turns    []Turn
		notes    []Note
		maxChars int
		want     string
	}{
		{"no budget", prev, turns, nil, 0, prev + "\n" + long},
		{"fits", prev, turns, nil, 500, prev + "\n" + long},
		{"no previous summary", "", turns, nil, 500, long},
		{"no times", "", noTime, nil, 500, "[Context contained 2 messages that were compacted. Summary unavailable due to size limits.]"},
		{"notes counted", "", turns[:1], []Note{{At: t0.Add(5 * time.Minute)}, {}}, 500,
			"[Context contained 1 message and 2 notes that were compacted (from " + stamp(0) + " to " + stamp(5) + "). Summary unavailable due to size limits.]"},
		{"short note keeps the whole summary", prev, turns, nil, runeLen(prev) + 1 + runeLen(short), prev + "\n" + short},
		// The whole summary with a shorter note beats a clamped summary.
		{"summary kept whole, minimal note", prev + " " + prev + " " + prev, turns, nil, 2*runeLen(long) + 2,
			prev + " " + prev + " " + prev + "\n[3 messages compacted; no summary]"},
		{"summary clamped from the end", strings.TrimSpace(strings.Repeat(prev+" ", 6)), turns, nil, 2*runeLen(long) + 2,
			prev + " " + prev + "\n" + long},
		{"minimal note", prev, turns, nil, 80, "Alice set up the repo. Bob wrote the parser.\n[3 messages compacted; no summary]"},
		{"tiny budget keeps the summary start", prev, turns, nil, 30, "Alice set up the repo."},
		{"tiny budget no summary", "", turns, nil, 20, "[3 messages…"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := Placeholder(tc.prev, tc.turns, tc.notes, tc.maxChars)
			if out.Summary != tc.want {
				t.Errorf("summary\n%q\nwant\n%q", out.Summary, tc.want)
			}
			if out.Tier != TierPlaceholder || out.SkippedTurns != len(tc.turns) || out.Calls != 0 {
				t.Errorf("outcome %+v", out)
			}
			if tc.maxChars > 0 && runeLen(out.Summary) > tc.maxChars {
				t.Errorf("%d chars over %d", runeLen(out.Summary), tc.maxChars)
			}
			if out.Summary == "" {
				t.Error("empty placeholder")
			}
			if tc.prev != "" && !strings.HasPrefix(out.Summary, tc.prev[:10]) {
				t.Error("previous summary's start dropped")
			}
		})
	}
}
