package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
)

// clientResult is one client's line: the fields of the JSON line the
// TypeScript and Python bench scripts print.
type clientResult struct {
	Client       string  `json:"client"`
	Turns        int     `json:"turns"`
	TurnsPerS    float64 `json:"turns_per_s"`
	Contexts     int     `json:"contexts"`
	ContextP50Ms float64 `json:"context_p50_ms"`
	ContextP99Ms float64 `json:"context_p99_ms"`
}

// The context every client asks for: a session of clientsContextTurns
// turns, within clientsBudgetChars.
const (
	clientsContextSession = "bench-clients-ctx"
	clientsContextTurns   = 200
	clientsBudgetChars    = 4000
)

// clientsSection measures the Go, TypeScript and Python clients against
// one processor and its service on one server (TCP on loopback): publish
// throughput with every acknowledgement awaited (each client to a session
// of its own) and the context round trip on the same session, one client
// after the other. The TypeScript and Python lines run their bench
// scripts (clients/typescript/dist/bench/bench.js, clients/python/bench.py)
// and are "not available" when those cannot run here.
func clientsSection(ctx context.Context, w io.Writer, o opts) error {
	e, err := newEnv(true)
	if err != nil {
		return err
	}
	defer e.close()
	l, store, err := e.foldStore(ctx)
	if err != nil {
		return err
	}
	stop, err := runProcessor(ctx, e, l, store, processor.Config{MaxConcurrentFolds: 32})
	if err != nil {
		return err
	}
	defer stop()
	sctx, stopService := context.WithCancel(ctx)
	defer stopService()
	if _, err := service.Start(sctx, e.nc, e.js, l, store, nil, benchLog()); err != nil {
		return err
	}
	pub, err := client.NewPublisher(e.js)
	if err != nil {
		return err
	}
	defer pub.Close(context.Background())
	for _, t := range recallConversation(clientsContextSession, clientsContextTurns) {
		if err := pub.PublishTurnAsync(t); err != nil {
			return err
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return err
	}
	window := int64(fold.DefaultWindow().Recent)
	for {
		cp, _, err := store.Load(ctx, clientsContextSession)
		if err != nil {
			return err
		}
		if cp.Total == clientsContextTurns && cp.Cursor >= clientsContextTurns-window-10 && cp.Lease == nil {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}

	fmt.Fprintf(w, "clients: %d turns published with every ack awaited (each client to its own session), then %d context requests one at a time (after 20 untimed; session of %d turns, budget %d chars); one server, one client after the other\n",
		o.clientsTurns, o.clientsContexts, clientsContextTurns, clientsBudgetChars)
	// Publishing first, each client after the processor has digested the
	// previous one's turns; then the context requests, on an idle
	// processor, so that no client's requests wait behind another's folds.
	settled := func(session string, n int) error {
		for {
			cp, _, err := store.Load(ctx, session)
			if err != nil {
				return err
			}
			if cp.Total == int64(n) && cp.Lease == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	url := e.ns.ClientURL()
	root := repoRoot()
	scripts := []benchScript{
		{"typescript", []string{"node", filepath.Join(root, "clients", "typescript", "dist", "bench", "bench.js")}, "cd clients/typescript && npm ci && npm run build", filepath.Join(root, "clients", "typescript", "src")},
		{"python", []string{"python3", filepath.Join(root, "clients", "python", "bench.py")}, "python3 and clients/python", ""},
	}
	goRes := clientResult{Client: "go", Turns: o.clientsTurns, Contexts: o.clientsContexts}
	goSession := fmt.Sprintf("bench-go-%d", time.Now().UnixMilli())
	if goRes.TurnsPerS, err = goPublishBench(ctx, e, goSession, o.clientsTurns); err != nil {
		return fmt.Errorf("go client: %w", err)
	}
	if err := settled(goSession, o.clientsTurns); err != nil {
		return err
	}
	results := []clientResult{goRes}
	var missing []string
	for _, s := range scripts {
		if s.src != "" {
			if f := staleAgainst(s.cmd[len(s.cmd)-1], s.src); f != "" {
				missing = append(missing, fmt.Sprintf("%s: not measured: %s is newer than its build (%s)", s.name, f, s.hint))
				continue
			}
		}
		session := fmt.Sprintf("bench-%s-%d", s.name, time.Now().UnixMilli())
		r, err := scriptBench(ctx, s.cmd, []string{"--url", url, "--turns", fmt.Sprint(o.clientsTurns), "--publish-session", session, "--contexts", "0"})
		if err == nil && r.TurnsPerS <= 0 {
			err = errors.New("no publish rate in its output")
		}
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s: not available (%s: %v)", s.name, s.hint, err))
			continue
		}
		if err := settled(session, o.clientsTurns); err != nil {
			return err
		}
		results = append(results, r)
	}
	if results[0].ContextP50Ms, results[0].ContextP99Ms, err = goContextBench(ctx, e, o.clientsContexts); err != nil {
		return fmt.Errorf("go client: %w", err)
	}
	for i := 1; i < len(results); i++ {
		s := scripts[slices.IndexFunc(scripts, func(x benchScript) bool { return x.name == results[i].Client })]
		r, err := scriptBench(ctx, s.cmd, []string{"--url", url, "--turns", "0", "--session", clientsContextSession,
			"--contexts", fmt.Sprint(o.clientsContexts), "--budget-chars", fmt.Sprint(clientsBudgetChars)})
		if err == nil && r.ContextP99Ms <= 0 {
			err = errors.New("no context round trip in its output")
		}
		if err != nil {
			return fmt.Errorf("%s contexts: %w", s.name, err)
		}
		results[i].ContextP50Ms, results[i].ContextP99Ms = r.ContextP50Ms, r.ContextP99Ms
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "client\tturns/s\tvs Go\tcontext p50\tcontext p99\tp99 vs Go\t")
	for _, r := range results {
		goRes := results[0]
		fmt.Fprintf(tw, "%s\t%.0f\t%.2fx\t%.2f ms\t%.2f ms\t%.2fx\t\n", r.Client, r.TurnsPerS, r.TurnsPerS/goRes.TurnsPerS,
			r.ContextP50Ms, r.ContextP99Ms, r.ContextP99Ms/goRes.ContextP99Ms)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, m := range missing {
		fmt.Fprintln(w, m)
	}
	fmt.Fprintln(w, "targets: TypeScript >= 10000 turns/s, Python >= 5000 turns/s; context p99 <= 1.5x the Go client's")
	return nil
}

// goPublishBench publishes n turns with the Go client, every ack
// awaited, and returns the rate.
func goPublishBench(ctx context.Context, e *env, session string, n int) (float64, error) {
	_, js, err := connect(e.ns, "bench-go-client")
	if err != nil {
		return 0, err
	}
	defer js.Conn().Close()
	pub, err := client.NewPublisher(js)
	if err != nil {
		return 0, err
	}
	defer pub.Close(context.Background())
	start := time.Now()
	for i := range n {
		t := client.Turn{Session: session, TurnID: fmt.Sprintf("t%07d", i), Speaker: "Alice", Role: "user",
			Text: fmt.Sprintf("turn %d: the ranked match on Tokyo 2099 starts at nine, bring the form", i)}
		if i%2 == 1 {
			t.Speaker, t.Role = "Bot", "assistant"
		}
		if err := pub.PublishTurnAsync(t); err != nil {
			return 0, err
		}
	}
	if err := pub.Flush(ctx); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// goContextBench asks for the bench session's context n times with the
// Go client, after 20 untimed requests, and returns p50 and p99 in ms.
func goContextBench(ctx context.Context, e *env, n int) (p50, p99 float64, err error) {
	nc, js, err := connect(e.ns, "bench-go-builder")
	if err != nil {
		return 0, 0, err
	}
	defer nc.Close()
	b, err := client.NewBuilder(nc, js)
	if err != nil {
		return 0, 0, err
	}
	budget := client.Budget{Chars: clientsBudgetChars}
	for range 20 {
		if _, err := b.Context(ctx, clientsContextSession, budget); err != nil {
			return 0, 0, err
		}
	}
	ms := make([]float64, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := b.Context(ctx, clientsContextSession, budget); err != nil {
			return 0, 0, err
		}
		ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
	}
	slices.Sort(ms)
	return percentile(ms, 50), percentile(ms, 99), nil
}

// percentile is the nearest-rank percentile of sorted, as the scripts
// compute it.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	k := int(p/100*float64(len(sorted))+0.5+0.5) - 1
	return sorted[max(0, min(len(sorted)-1, k))]
}

// benchScript is a client's bench script: its command line and what to do
// when it cannot run.
type benchScript struct {
	name string
	cmd  []string
	hint string
	// src, when set, is the source the script was built from: a script
	// older than any file under it is refused rather than measured, so
	// a figure never comes from a build that is not the checked-out code.
	src string
}

// staleAgainst says which file under src is newer than built ("" when
// none is, or when built does not exist: that is reported on running it).
func staleAgainst(built, src string) string {
	bi, err := os.Stat(built)
	if err != nil {
		return ""
	}
	newer := ""
	_ = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || newer != "" {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().After(bi.ModTime()) {
			newer = path
		}
		return nil
	})
	return newer
}

// scriptBench runs a client's bench script and decodes its JSON line.
func scriptBench(ctx context.Context, cmdline, args []string) (clientResult, error) {
	var r clientResult
	if _, err := exec.LookPath(cmdline[0]); err != nil {
		return r, err
	}
	if _, err := os.Stat(cmdline[1]); err != nil {
		return r, errors.New(cmdline[1] + " is missing")
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, cmdline[0], append(cmdline[1:], args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return r, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return r, fmt.Errorf("output %q: %w", out, err)
	}
	return r, nil
}

// repoRoot is the repository's root: the module directory above the
// working directory (make bench runs from the root).
func repoRoot() string {
	dir, _ := os.Getwd()
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}
