package crashtest

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	soakDuration = flag.Duration("soak-duration", 0, "TestSoak: how long the bot publishes under faults (make soak: 1h); 0 skips it")
	soakSessions = flag.Int("soak-sessions", 1000, "TestSoak: sessions the bot publishes to")
	soakRate     = flag.Int("soak-rate", 100, "TestSoak: turns per second over all sessions")
	soakKill     = flag.Duration("soak-kill-every", 3*time.Minute, "TestSoak: the processor is SIGKILLed and restarted this often")
	soakLeader   = flag.Duration("soak-leader-every", 7*time.Minute, "TestSoak: the inbound stream's leader node is shut down (and restarted 15 s later) this often")
	soakStart    = flag.Duration("soak-start-wait", 2*time.Minute, "TestSoak: how long a restarted processor may take to start consuming (a busy machine starves the cluster and the child)")
)

// metrics reads the processor's resident memory and goroutines from its
// /metrics.
func metrics(addr string) (rss, goroutines float64, err error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "process_resident_memory_bytes":
			rss = v
		case "go_goroutines":
			goroutines = v
		}
	}
	return rss, goroutines, sc.Err()
}

// selfRSS is this process's resident memory (the cluster, the bot, the
// model) from /proc.
func selfRSS() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}

// TestSoak runs the processor binary for -soak-duration against a 3-node
// cluster (streams and bucket with 3 replicas) while a bot publishes to
// -soak-sessions sessions, under random faults: the model answers 5xx
// (3% of folds) or hangs past the fold timeout (1%), the processor is
// SIGKILLed and restarted every -soak-kill-every, and the node leading
// the inbound stream is shut down every -soak-leader-every (restarted
// 15 s later). Every minute it prints the processor's RSS and goroutines.
// At the end, faults off, it waits for every session to settle and runs
// the exactly-once check of TestCrashSafety on every session: every
// turn counted once, every batch folded into exactly one summary version,
// checkpoints only forward. make soak runs it for an hour.
func TestSoak(t *testing.T) {
	if *soakDuration == 0 {
		t.Skip("make soak runs it (-soak-duration)")
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("FOLDSTREAM_CRASH_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d, %s, %d sessions, %d turns/s, processor SIGKILL every %s, stream leader shut down every %s",
		seed, *soakDuration, *soakSessions, *soakRate, *soakKill, *soakLeader)
	began := time.Now()
	ctx := context.Background()
	cl := brokertest.NewCluster(t, "foldstream-soak", nil)
	url := strings.Join(cl.URLs, ",")
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The cluster's JetStream answers once its meta group has a leader.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(actx)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster JetStream not ready: %v", err)
		}
	}
	subjects, _ := events.NewSubjects("")
	layout := broker.NewLayout(subjects)
	w := &world{t: t, nc: nc, js: js, logDir: t.TempDir(), url: url, env: Env{JS: js, Layout: layout},
		keep: func(line string) bool {
			return !strings.Contains(line, `"level":"info"`) && !strings.Contains(line, `"level":"debug"`)
		}, startWait: *soakStart}
	w.model = NewModel(t, seed, 30*time.Millisecond)
	defer w.dumpLogs()

	var faults, fives, hangs atomic.Int64
	var faultMu sync.Mutex
	frng := rand.New(rand.NewPCG(seed, 3))
	var faultsOn atomic.Bool
	faultsOn.Store(true)
	w.model.SetFault(func(Call) *openaitest.Reply {
		if !faultsOn.Load() {
			return nil
		}
		faultMu.Lock()
		n := frng.IntN(100)
		faultMu.Unlock()
		switch {
		case n < 3:
			faults.Add(1)
			fives.Add(1)
			return &openaitest.Reply{Status: 500 + n, ErrMessage: "soak: injected server error", ErrType: "server_error"}
		case n < 4:
			faults.Add(1)
			hangs.Add(1)
			return &openaitest.Reply{Hang: true}
		}
		return nil
	})

	metricsAddr := fmt.Sprintf("127.0.0.1:%d", brokertest.LoopbackPort(t))
	extra := []string{"--replicas", "3", "--metrics-addr", metricsAddr}
	proc := w.start(extra...)
	if !w.waitReady(proc) {
		t.Fatalf("processor did not start: %v\n%s", proc.err, tail(w.logText(), 40))
	}
	kv, err := js.KeyValue(ctx, layout.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	w.kv = kv
	w.env.Store = state.NewStore(js, kv)
	watcher, err := Watch(ctx, kv, batch)
	if err != nil {
		t.Fatal(err)
	}

	// The bot: publishers share the sessions; a publish that fails (a
	// node down, a leader election) is retried with the same message id
	// until the stream acknowledges it, so that it is stored once.
	names := make([]string, *soakSessions)
	for i := range names {
		names[i] = fmt.Sprintf("soak%04d", i)
	}
	published := make([]atomic.Int64, len(names))
	var retries atomic.Int64
	stop := make(chan struct{})
	var bots sync.WaitGroup
	const publishers = 8
	for p := range publishers {
		bots.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(10+p)))
			every := time.Duration(float64(time.Second) * publishers / float64(*soakRate))
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				i := p + publishers*rng.IntN(len(names)/publishers)
				n := int(published[i].Load())
				for {
					pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := Publish(pctx, js, layout.Subjects, names[i], n, true)
					cancel()
					if err == nil {
						break
					}
					retries.Add(1)
					select {
					case <-stop:
						// Not acknowledged: it may be stored or not. The
						// last try is repeated once more below.
						for {
							pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
							_, err := Publish(pctx, js, layout.Subjects, names[i], n, true)
							cancel()
							if err == nil {
								published[i].Add(1)
								return
							}
							time.Sleep(200 * time.Millisecond)
						}
					case <-time.After(100 * time.Millisecond):
					}
				}
				published[i].Add(1)
			}
		})
	}
	total := func() int64 {
		var n int64
		for i := range published {
			n += published[i].Load()
		}
		return n
	}

	kills, leaderKills := 0, 0
	end := began.Add(*soakDuration)
	nextKill, nextLeader, nextReport := began.Add(*soakKill), began.Add(*soakLeader), began.Add(time.Minute)
	var firstRSS, lastRSS float64
	report := func() {
		rss, gr, err := metrics(metricsAddr)
		if err != nil {
			t.Logf("%s: metrics: %v", time.Since(began).Round(time.Second), err)
			return
		}
		if firstRSS == 0 {
			firstRSS = rss
		}
		lastRSS = rss
		t.Logf("%6s  processor RSS %6.1f MiB  goroutines %5.0f | test process (cluster, bot, model) RSS %6.1f MiB goroutines %d | turns %d, model calls %d (faults %d), kills %d, leader shut-downs %d, publish retries %d",
			time.Since(began).Round(time.Second), rss/(1<<20), gr, selfRSS()/(1<<20), runtime.NumGoroutine(), total(),
			len(w.model.Calls()), faults.Load(), kills, leaderKills, retries.Load())
	}
	for now := time.Now(); now.Before(end); now = time.Now() {
		select {
		case <-proc.done:
			t.Fatalf("processor exited by itself: %v\n%s", proc.err, tail(w.logText(), 40))
		case <-time.After(time.Second):
		}
		switch {
		case now.After(nextReport):
			report()
			nextReport = nextReport.Add(time.Minute)
		case now.After(nextKill):
			proc.kill()
			kills++
			proc = w.start(extra...)
			if !w.waitReady(proc) {
				t.Fatalf("incarnation %d did not start: %v\n%s", w.runs, proc.err, tail(w.logText(), 40))
			}
			nextKill = nextKill.Add(*soakKill)
		case now.After(nextLeader):
			st, err := js.Stream(ctx, layout.In)
			if err != nil {
				t.Logf("stream info: %v", err)
				nextLeader = nextLeader.Add(time.Minute)
				continue
			}
			info := st.CachedInfo()
			leader := -1
			if info.Cluster != nil {
				for i, o := range cl.Opts {
					if o.ServerName == info.Cluster.Leader {
						leader = i
					}
				}
			}
			if leader < 0 {
				nextLeader = nextLeader.Add(time.Minute)
				continue
			}
			cl.Stop(leader)
			leaderKills++
			time.Sleep(15 * time.Second)
			cl.Start(leader)
			nextLeader = nextLeader.Add(*soakLeader)
		}
	}
	close(stop)
	bots.Wait()
	faultsOn.Store(false)
	report()
	t.Logf("bot stopped after %s: %d turns to %d sessions; faults off, settling", time.Since(began).Round(time.Second), total(), len(names))

	expects := make([]Expect, len(names))
	for i, s := range names {
		expects[i] = Expect{Session: s, Turns: int(published[i].Load()), Recent: recent, Batch: batch, MaxSummaryChars: 1200}
	}
	settle(t, w.env, expects, 10*time.Minute)
	report()
	if err := proc.stop(); err != nil {
		t.Errorf("graceful stop of the last incarnation: %v", err)
	}
	lost := 0
	for _, e := range expects {
		problems := Verify(ctx, w.env, w.model, e)
		if len(problems) > 0 {
			lost++
		}
		for _, p := range problems {
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
	refolds := 0
	for _, e := range expects {
		refolds += Refolds(w.model, e.Session)
	}
	t.Logf("soak: %s, %d sessions, %d turns, %d model calls (%d 5xx, %d hangs; %d batches asked again), %d processor SIGKILLs, %d stream leader shut-downs, %d publish retries, %d checkpoint writes watched; sessions failing the exactly-once check: %d; checkpoint problems (double folds, going back): %d; processor RSS %.1f -> %.1f MiB",
		time.Since(began).Round(time.Second), len(names), total(), len(w.model.Calls()), fives.Load(), hangs.Load(), refolds, kills, leaderKills,
		retries.Load(), updates, lost, len(problems), firstRSS/(1<<20), lastRSS/(1<<20))
}
