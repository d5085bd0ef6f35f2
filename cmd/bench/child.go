package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The memory and recovery sections run the processor binary as a child
// process, like internal/crashtest: its RSS is then the processor's alone
// (the nats-server stays in the bench process), and it can be SIGKILLed.

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// processorBinary builds cmd/processor once per bench run.
func processorBinary() (string, error) {
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "foldstream-bench-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "processor")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/foldstream/foldstream/cmd/processor").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build ./cmd/processor: %v\n%s", err, out)
		}
	})
	return binPath, binErr
}

// child is one processor process.
type child struct {
	cmd     *exec.Cmd
	metrics string // http://host:port/metrics, from the child's metrics_listening line
	started time.Time
	ready   chan struct{} // closed at the processor_started log line
	readyAt time.Time
	done    chan struct{}
}

// startChild runs the processor against url with the offline summarizer
// and a metrics listener; extra flags are appended.
func startChild(url string, extra ...string) (*child, error) {
	bin, err := processorBinary()
	if err != nil {
		return nil, err
	}
	// The metrics listener takes a port of its own choosing, which the
	// child logs (metrics_listening) before it is ready: a port picked
	// here and freed could be taken by then.
	args := append([]string{"--nats-url", url, "--summarizer", "offline", "--tokenizer", "heuristic",
		"--metrics-addr", "127.0.0.1:0", "--log-level", "info"}, extra...)
	cmd := exec.Command(bin, args...)
	for _, kv := range os.Environ() { // its settings come from its flags only
		if !strings.HasPrefix(kv, "FOLDSTREAM_") && !strings.HasPrefix(kv, "OPENAI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, ready: make(chan struct{}), done: make(chan struct{})}
	c.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var once sync.Once
		for sc.Scan() {
			line := sc.Text()
			var l struct{ Addr string }
			if strings.Contains(line, `"event":"metrics_listening"`) && json.Unmarshal([]byte(line), &l) == nil {
				c.metrics = "http://" + l.Addr + "/metrics" // (read after ready, which this goroutine closes later)
			}
			if strings.Contains(line, `"event":"processor_started"`) {
				once.Do(func() { c.readyAt = time.Now(); close(c.ready) })
			}
			if os.Getenv("FOLDSTREAM_BENCH_LOG") != "" {
				fmt.Fprintln(os.Stderr, "[child]", line)
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) waitReady(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-c.done:
		return fmt.Errorf("processor exited before it was ready")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// kill SIGKILLs the child: a crash, nothing flushed.
func (c *child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// stop asks the child to shut down gracefully.
func (c *child) stop() {
	_ = c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		c.kill()
	}
}

// rss is the child's resident set size in bytes (/proc/<pid>/status).
func (c *child) rss() (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", c.cmd.Process.Pid)
}

// metric sums the samples of a Prometheus metric whose line starts with
// name (labels included, e.g. `foldstream_events_applied_total{kind="turn"}`).
func (c *child) metric(name string) (float64, error) {
	resp, err := http.Get(c.metrics)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	var sum float64
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue // a longer metric name
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, err
		}
		sum += v
		found = true
	}
	if !found {
		return 0, nil
	}
	return sum, nil
}
