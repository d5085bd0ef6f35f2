package client_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestInvalidEventsAreRefusedBeforeSending(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	_, js := e.Client("bot")
	p, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	good := client.Turn{Session: "s1", TurnID: "t1", Speaker: "Alice", Role: "user", Text: "hi"}
	with := func(f func(*client.Turn)) client.Turn { t := good; f(&t); return t }
	cases := []struct {
		name  string
		turn  client.Turn
		code  string
		field string
	}{
		{"bad session", with(func(t *client.Turn) { t.Session = "a.b" }), client.CodeBadSession, "session"},
		{"no session", with(func(t *client.Turn) { t.Session = "" }), client.CodeBadSession, "session"},
		{"no turn id", with(func(t *client.Turn) { t.TurnID = " " }), client.CodeMissingField, "turn_id"},
		{"no speaker", with(func(t *client.Turn) { t.Speaker = "" }), client.CodeMissingField, "speaker"},
		{"bad role", with(func(t *client.Turn) { t.Role = "narrator" }), client.CodeInvalidField, "role"},
		{"no text", with(func(t *client.Turn) { t.Text = "" }), client.CodeMissingField, "text"},
		{"huge text", with(func(t *client.Turn) { t.Text = strings.Repeat("x", 70<<10) }), client.CodeOversized, "text"},
		{"bad utf-8", with(func(t *client.Turn) { t.Text = "hi \xff" }), client.CodeInvalidField, "text"},
		{"wrong version", with(func(t *client.Turn) { t.V = 2 }), client.CodeVersion, "v"},
		{"negative tokens", with(func(t *client.Turn) { t.Tokens = -1 }), client.CodeInvalidField, "tokens"},
	}
	for _, tc := range cases {
		for _, async := range []bool{false, true} {
			var err error
			if async {
				err = p.PublishTurnAsync(tc.turn)
			} else {
				err = p.PublishTurn(ctx, tc.turn)
			}
			var ve *client.ValidationError
			if !errors.As(err, &ve) || ve.Code != tc.code || ve.Field != tc.field || !strings.Contains(err.Error(), `"`+tc.field+`"`) {
				t.Errorf("%s (async %v): got %v, want %s on field %q", tc.name, async, err, tc.code, tc.field)
			}
		}
	}
	var ve *client.ValidationError
	if err := p.PublishNote(ctx, client.Note{Session: "s1", NoteID: "n1"}); !errors.As(err, &ve) || ve.Field != "text" {
		t.Errorf("note without text: %v", err)
	}
	if err := p.Control(ctx, "s1", "explode", nil); !errors.As(err, &ve) || ve.Field != "op" {
		t.Errorf("bad op: %v", err)
	}
	if err := p.Control(ctx, "s1", client.OpConfigure, &client.SessionConfig{Trigger: "always"}); !errors.As(err, &ve) || ve.Field != "config.trigger" {
		t.Errorf("bad config: %v", err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.Messages(e.Layout.In, "fold.in.>")); n != 0 {
		t.Fatalf("%d invalid events reached the stream", n)
	}
}

// Turns carry Nats-Msg-Id "<session>:<turn_id>": a re-send is stored once,
// and the same turn id in another session is a different turn.
func TestTurnsAreDeduplicatedPerSession(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	_, js := e.Client("bot")
	p, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	turn := client.Turn{Session: "s1", TurnID: "t1", Speaker: "Alice", Role: "user", Text: "hi"}
	for range 2 {
		if err := p.PublishTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.PublishTurnAsync(turn); err != nil {
		t.Fatal(err)
	}
	turn.Session = "s2"
	if err := p.PublishTurn(ctx, turn); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s1 := e.Messages(e.Layout.In, "fold.in.s1.turn")
	if len(s1) != 1 || len(e.Messages(e.Layout.In, "fold.in.s2.turn")) != 1 {
		t.Fatalf("stored %d turns in s1 (want 1) and s2 (want 1)", len(s1))
	}
	if id := s1[0].Header.Get(jetstream.MsgIDHeader); id != "s1:t1" {
		t.Fatalf("Nats-Msg-Id %q", id)
	}
	// Defaults were filled and the processor's decoder accepts the result.
	in, err := events.DecodeInbound(events.KindTurn, "s1", s1[0].Data, events.Limits{})
	if err != nil || in.Turn.V != 1 || in.Turn.At.IsZero() {
		t.Fatalf("stored turn %s: %v", s1[0].Data, err)
	}
	if err := p.PublishTurn(ctx, turn); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("publish after close: %v", err)
	}
}

// PublishTurnAsync blocks while MaxPending publishes wait for their
// acknowledgement, and a publish that is never acknowledged is reported
// on Errors() and by Flush.
func TestAsyncBackPressureAndErrors(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	nc, js := e.Client("bot")
	// Under prefix "stall" no stream stores anything, and a silent
	// subscriber keeps the server from answering "no responders": the
	// publishes simply never get an acknowledgement.
	if _, err := nc.Subscribe("stall.in.>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewPublisher(js, client.Prefix("stall"), client.MaxPending(2), client.AckTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	turn := func(i int) client.Turn {
		return client.Turn{Session: "s1", TurnID: "t" + string(rune('a'+i)), Speaker: "Alice", Role: "user", Text: "hi"}
	}
	for i := range 2 {
		if err := p.PublishTurnAsync(turn(i)); err != nil {
			t.Fatal(err)
		}
	}
	// The third waits for a slot, which only a failed (timed-out) publish
	// frees: when it returns, an error must already have been reported.
	if err := p.PublishTurnAsync(turn(2)); err != nil {
		t.Fatal(err)
	}
	var pe *client.PublishError
	select {
	case err := <-p.Errors():
		if !errors.As(err, &pe) || pe.Session != "s1" || pe.TurnID != "ta" || pe.Subject != "stall.in.s1.turn" {
			t.Fatalf("first async error: %v", err)
		}
	default:
		t.Fatal("the third publish did not wait for a slot: no error reported yet")
	}
	err = p.Flush(ctxT(t))
	if err == nil || !strings.Contains(err.Error(), "3 asynchronous publishes failed") || !errors.As(err, &pe) {
		t.Fatalf("flush: %v", err)
	}
	if err := p.Flush(ctxT(t)); err != nil {
		t.Fatalf("second flush reports old failures again: %v", err)
	}
	if err := p.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for range p.Errors() { // closed by Close, after the two remaining errors
		n++
	}
	if n != 2 {
		t.Fatalf("%d more errors on the channel, want 2", n)
	}

	// With an OnError handler the errors go there instead.
	var handled atomic.Int32
	p2, err := client.NewPublisher(js, client.Prefix("stall"), client.MaxPending(1), client.AckTimeout(100*time.Millisecond),
		client.OnError(func(error) { handled.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := p2.PublishTurnAsync(turn(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p2.Close(ctxT(t)); err == nil || handled.Load() != 3 {
		t.Fatalf("close: %v, handler called %d times (want 3)", err, handled.Load())
	}
}

func TestAsyncPublishesAreAllStored(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	_, js := e.Client("bot")
	p, err := client.NewPublisher(js, client.MaxPending(8))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		if err := p.PublishTurnAsync(testenv.Turn("s1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := len(e.Messages(e.Layout.In, "fold.in.s1.turn")); n != 300 {
		t.Fatalf("%d of 300 stored after Flush", n)
	}
}

// The client derives stream names without importing the broker; they must
// agree.
func TestStreamNamesMatchTheProcessor(t *testing.T) {
	for _, prefix := range []string{"fold", "acme.fold", "my-app"} {
		subj, err := events.NewSubjects(prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := client.StreamNameForTest(prefix, "OUT"), broker.NewLayout(subj).Out; got != want {
			t.Errorf("prefix %q: client says %s, processor %s", prefix, got, want)
		}
	}
}
