package main

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/retry"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// /healthz says when the deployment cannot fold: while the summarizer's
// breaker is open (a wrong key) it answers 503 "degraded: <reason>", and
// ok again once a probe got an answer.
func TestHealthzReportsADegradedSummarizer(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	b := retry.NewBreaker(retry.BreakerConfig{Endpoint: "openai:gpt-4o-mini"}, zerolog.Nop())
	stop, addr, err := serveMetrics("127.0.0.1:0", prometheus.NewRegistry(), nc, b.Health, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	get := func() (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get(); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthy: %d %q", code, body)
	}
	now := time.Now()
	b.Record(now, &retry.Error{Class: retry.Auth, StatusCode: 401, Err: errors.New("Incorrect API key provided")}, false)
	code, body := get()
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "degraded: summarizer openai:gpt-4o-mini unavailable") ||
		!strings.Contains(body, "auth (status 401)") {
		t.Fatalf("wrong key: %d %q", code, body)
	}
	if ok, probe, _ := b.Begin(now, true); !ok || !probe {
		t.Fatal("compact did not probe")
	}
	b.Record(now, nil, true)
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("after the fix: %d %q", code, body)
	}
}
