package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// rig is a real in-process nats-server with foldstream's streams, plus a
// chat-completions server behind the real go-openai client. Its server,
// engine runs and waits are brokertest's, as servicetest.Env's are; what
// is its own reaches the processor's internals, which servicetest (a
// package that imports this one) cannot.
type rig struct {
	t      *testing.T
	ns     *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	layout broker.Layout
	store  *state.Store
	llm    *openaitest.Server
	sum    fold.Summarizer
	log    zerolog.Logger
	seq    map[string]int
	mu     sync.Mutex
	// On a cluster (ns nil): the nodes' URLs and the replicas of buckets
	// the test creates.
	url      string
	replicas int
	// Optional deps for start: a metrics registry and the summarizer's
	// breaker (nil: the processor's own).
	reg     prometheus.Registerer
	breaker *retry.Breaker
}

func newRig(t *testing.T) *rig {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(testLogLevel)
	e := brokertest.Start(t, brokertest.Options{Log: log})
	r := &rig{t: t, ns: e.NS, nc: e.NC, js: e.JS, layout: e.Layout, store: state.NewStore(e.JS, e.KV), log: log, seq: map[string]int{}}
	r.llm = openaitest.New(t)
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply { return openaitest.OK(echoSummary(req)) })
	r.sum = r.summarizer(retry.Policy{MaxAttempts: 1})
	return r
}

func (r *rig) summarizer(p retry.Policy) fold.Summarizer {
	s, err := openai.New(openai.Config{BaseURL: r.llm.URL, APIKey: "k", Model: "fold-mini", Timeout: 5 * time.Second, Retry: p}, r.log)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

var msgNum = regexp.MustCompile(`message number (\d+)`)

// echoSummary answers like a model would: a short summary naming the
// turns it was given, so tests can see exactly what was folded.
func echoSummary(req openaitest.Request) string {
	var user string
	for _, m := range req.Messages {
		if m.Role == "user" {
			user = m.Content
		}
	}
	nums := msgNum.FindAllStringSubmatch(user, -1)
	if len(nums) == 0 {
		return "Alice and Bob kept talking."
	}
	return fmt.Sprintf("Alice and Bob discussed messages %s to %s.", nums[0][1], nums[len(nums)-1][1])
}

func (r *rig) start(cfg Config) (*Processor, func()) {
	r.t.Helper()
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 50 * time.Millisecond
	}
	cfg.FlushInterval = 5 * time.Millisecond
	if cfg.FoldTimeout == 0 {
		cfg.FoldTimeout = 10 * time.Second
	}
	p, err := New(cfg, Deps{JS: r.js, Layout: r.layout, Store: r.store, Summarizer: r.sum, Log: r.log, Clock: SystemClock{},
		Registry: r.reg, Breaker: r.breaker})
	if err != nil {
		r.t.Fatal(err)
	}
	return p, brokertest.RunEngine(r.t, p)
}

func (r *rig) publish(subject string, v any, msgID string) {
	r.t.Helper()
	data, ok := v.([]byte)
	if !ok {
		var err error
		if data, err = json.Marshal(v); err != nil {
			r.t.Fatal(err)
		}
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	if _, err := r.js.Publish(context.Background(), subject, data, opts...); err != nil {
		r.t.Fatalf("publish %s: %v", subject, err)
	}
}

var t0 = time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)

// turns publishes n more turns to session, numbered from where it left off.
func (r *rig) turns(session string, n int) {
	r.t.Helper()
	speakers := []string{"Alice", "Bob"}
	for range n {
		r.mu.Lock()
		i := r.seq[session]
		r.seq[session]++
		r.mu.Unlock()
		id := fmt.Sprintf("%s-t%03d", session, i)
		r.publish(r.layout.Subjects.In(session, events.KindTurn), events.Turn{
			V: 1, Session: session, TurnID: id, At: t0.Add(time.Duration(i) * 10 * time.Second),
			Speaker: speakers[i%2], Role: "user", Text: fmt.Sprintf("message number %03d from %s", i, speakers[i%2]),
		}, id)
	}
}

func (r *rig) note(session, id, source, text string, at time.Time) {
	r.t.Helper()
	r.publish(r.layout.Subjects.In(session, events.KindNote), events.Note{V: 1, Session: session, NoteID: id, At: at, Source: source, Text: text}, id)
}

func (r *rig) control(session, op string, cfg *events.SessionConfig) {
	r.t.Helper()
	r.publish(r.layout.Subjects.In(session, events.KindControl), events.Control{V: 1, Session: session, Op: op, Config: cfg}, "")
}

// checkpoint reads the session's KV state.
func (r *rig) checkpoint(session string) *state.Session {
	r.t.Helper()
	s, _, err := r.store.Load(context.Background(), session)
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

// eventually polls cond until it holds or the deadline passes.
func (r *rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	brokertest.Eventually(r.t, what, cond)
}

// waitCheckpoint waits until the checkpoint has applied total turns with
// nothing in flight.
func (r *rig) waitSettled(session string, total int64, cursor int64) *state.Session {
	r.t.Helper()
	var s *state.Session
	r.eventually(fmt.Sprintf("%s: total %d cursor %d", session, total, cursor), func() bool {
		s = r.checkpoint(session)
		return s.Total == total && s.Cursor == cursor && s.Lease == nil
	})
	return s
}

// outbound returns the session's outbound messages of kind, in order.
func (r *rig) outbound(session, kind string) []*jetstream.RawStreamMsg {
	r.t.Helper()
	ctx := context.Background()
	s, err := r.js.Stream(ctx, r.layout.Out)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	subject := r.layout.Subjects.Out(session, kind)
	info, err := s.Info(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		if m.Subject == subject {
			out = append(out, m)
		}
	}
	return out
}

func (r *rig) summaries(session string) []events.SummaryUpdated {
	r.t.Helper()
	var out []events.SummaryUpdated
	for _, m := range r.outbound(session, events.KindSummary) {
		var ev events.SummaryUpdated
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func (r *rig) lifecycle(session string) []events.Lifecycle {
	r.t.Helper()
	var out []events.Lifecycle
	for _, m := range r.outbound(session, events.KindEvent) {
		var ev events.Lifecycle
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func (r *rig) deadLetters() []*jetstream.RawStreamMsg {
	r.t.Helper()
	ctx := context.Background()
	s, err := r.js.Stream(ctx, r.layout.DLQ)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
		if m, err := s.GetMsg(ctx, seq); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// foldedRange returns the first and last message numbers a summarizer
// request carried.
func foldedRange(req openaitest.Request) (string, string) {
	nums := msgNum.FindAllStringSubmatch(req.Content(), -1)
	if len(nums) == 0 {
		return "", ""
	}
	return nums[0][1], nums[len(nums)-1][1]
}

func hasType(evs []events.Lifecycle, typ, reason string) bool {
	for _, e := range evs {
		if e.Type == typ && (reason == "" || e.Reason == reason) {
			return true
		}
	}
	return false
}

var _ = strings.Contains

var testLogLevel = zerolog.WarnLevel
