package openai

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// go-openai does not expose response headers on errors (*APIError and
// *RequestError carry only the status), so Retry-After on a 429/503 would be
// lost. headerDoer wraps the HTTP client and copies the response headers of
// each call into a slot carried by that call's request context: per call,
// not "last response of the client", so concurrent folds sharing one
// Summarizer never see each other's headers.
type headerDoer struct{ c *http.Client }

type respMeta struct {
	mu     sync.Mutex
	header http.Header
}

type metaKey struct{}

func withMeta(ctx context.Context) (context.Context, *respMeta) {
	m := &respMeta{}
	return context.WithValue(ctx, metaKey{}, m), m
}

func (d headerDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(req)
	if resp != nil {
		if m, ok := req.Context().Value(metaKey{}).(*respMeta); ok {
			m.mu.Lock()
			m.header = resp.Header.Clone()
			m.mu.Unlock()
		}
	}
	return resp, err
}

// retryAfter returns the server-requested wait, 0 if none. OpenAI sends
// retry-after-ms (fractional ms) besides the standard Retry-After
// (delta-seconds or an HTTP date); the ms form is more precise.
func (m *respMeta) retryAfter(now time.Time) time.Duration {
	m.mu.Lock()
	h := m.header
	m.mu.Unlock()
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	return parseRetryAfter(h.Get("Retry-After"), now)
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}
