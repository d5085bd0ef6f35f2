package service_test

import (
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
)

// The context service's tail and the recall index apply only what the
// processor applies: a turn dated beyond --max-clock-skew and a configure
// the deployment refuses are dead-lettered by the processor, so they are
// neither in a context nor recalled, and the processor's checkpoint,
// once it has caught up, agrees with the context the service packed.
func TestServiceSkipsEventsTheProcessorRejects(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	cfg := processor.Config{}
	e.StartService(nil, service.Admission(cfg.Admission()))

	// s1: a turn a year ahead of the stream's clock, between two good ones.
	publish(t, e, "s1", 0, 2)
	future := testenv.Turn("s1", 50)
	future.TurnID = "future"
	future.At = time.Now().AddDate(1, 0, 0)
	future.Text = "the lighthouse keeper's password is zebra"
	publishTurn(t, e, future)
	publish(t, e, "s1", 2, 3)

	// s2: a configure whose tokens settings cannot work with the
	// deployment's (a reserve above the window), which would also turn
	// on an idle reset of one minute; the next turn comes an hour later.
	publish(t, e, "s2", 0, 2)
	publishRaw(t, e, e.Layout.Subjects.In("s2", events.KindControl), events.Control{V: 1, Session: "s2", Op: events.OpConfigure,
		At: testenv.T0.Add(15 * time.Second), Config: &events.SessionConfig{
			Mode: "tokens", ContextWindow: 1000, ReserveTokens: 5000, ResetPolicy: events.ResetIdle, ResetIdleMinutes: 1,
		}})
	publish(t, e, "s2", 360, 361)

	// s3: a reset dated a year ahead: the processor keeps the session.
	publish(t, e, "s3", 0, 3)
	publishRaw(t, e, e.Layout.Subjects.In("s3", events.KindControl), events.Control{V: 1, Session: "s3", Op: events.OpReset, At: time.Now().AddDate(1, 0, 0)})
	publish(t, e, "s3", 3, 4)

	c1 := getContext(t, e.NC, client.ContextRequest{Session: "s1"})
	if c1.TotalTurns != 3 {
		t.Fatalf("s1: %d turns in the context, want 3 (the future-dated turn is rejected): %+v", c1.TotalTurns, indices(c1))
	}
	for _, turn := range c1.Turns {
		if turn.TurnID == "future" {
			t.Fatalf("s1: the future-dated turn is in the context: %+v", turn)
		}
	}
	q := getContext(t, e.NC, client.ContextRequest{Session: "s1", Query: "what is the lighthouse keeper's password?"})
	for _, r := range q.Recalled {
		if r.TurnID == "future" {
			t.Fatalf("s1: the future-dated turn is recalled: %+v", q.Recalled)
		}
	}
	if r := recall(t, e.NC, client.RecallRequest{V: 1, Session: "s1", Query: "lighthouse keeper password zebra", Scope: client.RecallScopeAll}); len(r.Results) > 0 {
		t.Fatalf("s1: recall found %+v, want nothing (only the rejected turn matches)", r.Results)
	}

	c2 := getContext(t, e.NC, client.ContextRequest{Session: "s2"})
	if c2.TotalTurns != 3 {
		t.Fatalf("s2: %d turns in the context, want 3 (the refused configure set no idle reset): %+v", c2.TotalTurns, indices(c2))
	}

	c3 := getContext(t, e.NC, client.ContextRequest{Session: "s3"})
	if c3.TotalTurns != 4 {
		t.Fatalf("s3: %d turns in the context, want 4 (the future-dated reset is rejected): %+v", c3.TotalTurns, indices(c3))
	}
	if r := recall(t, e.NC, client.RecallRequest{V: 1, Session: "s3", Query: "message number 001", Scope: client.RecallScopeAll}); len(r.Results) == 0 || r.Results[0].TurnID != "t001" {
		t.Fatalf("s3: recall of the turn before the rejected reset: %+v", r.Results)
	}

	// The processor, applying the same stream, checkpoints the same counts.
	e.StartProcessor(cfg, nil)
	for session, c := range map[string]*client.Context{"s1": c1, "s2": c2, "s3": c3} {
		e.Eventually("the processor applied "+session, func() bool { return e.Checkpoint(session).LastSeq >= c.ThroughSeq })
		if s := e.Checkpoint(session); s.Total != c.TotalTurns || s.Epoch != 0 {
			t.Fatalf("%s: processor total %d epoch %d, the service packed %d turns", session, s.Total, s.Epoch, c.TotalTurns)
		}
	}
}
