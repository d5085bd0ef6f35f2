package openaitest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) (*http.Response, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

func TestScriptingAndRecording(t *testing.T) {
	s := New(t, RateLimited(2*time.Second))
	s.SetFallback(OK("fallback"))
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":50,"temperature":0.5}`

	resp, m := post(t, s.URL+"/chat/completions", body)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" {
		t.Fatalf("status %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if e, _ := m["error"].(map[string]any); e["code"] != "rate_limit_exceeded" || e["message"] == "" {
		t.Fatalf("error body = %v", m)
	}
	resp, m = post(t, s.URL+"/chat/completions", body)
	if resp.StatusCode != 200 || m["model"] != "m" {
		t.Fatalf("fallback: %d %v", resp.StatusCode, m)
	}
	r := s.Requests()
	if len(r) != 2 || r[0].Model != "m" || r[0].MaxTokens != 50 || *r[0].Temperature != 0.5 || r[0].Messages[0].Content != "hi" {
		t.Fatalf("recorded %+v", r)
	}

	s.SetFunc(func(n int, _ Request) Reply { return BadRequest("call " + string(rune('0'+n))) })
	if resp, _ := post(t, s.URL+"/chat/completions", body); resp.StatusCode != 400 {
		t.Fatalf("SetFunc reply not used: %d", resp.StatusCode)
	}
}

func TestUnscriptedAndAzure(t *testing.T) {
	s := New(t)
	resp, m := post(t, s.URL+"/chat/completions", `{"model":"m","messages":[]}`)
	if e, _ := m["error"].(map[string]any); resp.StatusCode != 400 || e["code"] != "openaitest_unscripted" {
		t.Fatalf("unscripted: %d %v", resp.StatusCode, m)
	}
	resp, _ = post(t, s.AzureURL+"/openai/deployments/d1/chat/completions", `{"messages":[]}`)
	if resp.StatusCode != 404 {
		t.Fatalf("azure without api-version: %d", resp.StatusCode)
	}
	s.Enqueue(OK("x"))
	resp, _ = post(t, s.AzureURL+"/openai/deployments/d1/chat/completions?api-version=2024-10-21", `{"messages":[]}`)
	if r := s.Requests(); resp.StatusCode != 200 || r[len(r)-1].Deployment != "d1" {
		t.Fatalf("azure: %d %+v", resp.StatusCode, r[len(r)-1])
	}
}

func TestHangEndsWithClientAndClose(t *testing.T) {
	s := New(t, Hang(), Hang())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/chat/completions", strings.NewReader(`{}`))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("hang answered")
	}
	// A second hanging call must not block Close. The first may have
	// timed out before it reached the server, so wait for one more call
	// than the server has seen, not for two.
	seen := s.Calls()
	go func() { _, _ = http.Post(s.URL+"/chat/completions", "application/json", strings.NewReader(`{}`)) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Calls() <= seen {
		if time.Now().After(deadline) {
			t.Fatal("the second call never reached the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close blocked on a hanging call")
	}
}
