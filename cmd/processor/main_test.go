package main

import (
	"bytes"
	"context"
	"github.com/foldstream/foldstream/internal/testlog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOptionPrecedence(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "foldstream.json")
	if err := os.WriteFile(cfg, []byte(`{"recent-window": 30, "batch-size": 5, "prefix": "file", "prompts": {"voice": "{{.Turns}}"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FOLDSTREAM_BATCH_SIZE": "7", "FOLDSTREAM_PREFIX": "env", "OPENAI_API_KEY": "sk-test"}
	var o options
	fs := newFlagSet("t", &o)
	if err := parseOptions(fs, &o, []string{"--config", cfg, "--prefix", "flag"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if o.policy.Window.Recent != 30 || o.policy.Window.Batch != 7 || o.prefix != "flag" || o.openaiKey != "sk-test" || o.prompts["voice"] == "" {
		t.Fatalf("precedence flag > env > file > default broken: %+v", o)
	}
}

func TestOptionErrorsNameTheSetting(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		file, want string
		args       []string
		env        map[string]string
	}{
		{file: `{"recent-windw": 3}`, want: `unknown setting "recent-windw"`},
		{file: `{"batch-size": "ten"}`, want: `"batch-size"`},
		{file: `[1]`, want: "expected a JSON object"},
		{env: map[string]string{"FOLDSTREAM_SHARDS": "many"}, want: "FOLDSTREAM_SHARDS"},
		{args: []string{"extra"}, want: "unexpected arguments"},
	}
	for i, c := range cases {
		var o options
		fs := newFlagSet("t", &o)
		fs.SetOutput(&bytes.Buffer{})
		args := c.args
		if c.file != "" {
			p := filepath.Join(dir, "c.json")
			if err := os.WriteFile(p, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			args = append([]string{"--config", p}, args...)
		}
		err := parseOptions(fs, &o, args, func(k string) string { return c.env[k] })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("case %d: error %v, want it to mention %q", i, err, c.want)
		}
	}
}

// `--mode tokens --context-window 8000` starts. The reserve
// is not set, so it follows the window (a quarter of it, at most 16,384).
func TestSmallContextWindowStarts(t *testing.T) {
	var o options
	fs := newFlagSet("t", &o)
	if err := parseOptions(fs, &o, []string{"--mode", "tokens", "--context-window", "8000"}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	cfg := processorConfig(&o, nil)
	if err := cfg.Validate(); err != nil {
		t.Fatalf("--mode tokens --context-window 8000: %v", err)
	}
	if got := cfg.Tokens.Trigger(); got != 6000 {
		t.Errorf("trigger at %d tokens, want 6000 (8000 − a quarter)", got)
	}
	// A reserve set by hand that does not fit the window is still refused,
	// naming the setting.
	o = options{}
	fs = newFlagSet("t", &o)
	if err := parseOptions(fs, &o, []string{"--mode", "tokens", "--context-window", "8000", "--reserve-tokens", "9000"}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := processorConfig(&o, nil).Validate(); err == nil || !strings.Contains(err.Error(), "reserve tokens") {
		t.Errorf("a reserve above the window: %v, want an error naming the reserve", err)
	}
}

func TestRunRejectsBadSettings(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--trigger", "sometimes", "--store-dir", t.TempDir()},
		{"run", "--summarizer", "magic", "--store-dir", t.TempDir()},
		{"run", "--tokenizer", "p50k", "--store-dir", t.TempDir()},
		{"run", "--prefix", "a.*", "--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", ""},
		{"replay"},
		{"frobnicate"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// The processor starts on the embedded default and stops cleanly when its
// context ends (what SIGTERM does in main).
func TestRunEmbeddedStartsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut testlog.Buffer
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"run", "--store-dir", dir, "--embedded-port", "-1", "--metrics-addr", "127.0.0.1:0"}, &out, &errOut)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errOut.String(), "processor_started") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("did not stop")
	}
	logs := errOut.String()
	for _, ev := range []string{"embedded_server_started", "stream_created", "processor_started", "processor_stopped"} {
		if !strings.Contains(logs, `"event":"`+ev+`"`) {
			t.Errorf("no %s in logs:\n%s", ev, logs)
		}
	}
}

// The demo command runs the processor and the demo bot end to end on the
// embedded default and prints the summaries as they arrive.
func TestDemoEndToEnd(t *testing.T) {
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := run(ctx, []string{"demo", "--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", "", "--turns", "72", "--interval", "0s"}, &out, &errOut)
	if err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "summary v1") || !strings.Contains(out.String(), "summary v2") {
		t.Fatalf("demo printed no summaries:\n%s", out.String())
	}
}

// --idle-compact: 1s by default, 0 turns packing of idle sessions off.
func TestIdleCompactFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{{nil, time.Second}, {[]string{"--idle-compact", "5s"}, 5 * time.Second}, {[]string{"--idle-compact", "0"}, -1}} {
		var o options
		if err := parseOptions(newFlagSet("t", &o), &o, c.args, func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		if got := processorConfig(&o, nil).IdleCompact; got != c.want {
			t.Errorf("%v: IdleCompact %v, want %v", c.args, got, c.want)
		}
	}
}
