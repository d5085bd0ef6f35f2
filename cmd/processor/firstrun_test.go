package main

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/testlog"
)

// make demo runs twice on the same store: each run is a new session, and
// its closing hint is a replay command that works as printed.
func TestDemoRunsTwiceAndItsReplayHintWorks(t *testing.T) {
	dir := t.TempDir()
	var sessions []string
	for run1 := range 2 {
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := run(ctx, []string{"demo", "--store-dir", dir, "--embedded-port", "-1", "--metrics-addr", "", "--turns", "62", "--interval", "0s"}, &out, &errOut)
		cancel()
		if err != nil {
			t.Fatalf("demo run %d: %v\nstdout:\n%s\nstderr:\n%s", run1+1, err, out.String(), errOut.String())
		}
		_, hint, ok := strings.Cut(out.String(), "Replay it: ")
		if !ok {
			t.Fatalf("no replay hint:\n%s", out.String())
		}
		hint = strings.TrimSpace(hint)
		fields := strings.Fields(hint)
		if len(fields) < 4 || strings.Join(fields[:3], " ") != "go run ./cmd/processor" {
			t.Fatalf("hint %q: want go run ./cmd/processor replay ...", hint)
		}
		args := fields[3:]
		if args[0] != "replay" || !strings.Contains(hint, "--store-dir "+dir) {
			t.Fatalf("hint %q: want replay --store-dir %s", hint, dir)
		}
		sessions = append(sessions, args[len(args)-1])
		var rout bytes.Buffer
		if err := run(context.Background(), args, &rout, &errOut); err != nil {
			t.Fatalf("the hint %q fails: %v\n%s", hint, err, errOut.String())
		}
		if !strings.Contains(rout.String(), "summary") {
			t.Errorf("replay of the demo shows no summary:\n%s", rout.String())
		}
	}
	if sessions[0] == sessions[1] {
		t.Errorf("both demo runs used session %s", sessions[0])
	}
}

// replay of a session with no events fails and says where it looked.
func TestReplayWithNoEventsFails(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := run(ctx, []string{"demo", "--store-dir", dir, "--embedded-port", "-1", "--metrics-addr", "", "--session", "d1", "--turns", "3", "--interval", "0s"}, &out, &errOut); err != nil {
		t.Fatalf("demo: %v\n%s", err, errOut.String())
	}
	err := run(ctx, []string{"replay", "--store-dir", dir, "--session", "nobody"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), `session "nobody" has no events`) || !strings.Contains(err.Error(), "--session") {
		t.Errorf("replay of an unknown session: %v", err)
	}
}

// A busy embedded-server port and a busy metrics address are reported
// together, before anything starts, with the flags that fix both.
func TestBusyPortsNameTheFlagsThatFixThem(t *testing.T) {
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln1.Close()
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln2.Close()
	port := ln1.Addr().(*net.TCPAddr).Port
	var out, errOut bytes.Buffer
	err = run(context.Background(), []string{"run", "--store-dir", t.TempDir(), "--embedded-port", strconv.Itoa(port), "--metrics-addr", ln2.Addr().String()}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "run with --embedded-port -1 --metrics-addr 127.0.0.1:0") ||
		!strings.Contains(err.Error(), strconv.Itoa(port)) || !strings.Contains(err.Error(), ln2.Addr().String()) {
		t.Fatalf("busy ports: %v", err)
	}
	// Following the advice works.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var logs testlog.Buffer
	go func() {
		done <- run(ctx, []string{"run", "--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", "127.0.0.1:0"}, &out, &logs)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "processor_started") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil || !strings.Contains(logs.String(), "metrics_listening") {
		t.Fatalf("run with the advised flags: %v\n%s", err, logs.String())
	}
}

// A second processor without partitions on the same stream is refused
// with what to set, instead of both taking the consumer from each other.
func TestSecondInstanceWithoutPartitionsIsRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testlog.Buffer
	url := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		var o options
		fs := newFlagSet("run", &o)
		if err := parseOptions(fs, &o, []string{"--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", ""}, func(string) string { return "" }); err != nil {
			done <- err
			return
		}
		log, _ := newLogger(&o, &logs)
		done <- serve(ctx, &o, log, func(e *env) { url <- e.ns.ClientURL() })
	}()
	var u string
	select {
	case u = <-url:
	case err := <-done:
		t.Fatalf("first processor: %v\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatal("first processor did not start")
	}
	var out, errOut bytes.Buffer
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	err := run(ctx2, []string{"run", "--nats-url", u, "--metrics-addr", "", "--service=false"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "another processor is consuming stream FOLD_IN") || !strings.Contains(err.Error(), "--partitions N") {
		t.Fatalf("second processor: %v\n%s", err, errOut.String())
	}
	if strings.Contains(logs.String(), "consumer_rewound") {
		t.Errorf("the first processor was disturbed:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
