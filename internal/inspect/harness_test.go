package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/demo"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// rig is a real foldstream in-process: a nats-server, the processor with
// the offline summarizer, the context service, and the inspector on an
// httptest server.
type rig struct {
	t    testing.TB
	env  *testenv.Env
	cfg  processor.Config
	ins  *Server
	http *httptest.Server
	// stop stops the processor (the service and inspector stay up).
	stop func()
}

// testWindow folds at 41, 51, … turns: a short session shows several
// folds.
var testWindow = fold.Window{Recent: 30, Batch: 10, MaxSummaryChars: 1200}

func newRig(t testing.TB, text string) *rig {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	e := testenv.New(t, testenv.Options{Log: &log})
	cfg := processor.Config{Mode: fold.ModeWindow, Window: testWindow, FlushInterval: 5 * time.Millisecond, RecallEnabled: true}
	p, err := processor.New(cfg, processor.Deps{JS: e.JS, Layout: e.Layout, Store: e.Store, Summarizer: offline.New(),
		Log: log, Clock: processor.SystemClock{}, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	stop := brokertest.RunEngine(t, p)
	ctx, cancelSvc := context.WithCancel(context.Background())
	t.Cleanup(cancelSvc)
	if _, err := service.Start(ctx, e.NC, e.JS, e.Layout, e.Store, nil, log); err != nil {
		t.Fatal(err)
	}
	ins, err := New(Config{
		NC: e.NC, JS: e.JS, Layout: e.Layout, KV: e.KV, Text: text, Log: log,
		WhatIf: WhatIfConfig{Base: cfg, Summarizers: map[string]func() (fold.Summarizer, error){
			"offline": func() (fold.Summarizer, error) { return offline.New(), nil },
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ins.Handler())
	t.Cleanup(func() {
		ins.Close()
		hs.Close()
	})
	return &rig{t: t, env: e, cfg: cfg, ins: ins, http: hs, stop: stop}
}

// conversation publishes the demo bot's conversation (turns and notes) to
// session and waits for the summaries window mode makes of it and for the
// checkpoint that covers every turn.
func (r *rig) conversation(session string, turns int) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err := demo.Run(ctx, r.env.NC, r.env.JS, r.env.Layout.Subjects, demo.Config{
		Session: session, Turns: turns, Seed: 7, Notes: true, Recent: testWindow.Recent, Batch: testWindow.Batch,
	}, io.Discard, zerolog.Nop())
	if err != nil {
		r.t.Fatal(err)
	}
	r.env.Eventually(fmt.Sprintf("the checkpoint of %s at %d turns", session, turns), func() bool {
		e, err := r.env.KV.Get(context.Background(), session)
		if err != nil {
			return false
		}
		cp, err := state.Decode(session, e.Value())
		return err == nil && cp.Total == int64(turns) && cp.Lease == nil
	})
}

// moreTurns publishes n more turns to session, as a bot would.
func (r *rig) moreTurns(session string, n int) {
	r.t.Helper()
	for i := range n {
		data, _ := json.Marshal(events.Turn{V: 1, Session: session, TurnID: fmt.Sprintf("more-%d", i), At: time.Now().UTC(),
			Speaker: "Lena", Role: "user", Text: fmt.Sprintf("one more thing, number %d: the cabin has a grill after all", i)})
		if _, err := r.env.JS.Publish(context.Background(), r.env.Layout.Subjects.In(session, events.KindTurn), data); err != nil {
			r.t.Fatal(err)
		}
	}
}

// reject publishes a turn without a speaker, which the processor
// dead-letters, and waits until it is in the dead-letter stream.
func (r *rig) reject(session string) {
	r.t.Helper()
	ctx := context.Background()
	data, _ := json.Marshal(map[string]any{"v": 1, "session": session, "turn_id": "no-speaker-1", "at": time.Now().UTC(), "role": "user", "text": "who am I?"})
	ack, err := r.env.JS.Publish(ctx, r.env.Layout.Subjects.In(session, events.KindTurn), data)
	if err != nil {
		r.t.Fatal(err)
	}
	r.env.Eventually("the rejected turn in "+r.env.Layout.DLQ, func() bool {
		return r.streamCount(r.env.Layout.DLQ, r.env.Layout.Subjects.DeadLetter(session)) == 1
	})
	// The processor acknowledges a rejected event after its copy is in the
	// dead-letter stream: until then the inspector rightly shows it as lag.
	st, err := r.env.JS.Stream(ctx, r.env.Layout.In)
	if err != nil {
		r.t.Fatal(err)
	}
	r.env.Eventually("the rejected turn acknowledged", func() bool {
		floor, err := ackFloor(ctx, st)
		return err == nil && floor >= ack.Sequence
	})
}

func (r *rig) streamCount(stream, filter string) uint64 {
	r.t.Helper()
	st, err := r.env.JS.Stream(context.Background(), stream)
	if err != nil {
		r.t.Fatal(err)
	}
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(filter))
	if err != nil {
		r.t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// get fetches path from the inspector and decodes the JSON reply into out,
// failing the test unless the status is want.
func (r *rig) get(path string, header http.Header, want int, out any) {
	r.t.Helper()
	r.do(http.MethodGet, path, header, "", want, out)
}

func (r *rig) do(method, path string, header http.Header, body string, want int, out any) {
	r.t.Helper()
	req, err := http.NewRequest(method, r.http.URL+path, strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	if res.StatusCode != want {
		r.t.Fatalf("%s %s: status %d, want %d: %s", method, path, res.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			r.t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
}

// liveState is what a what-if refold must leave untouched on the live
// server: every stream's message count and last sequence, the bucket's
// included.
func (r *rig) liveState() string {
	r.t.Helper()
	ctx := context.Background()
	var b strings.Builder
	for _, name := range []string{r.env.Layout.In, r.env.Layout.Out, r.env.Layout.DLQ, "KV_" + r.env.Layout.Bucket} {
		st, err := r.env.JS.Stream(ctx, name)
		if err != nil {
			r.t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			r.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s msgs=%d last=%d\n", name, info.State.Msgs, info.State.LastSeq)
	}
	return b.String()
}
