// Package testenv is the one test harness: a real nats-server in-process
// (or a connection to a cluster) with foldstream's streams and bucket, the
// checkpoint store, and the helpers every package's tests share to drive
// it and read what came out: publish turns, notes and controls, read
// checkpoints, outbound events and dead letters, and wait for a state.
// It does not import the processor, so the processor's own tests build on
// it (their rig adds only starting the processor), as servicetest does
// (adding the processor and the context service for everyone else). The
// server itself, engine runs and the one wait are brokertest's, which
// stays below state so state's own tests can use it.
package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Env is one provisioned server (or cluster connection) and the checkpoint
// store on it.
type Env struct {
	T      testing.TB
	NS     *server.Server // nil on a cluster
	URL    string         // client URL; "" when in-process only
	NC     *nats.Conn
	JS     jetstream.JetStream
	Layout broker.Layout
	KV     jetstream.KeyValue
	Store  *state.Store
	Log    zerolog.Logger

	mu  sync.Mutex
	seq map[string]int // next turn number per session, for Turns
}

// Options configure New.
type Options struct {
	// Listen opens a TCP listener on a free loopback port (URL is set);
	// otherwise connections are in-process only.
	Listen bool
	// Log receives the server's, provisioning's and, through Env.Log, the
	// engines' logs; the zero value is a warn-level test log.
	Log *zerolog.Logger
	// Name is the connection name; default "test".
	Name string
	// Partitions provisions the partitioned inbound layout (scale-out).
	Partitions int
}

// New starts the server and provisions the streams and bucket; everything
// stops when the test ends.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	if o.Log != nil {
		log = *o.Log
	}
	b := brokertest.Start(t, brokertest.Options{Listen: o.Listen, Log: log, Name: o.Name, Partitions: o.Partitions})
	e := Attach(t, b.NC, b.JS, b.Layout, b.KV, log)
	e.NS = b.NS
	if o.Listen {
		e.URL = b.NS.ClientURL()
	}
	return e
}

// Attach is an Env over a connection the test made itself (to a cluster,
// say) and a layout it provisioned there; NS stays nil and URL empty
// unless the test sets them.
func Attach(t testing.TB, nc *nats.Conn, js jetstream.JetStream, layout broker.Layout, kv jetstream.KeyValue, log zerolog.Logger) *Env {
	return &Env{T: t, NC: nc, JS: js, Layout: layout, KV: kv, Store: state.NewStore(js, kv), Log: log, seq: map[string]int{}}
}

// Client opens another in-process connection, as a bot or builder would
// have its own.
func (e *Env) Client(name string) (*nats.Conn, jetstream.JetStream) {
	e.T.Helper()
	nc, err := nats.Connect("", nats.InProcessServer(e.NS), nats.Name(name))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		e.T.Fatal(err)
	}
	return nc, js
}

// Publish publishes v (JSON-encoded unless it is []byte) to subject, with
// msgID as its deduplication ID unless empty.
func (e *Env) Publish(subject string, v any, msgID string) {
	e.T.Helper()
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			e.T.Fatal(err)
		}
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	if _, err := e.JS.Publish(context.Background(), subject, data, opts...); err != nil {
		e.T.Fatalf("publish %s: %v", subject, err)
	}
}

// T0 is the timestamp of the first turn Turn and Turns make.
var T0 = time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)

// Turn is turn number i of session: alternating speakers, 10 s apart,
// with a text that names its number.
func Turn(session string, i int) events.Turn {
	speakers := []string{"Alice", "Bob"}
	return events.Turn{
		V: events.Version, Session: session, TurnID: fmt.Sprintf("t%03d", i),
		At:      T0.Add(time.Duration(i) * 10 * time.Second),
		Speaker: speakers[i%2], Role: "user",
		Text: fmt.Sprintf("message number %03d from %s about the ranked match.", i, speakers[i%2]),
	}
}

// Turns publishes n more turns to session, numbered from where the last
// call left off: alternating speakers 10 s apart, each text naming its
// number ("message number 007 from Bob"), each ID "<session>-t007", so a
// summarizer's input shows which turns it was given.
func (e *Env) Turns(session string, n int) {
	e.T.Helper()
	speakers := []string{"Alice", "Bob"}
	for range n {
		e.mu.Lock()
		i := e.seq[session]
		e.seq[session]++
		e.mu.Unlock()
		id := fmt.Sprintf("%s-t%03d", session, i)
		e.Publish(e.Layout.Subjects.In(session, events.KindTurn), events.Turn{
			V: 1, Session: session, TurnID: id, At: T0.Add(time.Duration(i) * 10 * time.Second),
			Speaker: speakers[i%2], Role: "user", Text: fmt.Sprintf("message number %03d from %s", i, speakers[i%2]),
		}, id)
	}
}

// Note publishes a note to session.
func (e *Env) Note(session, id, source, text string, at time.Time) {
	e.T.Helper()
	e.Publish(e.Layout.Subjects.In(session, events.KindNote), events.Note{V: 1, Session: session, NoteID: id, At: at, Source: source, Text: text}, id)
}

// Control publishes a control op (with cfg for configure) to session.
func (e *Env) Control(session, op string, cfg *events.SessionConfig) {
	e.T.Helper()
	e.Publish(e.Layout.Subjects.In(session, events.KindControl), events.Control{V: 1, Session: session, Op: op, Config: cfg}, "")
}

// Checkpoint reads a session's KV checkpoint (a fresh state if none).
func (e *Env) Checkpoint(session string) *state.Session {
	e.T.Helper()
	s, _, err := e.Store.Load(context.Background(), session)
	if err != nil {
		e.T.Fatal(err)
	}
	return s
}

// Eventually polls cond every 5 ms until it holds, or fails the test
// naming what it waited for after 20 s.
func (e *Env) Eventually(what string, cond func() bool) {
	e.T.Helper()
	brokertest.Eventually(e.T, what, cond)
}

// Settled waits until the checkpoint has total turns, the cursor at
// cursor and no fold in flight, and returns it.
func (e *Env) Settled(session string, total, cursor int64) *state.Session {
	e.T.Helper()
	var s *state.Session
	e.Eventually(fmt.Sprintf("session %s: total %d, cursor %d, no lease", session, total, cursor), func() bool {
		s = e.Checkpoint(session)
		return s.Total == total && s.Cursor == cursor && s.Lease == nil
	})
	return s
}

// Outbound returns the session's outbound messages of kind, in order.
func (e *Env) Outbound(session, kind string) []*jetstream.RawStreamMsg {
	e.T.Helper()
	return e.Messages(e.Layout.Out, e.Layout.Subjects.Out(session, kind))
}

// Summaries decodes the session's published summaries, in order.
func (e *Env) Summaries(session string) []events.SummaryUpdated {
	e.T.Helper()
	return decodeAll[events.SummaryUpdated](e, e.Outbound(session, events.KindSummary))
}

// Lifecycle decodes the session's published lifecycle events, in order.
func (e *Env) Lifecycle(session string) []events.Lifecycle {
	e.T.Helper()
	return decodeAll[events.Lifecycle](e, e.Outbound(session, events.KindEvent))
}

// DeadLetters returns every message in the dead-letter stream, in order.
func (e *Env) DeadLetters() []*jetstream.RawStreamMsg {
	e.T.Helper()
	return e.Messages(e.Layout.DLQ, ">")
}

// Messages returns the messages stream holds on subjects matching filter
// (wildcards allowed), in order.
func (e *Env) Messages(stream, filter string) []*jetstream.RawStreamMsg {
	e.T.Helper()
	out, err := ReadSubject(context.Background(), e.JS, stream, filter)
	if err != nil {
		e.T.Fatal(err)
	}
	return out
}

// ReadSubject returns every message of stream on subject (wildcards
// allowed), in order; for checks that report errors rather than fail a
// test (crashtest's).
func ReadSubject(ctx context.Context, js jetstream.JetStream, stream, subject string) ([]*jetstream.RawStreamMsg, error) {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); len(out) < 1_000_000; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read %s %s at %d: %w", stream, subject, seq, err)
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
	return out, nil
}

func decodeAll[T any](e *Env, msgs []*jetstream.RawStreamMsg) []T {
	e.T.Helper()
	var out []T
	for _, m := range msgs {
		var v T
		if err := json.Unmarshal(m.Data, &v); err != nil {
			e.T.Fatalf("%s: %v", m.Subject, err)
		}
		out = append(out, v)
	}
	return out
}
