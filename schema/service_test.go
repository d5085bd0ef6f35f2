package schema_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// sessionMessages asks the session endpoint about every session of envs
// (every checkpoint key of their buckets) and of one more environment
// whose fold hangs (a lease in flight) and which keeps an ended session's
// checkpoint, and returns each request and reply with header Event naming
// its schema. It starts a service on each of envs (a second one where one
// runs only joins its queue group).
func sessionMessages(t *testing.T, envs ...*servicetest.Env) []*jetstream.RawStreamMsg {
	t.Helper()
	for _, e := range envs {
		e.StartService(nil)
	}
	envs = append(envs, leaseEnv(t))
	var out []*jetstream.RawStreamMsg
	for _, e := range envs {
		nc, _ := e.Client("builder")
		kv, err := e.JS.KeyValue(context.Background(), e.Layout.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		keys, err := kv.ListKeys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for key := range keys.Keys() {
			if !events.ValidSession(key) {
				continue // chunks, archives, due marks
			}
			req, _ := json.Marshal(client.SessionRequest{Session: key})
			subject := client.ServiceSubject("fold", client.EndpointSession)
			reply, err := nc.Request(subject, req, 10*time.Second)
			if err != nil {
				t.Fatalf("session %s: %v", key, err)
			}
			if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
				continue // cleared between the listing and the request (an ended session's archive)
			}
			out = append(out,
				&jetstream.RawStreamMsg{Subject: subject, Data: req, Header: nats.Header{"Event": {"session-request"}}},
				&jetstream.RawStreamMsg{Subject: subject + " (reply)", Data: reply.Data, Header: nats.Header{"Event": {"session-reply"}}})
		}
	}
	if len(out) == 0 {
		t.Fatal("no session replies")
	}
	return out
}

// leaseEnv runs a processor whose model never answers, so session "held"
// has a fold in flight, and which keeps ended sessions (session "ended").
func leaseEnv(t *testing.T) *servicetest.Env {
	t.Helper()
	e := servicetest.New(t, servicetest.Options{})
	llm := openaitest.New(t)
	llm.SetFunc(func(int, openaitest.Request) openaitest.Reply { return openaitest.Hang() })
	sum, err := openai.New(openai.Config{BaseURL: llm.URL, APIKey: "k", Model: "fold-mini", Timeout: time.Minute, Retry: retry.Policy{MaxAttempts: 1}}, e.Log)
	if err != nil {
		t.Fatal(err)
	}
	e.StartProcessor(processor.Config{KeepEnded: true, FoldTimeout: time.Minute, ShutdownGrace: 50 * time.Millisecond}, sum)
	e.StartService(nil)
	_, js := e.Client("bot")
	pub, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close(context.Background()) }()
	ctx := context.Background()
	for i := range 61 {
		if err := pub.PublishTurn(ctx, testenv.Turn("held", i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if err := pub.PublishTurn(ctx, testenv.Turn("ended", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Control(ctx, "ended", client.OpEnd, nil); err != nil {
		t.Fatal(err)
	}
	e.Eventually("a fold in flight and an ended session", func() bool {
		return e.Checkpoint("held").Lease != nil && e.Checkpoint("ended").Ended
	})
	return e
}
