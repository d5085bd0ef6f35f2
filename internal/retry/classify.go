// Package retry classifies summarizer/provider errors and retries the
// transient ones with jittered exponential backoff.
//
// It knows no backend: errors of the standard library (timeouts,
// cancellation, connections, JSON) are classified here, and a backend
// turns its own error types into a *Error with FromStatus, close to the
// source (internal/fold/openai does it for go-openai's).
//
// The class of an error decides two things: whether a call is retried here
// (timeouts, rate limits, 5xx, connection failures) and what the engine
// reports in compaction_failed events (error class + retryable). 4xx
// answers other than 429 are never retried: sending the same request again
// cannot change the outcome.
package retry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"
)

// Class is a coarse error category, stable enough to appear on the wire.
type Class string

const (
	Timeout       Class = "timeout"
	RateLimited   Class = "rate_limited"
	Server        Class = "server"
	Connection    Class = "connection"
	BadRequest    Class = "bad_request"
	Auth          Class = "auth"
	NotFound      Class = "not_found"
	ContextLength Class = "context_length"
	InvalidOutput Class = "invalid_output"
	Canceled      Class = "canceled"
	Unknown       Class = "unknown"
)

// Retryable reports whether errors of class c are transient, i.e. the same
// request may succeed later.
func Retryable(c Class) bool {
	switch c {
	case Timeout, RateLimited, Server, Connection:
		return true
	}
	return false
}

// Error is a classified error. Retryable describes the class (transient or
// not), not whether Do actually retried: an error returned after the retry
// budget or the deadline ran out is still Retryable, which tells the engine
// that a later fold may succeed.
type Error struct {
	Class      Class
	Retryable  bool
	RetryAfter time.Duration // server-requested wait (429/503), 0 if none
	StatusCode int           // HTTP status, 0 when there was no response
	Err        error
}

func (e *Error) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s (status %d): %v", e.Class, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Class, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// New builds a classified error with Retryable derived from the class.
func New(c Class, err error) *Error {
	return &Error{Class: c, Retryable: Retryable(c), Err: err}
}

// Classify maps err to a *Error. It returns nil for nil, and an existing
// *Error found in the chain (errors.As) unchanged, so classification
// done close to the source (e.g. with RetryAfter) survives wrapping.
func Classify(err error) *Error {
	if err == nil {
		return nil
	}
	var ce *Error
	if errors.As(err, &ce) {
		return ce
	}
	c, status := classify(err)
	return &Error{Class: c, Retryable: Retryable(c), StatusCode: status, Err: err}
}

// FromStatus classifies a provider's answer by its HTTP status and, where
// the provider gives them, its error code, type and message (which tell a
// prompt that is too long from another 400). A backend calls it with the
// fields of its own error type; err is kept as the cause.
func FromStatus(err error, status int, code, typ, msg string) *Error {
	c := classifyStatus(status, code, typ, msg)
	return &Error{Class: c, Retryable: Retryable(c), StatusCode: status, Err: err}
}

func classify(err error) (Class, int) {
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled, 0
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return Timeout, 0
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return Timeout, 0
	}
	if isContextLength("", "", err.Error()) {
		return ContextLength, 0
	}

	// A 200 whose body is not the expected JSON: the server answered, but
	// with something unusable (wrong base URL serving HTML, broken proxy).
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.As(err, &syn) || errors.As(err, &typ) {
		return InvalidOutput, 0
	}

	var opErr *net.OpError
	var dnsErr *net.DNSError
	var urlErr *url.Error
	switch {
	case errors.As(err, &opErr), errors.As(err, &dnsErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, net.ErrClosed),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Connection, 0
	case errors.As(err, &urlErr):
		// Transport-level failure not matched above (TLS, proxy, ...).
		return Connection, 0
	}
	return Unknown, 0
}

func classifyStatus(status int, code, typ, msg string) Class {
	if isContextLength(code, typ, msg) {
		return ContextLength
	}
	switch {
	case status == http.StatusTooManyRequests:
		// insufficient_quota is a billing state, not a burst limit: waiting
		// a few seconds will not clear it, so treat it like bad credentials.
		if code == "insufficient_quota" || typ == "insufficient_quota" {
			return Auth
		}
		return RateLimited
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return Auth
	case status == http.StatusNotFound:
		return NotFound
	case status == http.StatusRequestEntityTooLarge:
		return ContextLength
	case status >= 500:
		return Server
	case status >= 400:
		return BadRequest
	}
	return Unknown
}

// isContextLength recognises "prompt too long" from OpenAI
// (code context_length_exceeded), vLLM ("maximum context length") and
// llama.cpp ("exceeds the available context size").
func isContextLength(code, typ, msg string) bool {
	if code == "context_length_exceeded" || typ == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(msg)
	for _, s := range []string{
		"context_length_exceeded",
		"maximum context length",
		"context length exceeded",
		"exceeds the available context size",
		"exceed_context_size",
	} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
