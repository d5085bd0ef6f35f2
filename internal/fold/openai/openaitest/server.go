// Package openaitest runs an in-process HTTP server that speaks the OpenAI
// chat-completions wire format, for tests that exercise the real go-openai
// client over HTTP (no interface-level fakes).
//
// Replies are scripted: a queue consumed one per call, or a function of the
// call. Every request is recorded, decoded, with its arrival time.
//
//	srv := openaitest.New(t, openaitest.RateLimited(time.Second), openaitest.OK("summary"))
//	cfg.BaseURL = srv.URL // ends in /v1
//	...
//	reqs := srv.Requests()
package openaitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Reply scripts one response.
type Reply struct {
	Status int // HTTP status; 0 = 200

	// Success body (Status 200 and no RawBody).
	Text             string
	FinishReason     string // default "stop"
	Model            string // default: the requested model
	PromptTokens     int
	CompletionTokens int

	// OpenAI-shaped error body {"error":{"message","type","param","code"}},
	// used when Status >= 400 and no RawBody.
	ErrMessage, ErrType, ErrCode, ErrParam string

	RawBody string      // written verbatim instead of a JSON body
	Header  http.Header // extra response headers (e.g. Retry-After)

	Delay time.Duration // sleep before answering (aborted if the client goes away)
	Hang  bool          // never answer: block until the client's context is done
}

// OK is a 200 with text and some usage.
func OK(text string) Reply {
	return Reply{Text: text, PromptTokens: 100, CompletionTokens: len(text)/4 + 1}
}

// Empty is a 200 whose message content is "".
func Empty() Reply { return Reply{Text: ""} }

// ContentFiltered is a 200 cut by the provider's content filter.
func ContentFiltered() Reply { return Reply{Text: "", FinishReason: "content_filter"} }

// Malformed is a 200 whose body is not valid JSON.
func Malformed() Reply {
	return Reply{RawBody: `{"id":"chatcmpl-x","choices":[{"message":{"content": oops}}]}`}
}

// RateLimited is a 429 with a Retry-After header in whole seconds.
func RateLimited(retryAfter time.Duration) Reply {
	h := http.Header{}
	h.Set("Retry-After", strconv.Itoa(int(retryAfter.Round(time.Second)/time.Second)))
	return Reply{Status: http.StatusTooManyRequests, Header: h,
		ErrMessage: "Rate limit reached for requests", ErrType: "requests", ErrCode: "rate_limit_exceeded"}
}

// ServerError is a 500 with an OpenAI-shaped body.
func ServerError() Reply {
	return Reply{Status: http.StatusInternalServerError,
		ErrMessage: "The server had an error while processing your request.", ErrType: "server_error"}
}

// BadRequest is a 400 invalid_request_error.
func BadRequest(msg string) Reply {
	return Reply{Status: http.StatusBadRequest, ErrMessage: msg, ErrType: "invalid_request_error"}
}

// ContextLengthExceeded is OpenAI's 400 for a prompt over the model's window.
func ContextLengthExceeded() Reply {
	return Reply{Status: http.StatusBadRequest, ErrType: "invalid_request_error", ErrParam: "messages",
		ErrCode:    "context_length_exceeded",
		ErrMessage: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."}
}

// Unauthorized is a 401 invalid_api_key.
func Unauthorized() Reply {
	return Reply{Status: http.StatusUnauthorized, ErrType: "invalid_request_error", ErrCode: "invalid_api_key",
		ErrMessage: "Incorrect API key provided."}
}

// Hang never answers; the call ends when the client gives up.
func Hang() Reply { return Reply{Hang: true} }

// Message is one chat message of a recorded request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one recorded call.
type Request struct {
	At       time.Time // arrival
	Method   string
	Path     string
	RawQuery string
	Header   http.Header

	// Azure only.
	Deployment string
	APIVersion string

	// Decoded body.
	Model               string
	Messages            []Message
	MaxTokens           int
	MaxCompletionTokens int
	Temperature         *float32 // nil when not sent
	Body                []byte
}

// Content returns the concatenated message contents, for substring asserts.
func (r Request) Content() string {
	var s string
	for _, m := range r.Messages {
		s += m.Content + "\n"
	}
	return s
}

// Server is the fake endpoint. URL is the OpenAI-style base URL (ending in
// /v1); AzureURL is the Azure-style base URL (the client appends
// /openai/deployments/{d}/chat/completions?api-version=…).
type Server struct {
	URL      string
	AzureURL string

	srv  *httptest.Server
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	queue    []Reply
	fn       func(n int, r Request) Reply
	fallback *Reply
	apiKey   string
	reqs     []Request
}

// New starts a server answering with replies in order, and closes it when
// tb's test ends. After the queue runs dry, calls get the fallback (see
// SetFallback), or a 400 "unscripted call" error that is never retried.
func New(tb testing.TB, replies ...Reply) *Server {
	s := &Server{done: make(chan struct{}), queue: replies}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handle)
	mux.HandleFunc("POST /openai/deployments/{deployment}/chat/completions", s.handle)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	s.AzureURL = s.srv.URL
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// Close releases hanging calls and stops the server. Idempotent.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.srv.Close()
	})
}

// Enqueue appends scripted replies.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// SetFunc scripts replies as a function of the call number (0-based) and
// request; it takes precedence over the queue.
func (s *Server) SetFunc(fn func(n int, r Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fn = fn
}

// SetFallback sets the reply used once the queue is empty.
func (s *Server) SetFallback(r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = &r
}

// RequireKey makes the server answer 401 unless the request carries key
// ("Authorization: Bearer key", or "api-key: key" on the Azure path).
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// Requests returns a copy of the calls received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Calls is the number of calls received so far.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	rec := Request{
		At: time.Now(), Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Header: r.Header.Clone(), Deployment: r.PathValue("deployment"),
		APIVersion: r.URL.Query().Get("api-version"),
	}
	var body struct {
		Model               string    `json:"model"`
		Messages            []Message `json:"messages"`
		MaxTokens           int       `json:"max_tokens"`
		MaxCompletionTokens int       `json:"max_completion_tokens"`
		Temperature         *float32  `json:"temperature"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20))
	decErr := dec.Decode(&body)
	rec.Model, rec.Messages, rec.MaxTokens = body.Model, body.Messages, body.MaxTokens
	rec.MaxCompletionTokens, rec.Temperature = body.MaxCompletionTokens, body.Temperature
	if raw, err := json.Marshal(body); err == nil {
		rec.Body = raw
	}

	s.mu.Lock()
	n := len(s.reqs)
	s.reqs = append(s.reqs, rec)
	var reply Reply
	switch {
	case s.fn != nil:
		fn := s.fn
		s.mu.Unlock()
		reply = fn(n, rec)
		s.mu.Lock()
	case len(s.queue) > 0:
		reply, s.queue = s.queue[0], s.queue[1:]
	case s.fallback != nil:
		reply = *s.fallback
	default:
		reply = Reply{Status: http.StatusBadRequest, ErrType: "invalid_request_error", ErrCode: "openaitest_unscripted",
			ErrMessage: fmt.Sprintf("openaitest: no scripted reply for call %d", n)}
	}
	key := s.apiKey
	s.mu.Unlock()

	switch {
	case decErr != nil:
		reply = BadRequest("openaitest: request body is not JSON: " + decErr.Error())
	case rec.Deployment != "" && rec.APIVersion == "":
		reply = Reply{Status: http.StatusNotFound, ErrCode: "404", ErrMessage: "Resource not found (missing api-version)"}
	case key != "" && r.Header.Get("Authorization") != "Bearer "+key && r.Header.Get("api-key") != key:
		reply = Unauthorized()
	}

	if reply.Hang {
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
		return
	}
	if reply.Delay > 0 {
		t := time.NewTimer(reply.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.done:
			t.Stop()
			return
		}
	}
	write(w, reply, rec)
}

func write(w http.ResponseWriter, reply Reply, rec Request) {
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	if reply.RawBody != "" {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(reply.RawBody))
		return
	}
	var payload any
	if status >= 400 {
		e := map[string]any{"message": reply.ErrMessage, "type": reply.ErrType, "param": nil, "code": nil}
		if reply.ErrParam != "" {
			e["param"] = reply.ErrParam
		}
		if reply.ErrCode != "" {
			e["code"] = reply.ErrCode
		}
		payload = map[string]any{"error": e}
	} else {
		model := reply.Model
		if model == "" {
			model = rec.Model
		}
		finish := reply.FinishReason
		if finish == "" {
			finish = "stop"
		}
		payload = map[string]any{
			"id":      "chatcmpl-openaitest",
			"object":  "chat.completion",
			"created": time.Now().Unix(),
			"model":   model,
			"choices": []any{map[string]any{
				"index":         0,
				"message":       map[string]any{"role": "assistant", "content": reply.Text},
				"finish_reason": finish,
			}},
			"usage": map[string]any{
				"prompt_tokens":     reply.PromptTokens,
				"completion_tokens": reply.CompletionTokens,
				"total_tokens":      reply.PromptTokens + reply.CompletionTokens,
			},
		}
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(payload)
}
