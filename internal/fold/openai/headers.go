package openai

import (
	"context"
	"math"
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
			return durationOf(ms, time.Millisecond)
		}
	}
	return parseRetryAfter(h.Get("Retry-After"), now)
}

// maxRetryAfter caps a server's wait so that converting it cannot
// overflow into a negative duration (which would mean "retry at once").
// Any wait this long is beyond every fold timeout, so the fold gives up.
const maxRetryAfter = 24 * time.Hour

// durationOf converts n units to a duration, clamped to [0, maxRetryAfter];
// NaN is 0 and +Inf is the cap.
func durationOf(n float64, unit time.Duration) time.Duration {
	switch {
	case math.IsNaN(n) || n <= 0:
		return 0
	case n >= float64(maxRetryAfter/unit):
		return maxRetryAfter
	}
	return time.Duration(n * float64(unit))
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		return durationOf(secs, time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	return 0
}
