package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// The example runs as documented against a real server and processor.
func TestBotExample(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{Listen: true})
	e.StartProcessor(processor.Config{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, e.URL, login{}, "demo-1", 61, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "published 61 turns and 1 note to session demo-1") {
		t.Fatalf("output: %s", out.String())
	}
	s := e.Settled("demo-1", 61, 10)
	if s.Version != 1 || len(s.PendingNotes) != 0 {
		t.Fatalf("after the bot: version %d, pending notes %d (the note must be folded)", s.Version, len(s.PendingNotes))
	}
}

// Against nats/auth/userpass.conf the example logs in as the bot with its
// private inbox (the only replies that user may read) and every turn is
// acknowledged and applied by a processor logged in as its own user.
func TestBotExampleWithThePrivateInbox(t *testing.T) {
	conf, _ := filepath.Abs(filepath.Join("..", "..", "..", "nats", "auth", "userpass.conf"))
	ns := brokertest.StartConfig(t, conf)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	_, store, stop := servicetest.RunProcessorAs(t, ctx, ns.ClientURL(), log, nats.UserInfo("processor", "dev-processor-password"),
		nats.CustomInboxPrefix("_INBOX_processor"))
	defer stop()

	var out bytes.Buffer
	if err := run(ctx, ns.ClientURL(), login{user: "bot", password: "dev-bot-password", inbox: "_INBOX_bot"}, "auth-1", 61, &out); err != nil {
		t.Fatal(err)
	}
	for {
		s, _, err := store.Load(ctx, "auth-1")
		if err == nil && s.Total == 61 && s.Cursor == 10 && len(s.PendingNotes) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("processor state %+v (%v)", s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
