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

// The Node client as a bot of nats/auth/userpass.conf: logged in as user
// bot with inboxPrefix _INBOX_bot (the only inbox the config lets it read),
// its 61 turns are acknowledged and folded by a processor logged in as user
// processor with its own prefix.
func TestNodeBotWithPrivateInbox(t *testing.T) {
	node := nodeProgram(t)
	conf, _ := filepath.Abs(filepath.Join("..", "nats", "auth", "userpass.conf"))
	ns := brokertest.StartConfig(t, conf)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	js, store, stop := servicetest.RunProcessorAs(t, ctx, ns.ClientURL(), log, nats.UserInfo("processor", "dev-processor-password"),
		nats.CustomInboxPrefix("_INBOX_processor"))
	defer stop()

	const session = "node-auth"
	cmd := exec.CommandContext(ctx, node, filepath.Join("node", "publish.mjs"), ns.ClientURL(), session, "61", "60")
	cmd.Env = append(os.Environ(), "NATS_USER=bot", "NATS_PASSWORD=dev-bot-password", "NATS_INBOX_PREFIX=_INBOX_bot", "WAIT_SUMMARY=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node publish.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var out struct{ Published int }
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil || out.Published != 61 {
		t.Fatalf("node printed %q (%v)", stdout.String(), err)
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
