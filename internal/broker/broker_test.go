package broker

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

func embedded(t *testing.T) *server.Server {
	t.Helper()
	ns, err := StartEmbedded(EmbeddedConfig{StoreDir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func TestProvisionIsIdempotentAndReportsMismatches(t *testing.T) {
	ns := embedded(t)
	var logs bytes.Buffer
	log := zerolog.New(&logs)
	nc, err := Connect(ConnConfig{URL: ns.ClientURL(), Name: "t"}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	subjects, _ := events.NewSubjects("fold")
	l := NewLayout(subjects)
	if l.In != "FOLD_IN" || l.Out != "FOLD_OUT" || l.DLQ != "FOLD_DLQ" || l.Bucket != "FOLD_SESSIONS" {
		t.Fatalf("layout %+v", l)
	}
	ctx := context.Background()
	for range 2 {
		if _, err := Provision(ctx, js, l, ProvisionConfig{}, log); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Count(logs.String(), "stream_created") != 3 || strings.Contains(logs.String(), "provision_mismatch") {
		t.Fatalf("second provision was not a no-op:\n%s", logs.String())
	}
	// An operator changed retention by hand: foldstream says so and leaves it.
	s, _ := js.Stream(ctx, l.Out)
	cfg := s.CachedInfo().Config
	cfg.MaxAge = time.Hour
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if _, err := Provision(ctx, js, l, ProvisionConfig{}, log); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "provision_mismatch") || !strings.Contains(logs.String(), "max_age 1h0m0s") {
		t.Fatalf("mismatch not reported:\n%s", logs.String())
	}
	s, _ = js.Stream(ctx, l.Out)
	if s.CachedInfo().Config.MaxAge != time.Hour {
		t.Fatal("existing stream was changed")
	}
	// A stream of that name that does not capture foldstream's subjects is an error.
	other, _ := events.NewSubjects("other")
	ol := NewLayout(other)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: ol.In, Subjects: []string{"elsewhere.>"}}); err != nil {
		t.Fatal(err)
	}
	_, err = Provision(ctx, js, ol, ProvisionConfig{}, log)
	if err == nil || !strings.Contains(err.Error(), "does not capture") {
		t.Fatalf("got %v", err)
	}
}

func TestConnectWithCredentials(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, Username: "bot", Password: "s3cret", NoSigs: true}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("not ready")
	}
	defer ns.Shutdown()
	log := zerolog.Nop()
	nc, err := Connect(ConnConfig{URL: ns.ClientURL(), User: "bot", Password: "s3cret"}, nil, log)
	if err != nil {
		t.Fatalf("good credentials refused: %v", err)
	}
	nc.Close()
	_, err = Connect(ConnConfig{URL: "nats://bot:wrong@" + strings.TrimPrefix(ns.ClientURL(), "nats://")}, nil, log)
	if err == nil || !strings.Contains(err.Error(), "***@") || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("bad credentials: %v (must fail, with the password redacted)", err)
	}
	if _, err := Connect(ConnConfig{URL: ns.ClientURL(), TLSCert: "c.pem"}, nil, log); err == nil || !strings.Contains(err.Error(), "--nats-tls-key") {
		t.Fatalf("half a client cert: %v", err)
	}
	if _, err := Connect(ConnConfig{}, nil, log); err == nil {
		t.Fatal("no URL and no embedded server accepted")
	}
}

// --inbox-prefix puts every reply of the connection (requests, JetStream)
// under the prefix the auth configs allow for the user; a prefix nats.go
// would refuse, or one with wildcards, is an error naming the flag.
func TestConnectWithInboxPrefix(t *testing.T) {
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoSigs: true}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(5 * time.Second) {
		t.Fatal("not ready")
	}
	defer ns.Shutdown()
	log := zerolog.Nop()
	nc, err := Connect(ConnConfig{URL: ns.ClientURL(), InboxPrefix: "_INBOX_processor"}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte(m.Reply)) }); err != nil {
		t.Fatal(err)
	}
	reply, err := nc.Request("svc", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(reply.Data), "_INBOX_processor.") {
		t.Fatalf("request replied to %q, want under _INBOX_processor.", reply.Data)
	}
	for _, bad := range []string{"_INBOX_*", "_INBOX.>", "a..b", "trailing.", "with space"} {
		if _, err := Connect(ConnConfig{URL: ns.ClientURL(), InboxPrefix: bad}, nil, log); err == nil || !strings.Contains(err.Error(), "--inbox-prefix") {
			t.Errorf("inbox prefix %q: %v, want an error naming --inbox-prefix", bad, err)
		}
	}
}
