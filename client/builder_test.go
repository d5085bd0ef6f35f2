package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
)

// publishTurns sends turns [from, to) of session through the client.
func publishTurns(t *testing.T, p *client.Publisher, session string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := p.PublishTurnAsync(testenv.Turn(session, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

func next(t *testing.T, ch <-chan client.SummaryUpdated) client.SummaryUpdated {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no summary-updated in 20s")
	}
	return client.SummaryUpdated{}
}

func nothing(t *testing.T, ch <-chan client.SummaryUpdated, what string) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("%s: got summary v%d", what, ev.Version)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestWatchFromLatestAndFromNew(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	_, bjs := e.Client("bot")
	pub, err := client.NewPublisher(bjs)
	if err != nil {
		t.Fatal(err)
	}
	nc, js := e.Client("builder")
	b, err := client.NewBuilder(nc, js)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))

	// Before any summary, FromLatest waits for the first.
	early, err := b.WatchSummaries(ctx, "s1", client.FromLatest)
	if err != nil {
		t.Fatal(err)
	}
	publishTurns(t, pub, "s1", 0, 61)
	if ev := next(t, early); ev.Version != 1 || ev.Cursor != 10 || ev.Session != "s1" || ev.Summary == "" {
		t.Fatalf("first summary %+v", ev)
	}
	e.Settled("s1", 61, 10)

	latest, err := b.WatchSummaries(ctx, "s1", client.FromLatest)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := b.WatchSummaries(ctx, "s1", client.FromNew)
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.WatchSummaries(ctx, "s2", client.FromLatest)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, latest); ev.Version != 1 {
		t.Fatalf("FromLatest started at v%d, want the existing v1", ev.Version)
	}
	nothing(t, fresh, "FromNew before a new fold")

	publishTurns(t, pub, "s1", 61, 71)
	for name, ch := range map[string]<-chan client.SummaryUpdated{"early": early, "latest": latest, "fresh": fresh} {
		if ev := next(t, ch); ev.Version != 2 || ev.Cursor != 20 {
			t.Fatalf("%s watch: got v%d cursor %d, want v2 cursor 20", name, ev.Version, ev.Cursor)
		}
	}
	nothing(t, other, "another session's watch")

	cancel()
	for _, ch := range []<-chan client.SummaryUpdated{early, latest, fresh, other} {
		select {
		case _, ok := <-ch:
			if ok {
				t.Fatal("a summary after cancel")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("watch channel not closed after cancel")
		}
	}
	if _, err := b.WatchSummaries(ctxT(t), "a b", client.FromNew); err == nil || !strings.Contains(err.Error(), `"session"`) {
		t.Fatalf("bad session: %v", err)
	}
}

func TestBuilderContextAndSession(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	nc, js := e.Client("builder")
	b, err := client.NewBuilder(nc, js, client.RequestTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := b.Context(ctx, "s1", client.Budget{}); !errors.Is(err, nats.ErrNoResponders) || !strings.Contains(err.Error(), "--service") {
		t.Fatalf("without a service: %v", err)
	}
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	if _, err := b.Context(ctx, "s1", client.Budget{}); !client.IsUnknownSession(err) {
		t.Fatalf("unknown session: %v", err)
	}
	var se *client.ServiceError
	if _, err := b.Session(ctx, "s1"); !errors.As(err, &se) || se.Code != "404" || !strings.Contains(se.Description, "unknown session") {
		t.Fatalf("unknown session state: %v", err)
	}
	var ve *client.ValidationError
	if _, err := b.Context(ctx, "s.1", client.Budget{}); !errors.As(err, &ve) || ve.Field != "session" {
		t.Fatalf("bad session id is refused locally: %v", err)
	}

	_, bjs := e.Client("bot")
	pub, _ := client.NewPublisher(bjs)
	publishTurns(t, pub, "s1", 0, 65)
	e.Settled("s1", 65, 10)
	c, err := b.Context(ctx, "s1", client.Budget{Chars: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if c.Chars > 2000 || len(c.Turns) == 0 || c.Turns[len(c.Turns)-1].Index != 64 || c.DroppedTurns == 0 || c.Summary != nil {
		t.Fatalf("budgeted context: %d chars, %d turns, dropped %d, summary %v", c.Chars, len(c.Turns), c.DroppedTurns, c.Summary != nil)
	}
	if p := c.Prompt(); len([]rune(p)) != c.Chars || !strings.HasSuffix(p, "Alice: message number 064 from Alice about the ranked match.\n") {
		t.Fatalf("prompt:\n%s", p)
	}
	info, err := b.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Cursor != 10 || info.TotalTurns != 65 || info.Version != 1 {
		t.Fatalf("session %+v", info)
	}
	if err := pub.Control(ctx, "s1", client.OpEnd, nil); err != nil {
		t.Fatal(err)
	}
	e.Eventually("session ended", func() bool {
		info, err := b.Session(ctx, "s1")
		return err == nil && info.Ended
	})
}
