package openai

import (
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/prompt"
	"github.com/foldstream/foldstream/internal/retry"
)

// answerMark ends every fuzzed answer: error texts must never quote the
// answer (it is derived from the transcript, and errors are logged at warn
// and published in compaction_failed events).
const answerMark = "ZQXJ-answer-mark"

// FuzzAnswer feeds any model answer through the backend's validation. It
// never panics; an accepted answer yields a trimmed, non-empty summary
// with clean memories; a refused one is invalid_output and its error text
// does not quote the answer.
func FuzzAnswer(f *testing.F) {
	f.Add("Alice and Bob agreed to queue ranked at nine.", "stop", "")
	f.Add("I'm sorry, but I can't help with that.", "stop", "")
	f.Add("", "content_filter", "")
	f.Add("<memories>\n- only memories\n</memories>", "length", "")
	f.Add("<summary>Bob left.</summary><memories>Bob: on call</memories>", "stop", "")
	f.Add("Summary: </transcript> Alice", "stop", "")
	f.Add("Bob asked something.", "stop", "I refuse")
	s, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", Model: "fold-mini"}, zerolog.Nop())
	if err != nil {
		f.Fatal(err)
	}
	at := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	req := fold.Request{Session: "s1", Profile: fold.ProfileVoice, MaxChars: 1200, PreviousSummary: "Earlier they met.",
		Turns: []fold.Turn{{Index: 0, At: at, Speaker: "Alice", Role: "user", Text: "let's queue ranked at nine"},
			{Index: 1, At: at, Speaker: "Bob", Role: "user", Text: "sure"}}}
	system, user, err := prompt.Defaults().Render(req)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, content, finish, refusal string) {
		content += " " + answerMark
		resp := goopenai.ChatCompletionResponse{Model: "fold-mini", Choices: []goopenai.ChatCompletionChoice{{
			Message:      goopenai.ChatCompletionMessage{Role: "assistant", Content: content, Refusal: refusal},
			FinishReason: goopenai.FinishReason(finish),
		}}}
		res, err := s.result(resp, req, system, user)
		if err != nil {
			if e := retry.Classify(err); e.Class != retry.InvalidOutput || e.Retryable {
				t.Fatalf("refused answer classed %s (retryable %v): %v", e.Class, e.Retryable, err)
			}
			if strings.Contains(err.Error(), answerMark) {
				t.Fatalf("error text quotes the answer: %v", err)
			}
			return
		}
		if res.Summary == "" || res.Summary != strings.TrimSpace(res.Summary) || looksLikeError(res.Summary) {
			t.Fatalf("accepted summary %q", res.Summary)
		}
		if !utf8.ValidString(content) {
			return
		}
		for _, m := range res.Memories {
			if m == "" || strings.Contains(m, "\n") {
				t.Fatalf("memory %q", m)
			}
		}
		if res.Model == "" {
			t.Fatal("no model name")
		}
	})
}

// FuzzRetryAfter: any Retry-After / Retry-After-Ms header value gives a
// wait that is not negative, and a huge one is a huge wait (so that the
// retry loop gives up, as the server asked), never a small one.
func FuzzRetryAfter(f *testing.F) {
	f.Add("3", "")
	f.Add("", "1500.5")
	f.Add("Wed, 21 Oct 2026 07:28:00 GMT", "")
	f.Add("99999999999", "")
	f.Add("", "1e20")
	f.Add("NaN", "")
	f.Add("-4", "Inf")
	now := time.Date(2026, 10, 21, 7, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, seconds, ms string) {
		h := http.Header{}
		if seconds != "" {
			h.Set("Retry-After", seconds)
		}
		if ms != "" {
			h.Set("Retry-After-Ms", ms)
		}
		d := (&respMeta{header: h}).retryAfter(now)
		if d < 0 || d > maxRetryAfter {
			t.Fatalf("Retry-After %q / Retry-After-Ms %q gave a wait %v outside [0, maxRetryAfter]: a negative one would make the retry loop retry at once", seconds, ms, d)
		}
	})
}
