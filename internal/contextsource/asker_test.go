package contextsource_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// Generous for sources that answer, tiny for sources that must time out:
// the tests assert statuses, never durations.
const (
	answers  = 30 * time.Second
	timesOut = 50 * time.Millisecond
)

var (
	from = time.Date(2026, 3, 2, 9, 15, 0, 0, time.UTC)
	to   = time.Date(2026, 3, 2, 14, 30, 0, 0, time.UTC)
)

// serve registers a context source on the test server that answers with
// fn, stopped when the test ends.
func serve(t *testing.T, nc *nats.Conn, name, subject string, fn contextsource.AnswerFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := contextsource.Serve(ctx, nc, contextsource.ServiceConfig{Name: name, Subject: subject, Description: "test source"}, fn, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = svc.Stop() })
}

func text(s string) contextsource.AnswerFunc {
	return func(context.Context, contextsource.Request) (string, error) { return s, nil }
}

// recorder keeps the requests a source received.
type recorder struct {
	mu   sync.Mutex
	reqs []contextsource.Request
}

func (r *recorder) answer(s string) contextsource.AnswerFunc {
	return func(_ context.Context, req contextsource.Request) (string, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.reqs = append(r.reqs, req)
		return s, nil
	}
}

func (r *recorder) requests() []contextsource.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]contextsource.Request(nil), r.reqs...)
}

func status(as []contextsource.Answer) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Label+"="+a.Status)
	}
	return out
}

func TestAskEverySourceAnswers(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	var cal recorder
	serve(t, env.NC, "calendar", "ctx.calendar", cal.answer("Edgewood Park hike 9am-12pm completed. Dentist at 2pm in 45 min."))
	serve(t, env.NC, "mail", "ctx.mail", text("5 new emails.\n\nUrgent: school principal re: Matteo incident."))
	serve(t, env.NC, "weather", "ctx.weather", text(""))
	sources := []contextsource.Source{
		{Label: "Calendar", Subject: "ctx.calendar", Prompt: "Events that occurred and the next 4 hours.", Timeout: answers},
		{Label: "Mail", Subject: "ctx.mail", Timeout: answers},
		{Label: "Weather", Subject: "ctx.weather", Timeout: answers},
	}
	as := contextsource.NewAsker(env.NC, zerolog.Nop()).Ask(context.Background(), "s1", from, to, sources)
	if got := strings.Join(status(as), " "); got != "Calendar=ok Mail=ok Weather=ok" {
		t.Fatalf("statuses %s, want every source ok: %+v", got, as)
	}
	if as[0].Text != "Edgewood Park hike 9am-12pm completed. Dentist at 2pm in 45 min." {
		t.Errorf("calendar text %q", as[0].Text)
	}
	if as[1].Text != "5 new emails. Urgent: school principal re: Matteo incident." {
		t.Errorf("mail text not single-lined: %q", as[1].Text)
	}
	if as[2].Text != "" || as[2].Line() != "(nothing to report)" {
		t.Errorf("empty answer: text %q line %q", as[2].Text, as[2].Line())
	}
	reqs := cal.requests()
	if len(reqs) != 1 {
		t.Fatalf("calendar got %d requests, want 1", len(reqs))
	}
	want := contextsource.Request{V: 1, Session: "s1", From: from, To: to, Prompt: "Events that occurred and the next 4 hours."}
	if r := reqs[0]; r.V != want.V || r.Session != want.Session || !r.From.Equal(from) || !r.To.Equal(to) || r.Prompt != want.Prompt {
		t.Errorf("request %+v, want %+v", r, want)
	}

	if got, want := reqs[0].Instruction(), "Provide a contextual summary for the period from 2026-03-02T09:15:00Z to 2026-03-02T14:30:00Z. Events that occurred and the next 4 hours."; got != want {
		t.Errorf("Instruction() = %q, want %q", got, want)
	}

	block := contextsource.Block(from, to, "discussed enzymatic cleaners, decided to order from Amazon.", as, 0)
	wantBlock := "[Session summary — 9:15 AM to 2:30 PM UTC]\n" +
		"Conversation: discussed enzymatic cleaners, decided to order from Amazon.\n" +
		"Calendar: Edgewood Park hike 9am-12pm completed. Dentist at 2pm in 45 min.\n" +
		"Mail: 5 new emails. Urgent: school principal re: Matteo incident.\n" +
		"Weather: (nothing to report)"
	if block != wantBlock {
		t.Errorf("block:\n%s\nwant:\n%s", block, wantBlock)
	}
}

func TestAskSlowSourceTimesOutOthersMerged(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	release := make(chan struct{})
	serve(t, env.NC, "calendar", "ctx.calendar", text("Dentist at 2pm."))
	serve(t, env.NC, "mail", "ctx.mail", func(ctx context.Context, _ contextsource.Request) (string, error) {
		select { // answers only after the test is over
		case <-release:
		case <-ctx.Done():
		}
		return "too late", nil
	})
	t.Cleanup(func() { close(release) }) // runs before the services stop
	sources := []contextsource.Source{
		{Label: "Calendar", Subject: "ctx.calendar", Timeout: answers},
		{Label: "Mail", Subject: "ctx.mail", Timeout: timesOut},
	}
	as := contextsource.NewAsker(env.NC, zerolog.Nop()).Ask(context.Background(), "s1", from, to, sources)
	if got := strings.Join(status(as), " "); got != "Calendar=ok Mail=timeout" {
		t.Fatalf("statuses %s: %+v", got, as)
	}
	if !errors.Is(as[1].Err, context.DeadlineExceeded) {
		t.Errorf("timeout error %v, want a deadline", as[1].Err)
	}
	block := contextsource.Block(from, to, "talked about the hike.", as, 0)
	if !strings.Contains(block, "\nCalendar: Dentist at 2pm.\nMail: (no answer within 50ms)") {
		t.Errorf("block does not merge the calendar and note the mail gap:\n%s", block)
	}
}

func TestAskNoResponders(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	serve(t, env.NC, "calendar", "ctx.calendar", text("Dentist at 2pm."))
	as := contextsource.NewAsker(env.NC, zerolog.Nop()).Ask(context.Background(), "s1", from, to, []contextsource.Source{
		{Label: "Mail", Subject: "ctx.mail", Timeout: answers},
		{Label: "Calendar", Subject: "ctx.calendar", Timeout: answers},
	})
	if got := strings.Join(status(as), " "); got != "Mail=no_responders Calendar=ok" {
		t.Fatalf("statuses %s: %+v", got, as)
	}
	if !errors.Is(as[0].Err, nats.ErrNoResponders) || as[0].Line() != "(source unavailable)" {
		t.Errorf("no responders: err %v, line %q", as[0].Err, as[0].Line())
	}
}

// respond answers requests on subject with a fixed message, as a source in
// another language would.
func respond(t *testing.T, nc *nats.Conn, subject string, reply *nats.Msg) {
	t.Helper()
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Header, r.Data = reply.Header, reply.Data
		_ = m.RespondMsg(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestAskErrorReplies(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	serve(t, env.NC, "go-failing", "ctx.go", func(context.Context, contextsource.Request) (string, error) {
		return "", errors.New("calendar API: 503")
	})
	hdr := nats.Header{}
	hdr.Set("Nats-Service-Error", "mailbox locked")
	hdr.Set("Nats-Service-Error-Code", "423")
	respond(t, env.NC, "ctx.headers", &nats.Msg{Header: hdr})
	respond(t, env.NC, "ctx.body", &nats.Msg{Data: []byte(`{"v":1,"error":"token expired"}`)})
	respond(t, env.NC, "ctx.garbage", &nats.Msg{Data: []byte(`not json`)})
	respond(t, env.NC, "ctx.puback", &nats.Msg{Data: []byte(`{"stream":"FOLD_IN","seq":7}`)})
	respond(t, env.NC, "ctx.neither", &nats.Msg{Data: []byte(`{"v":1}`)})
	respond(t, env.NC, "ctx.good", &nats.Msg{Data: []byte(`{"v":1,"text":"fine","future":true}`)})
	sources := []contextsource.Source{}
	for _, s := range []string{"go", "headers", "body", "garbage", "puback", "neither", "good"} {
		sources = append(sources, contextsource.Source{Label: s, Subject: "ctx." + s, Timeout: answers})
	}
	as := contextsource.NewAsker(env.NC, zerolog.Nop()).Ask(context.Background(), "s1", from, to, sources)
	want := "go=error headers=error body=error garbage=error puback=error neither=error good=ok"
	if got := strings.Join(status(as), " "); got != want {
		t.Fatalf("statuses %s, want %s: %+v", got, want, as)
	}
	var se *contextsource.SourceError
	if !errors.As(as[0].Err, &se) || se.Code != contextsource.ErrCodeInternal || !strings.Contains(se.Description, "calendar API: 503") {
		t.Errorf("Go source error: %v", as[0].Err)
	}
	if !errors.As(as[1].Err, &se) || se.Code != "423" || se.Description != "mailbox locked" {
		t.Errorf("header error: %v", as[1].Err)
	}
	if !errors.As(as[2].Err, &se) || se.Description != "token expired" {
		t.Errorf("body error: %v", as[2].Err)
	}
	if !strings.Contains(as[4].Err.Error(), `field "v"`) {
		t.Errorf("a PubAck reply should be refused naming v: %v", as[4].Err)
	}
	for _, a := range as[:6] {
		if a.Text != "" || a.Line() != "(source failed to answer)" {
			t.Errorf("%s: text %q line %q", a.Label, a.Text, a.Line())
		}
	}
	if as[6].Text != "fine" {
		t.Errorf("unknown reply fields must be ignored: %+v", as[6])
	}
}

func TestAskClampsLongAnswers(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	long := strings.Repeat("The principal wrote about the Matteo incident.\n", 30)
	serve(t, env.NC, "mail", "ctx.mail", text(long))
	as := contextsource.NewAsker(env.NC, zerolog.Nop()).Ask(context.Background(), "s1", from, to,
		[]contextsource.Source{{Label: "Mail", Subject: "ctx.mail", Timeout: answers}})
	got := as[0].Text
	if n := len([]rune(got)); n > contextsource.MaxAnswerChars || n < contextsource.MaxAnswerChars/2 {
		t.Errorf("clamped to %d chars, want at most %d", n, contextsource.MaxAnswerChars)
	}
	if strings.Contains(got, "\n") || !strings.HasSuffix(got, "incident.") {
		t.Errorf("want one line cut at a sentence end: %q", got)
	}
}

func TestAskBoundedByContext(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	release := make(chan struct{})
	serve(t, env.NC, "calendar", "ctx.calendar", func(ctx context.Context, _ contextsource.Request) (string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return "too late", nil
	})
	t.Cleanup(func() { close(release) })
	src := []contextsource.Source{{Label: "Calendar", Subject: "ctx.calendar", Timeout: answers}}
	asker := contextsource.NewAsker(env.NC, zerolog.Nop())

	// The fold's own deadline is shorter than the source's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), timesOut)
	defer cancel()
	as := asker.Ask(ctx, "s1", from, to, src)
	if as[0].Status != contextsource.StatusTimeout || as[0].Timeout > timesOut {
		t.Errorf("under a short fold deadline: %+v", as[0])
	}
	// An abandoned fold asks nobody.
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	as = asker.Ask(done, "s1", from, to, src)
	if as[0].Status != contextsource.StatusError || !errors.Is(as[0].Err, context.Canceled) {
		t.Errorf("with a canceled context: %+v", as[0])
	}
	if as := asker.Ask(context.Background(), "s1", from, to, nil); as != nil {
		t.Errorf("no sources: %+v", as)
	}
	if as := contextsource.NewAsker(nil, zerolog.Nop()).Ask(context.Background(), "s1", from, to, src); as[0].Status != contextsource.StatusError {
		t.Errorf("without a connection: %+v", as[0])
	}
}

// Info logs name the event and the source, never the answer's text.
func TestAskLogs(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	serve(t, env.NC, "calendar", "ctx.calendar", text("Secret dentist appointment."))
	var buf bytes.Buffer
	var mu sync.Mutex
	log := zerolog.New(zerolog.SyncWriter(&lockedWriter{mu: &mu, w: &buf})).Level(zerolog.InfoLevel)
	contextsource.NewAsker(env.NC, log).Ask(context.Background(), "s1", from, to, []contextsource.Source{
		{Label: "Calendar", Subject: "ctx.calendar", Timeout: answers},
		{Label: "Mail", Subject: "ctx.mail", Timeout: answers},
	})
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	seen := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		seen[m["event"].(string)] = m
	}
	if a := seen["context_source_answered"]; a == nil || a["source"] != "Calendar" || a["session"] != "s1" || a["subject"] != "ctx.calendar" {
		t.Errorf("context_source_answered: %v", a)
	}
	if f := seen["context_source_failed"]; f == nil || f["source"] != "Mail" || f["status"] != contextsource.StatusNoResponders {
		t.Errorf("context_source_failed: %v", f)
	}
	if strings.Contains(out, "dentist") {
		t.Errorf("answer text logged above debug level:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A Go source built with Serve refuses a bad request with code 400 naming
// the field.
func TestServeRefusesBadRequests(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	var called atomic.Bool
	serve(t, env.NC, "calendar", "ctx.calendar", func(context.Context, contextsource.Request) (string, error) {
		called.Store(true)
		return "x", nil
	})
	for _, tc := range []struct{ body, field string }{
		{`{"v":1,"session":"s1","from":"2026-03-02T09:15:00Z"}`, "to"},
		{`{"v":1,"session":"a.b","from":"2026-03-02T09:15:00Z","to":"2026-03-02T09:15:00Z"}`, "session"},
		{`{"v":2,"session":"s1","from":"2026-03-02T09:15:00Z","to":"2026-03-02T09:15:00Z"}`, "v"},
		{`{"v":1,"session":"s1","from":"2026-03-02T10:00:00Z","to":"2026-03-02T09:00:00Z"}`, "to"},
		{`[]`, ""},
	} {
		m, err := env.NC.Request("ctx.calendar", []byte(tc.body), answers)
		if err != nil {
			t.Fatal(err)
		}
		if code := m.Header.Get("Nats-Service-Error-Code"); code != "400" {
			t.Errorf("%s: code %q, want 400", tc.body, code)
		}
		if desc := m.Header.Get("Nats-Service-Error"); tc.field != "" && !strings.Contains(desc, `field "`+tc.field+`"`) {
			t.Errorf("%s: error %q does not name %q", tc.body, desc, tc.field)
		}
		var r contextsource.Reply
		if err := json.Unmarshal(m.Data, &r); err != nil || r.V != 1 || r.Error == "" {
			t.Errorf("%s: body %s, want {v, error}", tc.body, m.Data)
		}
	}
	if called.Load() {
		t.Error("the answer function was called with a bad request")
	}
	_, err := contextsource.DecodeRequest([]byte(`{"v":1,"session":"s1","from":"2026-03-02T09:15:00Z"}`))
	if ve, ok := events.AsValidation(err); !ok || ve.Field != "to" {
		t.Errorf("DecodeRequest: %v", err)
	}
}

// Serve stops when its context ends, and refuses a subject a Source
// could not use.
func TestServeLifecycle(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{})
	if _, err := contextsource.Serve(context.Background(), env.NC, contextsource.ServiceConfig{Name: "x", Subject: "ctx.*"}, text("x"), zerolog.Nop()); err == nil ||
		!strings.Contains(err.Error(), `field "subject"`) {
		t.Errorf("wildcard subject: %v", err)
	}
	if _, err := contextsource.Serve(context.Background(), env.NC, contextsource.ServiceConfig{Name: "bad name", Subject: "ctx.x"}, text("x"), zerolog.Nop()); err == nil {
		t.Error("a service name micro refuses was accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := contextsource.Serve(ctx, env.NC, contextsource.ServiceConfig{Name: "calendar", Subject: "ctx.calendar"}, text("x"), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	src := []contextsource.Source{{Label: "Calendar", Subject: "ctx.calendar", Timeout: answers}}
	asker := contextsource.NewAsker(env.NC, zerolog.Nop())
	if as := asker.Ask(context.Background(), "s1", from, to, src); as[0].Status != contextsource.StatusOK {
		t.Fatalf("serving: %+v", as[0])
	}
	cancel()
	deadline := time.Now().Add(answers)
	for !svc.Stopped() {
		if time.Now().After(deadline) {
			t.Fatal("the service did not stop with its context")
		}
		time.Sleep(time.Millisecond)
	}
	if as := asker.Ask(context.Background(), "s1", from, to, src); as[0].Status != contextsource.StatusNoResponders {
		t.Errorf("after stop: %+v", as[0])
	}
}
