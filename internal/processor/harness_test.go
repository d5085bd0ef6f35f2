package processor

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// rig is the one test harness (testenv.Env: a real in-process
// nats-server with foldstream's streams, its store and helpers) plus a
// chat-completions server behind the real go-openai client, and start,
// which reaches the processor's internals as servicetest (a package that
// imports this one) cannot.
type rig struct {
	*testenv.Env
	t   *testing.T
	llm *openaitest.Server
	sum fold.Summarizer
	// On a cluster (NS nil): the replicas of buckets the test creates.
	replicas int
	// Optional deps for start: a metrics registry and the summarizer's
	// breaker (nil: the processor's own).
	reg     prometheus.Registerer
	breaker *retry.Breaker
}

func newRig(t *testing.T) *rig {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(testLogLevel)
	return rigOn(t, testenv.New(t, testenv.Options{Log: &log}))
}

// rigOn is a rig over env, its summarizer answering with echoSummary.
func rigOn(t *testing.T, env *testenv.Env) *rig {
	r := &rig{Env: env, t: t}
	r.llm = openaitest.New(t)
	r.llm.SetFunc(func(n int, req openaitest.Request) openaitest.Reply { return openaitest.OK(echoSummary(req)) })
	r.sum = r.summarizer(retry.Policy{MaxAttempts: 1})
	return r
}

func (r *rig) summarizer(p retry.Policy) fold.Summarizer {
	s, err := openai.New(openai.Config{BaseURL: r.llm.URL, APIKey: "k", Model: "fold-mini", Timeout: 5 * time.Second, Retry: p}, r.Log)
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
	p, err := New(cfg, Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log, Clock: SystemClock{},
		Registry: r.reg, Breaker: r.breaker})
	if err != nil {
		r.t.Fatal(err)
	}
	return p, brokertest.RunEngine(r.t, p)
}

// t0 is the timestamp of the first turn Turns makes.
var t0 = testenv.T0

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

var testLogLevel = zerolog.WarnLevel
