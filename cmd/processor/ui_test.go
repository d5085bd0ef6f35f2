package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/demo"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/rs/zerolog"
)

// `processor ui --nats-url` inspects a running processor: the page and its
// API answer on loopback, and only under a loopback Host name.
func TestUICommand(t *testing.T) {
	var o options
	fs := newFlagSet("run", &o)
	args := []string{"--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", "", "--summarizer", "offline", "--tokenizer", "heuristic"}
	if err := parseOptions(fs, &o, args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	url := make(chan string, 1)
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, &o, log, func(e *env) {
			if err := demo.Run(ctx, e.nc, e.js, e.layout.Subjects, demo.Config{Session: "ui-test", Turns: 61}, io.Discard, log); err != nil {
				t.Errorf("demo: %v", err)
			}
			url <- e.ns.ClientURL()
		})
	}()
	var natsURL string
	select {
	case natsURL = <-url:
	case err := <-served:
		t.Fatalf("serve returned early: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("processor did not start")
	}

	out := &testlog.Buffer{}
	uiDone := make(chan error, 1)
	go func() {
		uiDone <- run(ctx, []string{"ui", "--nats-url", natsURL, "--ui-addr", "127.0.0.1:0", "--log-level", "warn"}, out, io.Discard)
	}()
	addr := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+/)`)
	var base string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && base == ""; time.Sleep(20 * time.Millisecond) {
		if m := addr.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("processor ui printed no address: %q", out.String())
	}
	res, err := http.Get(base + "api/sessions")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Total    int `json:"total"`
		Sessions []struct {
			Session string `json:"session"`
			Version uint64 `json:"version"`
		} `json:"sessions"`
	}
	err = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if err != nil || res.StatusCode != http.StatusOK || list.Total != 1 || list.Sessions[0].Session != "ui-test" || list.Sessions[0].Version == 0 {
		t.Fatalf("GET /api/sessions: status %d, %+v, %v; want session ui-test folded", res.StatusCode, list, err)
	}
	page, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), "foldstream inspector") || !strings.Contains(page.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Errorf("GET /: status %d, CSP %q; want the embedded page", page.StatusCode, page.Header.Get("Content-Security-Policy"))
	}
	// A DNS-rebound name pointing at loopback is refused.
	req, _ := http.NewRequest(http.MethodGet, base+"api/sessions", nil)
	req.Host = "attacker.example:80"
	res, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("Host attacker.example: status %d, want %d", res.StatusCode, http.StatusMisdirectedRequest)
	}
	cancel()
	if err := <-uiDone; err != nil {
		t.Errorf("processor ui: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

func TestUIBadTextPolicy(t *testing.T) {
	err := run(context.Background(), []string{"ui", "--store-dir", t.TempDir(), "--ui-addr", "127.0.0.1:0", "--ui-text", "some"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "ui-text") && !strings.Contains(err.Error(), "text policy") {
		t.Errorf("--ui-text some: got %v, want an error naming the setting", err)
	}
}

// `processor run --ui-addr` serves the inspector beside the processor, on
// the processor's own connection: its API lists the session the processor
// folds, and the page answers.
func TestRunServesTheInspector(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &testlog.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", "", "--summarizer", "offline",
			"--tokenizer", "heuristic", "--ui-addr", "127.0.0.1:0", "--ui-text", "deny"}, io.Discard, logs)
	}()
	urlRe := regexp.MustCompile(`"event":"inspector_listening","url":"(http://127\.0\.0\.1:\d+/)"`)
	natsRe := regexp.MustCompile(`"event":"embedded_server_started","url":"(nats://[^"]+)"`)
	var base, natsURL string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && (base == "" || natsURL == ""); time.Sleep(20 * time.Millisecond) {
		if m := urlRe.FindStringSubmatch(logs.String()); m != nil {
			base = m[1]
		}
		if m := natsRe.FindStringSubmatch(logs.String()); m != nil {
			natsURL = m[1]
		}
	}
	if base == "" || natsURL == "" {
		t.Fatalf("run logged no inspector or server address:\n%s", logs.String())
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"pub", "ui-run", "--nats-url", natsURL, "--turn", "hello from the bot", "--speaker", "Ann"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Sessions []struct {
			Session string `json:"session"`
			Turns   int64  `json:"turns"`
		} `json:"sessions"`
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		res, err := http.Get(base + "api/sessions")
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(res.Body).Decode(&list)
		res.Body.Close()
		if err == nil && res.StatusCode == http.StatusOK && len(list.Sessions) == 1 && list.Sessions[0].Session == "ui-run" && list.Sessions[0].Turns == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /api/sessions: status %d, %+v, %v; want session ui-run with its turn", res.StatusCode, list, err)
		}
	}
	res, err := http.Get(base + "api/config")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"text":false`) {
		t.Errorf("GET /api/config: %d %s; want no transcript text (--ui-text deny)", res.StatusCode, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// Every command's -h shows each flag with the kind of its value: a usage
// text that quotes a phrase in backquotes would print that phrase in the
// value's place (as "-ui-addr processor ui" instead of "-ui-addr host:port").
func TestHelpNamesEachFlagsValue(t *testing.T) {
	flagLine := regexp.MustCompile(`^  -[a-z0-9-]+( \S+)*$`)
	for _, cmd := range [][]string{{"run"}, {"demo"}, {"replay"}, {"ui"}, {"pub"}, {"tail"}, {"sessions"}, {"context"}, {"dlq"}, {"dlq", "redrive"}, {"migrate"}, {"healthcheck"}} {
		var stderr bytes.Buffer
		_ = run(context.Background(), append(cmd, "-h"), io.Discard, &stderr)
		n := 0
		for _, line := range strings.Split(stderr.String(), "\n") {
			if !flagLine.MatchString(line) {
				continue
			}
			n++
			if words := strings.Fields(line); len(words) > 2 {
				t.Errorf("%v -h: %q names its value with %d words", cmd, line, len(words)-1)
			}
		}
		if n == 0 {
			t.Errorf("%v -h lists no flag:\n%s", cmd, stderr.String())
		}
	}
}
