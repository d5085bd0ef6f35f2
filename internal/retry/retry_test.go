package retry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"
	"time"
)

func TestRetryable(t *testing.T) {
	want := map[Class]bool{
		Timeout: true, RateLimited: true, Server: true, Connection: true,
		BadRequest: false, Auth: false, NotFound: false, ContextLength: false,
		InvalidOutput: false, Canceled: false, Unknown: false,
	}
	for c, w := range want {
		if got := Retryable(c); got != w {
			t.Errorf("Retryable(%s) = %v, want %v", c, got, w)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func jsonSyntaxErr() error {
	var v any
	return fmt.Errorf("decode: %w", json.Unmarshal([]byte("{"), &v))
}

// apiErr is a provider's answer as a backend reports it (FromStatus).
func apiErr(status int, code, typ, msg string) error {
	return FromStatus(errors.New(msg), status, code, typ, msg)
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		class  Class
		status int
	}{
		{"429", apiErr(429, "rate_limit_exceeded", "requests", "slow down"), RateLimited, 429},
		{"429 quota", apiErr(429, "insufficient_quota", "insufficient_quota", "quota"), Auth, 429},
		{"500", apiErr(500, "", "server_error", "boom"), Server, 500},
		{"400", apiErr(400, "", "invalid_request_error", "bad"), BadRequest, 400},
		{"400 context code", apiErr(400, "context_length_exceeded", "invalid_request_error", "too long"), ContextLength, 400},
		{"400 vllm message", apiErr(400, "400", "BadRequestError", "This model's maximum context length is 4096 tokens"), ContextLength, 400},
		{"400 llama.cpp raw", apiErr(400, "", "", "the request exceeds the available context size"), ContextLength, 400},
		{"413", apiErr(413, "", "", "too large"), ContextLength, 413},
		{"401", apiErr(401, "invalid_api_key", "invalid_request_error", "no"), Auth, 401},
		{"403", apiErr(403, "", "", "forbidden"), Auth, 403},
		{"404", apiErr(404, "model_not_found", "", "no model"), NotFound, 404},
		{"422", apiErr(422, "", "", "unprocessable"), BadRequest, 422},
		{"wrapped api error", fmt.Errorf("call: %w", apiErr(502, "", "", "gw")), Server, 502},
		{"deadline", context.DeadlineExceeded, Timeout, 0},
		{"url deadline", &url.Error{Op: "Post", URL: "http://x", Err: context.DeadlineExceeded}, Timeout, 0},
		{"net timeout", &net.OpError{Op: "read", Err: timeoutErr{}}, Timeout, 0},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), Canceled, 0},
		{"refused", &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, Connection, 0},
		{"reset", syscall.ECONNRESET, Connection, 0},
		{"eof", &url.Error{Op: "Post", URL: "http://x", Err: io.EOF}, Connection, 0},
		{"unexpected eof", io.ErrUnexpectedEOF, Connection, 0},
		{"malformed json", jsonSyntaxErr(), InvalidOutput, 0},
		{"context length text", errors.New("context_length_exceeded"), ContextLength, 0},
		{"other", errors.New("weird"), Unknown, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Classify(tt.err)
			if e.Class != tt.class || e.StatusCode != tt.status {
				t.Fatalf("Classify(%v) = %s/%d, want %s/%d", tt.err, e.Class, e.StatusCode, tt.class, tt.status)
			}
			if e.Retryable != Retryable(tt.class) {
				t.Fatalf("Retryable = %v, want %v", e.Retryable, Retryable(tt.class))
			}
			// Classified here: unwraps to the original. Classified by a
			// backend and wrapped since: the original holds it.
			if !errors.Is(e, tt.err) && !errors.Is(tt.err, e) {
				t.Fatalf("classified error and the original are unrelated")
			}
		})
	}
}

func TestClassifyNilAndIdempotent(t *testing.T) {
	if Classify(nil) != nil {
		t.Fatal("Classify(nil) != nil")
	}
	orig := &Error{Class: RateLimited, Retryable: true, RetryAfter: 3 * time.Second}
	got := Classify(fmt.Errorf("wrapped: %w", orig))
	if got != orig {
		t.Fatalf("Classify did not return the existing *Error: %+v", got)
	}
	var target *Error
	if !errors.As(fmt.Errorf("x: %w", got), &target) || target.RetryAfter != 3*time.Second {
		t.Fatal("errors.As lost the classified error")
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		ok   bool
	}{
		{"zero", Policy{}, true},
		{"default", DefaultPolicy(), true},
		{"negative initial", Policy{Initial: -1}, false},
		{"jitter", Policy{Jitter: 1.5}, false},
		{"multiplier", Policy{Multiplier: 0.5}, false},
		{"attempts", Policy{MaxAttempts: -1}, false},
		{"initial over max", Policy{Initial: 2 * time.Second, Max: time.Second}, false},
	}
	for _, tt := range tests {
		if err := tt.p.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

// fast keeps test waits in milliseconds.
var fast = Policy{Initial: time.Millisecond, Max: 20 * time.Millisecond, MaxAttempts: 4, Multiplier: 2, Jitter: 0.1}

func TestDo(t *testing.T) {
	tests := []struct {
		name      string
		errs      []error // returned by successive attempts; nil = success
		policy    Policy
		wantCalls int
		wantClass Class // "" = success
	}{
		{"success first", []error{nil}, fast, 1, ""},
		{"500 then success", []error{apiErr(500, "", "", "x"), nil}, fast, 2, ""},
		{"timeouts then success", []error{context.DeadlineExceeded, context.DeadlineExceeded, nil}, fast, 3, ""},
		{"400 never retried", []error{apiErr(400, "", "", "bad"), nil}, fast, 1, BadRequest},
		{"401 never retried", []error{apiErr(401, "", "", "no"), nil}, fast, 1, Auth},
		{"404 never retried", []error{apiErr(404, "", "", "no"), nil}, fast, 1, NotFound},
		{"context length never retried", []error{apiErr(400, "context_length_exceeded", "", "x"), nil}, fast, 1, ContextLength},
		{"invalid output never retried", []error{New(InvalidOutput, errors.New("empty")), nil}, fast, 1, InvalidOutput},
		{"attempts capped", []error{apiErr(503, "", "", "1"), apiErr(503, "", "", "2"), apiErr(503, "", "", "3"), apiErr(503, "", "", "4"), nil}, fast, 4, Server},
		{"single attempt", []error{apiErr(503, "", "", "1"), nil}, Policy{MaxAttempts: 1}, 1, Server},
		{"connection then 429 then success", []error{syscall.ECONNREFUSED, apiErr(429, "", "", "x"), nil}, fast, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, retries := 0, 0
			err := Do(context.Background(), tt.policy, func(context.Context) error {
				e := tt.errs[calls]
				calls++
				return e
			}, func(e *Error, wait time.Duration) {
				retries++
				if !e.Retryable {
					t.Errorf("onRetry called for non-retryable %s", e.Class)
				}
				if wait <= 0 || wait > tt.policy.withDefaults().Max {
					t.Errorf("wait %v outside (0, Max]", wait)
				}
			})
			if calls != tt.wantCalls {
				t.Fatalf("calls = %d, want %d", calls, tt.wantCalls)
			}
			if retries != calls-1 && tt.wantClass == "" {
				t.Fatalf("onRetry called %d times for %d calls", retries, calls)
			}
			if tt.wantClass == "" {
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Class != tt.wantClass {
				t.Fatalf("err = %v, want class %s", err, tt.wantClass)
			}
		})
	}
}

func TestDoHonoursRetryAfter(t *testing.T) {
	ra := 50 * time.Millisecond
	var stamps []time.Time
	var waits []time.Duration
	// Retry-After (50ms) is far above the exponential interval (~1ms).
	p := fast
	p.Max = time.Second
	err := Do(context.Background(), p, func(context.Context) error {
		stamps = append(stamps, time.Now())
		if len(stamps) == 1 {
			return &Error{Class: RateLimited, Retryable: true, RetryAfter: ra, StatusCode: 429, Err: errors.New("429")}
		}
		return nil
	}, func(_ *Error, w time.Duration) { waits = append(waits, w) })
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0] < ra {
		t.Fatalf("waits = %v, want one wait >= %v", waits, ra)
	}
	if gap := stamps[1].Sub(stamps[0]); gap < ra {
		t.Fatalf("second attempt after %v, want >= %v", gap, ra)
	}
}

func TestDoRetryAfterBeyondMaxGivesUp(t *testing.T) {
	calls := 0
	err := Do(context.Background(), fast, func(context.Context) error {
		calls++
		return &Error{Class: RateLimited, Retryable: true, RetryAfter: time.Hour, StatusCode: 429, Err: errors.New("429")}
	}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Class != RateLimited || e.RetryAfter != time.Hour {
		t.Fatalf("err = %v, want rate_limited with RetryAfter", err)
	}
	if calls != 1 {
		t.Fatalf("calls = %d, want 1 (no early retry against Retry-After)", calls)
	}
}

func TestDoStopsBeforeDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	p := Policy{Initial: time.Millisecond, Max: 10 * time.Second, MaxAttempts: 5}
	calls := 0
	start := time.Now()
	err := Do(ctx, p, func(context.Context) error {
		calls++
		return &Error{Class: RateLimited, Retryable: true, RetryAfter: 5 * time.Second, StatusCode: 429, Err: errors.New("429")}
	}, nil)
	var e *Error
	if !errors.As(err, &e) || e.Class != RateLimited {
		t.Fatalf("err = %v, want rate_limited", err)
	}
	if calls != 1 {
		t.Fatalf("calls = %d, want 1", calls)
	}
	if time.Since(start) > 150*time.Millisecond {
		t.Fatal("Do slept although the wait could not fit before the deadline")
	}
}

func TestDoCanceledDuringWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := Policy{Initial: 5 * time.Second, Max: 10 * time.Second, MaxAttempts: 3, Jitter: 0.01}
	cause := errors.New("x")
	err := Do(ctx, p, func(context.Context) error {
		return FromStatus(cause, 500, "", "", "x")
	}, func(*Error, time.Duration) { cancel() })
	var e *Error
	if !errors.As(err, &e) || e.Class != Canceled {
		t.Fatalf("err = %v, want canceled", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatal("error does not wrap context.Canceled")
	}
	if !errors.Is(err, cause) {
		t.Fatal("error lost the last attempt's cause")
	}
}

func TestDoContextAlreadyDone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	err := Do(ctx, fast, func(context.Context) error { called = true; return nil }, nil)
	if called {
		t.Fatal("op ran with a done context")
	}
	if e := Classify(err); e.Class != Canceled {
		t.Fatalf("class = %s, want canceled", e.Class)
	}
}
