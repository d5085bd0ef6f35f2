package schema_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/foldstream/foldstream/schema"
)

// contextFiles are the schemas of the context endpoint, checked by
// TestContextMessagesMatchTheSchemas.
var contextFiles = map[string]string{
	"context-request": schema.Files["context-request"],
	"context-reply":   schema.Files["context-reply"],
}

// Real context requests, as the Go client sends them, and the service's
// replies (with and without a query, with a memory and earlier turns
// recalled) match the schemas, and every field they carry is documented;
// invalid requests are refused by the schema and the client alike.
func TestContextMessagesMatchTheSchemas(t *testing.T) {
	schemas := compileFiles(t, contextFiles)
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	ctx := context.Background()
	nc, js := e.Client("builder")
	pub, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		turn := testenv.Turn("s1", i)
		if i == 3 {
			turn.Text = "Can someone send the tournament form by Friday?"
		}
		if err := pub.PublishTurn(ctx, turn); err != nil {
			t.Fatal(err)
		}
	}
	e.Settled("s1", 64, 10)
	mem, _ := json.Marshal(events.Memories{V: 1, Session: "s1", Version: 1, FoldID: "f1", Memories: []string{"Bob sends the tournament form."}, At: testenv.T0})
	if _, err := e.JS.Publish(ctx, e.Layout.Subjects.Out("s1", events.KindMemory), mem); err != nil {
		t.Fatal(err)
	}

	sniff, err := nc.SubscribeSync(client.ServiceSubject("fold", client.EndpointContext))
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	b, _ := client.NewBuilder(nc, js)
	seen := map[string]map[string]bool{"context-request": {}, "context-reply": {}}
	check := func(event string, data []byte) {
		t.Helper()
		if err := validate(schemas[event], data); err != nil {
			t.Errorf("%s does not match %s:\n%s\n%v", event, contextFiles[event], data, err)
		}
		for _, k := range fieldsOf(t, schemas[event], data) {
			seen[event][k] = true
			if !schemas[event].props[k] {
				t.Errorf("%s field %q is not documented in %s", event, k, contextFiles[event])
			}
		}
	}
	for _, req := range []client.ContextRequest{
		{Session: "s1"},
		{Session: "s1", BudgetChars: 2000, BudgetTokens: 1000},
		{Session: "s1", Query: "tournament form", RecallTurns: 3, BudgetChars: 3000},
	} {
		c, err := b.ContextWith(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if req.Query != "" && len(c.Recalled) < 2 {
			t.Fatalf("recalled %+v, want the memory and turn 3", c.Recalled)
		}
		m, err := sniff.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		check("context-request", m.Data)
		reply, err := nc.Request(m.Subject, m.Data, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		check("context-reply", reply.Data)
		if _, err := sniff.NextMsg(5 * time.Second); err != nil { // our own request, seen too
			t.Fatal(err)
		}
	}
	for _, field := range []string{"session", "budget_chars", "budget_tokens", "query", "recall_turns"} {
		if !seen["context-request"][field] {
			t.Errorf("no real request carried %q", field)
		}
	}
	for _, field := range []string{"summary", "turns", "query", "recalled", "recall_searched"} {
		if !seen["context-reply"][field] {
			t.Errorf("no real reply carried %q", field)
		}
	}

	valid := `{"session":"s1","query":"tournament form","recall_turns":5,"budget_chars":4000}`
	r := strings.NewReplacer
	for name, doc := range map[string]string{
		"valid":                  valid,
		"no query":               `{"session":"s1","budget_chars":4000}`,
		"empty query":            r(`"tournament form"`, `""`).Replace(valid),
		"blank query":            r(`"tournament form"`, `"   "`).Replace(valid),
		"query too long":         r(`"tournament form"`, `"`+strings.Repeat("x", client.MaxContextQueryChars+1)+`"`).Replace(valid),
		"recall_turns 0":         r(`"recall_turns":5`, `"recall_turns":0`).Replace(valid),
		"recall_turns 51":        r(`"recall_turns":5`, `"recall_turns":51`).Replace(valid),
		"recall_turns, no query": `{"session":"s1","recall_turns":5}`,
		"negative budget":        r(`4000`, `-1`).Replace(valid),
		"bad session":            r(`"s1"`, `"a.b"`).Replace(valid),
	} {
		schemaOK := validate(schemas["context-request"], []byte(doc)) == nil
		var req client.ContextRequest
		clientOK := json.Unmarshal([]byte(doc), &req) == nil && client.CheckContext(&req) == nil
		if name == "empty query" {
			clientOK = false // the service sees "query":"" on the wire (its test: TestQueryContextBadRequestsNameTheField)
		}
		if name == "recall_turns 0" {
			clientOK = false // 0 is the client's "omitted"; on the wire the schema refuses it
		}
		if want := name == "valid" || name == "no query"; schemaOK != want || clientOK != want {
			t.Errorf("%s: schema accepts %v, client accepts %v, want %v: %.120s", name, schemaOK, clientOK, want, doc)
		}
	}
}
