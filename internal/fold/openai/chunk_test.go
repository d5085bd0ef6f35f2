package openai_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/retry"
)

// SummarizeChunked through the real go-openai client over HTTP: the
// chunking logic lives in package fold, which this package imports, so the
// test sits here (package fold cannot import fold/openai).

var chunkT0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// chunkedRequest has six turns of 50 tokens each: with ChunkTokens 100 they
// make three chunks, [0 1] [2 3] [4 5], each turn tagged with a marker the
// scripted server can recognise.
func chunkedRequest() fold.Request {
	texts := []string{
		"marker-0 I set up the repository with a Makefile",
		"marker-1 Bob reviewed the Makefile and approved it",
		"marker-2 here is the full 9000-token build log",
		"marker-3 and the second half of the build log",
		"marker-4 the parser now handles nested quotes",
		"marker-5 tests pass on linux and darwin",
	}
	req := fold.Request{Session: "agent-1", Profile: fold.ProfileAgent, MaxChars: 600,
		PreviousSummary: "Alice started a Go project called foldstream."}
	for i, text := range texts {
		req.Turns = append(req.Turns, fold.Turn{Index: int64(i), TurnID: fmt.Sprint("t", i),
			At: chunkT0.Add(time.Duration(i) * time.Minute), Speaker: "Alice", Role: "user", Text: text, Tokens: 50})
	}
	req.From, req.To = req.Turns[0].At, req.Turns[len(req.Turns)-1].At
	return req
}

var chunkOpts = fold.ChunkOptions{ChunkTokens: 100, OversizedTokens: 200}

func TestSummarizeChunkedContextLengthIsPartial(t *testing.T) {
	first := "Alice set up the foldstream repository with a Makefile, which Bob approved."
	last := "The parser handles nested quotes now and the tests pass on linux and darwin."
	srv := openaitest.New(t)
	srv.SetFunc(func(n int, r openaitest.Request) openaitest.Reply {
		switch {
		case strings.Contains(r.Content(), "marker-2"):
			return openaitest.ContextLengthExceeded()
		case strings.Contains(r.Content(), "marker-0"):
			return openaitest.OK(first)
		default:
			return openaitest.OK(last)
		}
	})
	s, _ := newSummarizer(t, srv, zerolog.Disabled, nil)

	req := chunkedRequest()
	out, err := fold.SummarizeChunked(context.Background(), s, req, chunkOpts)
	if err != nil {
		t.Fatal(err)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (context_length is a 4xx: never retried)", len(reqs))
	}
	for i, wantTurns := range [][]string{{"marker-0", "marker-1"}, {"marker-2", "marker-3"}, {"marker-4", "marker-5"}} {
		c := reqs[i].Content()
		for m := range 6 {
			marker := fmt.Sprint("marker-", m)
			if want := strings.Contains(strings.Join(wantTurns, " "), marker); strings.Contains(c, marker) != want {
				t.Errorf("request %d: has %s = %v, want %v", i, marker, !want, want)
			}
		}
	}
	// Rolling context: chunk 1 gets the session's summary; the rejected
	// chunk 2 and chunk 3 both get chunk 1's summary.
	if !strings.Contains(reqs[0].Content(), req.PreviousSummary) {
		t.Error("chunk 1 lacks the previous summary")
	}
	for _, i := range []int{1, 2} {
		if !strings.Contains(reqs[i].Content(), first) || strings.Contains(reqs[i].Content(), req.PreviousSummary) {
			t.Errorf("request %d does not carry chunk 1's summary as its previous summary", i)
		}
	}

	// After the gap, chunk 3 is asked for less so the gap line still fits.
	if reqs[2].MaxTokens >= reqs[0].MaxTokens {
		t.Errorf("chunk 3 max_tokens %d, not below chunk 1's %d", reqs[2].MaxTokens, reqs[0].MaxTokens)
	}

	gap := "[2 messages (~100 tokens) from 2025-03-01T09:02:00Z to 2025-03-01T09:03:00Z were too large to summarise and were skipped]"
	if out.Summary != last+"\n"+gap {
		t.Errorf("summary %q", out.Summary)
	}
	if out.Tier != fold.TierPartial || out.Chunks != 3 || out.SkippedTurns != 2 || out.Calls != 3 {
		t.Errorf("outcome %+v", out)
	}
	if out.InputTokens != 200 || out.Model != "gpt-4o-mini" {
		t.Errorf("usage %d model %q", out.InputTokens, out.Model)
	}
	if n := utf8.RuneCountInString(out.Summary); n > req.MaxChars {
		t.Errorf("summary %d chars over %d", n, req.MaxChars)
	}
}

func TestSummarizeChunkedServerErrorFails(t *testing.T) {
	srv := openaitest.New(t)
	srv.SetFunc(func(n int, r openaitest.Request) openaitest.Reply {
		if strings.Contains(r.Content(), "marker-2") {
			return openaitest.ServerError()
		}
		return openaitest.OK("Alice set up the foldstream repository with a Makefile.")
	})
	s, _ := newSummarizer(t, srv, zerolog.Disabled, nil)

	out, err := fold.SummarizeChunked(context.Background(), s, chunkedRequest(), chunkOpts)
	if err == nil {
		t.Fatalf("no error; outcome %+v", out)
	}
	if e := classOf(t, err); e.Class != retry.Server || !e.Retryable || e.StatusCode != 500 {
		t.Errorf("error class %q retryable %v status %d", e.Class, e.Retryable, e.StatusCode)
	}
	if out.Summary != "" || out.Tier != "" {
		t.Errorf("partial result with the error: %+v", out)
	}
	// Chunk 1, then chunk 2 with fastRetry's 3 attempts; chunk 3 never sent.
	if reqs := srv.Requests(); len(reqs) != 1+fastRetry.MaxAttempts {
		t.Errorf("%d requests, want %d", len(reqs), 1+fastRetry.MaxAttempts)
	}
}

func TestSummarizeChunkedAllOversizedSendsNothing(t *testing.T) {
	srv := openaitest.New(t)
	s, _ := newSummarizer(t, srv, zerolog.Disabled, nil)
	req := chunkedRequest()
	for i := range req.Turns {
		req.Turns[i].Tokens = 500
	}
	out, err := fold.SummarizeChunked(context.Background(), s, req, chunkOpts)
	if err != nil {
		t.Fatal(err)
	}
	if len(srv.Requests()) != 0 {
		t.Errorf("%d requests for oversized chunks", len(srv.Requests()))
	}
	want := req.PreviousSummary + "\n[Context contained 6 messages that were compacted (from 2025-03-01T09:00:00Z to 2025-03-01T09:05:00Z). Summary unavailable due to size limits.]"
	if out.Tier != fold.TierPlaceholder || out.Summary != want || out.Chunks != 6 || out.SkippedTurns != 6 {
		t.Errorf("outcome %+v", out)
	}
}
