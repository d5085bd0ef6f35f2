package events

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkRejection holds for every rejection: a complete ValidationError
// (code, field, reason) whose text is valid UTF-8 on one line, since it
// is sent as a dead-letter header and logged.
func checkRejection(t *testing.T, err error) {
	t.Helper()
	ve, ok := AsValidation(err)
	if !ok || ve.Code == "" || ve.Field == "" || ve.Reason == "" {
		t.Fatalf("rejection is not a complete ValidationError: %#v", err)
	}
	if msg := err.Error(); !utf8.ValidString(msg) || strings.ContainsAny(msg, "\r\n\x00") {
		t.Fatalf("rejection text is not one line of valid UTF-8 (it becomes a NATS header): %q", msg)
	}
}

// FuzzDecodeNote: any note payload is either rejected cleanly or accepted
// as a note that validates again and survives a re-encode unchanged.
func FuzzDecodeNote(f *testing.F) {
	f.Add("s1", []byte(`{"v":1,"session":"s1","note_id":"n1","at":"2026-01-02T15:04:05Z","source":"James","text":"James is screen-sharing Marvel Rivals on Tokyo"}`))
	f.Add("s1", []byte(`{"v":1,"session":"s1","note_id":"n1","at":"2026-01-02T15:04:05+09:00","text":"   "}`))
	f.Add("s1", []byte(`{"v":1,"session":"s2","note_id":"n1","at":"2026-01-02T15:04:05Z","text":"x"}`))
	f.Add("a.b", []byte(`{"v":1,"session":"a.b","note_id":"n1","at":"2026-01-02T15:04:05Z","text":"x"}`))
	f.Add("s1", []byte(`{"v":1,"session":"s1","note_id":"n1","at":12,"text":"x","source":"\ud800"}`))
	f.Fuzz(func(t *testing.T, session string, data []byte) {
		in, err := DecodeInbound(KindNote, session, data, Limits{})
		if err != nil {
			checkRejection(t, err)
			return
		}
		if in.Note == nil || in.Turn != nil || in.Control != nil || in.Kind != KindNote {
			t.Fatalf("accepted note decoded as %+v", in)
		}
		if !ValidSession(session) || in.Note.Session != session || in.Note.V != Version {
			t.Fatalf("accepted note %+v on session %q", in.Note, session)
		}
		if !utf8.ValidString(in.Note.Text) || !utf8.ValidString(in.Note.Source) || strings.TrimSpace(in.Note.Text) == "" {
			t.Fatalf("accepted note text %q source %q", in.Note.Text, in.Note.Source)
		}
		again, err := json.Marshal(in.Note)
		if err != nil {
			t.Fatal(err)
		}
		in2, err := DecodeInbound(KindNote, session, again, Limits{})
		if err != nil {
			t.Fatalf("re-encoded note rejected: %v\n%s", err, again)
		}
		if again2, _ := json.Marshal(in2.Note); !bytes.Equal(again, again2) {
			t.Fatalf("note changed on a round trip:\n%s\n%s", again, again2)
		}
	})
}

// FuzzDecodeControl: a control event is rejected cleanly or is one of the
// known ops, with a valid config for configure, stable on a round trip.
func FuzzDecodeControl(f *testing.F) {
	f.Add("s1", []byte(`{"v":1,"session":"s1","op":"generate"}`))
	f.Add("s1", []byte(`{"v":1,"session":"s1","op":"configure","config":{"recent_window":20,"batch_size":5,"max_summary_chars":800,"max_note_chars":200,"trigger":"generate","profile":"agent","disabled":false}}`))
	f.Add("s1", []byte(`{"v":1,"session":"s1","op":"configure","config":{"batch_size":-5}}`))
	f.Add("s1", []byte(`{"v":1,"session":"s1","op":"configure","config":{"min_fold_tokens":0}}`))
	f.Add("s1", []byte(`{"v":1,"session":"s1","op":"configure"}`))
	f.Add("s1", []byte(`{"v":1,"session":"s1","op":"drop_tables","at":"2026-01-02T15:04:05Z"}`))
	f.Add("s1", []byte(`{"v":1,"session":"s1","op":"reset","config":{"recent_window":1e9}}`))
	f.Fuzz(func(t *testing.T, session string, data []byte) {
		in, err := DecodeInbound(KindControl, session, data, Limits{})
		if err != nil {
			checkRejection(t, err)
			return
		}
		c := in.Control
		if c == nil || in.Turn != nil || in.Note != nil || !ValidSession(session) || c.Session != session {
			t.Fatalf("accepted control decoded as %+v", in)
		}
		switch c.Op {
		case OpCompact, OpEnd, OpReset, OpGenerate:
		case OpConfigure:
			if c.Config == nil || c.Config.Validate() != nil {
				t.Fatalf("configure accepted with config %+v", c.Config)
			}
		default:
			t.Fatalf("accepted op %q", c.Op)
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		in2, err := DecodeInbound(KindControl, session, again, Limits{})
		if err != nil {
			t.Fatalf("re-encoded control rejected: %v\n%s", err, again)
		}
		if again2, _ := json.Marshal(in2.Control); !bytes.Equal(again, again2) {
			t.Fatalf("control changed on a round trip:\n%s\n%s", again, again2)
		}
	})
}

// FuzzParseIn: an inbound subject parses into a valid session and a known
// kind that build the same subject again, or is rejected cleanly; either
// way its dead-letter subject is a valid subject under the prefix.
func FuzzParseIn(f *testing.F) {
	for _, s := range []string{"fold.in.s1.turn", "fold.in.s1.note", "fold.in.s1.control", "fold.in.s1.turn.x", "fold.in.s1",
		"fold.in..turn", "fold.in.a*b.turn", "fold.in.>.turn", "fold.in.café.turn", "fold.out.s1.summary", "fold.in.s1.exec",
		"fold.in." + strings.Repeat("x", 129) + ".turn", "fold.in.s1.\xff",
		"fold.part.4.1.s1.turn", "fold.part.4.0.s1.turn", "fold.part.4.4.s1.turn", "fold.part.04.1.s1.turn", "fold.part.4.1.s1"} {
		f.Add(s)
	}
	subj := Subjects{Prefix: DefaultPrefix}
	f.Fuzz(func(t *testing.T, subject string) {
		session, kind, err := subj.ParseIn(subject)
		dl := subj.DeadLetter(session)
		if tok, ok := strings.CutPrefix(dl, "fold.dlq."); !ok || (tok != "_invalid" && !ValidSession(tok)) {
			t.Fatalf("dead letter subject %q for session %q", dl, session)
		}
		if err != nil {
			checkRejection(t, err)
			return
		}
		if !ValidSession(session) || (kind != KindTurn && kind != KindNote && kind != KindControl) {
			t.Fatalf("%q parsed as session %q kind %q", subject, session, kind)
		}
		if got := subj.In(session, kind); got != subj.Published(subject) {
			t.Fatalf("%q parsed as %q/%q, which builds %q", subject, session, kind, got)
		}
	})
}

// FuzzSubjectsRoundTrip: any accepted prefix builds subjects that parse
// back into the session and kind they were built from.
func FuzzSubjectsRoundTrip(f *testing.F) {
	f.Add("fold", "s1", "turn")
	f.Add("acme.fold", "s-1_x", "control")
	f.Add("a b", "s1", "note")
	f.Add("fold.", "s1", "turn")
	f.Add("fold", "s.1", "turn")
	f.Fuzz(func(t *testing.T, prefix, session, kind string) {
		subj, err := NewSubjects(prefix)
		if err != nil {
			return
		}
		if strings.ContainsAny(subj.Prefix, " \t\r\n*>") || strings.Contains("."+subj.Prefix+".", "..") {
			t.Fatalf("accepted prefix %q", subj.Prefix)
		}
		s, k, err := subj.ParseIn(subj.In(session, kind))
		valid := ValidSession(session) && (kind == KindTurn || kind == KindNote || kind == KindControl)
		if valid != (err == nil) {
			t.Fatalf("prefix %q session %q kind %q: parse error %v", prefix, session, kind, err)
		}
		if err == nil && (s != session || k != kind) {
			t.Fatalf("prefix %q: %q/%q parsed back as %q/%q", prefix, session, kind, s, k)
		}
		if valid {
			if s, k, ok := subj.ParseOut(subj.Out(session, KindSummary)); !ok || s != session || k != KindSummary {
				t.Fatalf("prefix %q: outbound subject of %q parsed back as %q/%q", prefix, session, s, k)
			}
		}
	})
}
