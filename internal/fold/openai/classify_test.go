package openai

import (
	"errors"
	"fmt"
	"testing"

	"github.com/foldstream/foldstream/internal/retry"
	goopenai "github.com/sashabaranov/go-openai"
)

func apiErr(status int, code any, typ, msg string) error {
	return &goopenai.APIError{HTTPStatusCode: status, Code: code, Type: typ, Message: msg}
}

// go-openai's answers, as the client returns them, get the class of their
// status, code and message; what is not an answer is classified as retry
// does.
func TestClassifyGoOpenAIErrors(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		class  retry.Class
		status int
	}{
		{"429", apiErr(429, "rate_limit_exceeded", "requests", "slow down"), retry.RateLimited, 429},
		{"429 quota", apiErr(429, "insufficient_quota", "insufficient_quota", "quota"), retry.Auth, 429},
		{"500", apiErr(500, nil, "server_error", "boom"), retry.Server, 500},
		{"503 request error", &goopenai.RequestError{HTTPStatusCode: 503, Body: []byte("<html>")}, retry.Server, 503},
		{"400", apiErr(400, nil, "invalid_request_error", "bad"), retry.BadRequest, 400},
		{"400 context code", apiErr(400, "context_length_exceeded", "invalid_request_error", "too long"), retry.ContextLength, 400},
		{"400 vllm message, numeric code", apiErr(400, 400, "BadRequestError", "This model's maximum context length is 4096 tokens"), retry.ContextLength, 400},
		{"400 llama.cpp raw", &goopenai.RequestError{HTTPStatusCode: 400, Body: []byte(`the request exceeds the available context size`)}, retry.ContextLength, 400},
		{"401", apiErr(401, "invalid_api_key", "invalid_request_error", "no"), retry.Auth, 401},
		{"404", apiErr(404, "model_not_found", "", "no model"), retry.NotFound, 404},
		{"wrapped", fmt.Errorf("openai: chat completion: %w", apiErr(502, nil, "", "gw")), retry.Server, 502},
		{"not an answer", errors.New("weird"), retry.Unknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := classify(tt.err)
			if e.Class != tt.class || e.StatusCode != tt.status || e.Retryable != retry.Retryable(tt.class) {
				t.Fatalf("classify(%v) = %s/%d retryable %v, want %s/%d", tt.err, e.Class, e.StatusCode, e.Retryable, tt.class, tt.status)
			}
			if !errors.Is(e, tt.err) {
				t.Fatal("the classified error does not unwrap to the original")
			}
			// Classified once, the class survives wrapping and retry.Classify.
			if again := retry.Classify(fmt.Errorf("fold: %w", e)); again.Class != tt.class {
				t.Fatalf("retry.Classify of the wrapped result = %s, want %s", again.Class, tt.class)
			}
		})
	}
}
