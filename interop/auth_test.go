// Package interop proves that foldstream's wire contract is
// language-neutral under the shipped auth configs: a Node.js bot using the
// TypeScript client (clients/typescript) talks to a processor logged in as
// another user, each with its private reply inbox. The TypeScript client's
// own suite (make test-ts) covers the rest of its surface.
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

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// need reports a missing prerequisite: a failure under CI (so CI can never
// pass by silently skipping), a skip elsewhere.
func need(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set and the Node.js interop test cannot run: "+format+" (.ci/run installs node; make test builds clients/typescript)", args...)
	}
	t.Skipf("skipping the Node.js interop test: "+format+" (set CI=1 to make this a failure)", args...)
}

// tsDir is the TypeScript client's directory.
var tsDir = filepath.Join("..", "clients", "typescript")

// nodeBot returns node's path and the TypeScript client's example bot,
// building the client (npm ci, tsc) if it is not built.
func nodeBot(t *testing.T) (node, bot string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		need(t, "node is not installed")
	}
	bot = filepath.Join(tsDir, "dist", "examples", "bot.js")
	if _, err := os.Stat(bot); err == nil {
		return node, bot
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		need(t, "%s is not built and npm is not installed", bot)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, args := range [][]string{{"ci", "--no-audit", "--no-fund"}, {"run", "build"}} {
		cmd := exec.CommandContext(ctx, npm, args...)
		cmd.Dir = tsDir
		if out, err := cmd.CombinedOutput(); err != nil {
			need(t, "npm %s in clients/typescript failed: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return node, bot
}

// The TypeScript client as a bot of nats/auth/userpass.conf: logged in as
// user bot with inboxPrefix _INBOX_bot (the only inbox the config lets it
// read), its 61 turns are acknowledged and folded by a processor logged in
// as user processor with its own prefix. Without the prefix the client
// says at once which prefix to set.
func TestNodeBotWithPrivateInbox(t *testing.T) {
	node, bot := nodeBot(t)
	conf, _ := filepath.Abs(filepath.Join("..", "nats", "auth", "userpass.conf"))
	ns := brokertest.StartConfig(t, conf)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	js, store, stop := servicetest.RunProcessorAs(t, ctx, ns.ClientURL(), log, nats.UserInfo("processor", "dev-processor-password"),
		nats.CustomInboxPrefix("_INBOX_processor"))
	defer stop()

	const session = "node-auth"
	run := func(env ...string) (string, string, error) {
		cmd := exec.CommandContext(ctx, node, bot, ns.ClientURL(), session, "61")
		cmd.Env = append(os.Environ(), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	if _, stderr, err := run("NATS_USER=bot", "NATS_PASSWORD=dev-bot-password"); err == nil ||
		!strings.Contains(stderr, "InboxPermissionError") || !strings.Contains(stderr, `inboxPrefix: "_INBOX_bot"`) {
		t.Fatalf("bot without its inbox prefix: %v, stderr %q; want an InboxPermissionError naming inboxPrefix \"_INBOX_bot\"", err, stderr)
	}
	stdout, stderr, err := run("NATS_USER=bot", "NATS_PASSWORD=dev-bot-password", "NATS_INBOX_PREFIX=_INBOX_bot")
	if err != nil {
		t.Fatalf("node %s: %v\nstdout:\n%s\nstderr:\n%s", bot, err, stdout, stderr)
	}
	var out struct{ Published int }
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout)), &out); err != nil || out.Published != 61 {
		t.Fatalf("node printed %q (%v)", stdout, err)
	}
	// The processor counted every turn and folded the first batch.
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, _, err := store.Load(ctx, session)
		if err == nil && s.Total == 61 && s.Cursor == 10 && s.Lease == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("processor state: %+v (%v)", s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	subjects, _ := events.NewSubjects("fold")
	out2, err := js.Stream(ctx, broker.NewLayout(subjects).Out)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := out2.GetLastMsgForSubject(ctx, subjects.Out(session, events.KindSummary))
	if err != nil || !strings.Contains(string(msg.Data), `"version":1`) {
		t.Fatalf("summary-updated: %v %v", msg, err)
	}
}
