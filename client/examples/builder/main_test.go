package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
)

// The example runs as documented against a real server, processor and
// service.
func TestBuilderExample(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{Listen: true})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var out bytes.Buffer
	if err := run(ctx, e.URL, login{}, "demo-1", 200*time.Millisecond, false, &out); err == nil || !strings.Contains(err.Error(), "no summary yet") {
		t.Fatalf("before any fold: %v", err)
	}
	_, js := e.Client("bot")
	pub, _ := client.NewPublisher(js)
	for i := range 65 {
		if err := pub.PublishTurnAsync(testenv.Turn("demo-1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The summary is published before the processor checkpoints the new
	// cursor; until then the context still (rightly) has the old pair.
	e.Settled("demo-1", 65, 10)
	out.Reset()
	if err := run(ctx, e.URL, login{}, "demo-1", 30*time.Second, false, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"summary v1 covers turns 0-9: ", "context: summary true, 55 verbatim turns from 10 (0 dropped)",
		"Earlier in this session: ", "Bob: message number 063", "Session conversation summary:\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	instr := got[strings.Index(got, instructions):]
	if n := utf8.RuneCountInString(strings.TrimSpace(instr)); n > client.DefaultRealtimeCeiling {
		t.Errorf("realtime instructions are %d chars", n)
	}
}
