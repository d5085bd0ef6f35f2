package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// The wire cases every client runs (clients/conformance, format in its
// README.md): here against the Go client and, sent as they are, against
// the processor itself, so that a case that disagrees with the processor
// fails here before any other client is measured by it.
const conformanceDir = "../clients/conformance"

// confAt is the "at" the processor check gives an event without one
// (clients fill in the time of publishing).
const confAt = "2026-11-22T20:00:00Z"

type confEvent struct {
	Name           string          `json:"name"`
	Type           string          `json:"type"`
	Event          json.RawMessage `json:"event"`
	Valid          bool            `json:"valid"`
	Field          string          `json:"field"`
	Code           string          `json:"code"`
	WireOnly       bool            `json:"wire_only"`
	StringAt       bool            `json:"string_at"`
	SubjectSession string          `json:"subject_session"`
}

type confRequest struct {
	Name     string          `json:"name"`
	Endpoint string          `json:"endpoint"`
	Request  json.RawMessage `json:"request"`
	WireOnly bool            `json:"wire_only"`
	Expect   struct {
		Error *struct {
			Code  string `json:"code"`
			Field string `json:"field"`
		} `json:"error"`
		Reply *replyChecks `json:"reply"`
	} `json:"expect"`
}

// replyChecks are the assertions on a reply's JSON, by dotted path.
type replyChecks struct {
	Equal    map[string]any            `json:"equal"`
	Len      map[string]int            `json:"len"`
	MinLen   map[string]int            `json:"min_len"`
	Max      map[string]float64        `json:"max"`
	Min      map[string]float64        `json:"min"`
	Present  []string                  `json:"present"`
	Absent   []string                  `json:"absent"`
	Some     map[string]map[string]any `json:"some"`
	Prefix   map[string]string         `json:"prefix"`
	Contains map[string]string         `json:"contains"`
	// TextChars: the context rendered as text has exactly "chars"
	// characters. Messages: checks on the context rendered as chat
	// messages (Count: how many).
	TextChars bool         `json:"text_chars"`
	Messages  *replyChecks `json:"messages"`
	Count     *int         `json:"count"`
}

type confFixture struct {
	Session string `json:"session"`
	Settled struct {
		TotalTurns int64  `json:"total_turns"`
		Cursor     int64  `json:"cursor"`
		Version    uint64 `json:"version"`
	} `json:"settled"`
	Turns []client.Turn `json:"turns"`
}

// readConformance decodes one file of the suite, its "$repeat" values
// expanded.
func readConformance(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(conformanceDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data, err = json.Marshal(expandRepeats(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// expandRepeats replaces every {"$repeat": s, "count": n} by s repeated n
// times.
func expandRepeats(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if s, ok := x["$repeat"].(string); ok {
			return strings.Repeat(s, int(x["count"].(float64)))
		}
		for k, e := range x {
			x[k] = expandRepeats(e)
		}
	case []any:
		for i, e := range x {
			x[i] = expandRepeats(e)
		}
	}
	return v
}

var fieldInMessage = regexp.MustCompile(`field "([^"]+)"`)

// errField is the field an error names: a ValidationError's, a JSON
// decoding error's (the Go types refuse a non-integer before the client
// sees it), else the first `field "…"` of its message.
func errField(err error) string {
	if ve, ok := events.AsValidation(err); ok {
		return ve.Field
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return ute.Field
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return "at"
	}
	if m := fieldInMessage.FindStringSubmatch(err.Error()); m != nil {
		return m[1]
	}
	return ""
}

// confEnv is a processor and its service with the fixture session
// published and settled.
type confEnv struct {
	*servicetest.Env
	pub *client.Publisher
	b   *client.Builder
}

func newConfEnv(t *testing.T, fx confFixture) *confEnv {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	e.StartService(nil)
	_, js := e.Client("bot")
	pub, err := client.NewPublisher(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close(context.Background()) })
	nc, bjs := e.Client("builder")
	b, err := client.NewBuilder(nc, bjs)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	for _, tu := range fx.Turns {
		tu.Session = fx.Session
		if err := pub.PublishTurnAsync(tu); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the fixture session settled", func() bool {
		s, err := b.Session(ctx, fx.Session)
		return err == nil && s.CaughtUp && s.TotalTurns == fx.Settled.TotalTurns && s.Cursor == fx.Settled.Cursor &&
			s.Version == fx.Settled.Version && s.Lease == nil
	})
	return &confEnv{Env: e, pub: pub, b: b}
}

func (e *confEnv) streamState(t *testing.T, name string) jetstream.StreamState {
	t.Helper()
	s, err := e.JS.Stream(ctxT(t), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

// nextDeadLetter waits for the dead-letter stream to hold after+1
// messages and returns the newest one.
func (e *confEnv) nextDeadLetter(t *testing.T, after uint64) *jetstream.RawStreamMsg {
	t.Helper()
	var st jetstream.StreamState
	e.Eventually(fmt.Sprintf("dead letter %d", after+1), func() bool {
		st = e.streamState(t, e.Layout.DLQ)
		return st.Msgs >= after+1
	})
	if st.Msgs != after+1 {
		t.Fatalf("%d dead letters, expected %d", st.Msgs, after+1)
	}
	s, _ := e.JS.Stream(ctxT(t), e.Layout.DLQ)
	msg, err := s.GetMsg(ctxT(t), st.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// accepted proves that every event of session published so far was
// applied, not dead-lettered: a turn the processor refuses, published
// after them on the same session (whose events it handles in order), is
// the only new dead letter.
func (e *confEnv) accepted(t *testing.T, session string, before uint64) {
	t.Helper()
	sentinel := map[string]any{"v": 1, "session": session, "turn_id": "sentinel", "at": confAt, "speaker": "S", "role": "sentinel", "text": "x"}
	e.Publish(e.Layout.Subjects.In(session, events.KindTurn), sentinel, "")
	msg := e.nextDeadLetter(t, before)
	if !strings.Contains(string(msg.Data), `"turn_id":"sentinel"`) {
		t.Fatalf("the event was dead-lettered: %s %s", msg.Header.Get(events.HeaderError), msg.Data)
	}
}

// wirePayload is the event as a client puts it on the wire: v 1 and an
// "at" unless the case sets them.
func wirePayload(t *testing.T, c confEvent) (map[string]any, []byte) {
	t.Helper()
	var ev map[string]any
	if err := json.Unmarshal(c.Event, &ev); err != nil {
		t.Fatal(err)
	}
	if _, ok := ev["v"]; !ok {
		ev["v"] = 1
	}
	if _, ok := ev["at"]; !ok && c.Type != events.KindControl {
		ev["at"] = confAt
	}
	data, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return ev, data
}

func TestConformance(t *testing.T) {
	var fx confFixture
	var evs struct {
		Cases []confEvent `json:"cases"`
	}
	var reqs struct {
		Cases []confRequest `json:"cases"`
	}
	readConformance(t, "fixture.json", &fx)
	readConformance(t, "events.json", &evs)
	readConformance(t, "requests.json", &reqs)

	// The processor first: every event case as it is on the wire, on a
	// processor of its own so that the client's publishes below are not
	// duplicates of these.
	t.Run("processor-events", func(t *testing.T) {
		e := &confEnv{Env: servicetest.New(t, servicetest.Options{})}
		e.StartProcessor(processor.Config{}, nil)
		for _, c := range evs.Cases {
			ev, data := wirePayload(t, c)
			session, _ := ev["session"].(string)
			subjSession := c.SubjectSession
			if subjSession == "" {
				subjSession = session
			}
			if !client.ValidSession(subjSession) {
				subjSession = "conf-ev"
			}
			before := e.streamState(t, e.Layout.DLQ).Msgs
			e.Publish(e.Layout.Subjects.In(subjSession, c.Type), data, "")
			if c.Valid {
				e.accepted(t, subjSession, before)
				continue
			}
			msg := e.nextDeadLetter(t, before)
			if got := msg.Header.Get(events.HeaderErrorField); got != c.Field {
				t.Errorf("%s: the processor refused field %q (%s), the case expects %q", c.Name, got, msg.Header.Get(events.HeaderError), c.Field)
			}
		}
	})

	e := newConfEnv(t, fx)
	t.Run("events", func(t *testing.T) {
		ctx := ctxT(t)
		for _, c := range evs.Cases {
			if c.WireOnly || c.StringAt {
				continue // Turn.At is a time.Time: the wire run above checks the case
			}
			in := e.streamState(t, e.Layout.In)
			dlq := e.streamState(t, e.Layout.DLQ).Msgs
			err := publishCase(ctx, e.pub, c)
			if c.Valid {
				if err != nil {
					t.Errorf("%s: %v", c.Name, err)
					continue
				}
				var ev struct{ Session string }
				_ = json.Unmarshal(c.Event, &ev)
				e.accepted(t, ev.Session, dlq)
				continue
			}
			if err == nil {
				t.Errorf("%s: published, expected a refusal naming %q", c.Name, c.Field)
				continue
			}
			if got := errField(err); got != c.Field {
				t.Errorf("%s: refused naming %q, expected %q: %v", c.Name, got, c.Field, err)
			}
			if ve, ok := events.AsValidation(err); ok && ve.Code != c.Code {
				t.Errorf("%s: code %q, expected %q", c.Name, ve.Code, c.Code)
			}
			if after := e.streamState(t, e.Layout.In); after.LastSeq != in.LastSeq {
				t.Errorf("%s: refused, yet the inbound stream moved from %d to %d", c.Name, in.LastSeq, after.LastSeq)
			}
		}
	})

	t.Run("requests", func(t *testing.T) {
		ctx := ctxT(t)
		for _, c := range reqs.Cases {
			// As sent on the wire, to the service itself.
			reply, err := e.NC.RequestWithContext(ctx, client.ServiceSubject("", c.Endpoint), c.Request)
			if err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
			var werr error
			if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
				werr = &client.ServiceError{Code: code, Description: reply.Header.Get(micro.ErrorHeader)}
			}
			var rendered client.Context
			_ = json.Unmarshal(reply.Data, &rendered)
			checkRequestCase(t, "service", c, reply.Data, werr, &rendered)
			if c.WireOnly {
				continue
			}
			data, got, err := requestCase(ctx, e.b, c)
			checkRequestCase(t, "Go client", c, data, err, got)
		}
	})
}

// publishCase publishes an event case through the Go client's API.
func publishCase(ctx context.Context, pub *client.Publisher, c confEvent) error {
	switch c.Type {
	case events.KindTurn:
		var tu client.Turn
		if err := json.Unmarshal(c.Event, &tu); err != nil {
			return err
		}
		return pub.PublishTurn(ctx, tu)
	case events.KindNote:
		var n client.Note
		if err := json.Unmarshal(c.Event, &n); err != nil {
			return err
		}
		return pub.PublishNote(ctx, n)
	case events.KindControl:
		var ctl struct {
			Session string                `json:"session"`
			Op      string                `json:"op"`
			Config  *client.SessionConfig `json:"config"`
		}
		if err := json.Unmarshal(c.Event, &ctl); err != nil {
			return err
		}
		return pub.Control(ctx, ctl.Session, ctl.Op, ctl.Config)
	}
	return fmt.Errorf("unknown event type %q", c.Type)
}

// requestCase asks a request case through the Go client's API and returns
// the reply as JSON and, for a context, the reply.
func requestCase(ctx context.Context, b *client.Builder, c confRequest) ([]byte, *client.Context, error) {
	var reply any
	var cx *client.Context
	switch c.Endpoint {
	case client.EndpointContext:
		var r client.ContextRequest
		if err := json.Unmarshal(c.Request, &r); err != nil {
			return nil, nil, err
		}
		got, err := b.ContextWith(ctx, r)
		if err != nil {
			return nil, nil, err
		}
		reply, cx = got, got
	case client.EndpointSession:
		var r client.SessionRequest
		if err := json.Unmarshal(c.Request, &r); err != nil {
			return nil, nil, err
		}
		got, err := b.Session(ctx, r.Session)
		if err != nil {
			return nil, nil, err
		}
		reply = got
	case client.EndpointRecall:
		var r client.RecallRequest
		if err := json.Unmarshal(c.Request, &r); err != nil {
			return nil, nil, err
		}
		got, err := b.Recall(ctx, r.Session, r.Query, client.RecallOptions{Limit: r.Limit, Scope: r.Scope})
		if err != nil {
			return nil, nil, err
		}
		reply = got
	default:
		return nil, nil, fmt.Errorf("unknown endpoint %q", c.Endpoint)
	}
	data, err := json.Marshal(reply)
	return data, cx, err
}

// checkRequestCase checks one answer (a reply's JSON, or an error) against
// the case's expectation. A 400 may also be a refusal before sending that
// names the same field.
func checkRequestCase(t *testing.T, who string, c confRequest, data []byte, err error, cx *client.Context) {
	t.Helper()
	if want := c.Expect.Error; want != nil {
		var se *client.ServiceError
		switch {
		case err == nil:
			t.Errorf("%s: %s answered %s, expected error %s %q", c.Name, who, data, want.Code, want.Field)
		case errors.As(err, &se):
			if se.Code != want.Code || want.Field != "" && !strings.Contains(se.Description, strconv.Quote(want.Field)) {
				t.Errorf("%s: %s: %s %s, expected %s naming field %q", c.Name, who, se.Code, se.Description, want.Code, want.Field)
			}
		case want.Code != client.ErrCodeBadRequest || errField(err) != want.Field:
			t.Errorf("%s: %s: %v, expected %s naming field %q", c.Name, who, err, want.Code, want.Field)
		}
		return
	}
	if err != nil {
		t.Errorf("%s: %s: %v", c.Name, who, err)
		return
	}
	var reply any
	if err := json.Unmarshal(data, &reply); err != nil {
		t.Fatalf("%s: %s: %v", c.Name, who, err)
	}
	for _, problem := range c.Expect.Reply.check(reply) {
		t.Errorf("%s: %s: %s", c.Name, who, problem)
	}
	if c.Expect.Reply.TextChars {
		chars, _ := jsonPath(reply, "chars")
		if n := utf8.RuneCountInString(cx.Prompt()); float64(n) != chars {
			t.Errorf("%s: %s: the rendered text has %d characters, the reply's chars says %v", c.Name, who, n, chars)
		}
	}
	if mc := c.Expect.Reply.Messages; mc != nil {
		var msgs any
		data, _ := json.Marshal(chatMessages(cx))
		_ = json.Unmarshal(data, &msgs)
		for _, problem := range mc.check(msgs) {
			t.Errorf("%s: %s: messages: %s", c.Name, who, problem)
		}
	}
}

// jsonPath resolves a dotted path ("turns.0.index", "turns.-1.turn_id":
// from the end) in decoded JSON.
func jsonPath(v any, path string) (any, bool) {
	for _, key := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[key]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(key)
			if i < 0 {
				i += len(x)
			}
			if err != nil || i < 0 || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func (rc *replyChecks) check(reply any) []string {
	var out []string
	num := func(path string) (float64, bool) {
		v, ok := jsonPath(reply, path)
		f, isNum := v.(float64)
		if !ok || !isNum {
			out = append(out, fmt.Sprintf("%s: expected a number, got %v", path, v))
		}
		return f, ok && isNum
	}
	arr := func(path string) ([]any, bool) {
		v, ok := jsonPath(reply, path)
		a, isArr := v.([]any)
		if !ok || !isArr {
			out = append(out, fmt.Sprintf("%s: expected an array, got %v", path, v))
		}
		return a, ok && isArr
	}
	for path, want := range rc.Equal {
		if got, ok := jsonPath(reply, path); !ok || !reflect.DeepEqual(got, want) {
			out = append(out, fmt.Sprintf("%s: %v, expected %v", path, got, want))
		}
	}
	for path, n := range rc.Len {
		if a, ok := arr(path); ok && len(a) != n {
			out = append(out, fmt.Sprintf("%s: %d items, expected %d", path, len(a), n))
		}
	}
	for path, n := range rc.MinLen {
		if a, ok := arr(path); ok && len(a) < n {
			out = append(out, fmt.Sprintf("%s: %d items, expected at least %d", path, len(a), n))
		}
	}
	for path, limit := range rc.Max {
		if f, ok := num(path); ok && f > limit {
			out = append(out, fmt.Sprintf("%s: %v, expected at most %v", path, f, limit))
		}
	}
	for path, limit := range rc.Min {
		if f, ok := num(path); ok && f < limit {
			out = append(out, fmt.Sprintf("%s: %v, expected at least %v", path, f, limit))
		}
	}
	for _, path := range rc.Present {
		if v, ok := jsonPath(reply, path); !ok || v == nil {
			out = append(out, fmt.Sprintf("%s: missing", path))
		}
	}
	for _, path := range rc.Absent {
		if v, ok := jsonPath(reply, path); ok && v != nil {
			out = append(out, fmt.Sprintf("%s: %v, expected none", path, v))
		}
	}
	for path, want := range rc.Prefix {
		if got, ok := jsonPath(reply, path); !ok || !strings.HasPrefix(fmt.Sprint(got), want) {
			out = append(out, fmt.Sprintf("%s: %q, expected it to start with %q", path, got, want))
		}
	}
	for path, want := range rc.Contains {
		if got, ok := jsonPath(reply, path); !ok || !strings.Contains(fmt.Sprint(got), want) {
			out = append(out, fmt.Sprintf("%s: %q, expected it to contain %q", path, got, want))
		}
	}
	if a, ok := reply.([]any); ok && rc.Count != nil && len(a) != *rc.Count {
		out = append(out, fmt.Sprintf("%d items, expected %d", len(a), *rc.Count))
	}
	for path, want := range rc.Some {
		a, ok := arr(path)
		if !ok {
			continue
		}
		found := false
		for _, item := range a {
			match := true
			for k, w := range want {
				if got, ok := jsonPath(item, k); !ok && w != false || ok && !reflect.DeepEqual(got, w) {
					match = false
				}
			}
			found = found || match
		}
		if !found {
			out = append(out, fmt.Sprintf("%s: no item with %v", path, want))
		}
	}
	return out
}

// chatMessages is the reference rendering of a context as chat messages
// (clients/conformance/README.md): one system message holding the text's
// lines before the recent turns, if there are any, then each turn: an
// assistant's as its text, any other as a user message holding its line.
func chatMessages(c *client.Context) []map[string]string {
	before := client.Context{Summary: c.Summary, Evictions: c.Evictions, Recalled: c.Recalled}
	var out []map[string]string
	if system := strings.TrimSuffix(before.Prompt(), "\n"); system != "" {
		out = append(out, map[string]string{"role": "system", "content": system})
	}
	for _, t := range c.Turns {
		if t.Role == "assistant" {
			out = append(out, map[string]string{"role": "assistant", "content": t.Text})
			continue
		}
		out = append(out, map[string]string{"role": "user", "content": t.Line()})
	}
	return out
}

// The rendering cases: the Go client's lines and prompt text are the
// reference the other clients' are compared with.
func TestConformanceRendering(t *testing.T) {
	var r struct {
		Lines []struct {
			Speaker, Role, Text, Line string
		} `json:"turn_lines"`
		Context  client.Context      `json:"context"`
		Text     string              `json:"text"`
		Messages []map[string]string `json:"messages"`
	}
	readConformance(t, "rendering.json", &r)
	for _, l := range r.Lines {
		if got := (client.ContextTurn{Speaker: l.Speaker, Role: l.Role, Text: l.Text}).Line(); got != l.Line {
			t.Errorf("speaker %q role %q: line %q, the case expects %q", l.Speaker, l.Role, got, l.Line)
		}
	}
	if got := r.Context.Prompt(); got != r.Text {
		t.Errorf("prompt:\n%s\nthe case expects:\n%s", got, r.Text)
	}
	if got := chatMessages(&r.Context); !reflect.DeepEqual(got, r.Messages) {
		t.Errorf("messages:\n%q\nthe case expects:\n%q", got, r.Messages)
	}
	if len(r.Lines) == 0 || r.Text == "" || len(r.Messages) == 0 {
		t.Fatal("rendering.json has no cases")
	}
}
