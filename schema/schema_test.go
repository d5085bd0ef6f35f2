package schema_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/schema"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// compiled is one schema file, compiled with format assertions on (so
// "date-time" is checked), plus the properties it documents.
type compiled struct {
	sch   *jsonschema.Schema
	props map[string]bool
}

func compileAll(t *testing.T) map[string]compiled {
	t.Helper()
	return compileFiles(t, schema.Files)
}

// contextSourceFiles are the schemas of the context-source protocol (the
// processor asks calendar, mail, … services at a fold), checked by
// TestContextSourceMessagesMatchTheSchemas.
var contextSourceFiles = map[string]string{
	"context-source-request": "v1/context-source-request.json",
	"context-source-reply":   "v1/context-source-reply.json",
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
		var raw struct {
			Schema     string                     `json:"$schema"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		_ = json.Unmarshal(data, &raw)
		if raw.Schema != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema %q, want draft 2020-12", file, raw.Schema)
		}
		props := map[string]bool{}
		for name, p := range raw.Properties {
			props[name] = true
			if !bytes.Contains(p, []byte(`"description"`)) {
				t.Errorf("%s: property %q has no description", file, name)
			}
		}
		out[event] = compiled{sch: sch, props: props}
	}
	entries, _ := fs.ReadDir(schema.V1, "v1")
	listed := map[string]bool{}
	for _, f := range slices.Concat(slices.Collect(maps.Values(schema.Files)), slices.Collect(maps.Values(contextSourceFiles))) {
		listed[f] = true
	}
	for _, e := range entries {
		if !listed["v1/"+e.Name()] {
			t.Errorf("v1/%s is not listed in schema.Files", e.Name())
		}
	}
	return out
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
	rich := servicetest.Turn("s1", 0)
	rich.Kind, rich.Tool, rich.Tokens, rich.ContextTokens, rich.Meta = "tool_result", "search", 12, 5400, map[string]string{"channel": "voice-1"}
	if err := pub.PublishTurn(ctx, rich); err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishNote(ctx, client.Note{Session: "s1", NoteID: "n1", Source: "Bob", Text: "Bob is screen-sharing Marvel Rivals, playing Hulk on Tokyo 2099."}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 71; i++ { // two folds: cursor 10, then 20
		if err := pub.PublishTurnAsync(servicetest.Turn("s1", i)); err != nil {
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
	late := servicetest.Turn("s1", 200)
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
		return s.Total == 0 && !s.Ended && s.LastSeq > 0 && len(outbound(t, e, "fold.out.s1.event")) > 0 &&
			hasLifecycle(t, e, "s1", events.EventRejected, events.CodeBadJSON)
	})
}

// produceFailure makes a fold fail: a summarizer that answers 400.
func produceFailure(t *testing.T) *servicetest.Env {
	e := servicetest.New(t, servicetest.Options{})
	llm := openaitest.New(t)
	llm.SetFallback(openaitest.BadRequest("this model does not summarize"))
	sum, err := openai.New(openai.Config{BaseURL: llm.URL, APIKey: "k", Model: "fold-mini", Retry: retry.Policy{MaxAttempts: 1}}, e.Log)
	if err != nil {
		t.Fatal(err)
	}
	e.StartProcessor(processor.Config{}, sum)
	_, js := e.Client("bot")
	pub, _ := client.NewPublisher(js)
	for i := range 61 {
		if err := pub.PublishTurnAsync(servicetest.Turn("s2", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Eventually("compaction_failed", func() bool { return hasLifecycle(t, e, "s2", events.EventCompactionFailed, "") })
	return e
}

func outbound(t *testing.T, e *servicetest.Env, subject string) []*jetstream.RawStreamMsg {
	return streamMsgs(t, e, e.Layout.Out, subject)
}

func streamMsgs(t *testing.T, e *servicetest.Env, stream, subject string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx := context.Background()
	s, err := e.JS.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
		seq = m.Sequence
	}
}

func hasLifecycle(t *testing.T, e *servicetest.Env, session, typ, reason string) bool {
	for _, m := range outbound(t, e, "fold.out."+session+".event") {
		var ev events.Lifecycle
		if json.Unmarshal(m.Data, &ev) == nil && ev.Type == typ && (reason == "" || ev.Reason == reason) {
			return true
		}
	}
	return false
}

// Every message the processor and the Go client really produce validates
// against its schema, every field they send is documented, and every
// documented field of the outbound events is really sent.
func TestRealMessagesMatchTheSchemas(t *testing.T) {
	schemas := compileAll(t)
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	produce(t, e)
	failing := produceFailure(t)

	seen := map[string]map[string]bool{}
	types := map[string]bool{}
	check := func(event string, m *jetstream.RawStreamMsg) {
		t.Helper()
		s := schemas[event]
		if err := validate(s, m.Data); err != nil {
			t.Errorf("%s message on %s does not match %s:\n%s\n%v", event, m.Subject, schema.Files[event], m.Data, err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(m.Data, &fields); err != nil {
			t.Fatal(err)
		}
		if seen[event] == nil {
			seen[event] = map[string]bool{}
		}
		for k := range fields {
			seen[event][k] = true
			if !s.props[k] {
				t.Errorf("%s field %q (on %s) is not documented in %s", event, k, m.Subject, schema.Files[event])
			}
		}
		if event == "lifecycle" {
			var ev events.Lifecycle
			_ = json.Unmarshal(m.Data, &ev)
			types[ev.Type] = true
		}
	}
	for _, env := range []*servicetest.Env{e, failing} {
		for _, m := range streamMsgs(t, env, env.Layout.In, "fold.in.>") {
			if m.Header.Get(testInvalid) != "" {
				continue
			}
			check(m.Subject[strings.LastIndexByte(m.Subject, '.')+1:], m)
		}
		for _, m := range outbound(t, env, "fold.out.*.summary") {
			check("summary-updated", m)
		}
		for _, m := range outbound(t, env, "fold.out.*.event") {
			check("lifecycle", m)
		}
	}
	for _, m := range recallMessages(t, failing) {
		check(m.Header.Get("Event"), m)
	}
	for _, typ := range []string{events.EventCompactionSkipped, events.EventCompactionStarted, events.EventCompactionCompleted,
		events.EventCompactionFailed, events.EventSessionEnded, events.EventSessionReset, events.EventSessionConfigured, events.EventRejected} {
		if !types[typ] {
			t.Errorf("no %s event was produced; the scenario must cover every type", typ)
		}
	}
	for event, s := range schemas {
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
	}
	t.Logf("validated fields: %v", slices.Sorted(maps.Keys(seen)))
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
	valid := map[string]string{"turn": turn, "note": note, "control": control, "summary-updated": summary, "lifecycle": lifecycle,
		"recall-request": recallReq, "recall-response": recallResp}
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
		{"summary-updated", "missing version", r(`"version":1,`, ``).Replace(summary)},
		{"summary-updated", "empty summary", r(`"summary":"Alice and Bob talked."`, `"summary":""`).Replace(summary)},
		{"summary-updated", "unknown tier", r(`"tier":"full"`, `"tier":"best"`).Replace(summary)},
		{"summary-updated", "bad at", r(`"at":"2026-11-22T20:01:31Z"`, `"at":"now"`).Replace(summary)},
		{"lifecycle", "unknown type", r(`"compaction_skipped"`, `"compaction_exploded"`).Replace(lifecycle)},
		{"lifecycle", "unknown skip reason", r(`"below_threshold"`, `"bored"`).Replace(lifecycle)},
		{"lifecycle", "skip without reason", r(`"reason":"below_threshold",`, ``).Replace(lifecycle)},
		{"lifecycle", "failure without class", `{"v":1,"session":"s1","type":"compaction_failed","at":"2026-11-22T20:00:00Z","fold_id":"f","retryable":true,"error":"x","cursor":0,"total_turns":61}`},
		{"lifecycle", "missing cursor", r(`"cursor":0,`, ``).Replace(lifecycle)},
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
