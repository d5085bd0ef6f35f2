package schema_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/foldstream/foldstream/schema"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compiled is one schema file, compiled with format assertions on (so
// "date-time" is checked), plus the properties it documents.
type compiled struct {
	sch *jsonschema.Schema
	// props are the documented properties; those of a documented nested
	// object (control's config) as "config.<name>".
	props map[string]bool
	// nested are the properties whose object value has documented
	// properties of its own.
	nested map[string]bool
	// enums are the enum values of the top-level properties.
	enums map[string][]string
}

func compileAll(t *testing.T) map[string]compiled {
	t.Helper()
	return compileFiles(t, schema.Files)
}

// contextSourceFiles are the schemas of the context-source protocol (the
// processor asks calendar, mail, … services at a fold), checked by
// TestContextSourceMessagesMatchTheSchemas; TestRealMessagesMatchTheSchemas
// checks the others.
var contextSourceFiles = map[string]string{
	"context-source-request": schema.Files["context-source-request"],
	"context-source-reply":   schema.Files["context-source-reply"],
}

func compileFiles(t *testing.T, files map[string]string) map[string]compiled {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	out := map[string]compiled{}
	for event, file := range files {
		data, err := fs.ReadFile(schema.V1, file)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := c.AddResource(file, doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		sch, err := c.Compile(file)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		type property struct {
			Description string                     `json:"description"`
			Enum        []any                      `json:"enum"`
			Properties  map[string]json.RawMessage `json:"properties"`
		}
		var raw struct {
			Schema     string              `json:"$schema"`
			Properties map[string]property `json:"properties"`
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if raw.Schema != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %q, want draft 2020-12", file, raw.Schema)
		}
		c := compiled{sch: sch, props: map[string]bool{}, nested: map[string]bool{}, enums: map[string][]string{}}
		for name, p := range raw.Properties {
			c.props[name] = true
			if p.Description == "" {
				t.Errorf("%s: property %q has no description", file, name)
			}
			for _, v := range p.Enum {
				if v, ok := v.(string); ok && v != "" {
					c.enums[name] = append(c.enums[name], v)
				}
			}
			for sub, sp := range p.Properties {
				c.nested[name] = true
				c.props[name+"."+sub] = true
				var d property
				if json.Unmarshal(sp, &d) != nil || d.Description == "" {
					t.Errorf("%s: property %q has no description", file, name+"."+sub)
				}
			}
		}
		out[event] = c
	}
	return out
}

// fieldsOf returns the top-level fields of a message, and the fields of
// the nested objects s documents as "<name>.<field>".
func fieldsOf(t *testing.T, s compiled, data []byte) []string {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k, v := range fields {
		out = append(out, k)
		var sub map[string]json.RawMessage
		if s.nested[k] && json.Unmarshal(v, &sub) == nil {
			for f := range sub {
				out = append(out, k+"."+f)
			}
		}
	}
	return out
}

// schema.Files lists every file of v1/, each as v1/<event>.json, and the
// package documentation names every file.
func TestFilesListEveryFile(t *testing.T) {
	entries, err := fs.ReadDir(schema.V1, "v1")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for event, f := range schema.Files {
		listed[f] = true
		if f != "v1/"+event+".json" {
			t.Errorf("schema.Files[%q] = %q, want v1/%s.json", event, f, event)
		}
	}
	doc, err := os.ReadFile("schema.go")
	if err != nil {
		t.Fatal(err)
	}
	comment := string(doc[:bytes.Index(doc, []byte("var V1"))])
	comment = strings.Join(strings.Fields(strings.ReplaceAll(comment, "//", "")), " ")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if !listed["v1/"+e.Name()] {
			t.Errorf("v1/%s is not listed in schema.Files", e.Name())
		}
		if !strings.Contains(comment, e.Name()) {
			t.Errorf("the documentation of V1 in schema.go does not name %s", e.Name())
		}
	}
	if len(names) != len(schema.Files) {
		t.Errorf("schema.Files has %d entries, v1/ has %d files: %v", len(schema.Files), len(names), names)
	}
}

func validate(s compiled, data []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.sch.Validate(v)
}

// testInvalid marks inbound messages published to provoke rejections.
const testInvalid = "Test-Invalid"

// produce drives a processor through every event type the contract has and
// returns nothing: the messages are in the streams.
func produce(t *testing.T, e *servicetest.Env) {
	t.Helper()
	ctx := context.Background()
	_, js := e.Client("bot")
	pub, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	rich := testenv.Turn("s1", 0)
	rich.Kind, rich.Tool, rich.Tokens, rich.ContextTokens, rich.Meta = "tool_result", "search", 12, 5400, map[string]string{"channel": "voice-1"}
	if err := pub.PublishTurn(ctx, rich); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishNote(ctx, client.Note{Session: "s1", NoteID: "n1", Source: "Bob", Text: "Bob is screen-sharing Marvel Rivals, playing Hulk on Tokyo 2099."}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 71; i++ { // two folds: cursor 10, then 20
		if err := pub.PublishTurnAsync(testenv.Turn("s1", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	e.Settled("s1", 71, 20)
	for _, op := range []string{client.OpGenerate, client.OpCompact} {
		if err := pub.Control(ctx, "s1", op, nil); err != nil {
			t.Fatal(err)
		}
	}
	disabled := false
	if err := pub.Control(ctx, "s1", client.OpConfigure, &client.SessionConfig{RecentWindow: 40, BatchSize: 5, MaxSummaryChars: 800,
		MaxNoteChars: 200, Trigger: "turn", Profile: "voice", Disabled: &disabled}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Control(ctx, "s1", client.OpEnd, nil); err != nil {
		t.Fatal(err)
	}
	// end folds what is still verbatim (trigger end), then archives; a
	// reset before that would abandon the final fold.
	e.Eventually("session_archived", func() bool { return hasLifecycle(t, e, "s1", events.EventSessionArchived, "end") })
	late := testenv.Turn("s1", 200)
	data, _ := json.Marshal(late)
	bad := func(subject string, data []byte) {
		m := nats.NewMsg(subject)
		m.Data = data
		m.Header.Set(testInvalid, "1")
		if _, err := e.JS.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	bad("fold.in.s1.turn", data) // session_ended
	if err := pub.Control(ctx, "s1", client.OpReset, nil); err != nil {
		t.Fatal(err)
	}
	bad("fold.in.s1.turn", []byte(`{"v":1,`))
	e.Eventually("every event applied", func() bool {
		s := e.Checkpoint("s1")
		return s.Total == 0 && !s.Ended && s.LastSeq > 0 && len(e.Messages(e.Layout.Out, "fold.out.s1.event")) > 0 &&
			hasLifecycle(t, e, "s1", events.EventRejected, events.CodeBadJSON)
	})
	// A fold after the reset: its summary carries the session's epoch.
	for i := 300; i < 346; i++ {
		if err := pub.PublishTurnAsync(testenv.Turn("s1", i)); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually("a fold after the reset", func() bool {
		s := e.Checkpoint("s1")
		return s.Total == 46 && s.Cursor == 5 && s.Epoch > 0
	})
}

// produceFailure makes folds fail: a summarizer that answers 400, then 500. Session
// s2 (mode window) fails and retries; s3 (mode tokens, past its emergency
// threshold) fails twice, then folds with tier placeholder on a retry.
func produceFailure(t *testing.T) *servicetest.Env {
	e := servicetest.New(t, servicetest.Options{})
	// s2's one call is refused as a bad request (non-retryable: s2 then
	// backs off for minutes); every later call fails as a server error,
	// which is retried at the normal pace, so s3 reaches its placeholder.
	// Three bad requests in a row would open the summarizer's breaker.
	llm := openaitest.New(t, openaitest.BadRequest("this model does not summarize"))
	llm.SetFallback(openaitest.ServerError())
	sum, err := openai.New(openai.Config{BaseURL: llm.URL, APIKey: "k", Model: "fold-mini", Retry: retry.Policy{MaxAttempts: 1}}, e.Log)
	if err != nil {
		t.Fatal(err)
	}
	e.StartProcessor(processor.Config{}, sum)
	_, js := e.Client("bot")
	pub, _ := client.NewPublisher(js)
	for i := range 61 {
		if err := pub.PublishTurnAsync(testenv.Turn("s2", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Eventually("compaction_failed", func() bool { return hasLifecycle(t, e, "s2", events.EventCompactionFailed, "") })
	if err := pub.Control(context.Background(), "s3", client.OpConfigure, &client.SessionConfig{Mode: events.ModeTokens,
		ContextWindow: 4000, ReserveTokens: 400, KeepRecentTokens: 400, KeepRecentMessages: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 33 { // 3300 tokens > 80% of 4000
		if err := pub.PublishTurnAsync(turnAt("s3", i, 100, testenv.T0, "")); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Settled("s3", 33, 29)
	return e
}

func hasLifecycle(t *testing.T, e *servicetest.Env, session, typ, reason string) bool {
	for _, m := range e.Messages(e.Layout.Out, "fold.out."+session+".event") {
		var ev events.Lifecycle
		if json.Unmarshal(m.Data, &ev) == nil && ev.Type == typ && (reason == "" || ev.Reason == reason) {
			return true
		}
	}
	return false
}

// Every message the processor and the Go client really produce validates
// against its schema, every field they send is documented, and every
// documented field of the outbound events is really sent; so is every
// lifecycle type, and every value of the enums that name a mode, a cause,
// a trigger or a tier.
func TestRealMessagesMatchTheSchemas(t *testing.T) {
	schemas := compileAll(t)
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	produce(t, e)
	modes := produceModes(t)
	failing := produceFailure(t)

	seen := map[string]map[string]bool{}
	values := map[string]map[string]bool{} // "<event>.<field>" → enum values seen
	types := map[string]bool{}
	check := func(event string, m *jetstream.RawStreamMsg) {
		t.Helper()
		s := schemas[event]
		if err := validate(s, m.Data); err != nil {
			t.Errorf("%s message on %s does not match %s:\n%s\n%v", event, m.Subject, schema.Files[event], m.Data, err)
		}
		if seen[event] == nil {
			seen[event] = map[string]bool{}
		}
		for _, k := range fieldsOf(t, s, m.Data) {
			seen[event][k] = true
			if !s.props[k] {
				t.Errorf("%s field %q (on %s) is not documented in %s", event, k, m.Subject, schema.Files[event])
			}
		}
		var strs map[string]any
		_ = json.Unmarshal(m.Data, &strs)
		for field := range s.enums {
			if v, ok := strs[field].(string); ok {
				key := event + "." + field
				if values[key] == nil {
					values[key] = map[string]bool{}
				}
				values[key][v] = true
			}
		}
		if event == "lifecycle" {
			var ev events.Lifecycle
			_ = json.Unmarshal(m.Data, &ev)
			types[ev.Type] = true
		}
	}
	for _, env := range []*servicetest.Env{e, modes, failing} {
		for _, m := range env.Messages(env.Layout.In, "fold.in.>") {
			if m.Header.Get(testInvalid) != "" {
				continue
			}
			check(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:], m)
		}
		for kind, event := range map[string]string{"summary": "summary-updated", "event": "lifecycle", "evicted": "evicted", "memory": "memory"} {
			for _, m := range env.Messages(env.Layout.Out, "fold.out.*."+kind) {
				check(event, m)
			}
		}
	}
	for _, m := range recallMessages(t, failing) {
		check(m.Header.Get("Event"), m)
	}
	for _, m := range sessionMessages(t, e, modes, failing) {
		check(m.Header.Get("Event"), m)
	}
	for _, typ := range []string{events.EventCompactionSkipped, events.EventCompactionStarted, events.EventCompactionCompleted,
		events.EventCompactionFailed, events.EventSessionEnded, events.EventSessionReset, events.EventSessionConfigured,
		events.EventSessionArchived, events.EventRejected} {
		if !types[typ] {
			t.Errorf("no %s event was produced; the scenario must cover every type", typ)
		}
	}
	// Enum values no real message of the scenario carries, and why.
	notProduced := map[string]string{
		// A processor starting with a session marked due (a fold
		// interrupted by a crash or a shutdown): needs a processor killed
		// mid-fold; internal/processor's restart tests produce it.
		"lifecycle.trigger resume": "",
		// The other failure classes need a model failing each way; the
		// scenario's failing model answers 400 (bad_request), then 500
		// (server). The classes
		// are retry's (tested in internal/retry; a provider's answers are
		// classified by its backend, internal/fold/openai/classify.go).
		"lifecycle.error_class timeout": "", "lifecycle.error_class rate_limited": "",
		"lifecycle.error_class connection": "", "lifecycle.error_class auth": "", "lifecycle.error_class not_found": "",
		"lifecycle.error_class context_length": "", "lifecycle.error_class invalid_output": "",
		"lifecycle.error_class canceled": "", "lifecycle.error_class unknown": "",
	}
	for event, s := range schemas {
		if _, ok := contextSourceFiles[event]; ok {
			continue // TestContextSourceMessagesMatchTheSchemas
		}
		if _, ok := contextFiles[event]; ok {
			continue // TestContextMessagesMatchTheSchemas
		}
		var unsent []string
		for p := range s.props {
			if !seen[event][p] {
				unsent = append(unsent, p)
			}
		}
		slices.Sort(unsent)
		if len(unsent) > 0 {
			t.Errorf("%s documents fields no real message carried: %v (stale docs, or the scenario misses a case)", schema.Files[event], unsent)
		}
		if event != "lifecycle" && event != "summary-updated" {
			continue // inbound enums are the bots' choice; recall's are the client's
		}
		for field, enum := range s.enums {
			if field == "type" || field == "reason" {
				continue // types checked above; reasons are per type
			}
			for _, v := range enum {
				key := event + "." + field
				_, exempt := notProduced[key+" "+v]
				if !values[key][v] && !exempt {
					t.Errorf("%s %s %q: no real message carried it (stale docs, or the scenario misses a case)", schema.Files[event], field, v)
				}
				if values[key][v] && exempt {
					t.Errorf("%s %q is listed as not produced, but a real message carried it", key, v)
				}
			}
		}
	}
	t.Logf("validated fields: %v", slices.Sorted(maps.Keys(seen)))
	for _, key := range slices.Sorted(maps.Keys(values)) {
		t.Logf("%s values seen: %v", key, slices.Sorted(maps.Keys(values[key])))
	}
}

// turnAt is turn i of session at at, alternating a user and the bot (an
// exchange completes on the bot's answer), with tokens as the bot's count
// and marker (if any) in front of the text for modesLLM.
func turnAt(session string, i, tokens int, at time.Time, marker string) client.Turn {
	role, speaker := "user", "Alice"
	if i%2 == 1 {
		role, speaker = "assistant", "Bot"
	}
	return client.Turn{V: client.WireVersion, Session: session, TurnID: fmt.Sprintf("%s-%03d", session, i), At: at.Add(time.Duration(i) * time.Second),
		Speaker: speaker, Role: role, Text: fmt.Sprintf("%smessage number %03d from %s.", marker, i, speaker), Tokens: tokens}
}

// Markers in turn texts that select modesLLM's answer.
const (
	markSlow      = "[slow] "      // the first fold waits, so that turns arrive while it is in flight
	markRecompact = "[recompact] " // over budget at first, within it when asked to shorten
	markClamp     = "[clamp] "     // over budget even when asked to shorten
)

var msgNum = regexp.MustCompile(`message number (\d+)`)

// modesLLM is an in-process chat-completions server behind the real
// go-openai summarizer. It answers like a model: a summary naming the
// message numbers it was given, with a <memories> block; the
// markers above change that.
func modesLLM(t *testing.T, e *servicetest.Env) fold.Summarizer {
	llm := openaitest.New(t)
	var slowed atomic.Bool
	long := strings.Repeat("Alice and Bob went over the ranked match again, map by map and hero by hero. ", 4)
	llm.SetFunc(func(_ int, req openaitest.Request) openaitest.Reply {
		c := req.Content()
		nums := msgNum.FindAllStringSubmatch(c, -1)
		switch {
		case strings.Contains(c, markClamp):
			return openaitest.OK(markClamp + long)
		case strings.Contains(c, markRecompact) && len(nums) > 0:
			return openaitest.OK(markRecompact + long)
		case strings.Contains(c, markRecompact):
			return openaitest.OK("Alice and Bob reviewed the ranked match.")
		case strings.Contains(c, markSlow) && slowed.CompareAndSwap(false, true):
			time.Sleep(300 * time.Millisecond)
		}
		summary := "Alice and Bob kept talking."
		if len(nums) > 0 {
			summary = fmt.Sprintf("Alice and Bob discussed messages %s to %s.", nums[0][1], nums[len(nums)-1][1])
		}
		return openaitest.OK(summary + "\n<memories>\n- Alice mains Hulk\n- The team scrims on Fridays\n</memories>")
	})
	sum, err := openai.New(openai.Config{BaseURL: llm.URL, APIKey: "k", Model: "fold-mini", Timeout: 10 * time.Second, Retry: retry.Policy{MaxAttempts: 1}}, e.Log)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// produceModes drives sessions through the other modes on a processor with
// recall enabled and modesLLM: an eviction (evicted event), a chunked fold
// with a skipped chunk and masked tool turns, then an idle fold (mode
// tokens), interval folds with a catch-up, the recompacted and clamped
// tiers, memories, and resets by policy (idle, daily).
func produceModes(t *testing.T) *servicetest.Env {
	t.Helper()
	ctx := context.Background()
	e := servicetest.New(t, servicetest.Options{})
	// The reset scenario dates its turns up to 6 hours ahead (idle and
	// daily resets without waiting hours): allow that much clock skew.
	e.StartProcessor(processor.Config{RecallEnabled: true, MaxClockSkew: 12 * time.Hour}, modesLLM(t, e))
	_, js := e.Client("bot")
	pub, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	configure := func(session string, cfg client.SessionConfig) {
		t.Helper()
		if err := pub.Control(ctx, session, client.OpConfigure, &cfg); err != nil {
			t.Fatal(err)
		}
	}
	send := func(turns ...client.Turn) {
		t.Helper()
		for _, tr := range turns {
			if err := pub.PublishTurnAsync(tr); err != nil {
				t.Fatal(err)
			}
		}
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().UTC().Truncate(time.Second)

	// Mode evict: 19 × 100 tokens > 2000 − 200; evict down to
	// 50% of the window.
	configure("ev", client.SessionConfig{Mode: events.ModeEvict, ContextWindow: 2000, ReserveTokens: 200, TargetUtilization: 0.5, MinKeepMessages: 4})
	var ev []client.Turn
	for i := range 20 {
		ev = append(ev, turnAt("ev", i, 100, testenv.T0, ""))
	}
	send(ev...)
	e.Settled("ev", 20, 9)

	// Mode tokens, turns an hour old so that tool turns
	// are masked: 13 turns, 3300 tokens > 80% of 4000 (emergency). Turns
	// 0..10 are folded in two chunks: 0..9 (1000 tokens) and 10 alone
	// (2100 tokens, over half the window: skipped, tier partial).
	configure("tk", client.SessionConfig{Mode: events.ModeTokens, ContextWindow: 4000, ReserveTokens: 400, KeepRecentTokens: 400,
		KeepRecentMessages: 2, IdleAfterSeconds: 1, IdleThreshold: 0.5, EmergencyThreshold: 0.8, MaskToolOutputsAfterSeconds: 60})
	var tk []client.Turn
	for i := range 13 {
		tr := turnAt("tk", i, 100, now.Add(-time.Hour), "")
		switch i {
		case 1:
			tr.Kind, tr.Tool, tr.Text = "tool_call", "grep", `grep -r "ranked" ./notes`
		case 2:
			tr.Speaker, tr.Role, tr.Kind, tr.Tool, tr.Text = "grep", "tool", "tool_result", "grep", strings.Repeat("notes/ranked.md: Tokyo 2099 ", 20)
		case 10:
			tr.Tokens = 2100
		}
		tk = append(tk, tr)
	}
	send(tk...)
	e.Settled("tk", 13, 11)
	// Ten more turns, 2000 tokens: above the idle threshold (50%), below
	// the emergency; folded once the session is quiet for a second.
	tk = tk[:0]
	for i := 13; i < 23; i++ {
		tk = append(tk, turnAt("tk", i, 200, now.Add(-time.Hour), ""))
	}
	send(tk...)
	e.Settled("tk", 23, 21)

	// Mode interval: a fold every 2 exchanges keeping 2 turns;
	// the first fold is slow, so the next one starts on catch_up.
	configure("iv", client.SessionConfig{Mode: events.ModeInterval, IntervalExchanges: 2, KeepRecent: 2})
	var iv []client.Turn
	for i := range 12 {
		iv = append(iv, turnAt("iv", i, 0, testenv.T0, markSlow))
	}
	send(iv...)
	e.Settled("iv", 12, 10)

	// Mode window with min_fold_tokens: the fold waits for 10 eligible
	// turns (1000 tokens), not a batch of 2 at 5 turns.
	minFold := 1000
	configure("mf", client.SessionConfig{Mode: events.ModeWindow, RecentWindow: 2, BatchSize: 2, MinFoldTokens: &minFold})
	var mf []client.Turn
	for i := range 12 {
		mf = append(mf, turnAt("mf", i, 100, testenv.T0, ""))
	}
	send(mf...)
	e.Settled("mf", 12, 10)

	// Mode window's recompacted and clamped tiers: a budget of 100 chars.
	for session, marker := range map[string]string{"rc": markRecompact, "cl": markClamp} {
		configure(session, client.SessionConfig{Mode: events.ModeWindow, RecentWindow: 2, BatchSize: 2, MaxSummaryChars: 100})
		var turns []client.Turn
		for i := range 5 {
			turns = append(turns, turnAt(session, i, 0, testenv.T0, marker))
		}
		send(turns...)
		e.Settled(session, 5, 2)
	}

	// Reset policies go by the events' times (the configure's is now):
	// idle after 30 minutes of silence, then daily at an hour between
	// the last event and the next.
	configure("rs", client.SessionConfig{ResetPolicy: events.ResetIdle, ResetIdleMinutes: 30})
	send(turnAt("rs", 0, 0, now.Add(time.Minute), ""))
	send(turnAt("rs", 1, 0, now.Add(2*time.Hour), ""))
	e.Eventually("idle reset", func() bool { return hasLifecycle(t, e, "rs", events.EventSessionReset, events.ResetIdle) })
	hour := now.Add(4 * time.Hour).Hour() // its next occurrence is between now+3h and now+4h
	configure("rs", client.SessionConfig{ResetPolicy: events.ResetDaily, ResetHour: &hour})
	send(turnAt("rs", 2, 0, now.Add(6*time.Hour), ""))
	e.Eventually("daily reset", func() bool { return hasLifecycle(t, e, "rs", events.EventSessionReset, events.ResetDaily) })

	// Every other registered mode (a mode is one file under
	// internal/fold, with no scenario of its own here): a session in it,
	// folded by a compact.
	covered := map[string]bool{events.ModeEvict: true, events.ModeTokens: true, events.ModeInterval: true, events.ModeWindow: true}
	for _, m := range fold.ModeNames() {
		if covered[m] {
			continue
		}
		session := "m-" + m
		configure(session, client.SessionConfig{Mode: m})
		var turns []client.Turn
		for i := range 30 {
			turns = append(turns, turnAt(session, i, 100, testenv.T0, ""))
		}
		send(turns...)
		if err := pub.Control(ctx, session, client.OpCompact, nil); err != nil {
			t.Fatal(err)
		}
		e.Eventually("a fold in mode "+m, func() bool { return len(e.Messages(e.Layout.Out, "fold.out."+session+".summary")) > 0 })
	}

	e.Eventually("evicted and memory events", func() bool {
		return len(e.Messages(e.Layout.Out, "fold.out.ev.evicted")) == 1 && len(e.Messages(e.Layout.Out, "fold.out.*.memory")) > 0
	})
	return e
}

// recallMessages asks the recall endpoint through the Go client (session
// s2: 61 turns) and returns the request as the client sent it and the
// reply, each with header Event naming its schema.
func recallMessages(t *testing.T, e *servicetest.Env) []*jetstream.RawStreamMsg {
	t.Helper()
	e.StartService(nil)
	nc, js := e.Client("builder")
	sniff, err := nc.SubscribeSync(client.ServiceSubject("fold", client.EndpointRecall))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	b, _ := client.NewBuilder(nc, js)
	r, err := b.Recall(context.Background(), "s2", "ranked match from Alice", client.RecallOptions{Limit: 5, Scope: client.RecallScopeAll})
	if err != nil || len(r.Results) != 5 {
		t.Fatalf("recall: %v, %+v", err, r)
	}
	req, err := sniff.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	reply, err := nc.Request(req.Subject, req.Data, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return []*jetstream.RawStreamMsg{
		{Subject: req.Subject, Data: req.Data, Header: nats.Header{"Event": {"recall-request"}}},
		{Subject: req.Subject + " (reply)", Data: reply.Data, Header: nats.Header{"Event": {"recall-response"}}},
	}
}

// Invalid messages are rejected by the schema, and the inbound ones by the
// processor's validation too: the schema and the code say the same.
func TestInvalidExamplesAreRejected(t *testing.T) {
	schemas := compileAll(t)
	turn := `{"v":1,"session":"s1","turn_id":"t1","at":"2026-11-22T20:00:00Z","speaker":"Alice","role":"user","text":"hi","future":{"x":1}}`
	note := `{"v":1,"session":"s1","note_id":"n1","at":"2026-11-22T20:00:00Z","source":"Bob","text":"Tokyo map"}`
	control := `{"v":1,"session":"s1","op":"configure","config":{"recent_window":20,"max_summary_chars":800,"trigger":"generate"}}`
	summary := `{"v":1,"session":"s1","version":1,"summary":"Alice and Bob talked.","cursor":10,"covered_through_turn":9,` +
		`"from":"2026-11-22T20:00:00Z","to":"2026-11-22T20:01:30Z","folded_turns":10,"folded_notes":0,"summary_chars":21,` +
		`"summary_tokens":5,"original_tokens":120,"mode":"window","tier":"full","compactions":1,"model":"offline","latency_ms":3,"at":"2026-11-22T20:01:31Z"}`
	lifecycle := `{"v":1,"session":"s1","type":"compaction_skipped","at":"2026-11-22T20:00:00Z","reason":"below_threshold","trigger":"turn","cursor":0,"total_turns":3}`
	recallReq := `{"v":1,"session":"s1","query":"tournament form","limit":5,"scope":"evicted"}`
	recallResp := `{"v":1,"session":"s1","query":"tournament form","scope":"evicted","cursor":10,"searched":10,` +
		`"results":[{"turn_id":"t3","index":3,"at":"2026-11-22T20:00:30Z","speaker":"Dave","role":"user","text":"Send the tournament form.","score":3.2}]}`
	tokensControl := `{"v":1,"session":"s1","op":"configure","config":{"mode":"tokens","context_window":32000,"reserve_tokens":4000,` +
		`"idle_after_seconds":300,"idle_threshold":0.6,"emergency_threshold":0.8,"keep_recent_tokens":6400,"keep_recent_messages":10,` +
		`"mask_tool_outputs_after_seconds":600,"reset_policy":"daily","reset_hour":0}}`
	windowControl := `{"v":1,"session":"s1","op":"configure","config":{"mode":"window","recent_window":50,"batch_size":10,"min_fold_tokens":2000}}`
	evictControl := `{"v":1,"session":"s1","op":"configure","config":{"mode":"evict","context_window":2000,"reserve_tokens":200,` +
		`"target_utilization":0.5,"min_keep_messages":4,"reset_policy":"idle","reset_idle_minutes":30}}`
	started := `{"v":1,"session":"s1","type":"compaction_started","at":"2026-11-22T20:00:00Z","fold_id":"f1","trigger":"idle","mode":"tokens",` +
		`"cause":"idle","estimate_tokens":2240,"limit_tokens":2000,"cursor":11,"total_turns":23,"recent_start":21,"eligible":10,"batch_size":10,"batch_from":11,"batch_to":20}`
	archived := `{"v":1,"session":"s1","type":"session_archived","at":"2026-11-22T20:00:00Z","reason":"end","cursor":0,"total_turns":0,"version":2,"summary_chars":80}`
	evicted := `{"v":1,"session":"s1","version":1,"count":9,"tokens":900,"first_at":"2026-11-22T20:00:00Z","last_at":"2026-11-22T20:01:20Z",` +
		`"from_turn":0,"to_turn":8,"cursor":9,"total_evicted":9,"note":"[Context rolled: 9 messages evicted (900 tokens).]","at":"2026-11-22T20:01:31Z"}`
	memory := `{"v":1,"session":"s1","version":1,"fold_id":"f1","memories":["Alice prefers tea"],"model":"gpt-4o-mini","at":"2026-11-22T20:01:31Z"}`
	valid := map[string]string{"turn": turn, "note": note, "control": control, "summary-updated": summary, "lifecycle": lifecycle,
		"recall-request": recallReq, "recall-response": recallResp, "evicted": evicted, "memory": memory}
	for name, doc := range map[string]string{"tokens": tokensControl, "evict": evictControl, "window": windowControl,
		"window min_fold_tokens 0": strings.Replace(windowControl, `2000`, `0`, 1)} {
		if err := validate(schemas["control"], []byte(doc)); err != nil {
			t.Errorf("valid %s configure rejected: %v", name, err)
		}
		if _, err := events.DecodeInbound("control", "s1", []byte(doc), events.Limits{}); err != nil {
			t.Errorf("valid %s configure rejected by the processor: %v", name, err)
		}
	}
	for name, doc := range map[string]string{"started": started, "archived": archived} {
		if err := validate(schemas["lifecycle"], []byte(doc)); err != nil {
			t.Errorf("valid lifecycle %s rejected: %v", name, err)
		}
	}
	for event, doc := range valid {
		if err := validate(schemas[event], []byte(doc)); err != nil {
			t.Errorf("valid %s rejected: %v", event, err)
		}
		if kind := map[string]string{"turn": "turn", "note": "note", "control": "control"}[event]; kind != "" {
			if _, err := events.DecodeInbound(kind, "s1", []byte(doc), events.Limits{}); err != nil {
				t.Errorf("valid %s rejected by the processor: %v", event, err)
			}
		}
		if event == "recall-request" {
			if err := checkRecall(doc); err != nil {
				t.Errorf("valid recall request rejected by the client and service: %v", err)
			}
		}
	}
	r := strings.NewReplacer // shorthand: one substitution per case
	cases := []struct {
		event, name, doc string
	}{
		{"turn", "bad session", r(`"session":"s1"`, `"session":"a.b"`).Replace(turn)},
		{"turn", "missing turn_id", r(`"turn_id":"t1",`, ``).Replace(turn)},
		{"turn", "blank turn_id", r(`"turn_id":"t1"`, `"turn_id":"  "`).Replace(turn)},
		{"turn", "at not RFC 3339", r(`2026-11-22T20:00:00Z`, `yesterday`).Replace(turn)},
		{"turn", "unknown role", r(`"role":"user"`, `"role":"narrator"`).Replace(turn)},
		{"turn", "empty text", r(`"text":"hi"`, `"text":""`).Replace(turn)},
		{"turn", "text not a string", r(`"text":"hi"`, `"text":42`).Replace(turn)},
		{"turn", "version 2", r(`"v":1`, `"v":2`).Replace(turn)},
		{"turn", "missing v", r(`"v":1,`, ``).Replace(turn)},
		{"turn", "negative tokens", r(`"text":"hi"`, `"text":"hi","tokens":-1`).Replace(turn)},
		{"note", "missing text", r(`,"text":"Tokyo map"`, ``).Replace(note)},
		{"note", "missing note_id", r(`"note_id":"n1",`, ``).Replace(note)},
		{"control", "unknown op", `{"v":1,"session":"s1","op":"explode"}`},
		{"control", "configure without config", `{"v":1,"session":"s1","op":"configure"}`},
		{"control", "bad trigger", r(`"generate"`, `"always"`).Replace(control)},
		{"control", "summary budget too small", r(`800`, `50`).Replace(control)},
		{"control", "unknown mode", r(`"mode":"tokens"`, `"mode":"rolling"`).Replace(tokensControl)},
		{"control", "context_window 1023", r(`"context_window":32000`, `"context_window":1023`).Replace(tokensControl)},
		{"control", "negative reserve", r(`"reserve_tokens":4000`, `"reserve_tokens":-1`).Replace(tokensControl)},
		{"control", "idle_threshold 1", r(`"idle_threshold":0.6`, `"idle_threshold":1`).Replace(tokensControl)},
		{"control", "negative emergency_threshold", r(`"emergency_threshold":0.8`, `"emergency_threshold":-0.8`).Replace(tokensControl)},
		{"control", "target_utilization 1.5", r(`0.5`, `1.5`).Replace(evictControl)},
		{"control", "min_keep_messages 100001", r(`"min_keep_messages":4`, `"min_keep_messages":100001`).Replace(evictControl)},
		{"control", "reset_hour 24", r(`"reset_hour":0`, `"reset_hour":24`).Replace(tokensControl)},
		{"control", "daily without reset_hour", r(`,"reset_hour":0`, ``).Replace(tokensControl)},
		{"control", "idle without reset_idle_minutes", r(`,"reset_idle_minutes":30`, ``).Replace(evictControl)},
		{"control", "idle with reset_idle_minutes 0", r(`"reset_idle_minutes":30`, `"reset_idle_minutes":0`).Replace(evictControl)},
		{"control", "unknown reset_policy", r(`"idle"`, `"weekly"`).Replace(evictControl)},
		{"control", "negative min_fold_tokens", r(`"min_fold_tokens":2000`, `"min_fold_tokens":-1`).Replace(windowControl)},
		{"control", "min_fold_tokens above 1000000", r(`"min_fold_tokens":2000`, `"min_fold_tokens":1000001`).Replace(windowControl)},
		{"control", "min_fold_tokens not an integer", r(`"min_fold_tokens":2000`, `"min_fold_tokens":"2000"`).Replace(windowControl)},
		{"summary-updated", "unknown mode", r(`"mode":"window"`, `"mode":"rolling"`).Replace(summary)},
		{"summary-updated", "missing version", r(`"version":1,`, ``).Replace(summary)},
		{"summary-updated", "empty summary", r(`"summary":"Alice and Bob talked."`, `"summary":""`).Replace(summary)},
		{"summary-updated", "unknown tier", r(`"tier":"full"`, `"tier":"best"`).Replace(summary)},
		{"summary-updated", "bad at", r(`"at":"2026-11-22T20:01:31Z"`, `"at":"now"`).Replace(summary)},
		{"lifecycle", "unknown type", r(`"compaction_skipped"`, `"compaction_exploded"`).Replace(lifecycle)},
		{"lifecycle", "unknown skip reason", r(`"below_threshold"`, `"bored"`).Replace(lifecycle)},
		{"lifecycle", "skip without reason", r(`"reason":"below_threshold",`, ``).Replace(lifecycle)},
		{"lifecycle", "failure without class", `{"v":1,"session":"s1","type":"compaction_failed","at":"2026-11-22T20:00:00Z","fold_id":"f","retryable":true,"error":"x","cursor":0,"total_turns":61}`},
		{"lifecycle", "missing cursor", r(`"cursor":0,`, ``).Replace(lifecycle)},
		{"lifecycle", "unknown trigger", r(`"trigger":"idle"`, `"trigger":"timer"`).Replace(started)},
		{"lifecycle", "unknown cause", r(`"cause":"idle"`, `"cause":"boredom"`).Replace(started)},
		{"lifecycle", "unknown mode", r(`"mode":"tokens"`, `"mode":"rolling"`).Replace(started)},
		{"lifecycle", "negative estimate", r(`"estimate_tokens":2240`, `"estimate_tokens":-1`).Replace(started)},
		{"lifecycle", "archived without reason", r(`"reason":"end",`, ``).Replace(archived)},
		{"lifecycle", "unknown tier", `{"v":1,"session":"s1","type":"compaction_completed","at":"2026-11-22T20:00:00Z","fold_id":"f","mode":"tokens","cause":"idle","new_cursor":3,"version":1,"tier":"best","cursor":3,"total_turns":5}`},
		{"evicted", "missing note", r(`,"note":"[Context rolled: 9 messages evicted (900 tokens).]"`, ``).Replace(evicted)},
		{"evicted", "count 0", r(`"count":9`, `"count":0`).Replace(evicted)},
		{"evicted", "last_at not RFC 3339", r(`2026-11-22T20:01:20Z`, `later`).Replace(evicted)},
		{"memory", "no memories", r(`["Alice prefers tea"]`, `[]`).Replace(memory)},
		{"memory", "blank memory", r(`"Alice prefers tea"`, `" "`).Replace(memory)},
		{"memory", "missing fold_id", r(`"fold_id":"f1",`, ``).Replace(memory)},
		{"recall-request", "missing query", r(`"query":"tournament form",`, ``).Replace(recallReq)},
		{"recall-request", "query without a word", r(`"tournament form"`, `"?! …"`).Replace(recallReq)},
		{"recall-request", "limit 0", r(`"limit":5`, `"limit":0`).Replace(recallReq)},
		{"recall-request", "limit 51", r(`"limit":5`, `"limit":51`).Replace(recallReq)},
		{"recall-request", "unknown scope", r(`"evicted"`, `"recent"`).Replace(recallReq)},
		{"recall-request", "bad session", r(`"s1"`, `"a.b"`).Replace(recallReq)},
		{"recall-request", "version 2", r(`"v":1`, `"v":2`).Replace(recallReq)},
		{"recall-response", "missing cursor", r(`"cursor":10,`, ``).Replace(recallResp)},
		{"recall-response", "result without turn_id", r(`"turn_id":"t3",`, ``).Replace(recallResp)},
		{"recall-response", "negative index", r(`"index":3`, `"index":-1`).Replace(recallResp)},
	}
	for _, tc := range cases {
		if err := validate(schemas[tc.event], []byte(tc.doc)); err == nil {
			t.Errorf("%s %q accepted by %s: %s", tc.event, tc.name, schema.Files[tc.event], tc.doc)
		}
		if tc.event == "turn" || tc.event == "note" || tc.event == "control" {
			if _, err := events.DecodeInbound(tc.event, "s1", []byte(tc.doc), events.Limits{}); err == nil {
				t.Errorf("%s %q accepted by the processor but rejected by the schema: %s", tc.event, tc.name, tc.doc)
			}
		}
		// limit 0 means "the default" to the Go client, which sends it
		// only when set; on the wire it is out of range.
		if tc.event == "recall-request" && tc.name != "limit 0" && checkRecall(tc.doc) == nil {
			t.Errorf("recall request %q accepted by the client and service but rejected by the schema: %s", tc.name, tc.doc)
		}
	}
}

// The ranges of the config keys are SessionConfig.Validate's: both ends of
// every range are accepted by the schema and the processor, one past
// either end rejected by both (0 means "keep the setting" throughout).
func TestConfigRangesMatchTheProcessor(t *testing.T) {
	schemas := compileAll(t)
	check := func(key, value string, ok bool) {
		t.Helper()
		doc := `{"v":1,"session":"s1","op":"configure","config":{"` + key + `":` + value + `}}`
		if key == "reset_idle_minutes" {
			doc = strings.Replace(doc, `"config":{`, `"config":{"reset_policy":"idle",`, 1)
		}
		schemaErr := validate(schemas["control"], []byte(doc))
		_, codeErr := events.DecodeInbound("control", "s1", []byte(doc), events.Limits{})
		if (schemaErr == nil) != ok || (codeErr == nil) != ok {
			t.Errorf("%s = %s: want accepted %v; schema: %v; processor: %v", key, value, ok, schemaErr, codeErr)
		}
	}
	for _, r := range []struct {
		key    string
		lo, hi int
	}{
		{"context_window", 1024, 10_000_000}, {"reserve_tokens", 1, 10_000_000}, {"idle_after_seconds", 1, 30 * 24 * 3600},
		{"keep_recent_tokens", 1, 10_000_000}, {"keep_recent_messages", 1, 100_000}, {"min_keep_messages", 1, 100_000},
		{"interval_exchanges", 1, 10_000}, {"keep_recent", 1, 10_000}, {"mask_tool_outputs_after_seconds", 1, 365 * 24 * 3600},
		{"reset_idle_minutes", 1, 365 * 24 * 60}, {"recent_window", 0, 10000}, {"batch_size", 0, 1000},
		{"max_summary_chars", 100, 100000}, {"max_note_chars", 0, 100000}, {"reset_hour", 0, 23},
	} {
		check(r.key, fmt.Sprint(r.lo), true)
		check(r.key, fmt.Sprint(r.hi), true)
		check(r.key, fmt.Sprint(r.hi+1), false)
		if r.lo-1 != 0 {
			check(r.key, fmt.Sprint(r.lo-1), false)
		} else if r.key != "reset_idle_minutes" {
			check(r.key, "0", true)
		}
		check(r.key, "-1", false)
	}
	for _, key := range []string{"idle_threshold", "emergency_threshold", "target_utilization"} {
		for value, ok := range map[string]bool{"0": true, "0.001": true, "0.999": true, "1": false, "-0.5": false, "1.5": false} {
			check(key, value, ok)
		}
	}
	// Comparisons between two keys are beyond JSON Schema: the schema
	// accepts these, the processor rejects them (the descriptions say so).
	for name, cfg := range map[string]string{
		"reserve_tokens not below context_window": `"context_window":2000,"reserve_tokens":2000`,
		"idle_threshold not below emergency":      `"idle_threshold":0.8,"emergency_threshold":0.8`,
	} {
		doc := `{"v":1,"session":"s1","op":"configure","config":{` + cfg + `}}`
		if err := validate(schemas["control"], []byte(doc)); err != nil {
			t.Errorf("%s: the schema cannot compare keys, but rejected it: %v", name, err)
		}
		if _, err := events.DecodeInbound("control", "s1", []byte(doc), events.Limits{}); err == nil {
			t.Errorf("%s: accepted by the processor", name)
		}
	}
}

// The context-source protocol: the requests an Asker really sends and the
// replies a source built with contextsource.Serve really sends (text and
// error) match their schemas, every field of either is documented, every
// documented field is sent; invalid examples are rejected by the schema
// and by the code alike.
func TestContextSourceMessagesMatchTheSchemas(t *testing.T) {
	schemas := compileFiles(t, contextSourceFiles)
	env := brokertest.Start(t, brokertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for subject, answer := range map[string]contextsource.AnswerFunc{
		"ctx.calendar": func(context.Context, contextsource.Request) (string, error) { return "Dentist at 2pm in 45 min.", nil },
		"ctx.mail":     func(context.Context, contextsource.Request) (string, error) { return "", errors.New("mailbox locked") },
	} {
		name := strings.TrimPrefix(subject, "ctx.")
		if _, err := contextsource.Serve(ctx, env.NC, contextsource.ServiceConfig{Name: name, Subject: subject}, answer, zerolog.Nop()); err != nil {
			t.Fatal(err)
		}
	}
	reqs, err := env.NC.SubscribeSync("ctx.*")
	if err != nil {
		t.Fatal(err)
	}
	replies, err := env.NC.SubscribeSync(nats.InboxPrefix + ">")
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 3, 2, 9, 15, 0, 0, time.UTC)
	answers := contextsource.NewAsker(env.NC, zerolog.Nop()).Ask(ctx, "s1", from, from.Add(5*time.Hour), []contextsource.Source{
		{Label: "Calendar", Subject: "ctx.calendar", Prompt: "Events and the next 4 hours.", Timeout: 30 * time.Second},
		{Label: "Mail", Subject: "ctx.mail", Timeout: 30 * time.Second},
	})
	if answers[0].Status != contextsource.StatusOK || answers[1].Status != contextsource.StatusError {
		t.Fatalf("answers %+v", answers)
	}
	seen := map[string]map[string]bool{}
	for event, sub := range map[string]*nats.Subscription{"context-source-request": reqs, "context-source-reply": replies} {
		seen[event] = map[string]bool{}
		for range 2 {
			m, err := sub.NextMsg(30 * time.Second)
			if err != nil {
				t.Fatalf("%s: %v", event, err)
			}
			if err := validate(schemas[event], m.Data); err != nil {
				t.Errorf("%s %s does not match %s: %v", event, m.Data, contextSourceFiles[event], err)
			}
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(m.Data, &fields); err != nil {
				t.Fatal(err)
			}
			for k := range fields {
				seen[event][k] = true
				if !schemas[event].props[k] {
					t.Errorf("%s field %q is not documented in %s", event, k, contextSourceFiles[event])
				}
			}
		}
	}
	for event, s := range schemas {
		for p := range s.props {
			if !seen[event][p] {
				t.Errorf("%s documents %q, which no real message carried", contextSourceFiles[event], p)
			}
		}
	}

	req := `{"v":1,"session":"s1","from":"2026-03-02T09:15:00Z","to":"2026-03-02T14:30:00Z","prompt":"Next 4 hours."}`
	if err := validate(schemas["context-source-request"], []byte(req)); err != nil {
		t.Errorf("valid request rejected: %v", err)
	}
	if _, err := contextsource.DecodeRequest([]byte(req)); err != nil {
		t.Errorf("valid request rejected by the code: %v", err)
	}
	r := strings.NewReplacer
	for name, doc := range map[string]string{
		"missing to":      r(`,"to":"2026-03-02T14:30:00Z"`, ``).Replace(req),
		"from not a time": r(`"from":"2026-03-02T09:15:00Z"`, `"from":"this morning"`).Replace(req),
		"bad session":     r(`"s1"`, `"a.b"`).Replace(req),
		"version 2":       r(`"v":1`, `"v":2`).Replace(req),
	} {
		if validate(schemas["context-source-request"], []byte(doc)) == nil {
			t.Errorf("request %q accepted by the schema: %s", name, doc)
		}
		if _, err := contextsource.DecodeRequest([]byte(doc)); err == nil {
			t.Errorf("request %q accepted by the code: %s", name, doc)
		}
	}
	for name, doc := range map[string]string{
		"text":           `{"v":1,"text":"Dentist at 2pm."}`,
		"nothing to say": `{"v":1,"text":""}`,
		"error":          `{"v":1,"error":"mailbox locked"}`,
	} {
		if err := validate(schemas["context-source-reply"], []byte(doc)); err != nil {
			t.Errorf("valid reply %q rejected: %v", name, err)
		}
	}
	for name, doc := range map[string]string{
		"neither":         `{"v":1}`,
		"both":            `{"v":1,"text":"x","error":"y"}`,
		"blank error":     `{"v":1,"error":" "}`,
		"missing v":       `{"text":"x"}`,
		"a JetStream ack": `{"stream":"FOLD_IN","seq":7}`,
	} {
		if validate(schemas["context-source-reply"], []byte(doc)) == nil {
			t.Errorf("reply %q accepted by the schema: %s", name, doc)
		}
	}
}

// checkRecall applies the service's checks to a recall request document.
func checkRecall(doc string) error {
	var r client.RecallRequest
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		return err
	}
	if err := client.CheckRecall(&r); err != nil {
		return err
	}
	if !slices.ContainsFunc([]rune(r.Query), func(c rune) bool { return unicode.IsLetter(c) || unicode.IsNumber(c) }) {
		return errors.New("query without a word")
	}
	return nil
}
