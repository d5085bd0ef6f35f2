package crashtest

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// binary is the processor built once for every test of this package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "foldstream-crashtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "processor")
	build := exec.Command("go", "build", "-o", binary, "github.com/foldstream/foldstream/cmd/processor")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "crashtest: go build ./cmd/processor: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// The window every harness session is folded with: small, so that folds
// are frequent.
const recent, batch = 6, 4

// world is one in-process nats-server (listening on loopback), the fake
// model, and the processor binary run as a child process against them.
type world struct {
	t      *testing.T
	ns     *server.Server
	nc     *nats.Conn
	js     jetstream.JetStream
	kv     jetstream.KeyValue
	env    Env
	model  *Model
	logDir string
	runs   int
	logs   bytes.Buffer // every incarnation's stderr
	logsMu sync.Mutex
	// url, if set, is the processor's --nats-url (a cluster's); keep, if
	// set, chooses the log lines kept (a long run keeps the warnings).
	url  string
	keep func(line string) bool
	// startWait bounds the wait for an incarnation to start consuming
	// (20 s when zero).
	startWait time.Duration
}

func newWorld(t *testing.T, seed uint64, maxDelay time.Duration) *world {
	t.Helper()
	b := brokertest.Start(t, brokertest.Options{Listen: true, Name: "crashtest"})
	ns, nc, js, kv, layout := b.NS, b.NC, b.JS, b.KV, b.Layout
	w := &world{t: t, ns: ns, nc: nc, js: js, kv: kv, logDir: t.TempDir(),
		env: Env{JS: js, Layout: layout, Store: state.NewStore(js, kv)}}
	w.model = NewModel(t, seed, maxDelay)
	return w
}

// child is one incarnation of the processor.
type child struct {
	cmd   *exec.Cmd
	ready chan struct{}
	done  chan struct{}
	err   error
}

// lineWriter hands complete lines of a child's stderr to fn.
type lineWriter struct {
	buf []byte
	fn  func(line string)
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.fn(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

func (w *world) start(extra ...string) *child {
	w.t.Helper()
	w.runs++
	url := w.url
	if url == "" {
		url = w.ns.ClientURL()
	}
	args := []string{
		"--nats-url", url,
		"--summarizer", "openai", "--openai-base-url", w.model.URL, "--openai-api-key", "k", "--openai-model", "fold-mini",
		"--metrics-addr=", "--fold-timeout", "3s", "--lease-ttl", "4s", "--flush-interval", "5ms",
		"--tokenizer", "heuristic", "--log-level", "info",
		"--recent-window", strconv.Itoa(recent), "--batch-size", strconv.Itoa(batch),
	}
	cmd := exec.Command(binary, append(args, extra...)...)
	// The child's settings come from its flags only.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FOLDSTREAM_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	c := &child{cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	run := w.runs
	var once sync.Once
	cmd.Stderr = &lineWriter{fn: func(line string) {
		if w.keep == nil || w.keep(line) {
			w.logsMu.Lock()
			fmt.Fprintf(&w.logs, "[run %d] %s\n", run, line)
			w.logsMu.Unlock()
		}
		if strings.Contains(line, `"event":"processor_started"`) {
			once.Do(func() { close(c.ready) })
		}
	}}
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c
}

// waitReady waits until the child consumes; false if it exited first.
func (w *world) waitReady(c *child) bool {
	select {
	case <-c.ready:
		return true
	case <-c.done:
		return false
	case <-time.After(cmp.Or(w.startWait, 20*time.Second)):
		return false
	}
}

func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
}

// stop ends the child gracefully (SIGTERM) and returns its exit error.
func (c *child) stop() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return c.err
	case <-time.After(30 * time.Second):
		c.kill()
		return fmt.Errorf("no exit within 30s of SIGTERM")
	}
}

func (w *world) logText() string {
	w.logsMu.Lock()
	defer w.logsMu.Unlock()
	return w.logs.String()
}

// dumpLogs writes the children's logs to a file kept on failure.
func (w *world) dumpLogs() {
	if !w.t.Failed() {
		return
	}
	f := filepath.Join(os.TempDir(), fmt.Sprintf("foldstream-crashtest-%d.log", time.Now().UnixNano()))
	if err := os.WriteFile(f, []byte(w.logText()), 0o644); err == nil {
		w.t.Logf("processor logs: %s", f)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestCrashSafety kills the processor (SIGKILL) at random points during
// ingest and folds while a bot publishes turns for several sessions, many
// times, then checks that every turn is counted exactly once, every batch
// is folded into exactly one summary version, versions and cursors only go
// forward, and no lease is left behind. FOLDSTREAM_SOAK=1 (make soak) runs
// 200 kills (FOLDSTREAM_SOAK_KILLS overrides); FOLDSTREAM_CRASH_SEED
// replays a run.
func TestCrashSafety(t *testing.T) {
	kills, sessions := 20, 4
	if os.Getenv("FOLDSTREAM_SOAK") != "" {
		kills, sessions = envInt("FOLDSTREAM_SOAK_KILLS", 200), 6
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("FOLDSTREAM_CRASH_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (replay with FOLDSTREAM_CRASH_SEED=%d), %d kills, %d sessions", seed, seed, kills, sessions)
	began := time.Now()

	w := newWorld(t, seed, 30*time.Millisecond)
	defer w.dumpLogs()
	ctx := context.Background()
	watcher, err := Watch(ctx, w.kv, batch)
	if err != nil {
		t.Fatal(err)
	}
	// The model tells the killer when a fold reaches it.
	calls := make(chan Call, 1)
	w.model.OnCall(func(c Call) {
		select {
		case calls <- c:
		default:
		}
	})

	names := make([]string, sessions)
	for i := range names {
		names[i] = fmt.Sprintf("s%d", i)
	}
	// The bot: turns at random to random sessions, a few re-published
	// (with Nats-Msg-Id: the stream drops them; without: the processor
	// must drop them by turn id).
	var (
		pubMu     sync.Mutex
		published = map[string]int{}
		dups      int
		pubErr    error
	)
	stopPub := make(chan struct{})
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		rng := rand.New(rand.NewPCG(seed, 2))
		for {
			select {
			case <-stopPub:
				return
			case <-time.After(time.Duration(3+rng.IntN(5)) * time.Millisecond):
			}
			s := names[rng.IntN(len(names))]
			pubMu.Lock()
			n := published[s]
			pubMu.Unlock()
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			var err error
			if n > 0 && rng.IntN(20) == 0 {
				_, err = Publish(pctx, w.js, w.env.Layout.Subjects, s, max(0, n-1-rng.IntN(20)), rng.IntN(2) == 0)
				pubMu.Lock()
				dups++
				pubMu.Unlock()
			} else if _, err = Publish(pctx, w.js, w.env.Layout.Subjects, s, n, true); err == nil {
				pubMu.Lock()
				published[s]++
				pubMu.Unlock()
			}
			cancel()
			if err != nil {
				pubMu.Lock()
				pubErr = err
				pubMu.Unlock()
				return
			}
		}
	}()

	rng := rand.New(rand.NewPCG(seed, 1))
	modes := map[string]int{}
	for i := range kills {
		c := w.start()
		mode := []string{"startup", "startup", "anytime", "anytime", "mid-fold", "mid-fold", "mid-fold",
			"after-answer", "after-answer", "after-answer"}[rng.IntN(10)]
		modes[mode]++
		if mode == "startup" {
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		} else {
			if !w.waitReady(c) {
				t.Fatalf("incarnation %d did not start: %v\n%s", w.runs, c.err, tail(w.logText(), 40))
			}
			switch mode {
			case "anytime":
				time.Sleep(time.Duration(20+rng.IntN(700)) * time.Millisecond)
			default:
				// Kill while the model is answering, or just after it
				// answered: between the answer, the summary's publish and
				// the checkpoint that clears the lease.
				select {
				case <-calls:
				default:
				}
				select {
				case call := <-calls:
					if mode == "mid-fold" {
						time.Sleep(time.Duration(rng.Int64N(int64(call.Delay) + 1)))
					} else {
						time.Sleep(call.Delay + time.Duration(rng.IntN(3000))*time.Microsecond)
					}
				case <-time.After(1500 * time.Millisecond):
				}
			}
		}
		select {
		case <-c.done:
			t.Fatalf("incarnation %d exited by itself: %v\n%s", w.runs, c.err, tail(w.logText(), 40))
		default:
		}
		c.kill()
		if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
		if i%5 == 4 {
			pubMu.Lock()
			t.Logf("%d kills, %d turns published, %s", i+1, sum(published), time.Since(began).Round(time.Millisecond))
			pubMu.Unlock()
		}
	}
	close(stopPub)
	<-pubDone
	if pubErr != nil {
		t.Fatalf("publish: %v", pubErr)
	}

	// The last incarnation runs to the end.
	final := w.start()
	if !w.waitReady(final) {
		t.Fatalf("final incarnation did not start: %v\n%s", final.err, tail(w.logText(), 40))
	}
	expects := make([]Expect, len(names))
	for i, s := range names {
		expects[i] = Expect{Session: s, Turns: published[s], Recent: recent, Batch: batch, MaxSummaryChars: 1200}
	}
	// No more events: folds interrupted by the last kill must resume on
	// their own once their leases expire.
	settle(t, w.env, expects, 45*time.Second)
	if err := final.stop(); err != nil {
		t.Errorf("graceful stop of the final incarnation: %v", err)
	}

	for _, e := range expects {
		for _, p := range Verify(ctx, w.env, w.model, e) {
			t.Error(p)
		}
	}
	problems, updates := watcher.Stop()
	for _, p := range problems {
		t.Error("checkpoint write: " + p)
	}
	logs := w.logText()
	for _, bad := range []string{"panic:", "fatal error:", "DATA RACE", `"event":"state_inconsistent"`} {
		if strings.Contains(logs, bad) {
			t.Errorf("processor logs contain %q", bad)
		}
	}
	// After a graceful stop every applied event is acknowledged.
	cons, err := w.js.Consumer(ctx, w.env.Layout.In, "foldstream")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.NumAckPending != 0 || ci.NumPending != 0 {
		t.Errorf("after the final graceful stop: %d unacknowledged, %d undelivered", ci.NumAckPending, ci.NumPending)
	}

	refolds, versions := 0, 0
	for _, e := range expects {
		refolds += Refolds(w.model, e.Session)
		versions += int(FinalCursor(e.Turns, recent, batch)) / batch
	}
	t.Logf("%d kills %v, %d turns + %d re-published, %d summary versions, %d model calls (%d batches asked again after a kill), "+
		"%d checkpoint writes watched, %d summaries recovered, %d expired leases taken over; %s",
		kills, modes, sum(published), dups, versions, len(w.model.Calls()), refolds, updates,
		strings.Count(logs, `"event":"summary_recovered"`), strings.Count(logs, `"event":"lease_expired"`), time.Since(began).Round(time.Millisecond))
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// settle waits until every session has applied all its turns and folded
// every eligible batch, with nothing in flight.
func settle(t *testing.T, env Env, expects []Expect, within time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for {
		var status []string
		for _, e := range expects {
			s, _, err := env.Store.Load(ctx, e.Session)
			if err != nil {
				t.Fatal(err)
			}
			if !Settled(s, e) {
				status = append(status, fmt.Sprintf("%s: total %d/%d cursor %d/%d lease %v", e.Session, s.Total, e.Turns,
					s.Cursor, FinalCursor(e.Turns, e.Recent, e.Batch), s.Lease != nil))
			}
		}
		if len(status) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not settled after %s: %s", within, strings.Join(status, "; "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
