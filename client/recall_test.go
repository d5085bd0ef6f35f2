package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
)

// A builder recalls an evicted turn by what was said in it: the turn that
// left the prompt (folded here, turns 0-9) is found, the verbatim ones are
// not unless asked for.
func TestBuilderRecall(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	_, bjs := e.Client("bot")
	pub, err := client.NewPublisher(bjs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		tu := testenv.Turn("s1", i)
		switch i {
		case 4:
			tu.Text = "Dave, remind me to send the tournament form by Friday."
		case 50:
			tu.Text = "The tournament form is sent."
		}
		if err := pub.PublishTurnAsync(tu); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	e.Settled("s1", 64, 10)
	nc, js := e.Client("builder")
	b, err := client.NewBuilder(nc, js)
	if err != nil {
		t.Fatal(err)
	}

	r, err := b.Recall(ctxT(t), "s1", "tournament form", client.RecallOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Scope != client.RecallScopeEvicted || r.Cursor != 10 || r.Searched != 10 || len(r.Results) != 1 {
		t.Fatalf("default recall %+v", r)
	}
	if got := r.Results[0]; got.TurnID != "t004" || got.Index != 4 || got.Speaker != "Alice" || !strings.Contains(got.Text, "Friday") ||
		!got.At.Equal(testenv.Turn("s1", 4).At) || got.Score <= 0 {
		t.Fatalf("result %+v", got)
	}
	r, err = b.Recall(ctxT(t), "s1", "tournament form", client.RecallOptions{Scope: client.RecallScopeAll, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Results) != 1 || r.Results[0].Index != 50 || r.Searched != 64 {
		t.Fatalf("scope all, limit 1: %+v", r)
	}

	// An unknown session is the service's 404.
	_, err = b.Recall(ctxT(t), "nobody", "tournament", client.RecallOptions{})
	if !client.IsUnknownSession(err) {
		t.Fatalf("unknown session: %v", err)
	}
}

// A request the service would refuse fails before anything is sent (no
// service is running here, so a request that went out would fail with
// no responders instead), with an error naming the field.
func TestBuilderRecallChecksTheRequest(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	nc, js := e.Client("builder")
	b, err := client.NewBuilder(nc, js)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		session, query string
		opts           client.RecallOptions
		field          string
	}{
		{"", "form", client.RecallOptions{}, `"session"`},
		{"a.b", "form", client.RecallOptions{}, `"session"`},
		{"s1", "  ", client.RecallOptions{}, `"query"`},
		{"s1", strings.Repeat("x", client.MaxRecallQueryChars+1), client.RecallOptions{}, `"query"`},
		{"s1", "form", client.RecallOptions{Limit: client.MaxRecallLimit + 1}, `"limit"`},
		{"s1", "form", client.RecallOptions{Limit: -1}, `"limit"`},
		{"s1", "form", client.RecallOptions{Scope: "recent"}, `"scope"`},
	}
	for _, tc := range cases {
		_, err := b.Recall(ctxT(t), tc.session, tc.query, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.field) || errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("recall(%q, %.20q, %+v): %v, want an error naming %s", tc.session, tc.query, tc.opts, err, tc.field)
		}
	}
	// A valid request does go out: with no service, nobody answers.
	_, err = b.Recall(ctxT(t), "s1", "form", client.RecallOptions{})
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("valid request without a service: %v", err)
	}
	// CheckRecall fills in the defaults.
	req := client.RecallRequest{Session: "s1", Query: "form"}
	if err := client.CheckRecall(&req); err != nil || req.V != 1 || req.Limit != client.DefaultRecallLimit || req.Scope != client.RecallScopeEvicted {
		t.Fatalf("defaults: %v %+v", err, req)
	}
}
