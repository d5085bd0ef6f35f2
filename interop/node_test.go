// Package interop proves that foldstream's wire contract is
// language-neutral: programs in other languages, using only their own NATS
// client and the documented JSON, talk to a real processor.
package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
)

// need reports a missing prerequisite: a failure under CI (so CI can never
// pass by silently skipping the interop test), a skip elsewhere.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set and the Node.js interop test cannot run: "+format+" (.ci/run installs node and runs npm ci --prefix interop/node)", args...)
	}
	t.Skipf("skipping the Node.js interop test: "+format+" (set CI=1 to make this a failure)", args...)
}

// nodeProgram returns node's path once node and interop/node/node_modules
// are ready, running `npm ci` if the modules are missing.
func nodeProgram(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node is not installed")
	}
	if _, err := os.Stat(filepath.Join("node", "node_modules", "nats", "package.json")); err == nil {
		return node
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		need(t, "interop/node/node_modules is missing and npm is not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = "node"
	if out, err := cmd.CombinedOutput(); err != nil {
		need(t, "npm ci in interop/node failed: %v\n%s", err, out)
	}
	return node
}

// A Node.js program using the npm "nats" package publishes 61 turns with
// JetStream (msgID = "<session>:<turn_id>") and receives the processor's
// summary-updated; the processor counted every turn.
func TestNodePublishesTurnsAndReceivesTheSummary(t *testing.T) {
	node := nodeProgram(t)
	e := servicetest.New(t, servicetest.Options{Listen: true})
	p, _ := e.StartProcessor(processor.Config{}, nil) // offline summarizer

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const session = "node-s1"
	cmd := exec.CommandContext(ctx, node, filepath.Join("node", "publish.mjs"), e.URL, session, "61", "60")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node publish.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	line := strings.TrimSpace(stdout.String())
	var ev client.SummaryUpdated
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("node printed %q: %v", line, err)
	}
	if ev.V != 1 || ev.Session != session || ev.Version != 1 || ev.Cursor != 10 || ev.CoveredThroughTurn != 9 ||
		ev.FoldedTurns != 10 || ev.Summary == "" || ev.Mode != "window" {
		t.Fatalf("summary-updated received by node: %s", line)
	}
	if !strings.Contains(ev.Summary, "Alice") || !strings.Contains(ev.Summary, "Bob") {
		t.Errorf("summary does not attribute speakers: %q", ev.Summary)
	}
	s := e.Settled(session, 61, 10)
	if s.Version != 1 || p.Applied() < 61 {
		t.Fatalf("processor state: version %d, total %d, applied %d", s.Version, s.Total, p.Applied())
	}
	// Nothing node sent was rejected.
	dlq, err := e.JS.Stream(ctx, e.Layout.DLQ)
	if err != nil {
		t.Fatal(err)
	}
	info, err := dlq.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 0 {
		t.Fatalf("%d of node's messages were dead-lettered", info.State.Msgs)
	}
}

// The Node.js client asks for a question-aware context: the reply carries
// the recalled turns, and the prompt node renders from the documented
// JSON is exactly the Go client's (Chars characters). A bad query is a
// 400 naming the field.
func TestNodeAsksAQuestionAwareContext(t *testing.T) {
	node := nodeProgram(t)
	e := servicetest.New(t, servicetest.Options{Listen: true})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	_, js := e.Client("bot")
	pub, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	const session = "node-s2"
	for i := range 64 {
		turn := testenv.Turn(session, i)
		if i == 3 {
			turn.Text = "Can someone send the tournament form by Friday?"
		}
		if err := pub.PublishTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
	}
	e.Settled(session, 64, 10)

	run := func(args ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("node", "context.mjs"), e.URL, session}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	stdout, stderr, err := run("When is the tournament form due?", "3000")
	if err != nil {
		t.Fatalf("node context.mjs: %v\n%s", err, stderr)
	}
	reply, prompt, _ := strings.Cut(stdout, "\n")
	var c client.Context
	if err := json.Unmarshal([]byte(reply), &c); err != nil {
		t.Fatalf("node printed %q: %v", reply, err)
	}
	if len(c.Recalled) == 0 || c.Recalled[0].Index != 3 || c.Chars > 3000 {
		t.Fatalf("recalled %+v (chars %d)", c.Recalled, c.Chars)
	}
	if prompt != c.Prompt() {
		t.Fatalf("node's prompt:\n%s\nGo's:\n%s", prompt, c.Prompt())
	}
	if _, stderr, err = run("   "); err == nil || !strings.HasPrefix(stderr, "400 ") || !strings.Contains(stderr, `"query"`) {
		t.Fatalf("blank query: %v %q", err, stderr)
	}
}
