package openai_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/testlog"
)

var fastRetry = retry.Policy{Initial: 5 * time.Millisecond, Max: 3 * time.Second, MaxAttempts: 3, Multiplier: 2, Jitter: 0.1}

func newSummarizer(t *testing.T, srv *openaitest.Server, level zerolog.Level, mutate func(*openai.Config)) (*openai.Summarizer, *testlog.Buffer) {
	t.Helper()
	cfg := openai.Config{
		BaseURL:     srv.URL,
		APIKey:      "test-key",
		Model:       "gpt-4o-mini",
		Timeout:     5 * time.Second,
		Temperature: 0.2,
		Retry:       fastRetry,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	buf := &testlog.Buffer{}
	s, err := openai.New(cfg, zerolog.New(buf).Level(level))
	if err != nil {
		t.Fatal(err)
	}
	return s, buf
}

func request() fold.Request {
	return fold.Request{
		Session:         "voice-1",
		Profile:         fold.ProfileVoice,
		PreviousSummary: "Alice and Bob started a Marvel Rivals session.",
		MaxChars:        1200,
		Turns: []fold.Turn{
			{Index: 10, TurnID: "a1", Speaker: "Alice", Role: "user", Text: "let's try the new team comp"},
			{Index: 11, TurnID: "b1", Speaker: "Bob", Role: "user", Text: "I keep dying as Hulk"},
		},
		Notes: []fold.Note{{Source: "James", Text: "Tokyo map, Winter Soldier"}},
	}
}

func classOf(t *testing.T, err error) *retry.Error {
	t.Helper()
	var e *retry.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *retry.Error", err, err)
	}
	return e
}

func TestSummarizeSuccess(t *testing.T) {
	answer := "Alice proposed a new team comp; Bob keeps dying as Hulk while James shares Tokyo.\n<memories>\n- Bob mains Hulk\n</memories>"
	srv := openaitest.New(t, openaitest.Reply{Text: answer, Model: "gpt-4o-mini-2024-07-18", PromptTokens: 321, CompletionTokens: 45})
	s, _ := newSummarizer(t, srv, zerolog.InfoLevel, nil)

	if s.Name() != "openai:gpt-4o-mini" {
		t.Errorf("Name() = %q", s.Name())
	}
	res, err := s.Summarize(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != "Alice proposed a new team comp; Bob keeps dying as Hulk while James shares Tokyo." {
		t.Errorf("Summary = %q", res.Summary)
	}
	if !slices.Equal(res.Memories, []string{"Bob mains Hulk"}) {
		t.Errorf("Memories = %q", res.Memories)
	}
	if len(res.MemoryItems) != 1 || res.MemoryItems[0].Speaker != "Bob" || res.MemoryItems[0].TurnID != "b1" || res.MemoryItems[0].ID == "" {
		t.Errorf("MemoryItems = %+v, want Bob's, from his turn b1", res.MemoryItems)
	}
	if res.Model != "gpt-4o-mini-2024-07-18" || res.InputTokens != 321 || res.OutputTokens != 45 {
		t.Errorf("Result = %+v", res)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer test-key" {
		t.Errorf("path %q auth %q", r.Path, r.Header.Get("Authorization"))
	}
	if r.Model != "gpt-4o-mini" {
		t.Errorf("model = %q", r.Model)
	}
	if want := openai.MaxTokens(1200); r.MaxTokens != want || want != 270 {
		t.Errorf("max_tokens = %d, want %d (=270)", r.MaxTokens, want)
	}
	if r.Temperature == nil || *r.Temperature != 0.2 {
		t.Errorf("temperature = %v", r.Temperature)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[1].Role != "user" {
		t.Fatalf("messages = %+v", r.Messages)
	}
	user := r.Messages[1].Content
	fenced := user[strings.Index(user, "<transcript>"):strings.Index(user, "</transcript>")]
	for _, want := range []string{"\nAlice: let's try the new team comp\n", "\nBob: I keep dying as Hulk\n"} {
		if !strings.Contains(fenced, want) {
			t.Errorf("turn %q not inside the transcript fence:\n%s", want, user)
		}
	}
	for _, want := range []string{"Alice and Bob started a Marvel Rivals session.", "James: Tokyo map, Winter Soldier", "Max 1200 characters"} {
		if !strings.Contains(user, want) {
			t.Errorf("prompt lacks %q", want)
		}
	}
}

func TestRateLimitedHonoursRetryAfter(t *testing.T) {
	srv := openaitest.New(t, openaitest.RateLimited(time.Second), openaitest.OK("Alice and Bob discussed team comps."))
	s, logs := newSummarizer(t, srv, zerolog.InfoLevel, nil)

	if _, err := s.Summarize(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if gap := reqs[1].At.Sub(reqs[0].At); gap < time.Second {
		t.Fatalf("retry came %v after the 429, want >= Retry-After (1s)", gap)
	}
	var retried bool
	for _, l := range logs.Lines(t) {
		if l["message"] != "openai: call failed, retrying" {
			continue
		}
		retried = true
		if l["level"] != "warn" || l["model"] != "gpt-4o-mini" || l["error_class"] != "rate_limited" ||
			l["retryable"] != true || l["attempt"] != float64(1) || l["wait_ms"].(float64) < 1000 {
			t.Errorf("retry log = %v", l)
		}
	}
	if !retried {
		t.Fatalf("no retry log:\n%s", logs)
	}
}

func TestRetryAfterPastDeadlineFailsFast(t *testing.T) {
	srv := openaitest.New(t, openaitest.RateLimited(30*time.Second), openaitest.OK("never"))
	s, _ := newSummarizer(t, srv, zerolog.InfoLevel, func(c *openai.Config) { c.Retry.Max = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := s.Summarize(ctx, request())
	if e := classOf(t, err); e.Class != retry.RateLimited || !e.Retryable || e.RetryAfter != 30*time.Second || e.StatusCode != 429 {
		t.Fatalf("err = %+v", e)
	}
	if srv.Calls() != 1 {
		t.Fatalf("%d calls, want 1", srv.Calls())
	}
	if ctx.Err() != nil {
		t.Fatal("Summarize slept into the deadline instead of giving up")
	}
}

func TestServerErrorThenSuccess(t *testing.T) {
	srv := openaitest.New(t, openaitest.ServerError(), openaitest.OK("Bob keeps dying as Hulk."))
	s, logs := newSummarizer(t, srv, zerolog.InfoLevel, nil)
	res, err := s.Summarize(context.Background(), request())
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != "Bob keeps dying as Hulk." || srv.Calls() != 2 {
		t.Fatalf("summary %q after %d calls", res.Summary, srv.Calls())
	}
	// Transcript text never reaches logs above debug.
	if out := logs.String(); strings.Contains(out, "team comp") || strings.Contains(out, "Bob keeps dying") || !strings.Contains(out, `"error_class":"server"`) {
		t.Fatalf("info-level logs:\n%s", out)
	}
}

func TestTimeoutRetriedThenFails(t *testing.T) {
	srv := openaitest.New(t, openaitest.Hang(), openaitest.Hang(), openaitest.OK("late"))
	s, _ := newSummarizer(t, srv, zerolog.InfoLevel, func(c *openai.Config) {
		c.Timeout = 100 * time.Millisecond
		c.Retry.MaxAttempts = 2
	})
	_, err := s.Summarize(context.Background(), request())
	if e := classOf(t, err); e.Class != retry.Timeout || !e.Retryable {
		t.Fatalf("err = %v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("timeout does not wrap context.DeadlineExceeded: %v", err)
	}
	if srv.Calls() != 2 {
		t.Fatalf("%d calls, want 2", srv.Calls())
	}
}

func TestNotRetried(t *testing.T) {
	tests := []struct {
		name   string
		reply  openaitest.Reply
		class  retry.Class
		status int
	}{
		{"400", openaitest.BadRequest("Invalid value for 'messages'"), retry.BadRequest, 400},
		{"400 context length", openaitest.ContextLengthExceeded(), retry.ContextLength, 400},
		{"401", openaitest.Unauthorized(), retry.Auth, 401},
		{"404 model", openaitest.Reply{Status: 404, ErrType: "invalid_request_error", ErrCode: "model_not_found", ErrMessage: "The model does not exist"}, retry.NotFound, 404},
		{"empty", openaitest.Empty(), retry.InvalidOutput, 0},
		{"whitespace", openaitest.OK("  \n\t "), retry.InvalidOutput, 0},
		{"content filter", openaitest.ContentFiltered(), retry.InvalidOutput, 0},
		{"malformed json", openaitest.Malformed(), retry.InvalidOutput, 0},
		{"refusal", openaitest.OK("I'm sorry, I can't help with summarizing this conversation."), retry.InvalidOutput, 0},
		{"error text", openaitest.OK("Error: upstream model unavailable"), retry.InvalidOutput, 0},
		{"echo fence", openaitest.OK("<transcript>\nAlice: let's try the new team comp\n</transcript>"), retry.InvalidOutput, 0},
		{"echo instructions", openaitest.OK("Drop filler, greetings, laughter, backchannels, repeats and small talk."), retry.InvalidOutput, 0},
		{"memories only", openaitest.OK("<memories>\nBob mains Hulk\n</memories>"), retry.InvalidOutput, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := openaitest.New(t, tt.reply, openaitest.OK("should not be reached"))
			s, logs := newSummarizer(t, srv, zerolog.InfoLevel, nil)
			_, err := s.Summarize(context.Background(), request())
			e := classOf(t, err)
			if e.Class != tt.class || e.Retryable || e.StatusCode != tt.status {
				t.Fatalf("err = %+v (%v), want %s/%d not retryable", e, err, tt.class, tt.status)
			}
			if srv.Calls() != 1 {
				t.Fatalf("%d calls, want exactly 1", srv.Calls())
			}
			if strings.Contains(logs.String(), "team comp") {
				t.Fatalf("transcript text in info logs:\n%s", logs)
			}
		})
	}
}

func TestOverLongAnswerReturnedAsIs(t *testing.T) {
	long := strings.Repeat("Alice and Bob argued about the Tokyo map. ", 20)
	srv := openaitest.New(t, openaitest.OK(long))
	s, _ := newSummarizer(t, srv, zerolog.InfoLevel, nil)
	req := request()
	req.MaxChars = 100
	res, err := s.Summarize(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != strings.TrimSpace(long) {
		t.Fatalf("backend altered an over-long answer (%d chars)", len(res.Summary))
	}
	if got := srv.Requests()[0].MaxTokens; got != 32 {
		t.Fatalf("max_tokens for 100 chars = %d, want the floor 32", got)
	}
}

func TestRecompactRequest(t *testing.T) {
	srv := openaitest.New(t, openaitest.OK("Alice and Bob played Marvel Rivals."))
	s, _ := newSummarizer(t, srv, zerolog.InfoLevel, nil)
	long := strings.Repeat("Alice and Bob played Marvel Rivals on /maps/tokyo. ", 40)
	_, err := s.Summarize(context.Background(), fold.Request{Session: "voice-1", Recompact: true, PreviousSummary: long, MaxChars: 400})
	if err != nil {
		t.Fatal(err)
	}
	user := srv.Requests()[0].Messages[1].Content
	if !strings.Contains(user, "at most 400 characters") || !strings.Contains(user, "/maps/tokyo") {
		t.Fatalf("recompact prompt:\n%s", user)
	}
	if got := srv.Requests()[0].MaxTokens; got != openai.MaxTokens(400) {
		t.Fatalf("max_tokens = %d", got)
	}
}

func TestAzureDeploymentPath(t *testing.T) {
	srv := openaitest.New(t, openaitest.OK("Alice and Bob played."))
	s, _ := newSummarizer(t, srv, zerolog.InfoLevel, func(c *openai.Config) {
		c.APIType = "azure"
		c.BaseURL = srv.AzureURL
		c.APIKey = "azure-key"
		c.Model = "summarizer-gpt-3.5"
	})
	if _, err := s.Summarize(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.Path != "/openai/deployments/summarizer-gpt-3.5/chat/completions" || r.Deployment != "summarizer-gpt-3.5" {
		t.Errorf("path = %q", r.Path)
	}
	if r.APIVersion != openai.DefaultAzureAPIVersion {
		t.Errorf("api-version = %q", r.APIVersion)
	}
	if r.Header.Get("api-key") != "azure-key" || r.Header.Get("Authorization") != "" {
		t.Errorf("auth headers: api-key %q, Authorization %q", r.Header.Get("api-key"), r.Header.Get("Authorization"))
	}
}

func TestReasoningModelUsesMaxCompletionTokens(t *testing.T) {
	srv := openaitest.New(t, openaitest.OK("Alice and Bob played."))
	s, _ := newSummarizer(t, srv, zerolog.InfoLevel, func(c *openai.Config) {
		c.Model = "o3-mini"
		c.MaxOutputTokens = 4000
	})
	if _, err := s.Summarize(context.Background(), request()); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.MaxTokens != 0 || r.MaxCompletionTokens != 4000 || r.Temperature != nil {
		t.Fatalf("max_tokens %d max_completion_tokens %d temperature %v", r.MaxTokens, r.MaxCompletionTokens, r.Temperature)
	}
}

func TestServerRequiresKey(t *testing.T) {
	srv := openaitest.New(t, openaitest.OK("x"))
	srv.RequireKey("right")
	s, _ := newSummarizer(t, srv, zerolog.InfoLevel, func(c *openai.Config) { c.APIKey = "wrong" })
	_, err := s.Summarize(context.Background(), request())
	if e := classOf(t, err); e.Class != retry.Auth {
		t.Fatalf("err = %v", err)
	}
}

func TestNewValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  openai.Config
		want string // field named in the error; "" = valid
	}{
		{"ok local", openai.Config{BaseURL: "http://localhost:11434/v1", Model: "llama3.2:3b"}, ""},
		{"ok openai", openai.Config{APIKey: "sk", Model: "gpt-4o-mini"}, ""},
		{"no model", openai.Config{BaseURL: "http://localhost:8000/v1"}, "Config.Model"},
		{"openai without key", openai.Config{Model: "gpt-4o-mini"}, "Config.APIKey"},
		{"bad url", openai.Config{BaseURL: "localhost:8080", Model: "m"}, "Config.BaseURL"},
		{"bad type", openai.Config{BaseURL: "http://x", Model: "m", APIType: "bedrock"}, "Config.APIType"},
		{"azure without url", openai.Config{APIType: "azure", APIKey: "k", Model: "d"}, "Config.BaseURL"},
		{"azure without key", openai.Config{APIType: "azure", BaseURL: "https://r.openai.azure.com", Model: "d"}, "Config.APIKey"},
		{"negative timeout", openai.Config{BaseURL: "http://x", Model: "m", Timeout: -time.Second}, "Config.Timeout"},
		{"temperature", openai.Config{BaseURL: "http://x", Model: "m", Temperature: 3}, "Config.Temperature"},
		{"max tokens", openai.Config{BaseURL: "http://x", Model: "m", MaxOutputTokens: -1}, "Config.MaxOutputTokens"},
		{"retry", openai.Config{BaseURL: "http://x", Model: "m", Retry: retry.Policy{Jitter: 2}}, "Config.Retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := openai.New(tt.cfg, zerolog.Nop())
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("err = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

func TestMaxTokens(t *testing.T) {
	for chars, want := range map[int]int{0: 32, 100: 32, 1200: 270, 4000: 900} {
		if got := openai.MaxTokens(chars); got != want {
			t.Errorf("MaxTokens(%d) = %d, want %d", chars, got, want)
		}
	}
}
