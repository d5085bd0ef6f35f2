package client_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// violations collects permission errors of one connection.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.errs = append(v.errs, err.Error())
	})
}

func (v *violations) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return append([]string(nil), v.errs...)
}

// The roles of nats/auth/accounts.conf are enough for the client: a bot
// publishes with a Publisher, a builder watches summaries and asks the
// service, and the processor serves it, each logged in as its own user and
// with its own inbox prefix (_INBOX_<user>, the only inbox the config lets
// it read).
func TestClientWorksWithTheDocumentedPermissions(t *testing.T) {
	path, _ := filepath.Abs(filepath.Join("..", "nats", "auth", "accounts.conf"))
	ns := brokertest.StartConfig(t, path)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	login := func(role string, v *violations) (*nats.Conn, jetstream.JetStream) {
		t.Helper()
		nc, err := nats.Connect(ns.ClientURL(), nats.UserInfo("a-"+role, "dev-a-"+role+"-password"), nats.Timeout(10*time.Second), v.option(),
			nats.CustomInboxPrefix("_INBOX_a-"+role))
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		t.Cleanup(nc.Close)
		js, _ := jetstream.New(nc)
		return nc, js
	}

	var pv, bv, wv violations
	pnc, pjs := login("processor", &pv)
	subjects, _ := events.NewSubjects("fold")
	layout := broker.NewLayout(subjects)
	kv, err := broker.Provision(ctx, pjs, layout, broker.ProvisionConfig{}, log)
	if err != nil {
		t.Fatal(err)
	}
	store := state.NewStore(pjs, kv)
	p, err := processor.New(processor.Config{FlushInterval: 5 * time.Millisecond}, processor.Deps{JS: pjs, Layout: layout, Store: store, Summarizer: offline.New(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	defer func() { stop(); <-done }()
	if _, err := service.Start(pctx, pnc, pjs, layout, store, nil, log); err != nil {
		t.Fatal(err)
	}

	_, bjs := login("bot", &bv)
	pub, err := client.NewPublisher(bjs, client.InboxPrefix("_INBOX_a-bot"))
	if err != nil {
		t.Fatal(err)
	}
	wnc, wjs := login("builder", &wv)
	b, err := client.NewBuilder(wnc, wjs, client.InboxPrefix("_INBOX_a-builder"))
	if err != nil {
		t.Fatal(err)
	}
	watch, err := b.WatchSummaries(ctx, "s1", client.FromLatest)
	if err != nil {
		t.Fatalf("builder watch: %v", err)
	}
	for i := range 61 {
		turn := client.Turn{Session: "s1", TurnID: fmt.Sprintf("t%03d", i),
			Speaker: "Alice", Role: "user", Text: "message about the ranked match"}
		if err := pub.PublishTurnAsync(turn); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatalf("bot: %v", err)
	}
	if err := pub.Control(ctx, "s1", client.OpGenerate, nil); err != nil {
		t.Fatalf("bot control: %v", err)
	}
	select {
	case ev := <-watch:
		if ev.Version != 1 || ev.Cursor != 10 {
			t.Fatalf("builder saw %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("the builder never saw the summary")
	}
	c, err := b.Context(ctx, "s1", client.Budget{Chars: 4000})
	if err != nil {
		t.Fatalf("builder context: %v", err)
	}
	if len(c.Turns) == 0 || c.TotalTurns != 61 {
		t.Fatalf("context: %d turns of %d", len(c.Turns), c.TotalTurns)
	}
	if _, err := b.Session(ctx, "s1"); err != nil {
		t.Fatalf("builder session: %v", err)
	}
	for role, v := range map[string]*violations{"processor": &pv, "bot": &bv, "builder": &wv} {
		if errs := v.list(); len(errs) > 0 {
			t.Errorf("%s hit permission errors: %v", role, errs)
		}
	}
}

// InboxPrefix turns a connection opened without the prefix the auth config
// expects into an error at construction, naming the fix, instead of a
// permissions violation or a timeout on the first publish.
func TestInboxPrefixChecksTheConnection(t *testing.T) {
	ns := brokertest.Start(t, brokertest.Options{Listen: true}).NS
	plain, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.Close)
	private, err := nats.Connect(ns.ClientURL(), nats.CustomInboxPrefix("_INBOX_bot"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(private.Close)
	pjs, _ := jetstream.New(plain)
	if _, err := client.NewPublisher(pjs, client.InboxPrefix("_INBOX_bot")); err == nil ||
		!strings.Contains(err.Error(), `nats.CustomInboxPrefix("_INBOX_bot")`) || !strings.Contains(err.Error(), `"_INBOX"`) {
		t.Fatalf("publisher on a default-inbox connection: %v", err)
	}
	if _, err := client.NewBuilder(plain, pjs, client.InboxPrefix("_INBOX_bot")); err == nil {
		t.Fatal("builder on a default-inbox connection accepted")
	}
	js, _ := jetstream.New(private)
	pub, err := client.NewPublisher(js, client.InboxPrefix("_INBOX_bot"))
	if err != nil {
		t.Fatalf("publisher on the right connection: %v", err)
	}
	_ = pub.Close(context.Background())
	if _, err := client.NewBuilder(private, js, client.InboxPrefix("_INBOX_bot")); err != nil {
		t.Fatalf("builder on the right connection: %v", err)
	}
	for _, bad := range []string{"", "_INBOX_*", "_INBOX.>", "x..y", "trailing."} {
		if _, err := client.NewPublisher(js, client.InboxPrefix(bad)); err == nil || !strings.Contains(err.Error(), "InboxPrefix") {
			t.Errorf("InboxPrefix(%q): %v, want an error naming InboxPrefix", bad, err)
		}
	}
}
