package openai

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterHeaders(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, 0},
		{"seconds", http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{"fractional", http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{"date", http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second},
		{"past date", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"ms wins", http.Header{"Retry-After": {"2"}, "Retry-After-Ms": {"1500.5"}}, 1500*time.Millisecond + 500*time.Microsecond},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"negative", http.Header{"Retry-After": {"-4"}}, 0},
	}
	for _, tt := range tests {
		m := &respMeta{header: tt.h}
		if got := m.retryAfter(now); got != tt.want {
			t.Errorf("%s: retryAfter = %v, want %v", tt.name, got, tt.want)
		}
	}
}
