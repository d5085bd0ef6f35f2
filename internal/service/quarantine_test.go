package service_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/nats-io/nats.go/micro"
)

// A checkpoint that cannot be decoded is answered with a clear 503 naming
// the quarantine, by every endpoint that reads it, not a bare 500; once
// the processor has handled the session (its next event), it is rebuilt
// and the service answers again.
func TestUndecodableCheckpointIsAnsweredAsQuarantined(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartService(nil)
	ctx := context.Background()
	kv, err := e.JS.KeyValue(ctx, e.Layout.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "s1", []byte(`{"id":"s1","turns":"/w","total":1}`)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ endpoint, req string }{
		{client.EndpointSession, `{"session":"s1"}`},
		{client.EndpointContext, `{"session":"s1"}`},
		{client.EndpointRecall, `{"v":1,"session":"s1","query":"tournament form"}`},
	} {
		m := ask(t, e.NC, c.endpoint, []byte(c.req))
		code, desc := m.Header.Get(micro.ErrorCodeHeader), m.Header.Get(micro.ErrorHeader)
		if code != client.ErrCodeUnavailable || !strings.Contains(desc, "quarantined") {
			t.Errorf("%s: got %q %q, want %s naming the quarantine", c.endpoint, code, desc, client.ErrCodeUnavailable)
		}
	}
	e.StartProcessor(processor.Config{}, nil)
	turn, _ := json.Marshal(events.Turn{V: 1, Session: "s1", TurnID: "t1", At: time.Now().UTC(), Speaker: "Alice", Role: "user", Text: "hi"})
	if _, err := e.JS.Publish(ctx, e.Layout.Subjects.In("s1", events.KindTurn), turn); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		m := ask(t, e.NC, client.EndpointSession, []byte(`{"session":"s1"}`))
		var info client.SessionInfo
		if m.Header.Get(micro.ErrorCodeHeader) == "" && json.Unmarshal(m.Data, &info) == nil && info.TotalTurns == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the session did not come back after the processor handled it: %s %s", m.Header, m.Data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
