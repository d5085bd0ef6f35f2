package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
)

// The example runs as documented against a real server and processor.
func TestBotExample(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{Listen: true})
	e.StartProcessor(processor.Config{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, e.URL, "demo-1", 61, &out); err != nil {
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
