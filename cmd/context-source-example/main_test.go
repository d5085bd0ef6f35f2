package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

func at(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The shipped data file, asked for several windows.
func TestAnswerForAWindow(t *testing.T) {
	entries, err := loadEntries("calendar.json")
	if err != nil {
		t.Fatal(err)
	}
	rome, err := time.LoadLocation("Europe/Rome")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, from, to string
		loc            *time.Location
		want           string
	}{
		{"a morning", "2026-03-02T09:15:00Z", "2026-03-02T13:15:00Z", time.UTC,
			"Edgewood Park hike 9:00 AM-12:00 PM completed. Call with Mom at 12:30 PM. " +
				"Dentist at 2:00 PM, in 45 min. School pickup (Matteo) at 3:30 PM, in 2 h 15 min."},
		{"during the hike", "2026-03-02T10:00:00Z", "2026-03-02T11:00:00Z", time.UTC,
			"Edgewood Park hike since 9:00 AM, until 12:00 PM. Call with Mom at 12:30 PM, in 1 h 30 min. Dentist at 2:00 PM, in 3 h."},
		{"evening, nothing next", "2026-03-02T18:00:00Z", "2026-03-02T21:30:00Z", time.UTC,
			"Dinner with Sam 7:00 PM-9:00 PM completed. Nothing in the next 4 h."},
		{"empty window", "2026-03-03T09:00:00Z", "2026-03-03T10:00:00Z", time.UTC,
			"No calendar entries from 9:00 AM to 10:00 AM, none in the next 4 h."},
		{"across midnight", "2026-03-01T22:00:00Z", "2026-03-02T06:00:00Z", time.UTC,
			"Team standup at 8:30 AM, in 2 h 30 min. Edgewood Park hike at 9:00 AM, in 3 h."},
		{"previous evening", "2026-03-02T20:30:00Z", "2026-03-03T01:00:00Z", time.UTC,
			"Dinner with Sam Mar 2 7:00 PM-9:00 PM completed. Nothing in the next 4 h."},
		{"in another zone", "2026-03-02T09:15:00Z", "2026-03-02T11:30:00Z", rome,
			"Edgewood Park hike since 10:00 AM, until 1:00 PM. Call with Mom at 1:30 PM, in 1 h. Dentist at 3:00 PM, in 2 h 30 min. School pickup (Matteo) at 4:30 PM, in 4 h."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cal := &calendar{label: "Calendar", entries: entries, horizon: 4 * time.Hour, loc: tc.loc}
			got, err := cal.answer(context.Background(), contextsource.Request{V: 1, Session: "s1", From: at(t, tc.from), To: at(t, tc.to)})
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
}

// The binary as it runs: on a real server over TCP, a micro service that
// the processor's Asker gets an answer from.
func TestRunServesOverNATS(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{Listen: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	done := make(chan error, 1)
	var logs testlog.Buffer
	go func() {
		done <- run(ctx, []string{"--nats-url", env.NS.ClientURL(), "--subject", "ctx.calendar", "--label", "Calendar",
			"--data", "calendar.json"}, &logs, func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, logs.String())
	}
	as := contextsource.NewAsker(env.NC, zerolog.Nop()).Ask(context.Background(), "s1",
		at(t, "2026-03-02T09:15:00Z"), at(t, "2026-03-02T13:15:00Z"),
		[]contextsource.Source{{Label: "Calendar", Subject: "ctx.calendar", Timeout: 30 * time.Second}})
	if as[0].Status != contextsource.StatusOK || !strings.HasPrefix(as[0].Text, "Edgewood Park hike 9:00 AM-12:00 PM completed.") {
		t.Fatalf("answer %+v", as[0])
	}

	// Discoverable like any micro service (what `nats micro info` asks).
	m, err := env.NC.Request("$SRV.INFO.calendar-context", nil, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Endpoints) != 1 || info.Endpoints[0].Subject != "ctx.calendar" || info.Metadata["protocol"] != "foldstream-context-source" {
		t.Errorf("service info %s", m.Data)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"event":"context_source_started"`) {
		t.Errorf("logs:\n%s", logs.String())
	}
}

func TestRunRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--data is required"},
		{[]string{"--data", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"--data", write("obj.json", `{}`)}, "expected a JSON array"},
		{[]string{"--data", write("noat.json", `[{"text":"x"}]`)}, `entry [0]: field "at"`},
		{[]string{"--data", write("notext.json", `[{"at":"2026-03-02T09:00:00Z"}]`)}, `entry [0]: field "text"`},
		{[]string{"--data", write("end.json", `[{"at":"2026-03-02T09:00:00Z","end":"2026-03-02T08:00:00Z","text":"x"}]`)}, `field "end"`},
		{[]string{"--data", "calendar.json", "--tz", "Mars/Olympus"}, "--tz"},
		{[]string{"--data", "calendar.json", "--horizon", "-1h"}, "--horizon"},
		{[]string{"--data", "calendar.json", "extra"}, "unexpected arguments"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, &out, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestServiceName(t *testing.T) {
	for label, want := range map[string]string{"Calendar": "calendar-context", "Work mail": "work-mail-context", "Ünïcode": "n-code-context"} {
		if got := serviceName(label); got != want {
			t.Errorf("serviceName(%q) = %q, want %q", label, got, want)
		}
	}
}
