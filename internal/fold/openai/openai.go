package openai

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/prompt"
	"github.com/foldstream/foldstream/internal/retry"
)

// API types accepted in Config.APIType.
const (
	APITypeOpenAI = "openai"
	APITypeAzure  = "azure"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultBaseURL         = "https://api.openai.com/v1"
	DefaultTimeout         = 60 * time.Second
	DefaultAzureAPIVersion = "2024-10-21"
)

// Config configures the backend. Zero values take the documented defaults.
type Config struct {
	BaseURL string // default DefaultBaseURL; for Azure the resource endpoint
	APIKey  string // optional for local servers (Ollama, vLLM, llama.cpp)
	Org     string // OpenAI organization id, optional
	Model   string // model name; for Azure the deployment name

	Timeout         time.Duration // per HTTP call; default DefaultTimeout
	Temperature     float32       // 0 = provider default (go-openai omits zero)
	MaxOutputTokens int           // 0 = derive from Request.MaxChars
	APIType         string        // "openai" (default) | "azure"
	AzureAPIVersion string        // default DefaultAzureAPIVersion
	Retry           retry.Policy  // zero fields take retry.DefaultPolicy
	Templates       *prompt.Templates

	// HTTPClient is optional (proxies, custom TLS). Its Timeout should be
	// zero: the per-call Timeout above is applied through the context.
	HTTPClient *http.Client
}

// Summarizer is the "openai" fold.Summarizer: any OpenAI-compatible
// chat-completions endpoint through github.com/sashabaranov/go-openai.
type Summarizer struct {
	cfg       Config
	client    *goopenai.Client
	tmpl      *prompt.Templates
	log       zerolog.Logger
	reasoning bool // model takes max_completion_tokens and no temperature
}

var _ fold.Summarizer = (*Summarizer)(nil)

// New validates cfg and builds the backend. Errors name the offending field.
func New(cfg Config, log zerolog.Logger) (*Summarizer, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("openai: "+format, args...)) }

	cfg.Model = strings.TrimSpace(cfg.Model)
	if cfg.Model == "" {
		bad("Config.Model is required (for Azure: the deployment name)")
	}
	switch strings.ToLower(cfg.APIType) {
	case "", APITypeOpenAI:
		cfg.APIType = APITypeOpenAI
	case APITypeAzure:
		cfg.APIType = APITypeAzure
	default:
		bad("Config.APIType %q is not supported (want %q or %q)", cfg.APIType, APITypeOpenAI, APITypeAzure)
	}
	if cfg.BaseURL == "" && cfg.APIType == APITypeOpenAI {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.BaseURL == "" {
		bad("Config.BaseURL is required for Azure (https://<resource>.openai.azure.com)")
	} else if u, err := url.Parse(cfg.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("Config.BaseURL %q is not an absolute http(s) URL", cfg.BaseURL)
	}
	if cfg.APIKey == "" {
		switch {
		case cfg.APIType == APITypeAzure:
			bad("Config.APIKey is required for Azure")
		case strings.Contains(cfg.BaseURL, "api.openai.com"):
			bad("Config.APIKey is required for api.openai.com")
		}
	}
	if cfg.APIType == APITypeAzure && cfg.AzureAPIVersion == "" {
		cfg.AzureAPIVersion = DefaultAzureAPIVersion
	}
	switch {
	case cfg.Timeout < 0:
		bad("Config.Timeout must be >= 0, got %v", cfg.Timeout)
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Temperature < 0 || cfg.Temperature > 2 {
		bad("Config.Temperature must be in [0,2], got %v", cfg.Temperature)
	}
	if cfg.MaxOutputTokens < 0 {
		bad("Config.MaxOutputTokens must be >= 0, got %d", cfg.MaxOutputTokens)
	}
	if err := cfg.Retry.Validate(); err != nil {
		bad("Config.Retry: %w", err)
	}
	if cfg.Templates == nil {
		cfg.Templates = prompt.Defaults()
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	var cc goopenai.ClientConfig
	if cfg.APIType == APITypeAzure {
		cc = goopenai.DefaultAzureConfig(cfg.APIKey, cfg.BaseURL)
		cc.APIVersion = cfg.AzureAPIVersion
		// Model is already the deployment name; go-openai's default mapper
		// would strip "." from names containing "3.5".
		cc.AzureModelMapperFunc = func(m string) string { return m }
	} else {
		cc = goopenai.DefaultConfig(cfg.APIKey)
		cc.BaseURL = cfg.BaseURL
		cc.OrgID = cfg.Org
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	cc.HTTPClient = headerDoer{c: hc}

	return &Summarizer{
		cfg:       cfg,
		client:    goopenai.NewClientWithConfig(cc),
		tmpl:      cfg.Templates,
		log:       log,
		reasoning: isReasoningModel(cfg.Model),
	}, nil
}

// Name is "openai:<model>".
func (s *Summarizer) Name() string { return "openai:" + s.cfg.Model }

// MaxTokens is the output cap for a char budget: about 4 chars per token,
// 10% below the budget so that a well-behaved model cannot overshoot it,
// and never below 32 so that a tiny budget still yields a sentence.
func MaxTokens(maxChars int) int {
	return max(int(float64(maxChars)/4*0.9), 32)
}

// Summarize renders the prompt, calls the chat-completions API under
// retry.Do (bounded by ctx, which the engine sets to the fold lease), and
// validates the answer.
//
// Invalid answers (empty, echoed prompt, refusal/error text, content
// filter) fail with class invalid_output and are not retried here: at
// temperature 0 a repeat would likely give the same answer, and the
// engine's next trigger retries the fold anyway, since the cursor does not
// move on failure.
func (s *Summarizer) Summarize(ctx context.Context, req fold.Request) (fold.Result, error) {
	system, user, err := s.tmpl.Render(req)
	if err != nil {
		return fold.Result{}, retry.New(retry.BadRequest, fmt.Errorf("openai: %w", err))
	}
	creq := goopenai.ChatCompletionRequest{
		Model: s.cfg.Model,
		Messages: []goopenai.ChatCompletionMessage{
			{Role: goopenai.ChatMessageRoleSystem, Content: system},
			{Role: goopenai.ChatMessageRoleUser, Content: user},
		},
	}
	maxTok := s.cfg.MaxOutputTokens
	if maxTok == 0 {
		maxTok = MaxTokens(req.MaxChars)
	}
	if s.reasoning {
		// go-openai refuses max_tokens and non-default sampling for these.
		creq.MaxCompletionTokens = maxTok
	} else {
		// max_tokens, deprecated by OpenAI, is the one most
		// OpenAI-compatible servers (vLLM, llama.cpp, Ollama) understand.
		//lint:ignore SA1019 kept on purpose for OpenAI-compatible servers
		creq.MaxTokens = maxTok
		creq.Temperature = s.cfg.Temperature
	}

	log := s.log.With().Str("model", s.cfg.Model).Str("session", req.Session).Bool("recompact", req.Recompact).Logger()
	// Prompt text only at debug: it carries the transcript.
	log.Debug().Str("system", system).Str("user", user).Int("max_tokens", maxTok).Msg("openai: request")

	var resp goopenai.ChatCompletionResponse
	attempt := 0
	err = retry.Do(ctx, s.cfg.Retry, func(ctx context.Context) error {
		attempt++
		callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		defer cancel()
		callCtx, meta := withMeta(callCtx)
		r, err := s.client.CreateChatCompletion(callCtx, creq)
		if err != nil {
			e := classify(fmt.Errorf("openai: chat completion: %w", err))
			e.RetryAfter = meta.retryAfter(time.Now())
			return e
		}
		resp = r
		return nil
	}, func(e *retry.Error, wait time.Duration) {
		log.Warn().Str("error_class", string(e.Class)).Bool("retryable", e.Retryable).
			Int("status", e.StatusCode).Int("attempt", attempt).Int64("wait_ms", wait.Milliseconds()).
			Str("error", clip(e.Err.Error(), 300)).Msg("openai: call failed, retrying")
	})
	if err != nil {
		e := retry.Classify(err)
		log.Warn().Str("error_class", string(e.Class)).Bool("retryable", e.Retryable).
			Int("status", e.StatusCode).Int("attempt", attempt).
			Str("error", clip(err.Error(), 300)).Msg("openai: summarize failed")
		return fold.Result{}, err
	}

	res, err := s.result(resp, req, system, user)
	if err != nil {
		log.Warn().Str("error_class", string(retry.InvalidOutput)).Bool("retryable", false).
			Int("attempt", attempt).Str("error", err.Error()).Msg("openai: invalid answer")
		return fold.Result{}, err
	}
	log.Debug().Str("summary", res.Summary).Int("summary_chars", utf8.RuneCountInString(res.Summary)).
		Int("memories", len(res.Memories)).Int("input_tokens", res.InputTokens).
		Int("output_tokens", res.OutputTokens).Msg("openai: summary")
	return res, nil
}

// result validates the answer. Error messages never quote the answer: it
// is derived from the transcript and errors end up in warn-level logs and
// failure events.
func (s *Summarizer) result(resp goopenai.ChatCompletionResponse, req fold.Request, system, user string) (fold.Result, error) {
	invalid := func(format string, args ...any) error {
		return retry.New(retry.InvalidOutput, fmt.Errorf("openai: "+format, args...))
	}
	if len(resp.Choices) == 0 {
		return fold.Result{}, invalid("answer has no choices")
	}
	ch := resp.Choices[0]
	if ch.FinishReason == goopenai.FinishReasonContentFilter {
		return fold.Result{}, invalid("answer withheld by the provider's content filter")
	}
	if ch.Message.Refusal != "" {
		return fold.Result{}, invalid("model refused")
	}
	raw := strings.TrimSpace(ch.Message.Content)
	if raw == "" {
		return fold.Result{}, invalid("empty answer (finish_reason %q)", ch.FinishReason)
	}
	summary, memories := prompt.ParseMemories(raw)
	switch {
	case summary == "":
		return fold.Result{}, invalid("answer holds no summary besides the memories block")
	case looksLikeError(summary):
		return fold.Result{}, invalid("answer looks like a refusal or an error message (%d chars)", utf8.RuneCountInString(summary))
	case prompt.Echoes(raw, req, system, user):
		return fold.Result{}, invalid("answer echoes the prompt (%d chars)", utf8.RuneCountInString(raw))
	}
	model := resp.Model
	if model == "" {
		model = s.cfg.Model
	}
	return fold.Result{
		Summary:      summary,
		Memories:     memories,
		MemoryItems:  memoryItems(memories, req.Turns),
		Model:        model,
		InputTokens:  resp.Usage.PromptTokens,
		OutputTokens: resp.Usage.CompletionTokens,
	}, nil
}

// refusalPrefixes open answers that are not summaries. Only prefixes are
// checked: a summary is third-person prose and never opens this way, while
// "Bob said I'm sorry" inside one is fine.
var refusalPrefixes = []string{
	"i'm sorry", "i am sorry", "sorry,", "sorry but", "i apologize",
	"i can't", "i cannot", "i can not", "i'm unable", "i am unable", "i won't",
	"as an ai", "as a language model",
	"error:", "error -", "an error occurred", "internal server error",
}

func looksLikeError(s string) bool {
	s = strings.ToLower(strings.TrimLeft(s, " \t\n\"'*_#>"))
	s = strings.ReplaceAll(s, "’", "'")
	for _, p := range refusalPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// isReasoningModel mirrors go-openai's request validator: these families
// reject max_tokens (use max_completion_tokens) and custom temperature.
func isReasoningModel(model string) bool {
	for _, p := range []string{"o1", "o3", "o4", "gpt-5", "gpt-6"} {
		if strings.HasPrefix(model, p) {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
