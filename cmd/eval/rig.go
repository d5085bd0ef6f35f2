package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/tokens"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

// rig is what the evaluation runs against: an embedded nats-server with
// file storage in a temporary directory, foldstream's streams, the
// processor with its defaults (mode window, 50 recent turns, batches of
// 10, a 1,200-char summary, the offline summarizer, cl100k_base token
// counts) and the context service, all in this process, as the tests and
// cmd/bench run them. A bot publishes through client.Publisher and a
// prompt builder asks through the service's subjects, each on its own
// connection.
type rig struct {
	ns      *server.Server
	dir     string
	conns   []*nats.Conn
	js      jetstream.JetStream // the processor's
	pub     *client.Publisher
	builder *client.Builder
	bnc     *nats.Conn // the builder's connection
	window  fold.Window
	stop    context.CancelFunc
	done    chan error
	svc     micro.Service
}

// startRig starts everything (maxSummaryChars > 0 overrides the
// processor's summary budget) and returns once the processor consumes and
// the service answers.
func startRig(ctx context.Context, log zerolog.Logger, maxSummaryChars int) (_ *rig, err error) {
	r := &rig{window: fold.DefaultWindow(), done: make(chan error, 1)}
	if maxSummaryChars > 0 {
		r.window.MaxSummaryChars = maxSummaryChars
	}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	if r.dir, err = os.MkdirTemp("", "foldstream-eval-"); err != nil {
		return nil, err
	}
	if r.ns, err = broker.StartEmbedded(broker.EmbeddedConfig{StoreDir: r.dir, Port: -1, NoListen: true}); err != nil {
		return nil, err
	}
	connect := func(name string) (*nats.Conn, jetstream.JetStream, error) {
		nc, err := broker.Connect(broker.ConnConfig{Name: name}, r.ns, log)
		if err != nil {
			return nil, nil, err
		}
		r.conns = append(r.conns, nc)
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
		return nc, js, err
	}
	nc, js, err := connect("foldstream-processor")
	if err != nil {
		return nil, err
	}
	r.js = js
	subjects, err := events.NewSubjects(events.DefaultPrefix)
	if err != nil {
		return nil, err
	}
	layout := broker.NewLayout(subjects)
	kv, err := broker.Provision(ctx, js, layout, broker.ProvisionConfig{}, log)
	if err != nil {
		return nil, err
	}
	store := state.NewStore(js, kv)
	counter, err := tokens.New(tokens.Default)
	if err != nil {
		return nil, err
	}
	_, fjs, err := connect("foldstream-processor-folds")
	if err != nil {
		return nil, err
	}
	// Fields left zero take the processor's defaults; the window is seed
	// 000's (with -max-summary-chars, if given). The offline summarizer is
	// CPU-bound, so folds run one per two cores, as cmd/processor runs
	// them. The service's options (recall index budget) are its defaults,
	// which are cmd/processor's.
	p, err := processor.New(processor.Config{Window: r.window, MaxConcurrentFolds: max(1, runtime.NumCPU()/2)}, processor.Deps{
		JS: js, FoldJS: fjs, Layout: layout, Store: store, Summarizer: offline.New(), Tokens: counter,
		Log: log, Clock: processor.SystemClock{},
	})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- p.Run(pctx) }()
	select {
	case <-p.Ready():
	case err := <-r.done:
		r.done <- err
		return nil, fmt.Errorf("processor stopped before it was ready: %v", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if r.svc, err = service.Start(pctx, nc, js, layout, store, counter, log); err != nil {
		return nil, err
	}
	_, bjs, err := connect("eval-bot")
	if err != nil {
		return nil, err
	}
	if r.pub, err = client.NewPublisher(bjs, client.MaxPending(1024)); err != nil {
		return nil, err
	}
	var cjs jetstream.JetStream
	if r.bnc, cjs, err = connect("eval-builder"); err != nil {
		return nil, err
	}
	if r.builder, err = client.NewBuilder(r.bnc, cjs, client.RequestTimeout(30*time.Second)); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rig) close() {
	if r.pub != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = r.pub.Close(ctx)
		cancel()
	}
	if r.svc != nil {
		_ = r.svc.Stop()
	}
	if r.stop != nil {
		r.stop()
		<-r.done
	}
	for _, nc := range r.conns {
		nc.Close()
	}
	if r.ns != nil {
		r.ns.Shutdown()
		r.ns.WaitForShutdown()
	}
	if r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// T0 is the time of every session's first turn; turns follow turnGap
// apart (about a meeting's pace: 800 turns in an hour).
var (
	T0      = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	turnGap = 5 * time.Second
)

// at is when session turn i was said (rig.publish). With m.sitting turns
// a sitting (-sitting), each sitting is said on the next day at T0's hour
// from a year before T0 (no turn dated ahead of the clock): a meeting
// replayed as a chat of many days.
func (m *meeting) at(i int) time.Time {
	if m.sitting <= 0 {
		return T0.Add(time.Duration(i) * turnGap)
	}
	return T0.AddDate(-1, 0, i/m.sitting).Add(time.Duration(i%m.sitting) * turnGap)
}

var sessionUnsafe = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// sessionID is the meeting's session: "qmsum-" and its file name.
func sessionID(m *meeting) string { return "qmsum-" + sessionUnsafe.ReplaceAllString(m.Name, "_") }

// publish replays a meeting as a bot would: one session, every turn in
// order with its speaker and an increasing time, acknowledged by the
// stream.
func (r *rig) publish(ctx context.Context, m *meeting) error {
	s := sessionID(m)
	for i, t := range m.Turns {
		err := r.pub.PublishTurnAsync(client.Turn{
			V: client.WireVersion, Session: s, TurnID: fmt.Sprintf("t%05d", i),
			At: m.at(i), Speaker: t.Speaker, Role: "user", Kind: "speech", Text: t.Text,
		})
		if err != nil {
			return fmt.Errorf("%s turn %d: %w", m.Name, i, err)
		}
	}
	return r.pub.Flush(ctx)
}

// settle waits until the processor has applied every turn of the meeting
// and folding has stopped: no fold in flight and no fold due (window mode
// folds while more than recent+batch turns are unfolded). If the cursor
// stops moving with a fold still due for quiet seconds, that is taken as
// settled too, and said.
func (r *rig) settle(ctx context.Context, m *meeting, quiet time.Duration) (*client.SessionInfo, error) {
	s, total := sessionID(m), int64(len(m.Turns))
	var last *client.SessionInfo
	lastChange := time.Now()
	for {
		info, err := r.builder.Session(ctx, s)
		if err != nil && !client.IsUnknownSession(err) {
			return nil, err
		}
		if info != nil {
			if info.TotalTurns == total && info.Lease == nil && info.TotalTurns-info.Cursor <= int64(r.window.Recent+r.window.Batch) {
				return info, nil
			}
			if last == nil || info.Cursor != last.Cursor || info.TotalTurns != last.TotalTurns || info.Version != last.Version {
				lastChange = time.Now()
			} else if info.TotalTurns == total && info.Lease == nil && time.Since(lastChange) > quiet {
				return info, fmt.Errorf("%s: settled with %d turns unfolded (cursor %d of %d, no fold for %s)", m.Name, total-info.Cursor, info.Cursor, total, quiet)
			}
			last = info
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: waiting for the processor (last: %+v): %w", m.Name, last, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reply is a context reply and its round trip.
type reply struct {
	ctx  *client.Context
	took time.Duration
}

// context asks fold.svc.context, as a prompt builder does on the wire,
// and times the round trip.
func (r *rig) context(ctx context.Context, req client.ContextRequest) (reply, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return reply{}, err
	}
	started := time.Now()
	msg, err := r.bnc.RequestWithContext(ctx, client.ServiceSubject(client.DefaultPrefix, client.EndpointContext), data)
	took := time.Since(started)
	if err != nil {
		return reply{}, fmt.Errorf("context of %s: %w", req.Session, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return reply{}, &client.ServiceError{Code: code, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	var c client.Context
	if err := json.Unmarshal(msg.Data, &c); err != nil {
		return reply{}, fmt.Errorf("context of %s: decode: %w", req.Session, err)
	}
	return reply{ctx: &c, took: took}, nil
}

// queryAware reports whether the service packs by query: one that does
// refuses an over-long query with a 400 naming the field; one that does
// not ignores the field and answers.
func (r *rig) queryAware(ctx context.Context, session string) (bool, error) {
	_, err := r.context(ctx, client.ContextRequest{Session: session, Query: strings.Repeat("q", client.MaxContextQueryChars+1)})
	var se *client.ServiceError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &se) && se.Code == client.ErrCodeBadRequest && strings.Contains(se.Description, "query"):
		return true, nil
	default:
		return false, err
	}
}
