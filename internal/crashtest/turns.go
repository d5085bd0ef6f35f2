package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// T0 is the time of every harness session's first turn.
var T0 = time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)

// TurnID is the id (and Nats-Msg-Id) of turn n of session.
func TurnID(session string, n int) string { return fmt.Sprintf("%s-t%d", session, n) }

// Turn is turn n of session as the harnesses publish it: its text names
// its message number and session, so the Model can tell what it folds.
func Turn(session string, n int) events.Turn {
	speaker := []string{"Alice", "Bob", "Carol"}[n%3]
	return events.Turn{
		V: events.Version, Session: session, TurnID: TurnID(session, n), At: T0.Add(time.Duration(n) * time.Second),
		Speaker: speaker, Role: "user", Text: fmt.Sprintf("message number %d of %s from %s", n, session, speaker),
	}
}

// Publish publishes turn n of session and waits for the stream's ack.
// With msgID the turn id is sent as Nats-Msg-Id (stream dedup); without
// it a re-publish reaches the processor, which must drop it by turn id.
func Publish(ctx context.Context, js jetstream.JetStream, subj events.Subjects, session string, n int, msgID bool) (*jetstream.PubAck, error) {
	data, err := json.Marshal(Turn(session, n))
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(subj.In(session, events.KindTurn))
	msg.Data = data
	var opts []jetstream.PublishOpt
	if msgID {
		opts = append(opts, jetstream.WithMsgID(TurnID(session, n)))
	}
	return js.PublishMsg(ctx, msg, opts...)
}

// Control publishes a control event (generate, compact, …) for session.
func Control(ctx context.Context, js jetstream.JetStream, subj events.Subjects, session, op string) error {
	data, err := json.Marshal(events.Control{V: events.Version, Session: session, Op: op})
	if err != nil {
		return err
	}
	_, err = js.Publish(ctx, subj.In(session, events.KindControl), data)
	return err
}
