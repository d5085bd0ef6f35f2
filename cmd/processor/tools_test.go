package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go/jetstream"
)

// toolEnv is a real nats-server listening on a loopback port, with the
// processor and the context service running: what the tools talk to.
func toolEnv(t *testing.T) *servicetest.Env {
	t.Helper()
	e := servicetest.New(t, servicetest.Options{Listen: true})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	return e
}

// tool runs a subcommand against e and returns its stdout; stdin feeds pub.
func runTool(t *testing.T, e *servicetest.Env, stdin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	words := 1 // the subcommand: "pub", or "dlq redrive"
	if len(args) > 1 && args[0] == "dlq" && args[1] == "redrive" {
		words = 2
	}
	args = append(args[:words:words], append([]string{"--nats-url", e.URL}, args[words:]...)...)
	var out, errOut bytes.Buffer
	var err error
	if args[0] == "pub" {
		err = pub(ctx, args[1:], strings.NewReader(stdin), &out, &errOut)
	} else {
		err = run(ctx, args, &out, &errOut)
	}
	if errOut.Len() > 0 {
		t.Logf("%v stderr:\n%s", args, errOut.String())
	}
	return out.String(), err
}

func mustTool(t *testing.T, e *servicetest.Env, stdin string, args ...string) string {
	t.Helper()
	out, err := runTool(t, e, stdin, args...)
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return out
}

// pub publishes from flags and from JSON lines; a turn published twice is
// stored once (its Nats-Msg-Id); a bad line is reported with its number
// and field, and the good lines are still published.
func TestPubPublishesTurnsNotesAndControls(t *testing.T) {
	e := toolEnv(t)
	out := mustTool(t, e, "", "pub", "--session", "s1", "--turn", "hello there", "--speaker", "Alice", "--turn-id", "t1")
	if !strings.Contains(out, "Nats-Msg-Id s1:t1") {
		t.Errorf("pub turn output: %s", out)
	}
	mustTool(t, e, "", "pub", "--session", "s1", "--turn", "hello there", "--speaker", "Alice", "--turn-id", "t1") // again
	mustTool(t, e, "", "pub", "--session", "s1", "--note", "Bob shares his screen", "--source", "screen")
	lines := `{"turn_id":"t2","speaker":"Bob","role":"assistant","text":"hi Alice","kind":"speech"}
# a comment
{"session":"s1","turn_id":"t3","speaker":"Alice","role":"user","text":"what is new?"}
{"turn_id":"t4","role":"user","text":"no speaker"}
{"note_id":"n2","text":"Carol joined"}
{"op":"configure","config":{"recent_window":20}}
`
	out, err := runTool(t, e, lines, "pub", "--session", "s1")
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), `"speaker"`) {
		t.Fatalf("want the error to name line 4 and field speaker, got %v\n%s", err, out)
	}
	if strings.Count(out, "published ") != 4 {
		t.Errorf("want 4 lines published, got:\n%s", out)
	}
	e.Eventually("3 distinct turns, 2 notes pending, configured", func() bool {
		cp := e.Checkpoint("s1")
		return cp.Total == 3 && len(cp.PendingNotes) == 2 && cp.Config != nil && cp.Config.RecentWindow == 20
	})
	for _, args := range [][]string{
		{"pub", "--session", "s1", "--turn", "x"},                                // no speaker
		{"pub", "--session", "a.b", "--turn", "x", "--speaker", "A"},             // bad session
		{"pub", "--session", "s1", "--turn", "x", "--note", "y"},                 // two events
		{"pub", "--session", "s1", "--control", "explode"},                       // unknown op
		{"pub", "--session", "s1", "--control", "end", "--session-config", "{}"}, // config without configure
	} {
		if out, err := runTool(t, e, "", args...); err == nil {
			t.Errorf("%v: accepted:\n%s", args, out)
		}
	}
	if _, err := runTool(t, e, "", "pub", "--session", "s1"); err == nil || !strings.Contains(err.Error(), "nothing to publish") {
		t.Errorf("pub with an empty stdin: %v", err)
	}
}

// A JSON value of the wrong type, in a line or in --session-config, is an
// error that names the event's field and what was expected, as the
// processor's dead letter of the same event does, and nothing is published.
func TestPubNamesTheFieldOfAValueThatDoesNotDecode(t *testing.T) {
	e := toolEnv(t)
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{`{"turn_id":"t1","speaker":"Alice","text":"hi","at":"yesterday"}`, nil,
			`field "at": expected an RFC 3339 timestamp like 2026-01-02T15:04:05Z, got "yesterday"`},
		{`{"turn_id":"t1","speaker":"Alice","text":"hi","tokens":"many"}`, nil, `field "tokens": expected a JSON number, got string`},
		{`{"note_id":"n1","text":"Carol joined","at":3}`, nil, `field "at": expected an RFC 3339 timestamp`},
		{`{"op":"configure","config":{"recent_window":"x"}}`, nil, `field "config.recent_window": expected a JSON number, got string`},
		{"", []string{"--control", "configure", "--session-config", `{"recent_window":"x"}`}, `field "config.recent_window": expected a JSON number, got string`},
	} {
		out, err := runTool(t, e, c.stdin, append([]string{"pub", "--session", "s1"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: want an error with %q, got %v\n%s", c.stdin, c.args, c.want, err, out)
		}
	}
	in, err := e.JS.Stream(context.Background(), e.Layout.In)
	if err != nil {
		t.Fatal(err)
	}
	info, err := in.Info(context.Background(), jetstream.WithSubjectFilter(e.Layout.Subjects.In("s1", ">")))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 0 {
		t.Errorf("events published: %v, want none", info.State.Subjects)
	}
}

// publishTurns publishes turns [from, to) of session through the Go client.
func publishTurns(t *testing.T, e *servicetest.Env, session string, from, to int) {
	t.Helper()
	_, js := e.Client("bot")
	p, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close(context.Background()) }()
	for i := from; i < to; i++ {
		if err := p.PublishTurn(context.Background(), testenv.Turn(session, i)); err != nil {
			t.Fatal(err)
		}
	}
}

// tail prints a session's summaries and lifecycle events, pretty or as
// JSON lines, from the outbound stream.
func TestTailFollowsSummariesAndEvents(t *testing.T) {
	e := toolEnv(t)
	publishTurns(t, e, "s1", 0, 61)
	e.Settled("s1", 61, 10)
	// The first fold's outbound events: started, the summary, completed,
	// and whatever else it published (memories); all of them with --all.
	n := 0
	e.Eventually("the first fold's completion on the stream", func() bool {
		out, err := e.JS.Stream(context.Background(), e.Layout.Out)
		if err != nil {
			return false
		}
		info, err := out.Info(context.Background(), jetstream.WithSubjectFilter(e.Layout.Subjects.OutSession("s1")))
		if err != nil {
			return false
		}
		n = 0
		for _, c := range info.State.Subjects {
			n += int(c)
		}
		return info.State.Subjects[e.Layout.Subjects.Out("s1", events.KindEvent)] >= 2
	})
	out := mustTool(t, e, "", "tail", "--session", "s1", "--all", "--json", "--count", fmt.Sprint(n))
	kinds := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l struct {
			Seq   uint64          `json:"seq"`
			Kind  string          `json:"kind"`
			Event json.RawMessage `json:"event"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Seq == 0 || len(l.Event) == 0 {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		kinds[l.Kind]++
	}
	if kinds[events.KindSummary] != 1 || kinds[events.KindEvent] != 2 {
		t.Errorf("want a summary and its two lifecycle events, got %v:\n%s", kinds, out)
	}
	out = mustTool(t, e, "", "tail", "--session", "s1", "--all", "--count", fmt.Sprint(n))
	for _, want := range []string{"== summary v1: cursor 10, 10 turns and 0 notes folded", "   | ", "-- fold started: turns 0..", "-- fold completed: cursor 0 -> 10, v1"} {
		if !strings.Contains(out, want) {
			t.Errorf("tail output lacks %q:\n%s", want, out)
		}
	}
	// Following: a new fold's summary arrives while tail waits.
	done := make(chan string, 1)
	go func() {
		// --all with the n events above, so the test does not depend on
		// tail attaching before the publish: the next two (the second
		// fold's started event and its summary) can only come by following.
		out, err := runTool(t, e, "", "tail", "--session", "s1", "--all", "--count", fmt.Sprint(n+2))
		if err != nil {
			out += err.Error()
		}
		done <- out
	}()
	publishTurns(t, e, "s1", 61, 71)
	select {
	case out := <-done:
		if !strings.Contains(out, "summary v2") {
			t.Errorf("tail did not follow the new summary:\n%s", out)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("tail got no new events")
	}
	if _, err := runTool(t, e, "", "tail"); err == nil {
		t.Error("tail without --session accepted")
	}
}

// sessions lists the checkpointed sessions with their lag and lease, and
// shows one in full, caught up once the processor checkpointed it.
func TestSessionsListsAndShows(t *testing.T) {
	e := toolEnv(t)
	publishTurns(t, e, "s1", 0, 61)
	publishTurns(t, e, "s2", 0, 3)
	e.Settled("s1", 61, 10)
	e.Settled("s2", 3, 0)
	var out string
	e.Eventually("both listed as caught up", func() bool {
		out = mustTool(t, e, "", "sessions")
		return strings.Count(out, "caught up") == 2
	})
	for _, want := range []string{"SESSION", "s1", "s2", "v1 "} {
		if !strings.Contains(out, want) {
			t.Errorf("sessions lacks %q:\n%s", want, out)
		}
	}
	out = mustTool(t, e, "", "sessions", "--session", "s1")
	for _, want := range []string{"turns", "61 (cursor 10", "lag", "caught up: applied seq", "lease", "none (no fold in flight)"} {
		if !strings.Contains(out, want) {
			t.Errorf("sessions --session s1 lacks %q:\n%s", want, out)
		}
	}
	var info client.SessionInfo
	if err := json.Unmarshal([]byte(mustTool(t, e, "", "sessions", "--session", "s2", "--json")), &info); err != nil || info.TotalTurns != 3 || !info.CaughtUp {
		t.Errorf("sessions --json: %+v, %v", info, err)
	}
	if _, err := runTool(t, e, "", "sessions", "--session", "nobody"); !client.IsUnknownSession(err) {
		t.Errorf("an unknown session: %v", err)
	}
}

// context prints what a builder gets, within the budget, and passes the
// query on to the service.
func TestContextPrintsWhatABuilderGets(t *testing.T) {
	e := toolEnv(t)
	publishTurns(t, e, "s1", 0, 61)
	e.Settled("s1", 61, 10)
	sniff, err := e.NC.SubscribeSync(client.ServiceSubject("fold", client.EndpointContext))
	if err != nil {
		t.Fatal(err)
	}
	// The tool's request comes on its own connection: the server must
	// have the subscription first.
	if err := e.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	out := mustTool(t, e, "", "context", "--session", "s1", "--query", "ranked match", "--budget-chars", "600", "--recall-turns", "3")
	req, err := sniff.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var r client.ContextRequest
	if err := json.Unmarshal(req.Data, &r); err != nil || r.Query != "ranked match" || r.BudgetChars != 600 || r.RecallTurns != 3 {
		t.Errorf("request %s: %v", req.Data, err)
	}
	head, prompt, _ := strings.Cut(out, "\n")
	if n := len([]rune(prompt)); n > 600 || n == 0 {
		t.Errorf("prompt of %d chars for a budget of 600:\n%s", n, out)
	}
	// With a query the window's older turns give way to excerpts, not only
	// to the budget: the header says so rather than "over budget".
	if !strings.Contains(head, "# session s1: 61 turns, cursor 10") || !strings.Contains(head, "; for the query: ") ||
		!strings.Contains(head, "oldest turns not among the recent turns") || strings.Contains(head, "over budget") {
		t.Errorf("header: %s", head)
	}
	plain := mustTool(t, e, "", "context", "--session", "s1", "--budget-chars", "600")
	if head, _, _ := strings.Cut(plain, "\n"); !strings.Contains(head, "; over budget: ") || !strings.Contains(head, "oldest turns left out, summary left out") {
		t.Errorf("header without a query: %s", head)
	}
	if !strings.Contains(prompt, "message number 060") {
		t.Errorf("the newest turn is missing:\n%s", prompt)
	}
	var c client.Context
	if err := json.Unmarshal([]byte(mustTool(t, e, "", "context", "--session", "s1", "--json")), &c); err != nil || c.Summary == nil || len(c.Turns) != 51 {
		t.Errorf("context --json: %v, %+v", err, c)
	}
	if _, err := runTool(t, e, "", "context", "--session", "s1", "--budget-tokens", "-1"); err == nil {
		t.Error("a negative budget accepted")
	}
	if _, err := runTool(t, e, "", "context", "--session", "s1", "--recall-turns", "3"); err == nil || !strings.Contains(err.Error(), "--recall-turns") {
		t.Errorf("--recall-turns without --query: %v", err)
	}
}

// dlq lists rejected events with their code and field; after the fix (here
// a reset of the ended session) redrive publishes them again, once: a
// second redrive finds nothing, and a kept dead letter redriven twice is
// stored once.
func TestDLQListsAndRedrivesWithoutDuplicates(t *testing.T) {
	e := toolEnv(t)
	publishTurns(t, e, "s1", 0, 2)
	mustTool(t, e, "", "pub", "--session", "s1", "--control", "end")
	e.Eventually("ended", func() bool { return e.Checkpoint("s1").Ended || e.Checkpoint("s1").Total == 0 })
	mustTool(t, e, "", "pub", "--session", "s1", "--turn", "too late", "--speaker", "Alice", "--turn-id", "late1")
	mustTool(t, e, "", "pub", "--session", "s1", "--turn", "later still", "--speaker", "Bob", "--turn-id", "late2")
	var out string
	e.Eventually("two dead letters", func() bool {
		out = mustTool(t, e, "", "dlq", "--session", "s1")
		return strings.Count(out, "session_ended") == 2
	})
	if !strings.Contains(out, "fold.in.s1.turn") || !strings.Contains(out, `"turn_id":"late1"`) {
		t.Errorf("dlq listing:\n%s", out)
	}
	var dl deadLetter
	first := strings.Split(mustTool(t, e, "", "dlq", "--json"), "\n")[0]
	if err := json.Unmarshal([]byte(first), &dl); err != nil || dl.Code != events.CodeSessionEnded || dl.Field != "session" ||
		dl.OriginalMsgID != "s1:late1" || dl.OriginalSeq == 0 || !strings.Contains(string(dl.Payload), `"late1"`) {
		t.Fatalf("dlq --json: %+v, %v", dl, err)
	}

	// The fix: start the session again.
	mustTool(t, e, "", "pub", "--session", "s1", "--control", "reset")
	e.Eventually("reset", func() bool { cp := e.Checkpoint("s1"); return !cp.Ended && cp.Total == 0 })
	out = mustTool(t, e, "", "dlq", "redrive", "--seq", fmt.Sprint(dl.Seq), "--keep")
	if !strings.Contains(out, "stored as inbound seq") {
		t.Fatalf("redrive: %s", out)
	}
	out = mustTool(t, e, "", "dlq", "redrive", "--seq", fmt.Sprint(dl.Seq), "--keep")
	if !strings.Contains(out, "already redriven") {
		t.Errorf("a second redrive of a kept dead letter: %s", out)
	}
	out = mustTool(t, e, "", "dlq", "redrive", "--session", "s1")
	if strings.Count(out, " → fold.in.s1.turn") != 2 {
		t.Errorf("redrive of both: %s", out)
	}
	e.Eventually("both late turns applied once", func() bool { return e.Checkpoint("s1").Total == 2 })
	if out := mustTool(t, e, "", "dlq", "redrive"); !strings.Contains(out, "nothing to redrive") {
		t.Errorf("a redrive after the dead letters were redriven: %s", out)
	}
	if out := mustTool(t, e, "", "dlq"); !strings.Contains(out, "no rejected events") {
		t.Errorf("the dead letters are still listed: %s", out)
	}
	time.Sleep(100 * time.Millisecond) // a duplicate would be applied by now; the count must stay
	if n := e.Checkpoint("s1").Total; n != 2 {
		t.Errorf("%d turns after the redrives, want 2", n)
	}
}

// Every subcommand's -h lists its own flags, not the processor's ~60.
func TestSubcommandHelpShowsOnlyItsFlags(t *testing.T) {
	for _, args := range [][]string{{"replay"}, {"demo"}, {"pub"}, {"tail"}, {"sessions"}, {"context"}, {"dlq"}, {"dlq", "redrive"}, {"run"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), append(args, "-h"), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), "help requested") {
			t.Errorf("%v -h: %v", args, err)
		}
		help := errOut.String()
		n := strings.Count(help, "\n  -")
		switch {
		case args[0] == "run":
			if n < 50 || !strings.Contains(help, "-batch-size") {
				t.Errorf("run -h lists %d flags:\n%s", n, help)
			}
		case strings.Contains(help, "-batch-size") || strings.Contains(help, "-openai-model") || n > 30:
			t.Errorf("%v -h lists %d flags, the processor's among them:\n%s", args, n, help)
		case !strings.Contains(help, "-nats-url"):
			t.Errorf("%v -h lacks --nats-url:\n%s", args, help)
		}
	}
}

// A dead letter kept as a reference (the rejected message was too large
// for a copy on the dead-letter stream) is redriven with the whole
// original payload, read from the inbound stream.
func TestDLQRedrivesAReferenceWithTheWholePayload(t *testing.T) {
	e := toolEnv(t)
	big := `{"v":1,"session":"s1","turn_id":"huge","speaker":"A","role":"user","at":"2026-01-02T15:04:05Z","text":"` +
		strings.Repeat("a", 1<<20-300) + `"}`
	if _, err := e.JS.Publish(context.Background(), e.Layout.Subjects.In("s1", events.KindTurn), []byte(big)); err != nil {
		t.Fatal(err)
	}
	var dl deadLetter
	e.Eventually("a reference on the dead-letter stream", func() bool {
		out, err := runTool(t, e, "", "dlq", "--json")
		return err == nil && json.Unmarshal([]byte(strings.TrimSpace(out)), &dl) == nil && dl.Reference
	})
	if dl.Code != events.CodeOversized || len(dl.Payload) >= len(big) {
		t.Fatalf("reference: %+v", dl)
	}
	if out := mustTool(t, e, "", "dlq"); !strings.Contains(out, "(a reference: the ") {
		t.Errorf("the listing does not say it is a reference:\n%s", out)
	}
	out := mustTool(t, e, "", "dlq", "redrive")
	if !strings.Contains(out, "stored as inbound seq") {
		t.Fatalf("redrive: %s", out)
	}
	in, err := e.JS.Stream(context.Background(), e.Layout.In)
	if err != nil {
		t.Fatal(err)
	}
	m, err := in.GetLastMsgForSubject(context.Background(), e.Layout.Subjects.In("s1", events.KindTurn))
	if err != nil || string(m.Data) != big || m.Header.Get("Nats-Msg-Id") != fmt.Sprintf("redrive:%d", dl.OriginalSeq) {
		t.Errorf("the redriven message: %d bytes (want %d), id %q, %v", len(m.Data), len(big), m.Header.Get("Nats-Msg-Id"), err)
	}
}

// Every subcommand that takes a session takes it as its argument, before
// or after its flags, as well as with --session; two sessions are refused.
func TestSessionIsAPositionalArgument(t *testing.T) {
	e := toolEnv(t)
	mustTool(t, e, "", "pub", "p1", "--turn", "hello there", "--speaker", "Alice", "--turn-id", "t1")
	mustTool(t, e, "", "pub", "--turn", "again", "--speaker", "Bob", "--turn-id", "t2", "p1")
	e.Settled("p1", 2, 0)
	var info client.SessionInfo
	if err := json.Unmarshal([]byte(mustTool(t, e, "", "sessions", "p1", "--json")), &info); err != nil || info.Session != "p1" || info.TotalTurns != 2 {
		t.Errorf("sessions p1 --json: %+v, %v", info, err)
	}
	var c client.Context
	if err := json.Unmarshal([]byte(mustTool(t, e, "", "context", "p1", "--json")), &c); err != nil || c.Session != "p1" || len(c.Turns) != 2 {
		t.Errorf("context p1 --json: %+v, %v", c, err)
	}
	if out := mustTool(t, e, "", "replay", "--full-text", "p1"); !strings.Contains(out, "hello there") || !strings.Contains(out, "again") {
		t.Errorf("replay p1:\n%s", out)
	}
	mustTool(t, e, "", "pub", "p1", "--control", "compact")
	e.Eventually("a lifecycle event of p1", func() bool {
		out, err := runTool(t, e, "", "tail", "p1", "--all", "--count", "1")
		return err == nil && strings.Contains(out, "--")
	})
	if out := mustTool(t, e, "", "dlq", "p1"); strings.Contains(out, "p1") {
		t.Errorf("dlq p1 lists rejections of a session that has none:\n%s", out)
	}
	mustTool(t, e, "", "dlq", "redrive", "p1", "--dry-run")
	for _, bad := range [][]string{
		{"context", "p1", "--session", "p2"},
		{"context", "p1", "p2"},
		{"tail", "p1", "p2", "--count", "1"},
	} {
		if _, err := runTool(t, e, "", bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if _, err := runTool(t, e, "", "context", "p1", "--session", "p1", "--json"); err != nil {
		t.Errorf("the same session twice: %v", err)
	}
}

// replay --state prints the summarizer's state from the checkpoint,
// decoded: the offline summarizer's statements, as indented JSON or as a
// JSON Lines object after the totals.
func TestReplayShowsSummaryState(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{Listen: true})
	e.StartProcessor(processor.Config{Window: fold.Window{Recent: 1, Batch: 1}}, nil) // the offline summarizer
	mustTool(t, e, "", "pub", "r1", "--turn", "I love the desert house at Joshua Tree", "--speaker", "Lena", "--turn-id", "t1")
	mustTool(t, e, "", "pub", "r1", "--turn", "Let's leave at 8 am on Saturday", "--speaker", "Jonas", "--turn-id", "t2")
	mustTool(t, e, "", "pub", "r1", "--turn", "I can drive, my car fits four", "--speaker", "Marco", "--turn-id", "t3")
	var out string
	e.Eventually("the state in the checkpoint", func() bool {
		out = mustTool(t, e, "", "replay", "r1", "--state")
		return strings.Contains(out, "summarizer state (")
	})
	if !strings.Contains(out, `"text": "Lena loves the desert house at Joshua Tree."`) || !strings.Contains(out, `"name": "Lena"`) {
		t.Errorf("replay --state does not show the statements and per-speaker facts:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(mustTool(t, e, "", "replay", "r1", "--state", "--json")), "\n")
	var last struct {
		Kind  string          `json:"kind"`
		Bytes int             `json:"bytes"`
		State json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last.Kind != "summary_state" || last.Bytes == 0 || !json.Valid(last.State) {
		t.Errorf("replay --state --json: last line %s (%v)", lines[len(lines)-1], err)
	}
}
