package events

import (
	"strings"
	"testing"
	"time"
)

const goodTurn = `{"v":1,"session":"s1","turn_id":"t1","at":"2026-01-02T15:04:05Z","speaker":"Alice","role":"user","text":"hi there","future_field":{"x":1}}`

func TestDecodeInbound(t *testing.T) {
	cases := []struct {
		name, kind, session, data string
		code, field               string // "" = accepted
	}{
		{"turn ok, unknown field kept out", KindTurn, "s1", goodTurn, "", ""},
		{"note ok", KindNote, "s1", `{"v":1,"session":"s1","note_id":"n1","at":"2026-01-02T15:04:05Z","source":"James","text":"Tokyo map"}`, "", ""},
		{"control ok", KindControl, "s1", `{"v":1,"session":"s1","op":"generate"}`, "", ""},
		{"configure ok", KindControl, "s1", `{"v":1,"session":"s1","op":"configure","config":{"recent_window":20,"batch_size":5}}`, "", ""},
		{"bad json", KindTurn, "s1", `{"v":1,`, CodeBadJSON, "payload"},
		{"not an object", KindTurn, "s1", `[1,2]`, CodeBadJSON, "payload"},
		{"empty", KindTurn, "s1", ``, CodeBadJSON, "payload"},
		{"missing v", KindTurn, "s1", strings.Replace(goodTurn, `"v":1,`, ``, 1), CodeMissingField, "v"},
		{"wrong v", KindTurn, "s1", strings.Replace(goodTurn, `"v":1`, `"v":2`, 1), CodeVersion, "v"},
		{"missing turn_id", KindTurn, "s1", strings.Replace(goodTurn, `"turn_id":"t1",`, ``, 1), CodeMissingField, "turn_id"},
		{"missing at", KindTurn, "s1", strings.Replace(goodTurn, `"at":"2026-01-02T15:04:05Z",`, ``, 1), CodeMissingField, "at"},
		{"bad at", KindTurn, "s1", strings.Replace(goodTurn, `2026-01-02T15:04:05Z`, `yesterday`, 1), CodeInvalidField, "at"},
		{"missing speaker", KindTurn, "s1", strings.Replace(goodTurn, `"speaker":"Alice",`, ``, 1), CodeMissingField, "speaker"},
		{"bad role", KindTurn, "s1", strings.Replace(goodTurn, `"role":"user"`, `"role":"narrator"`, 1), CodeInvalidField, "role"},
		{"missing text", KindTurn, "s1", strings.Replace(goodTurn, `"text":"hi there",`, ``, 1), CodeMissingField, "text"},
		{"wrong type", KindTurn, "s1", strings.Replace(goodTurn, `"text":"hi there"`, `"text":42`, 1), CodeInvalidField, "text"},
		{"session mismatch", KindTurn, "s2", goodTurn, CodeSessionMismatch, "session"},
		{"bad session token", KindTurn, "s$1", goodTurn, CodeBadSession, "subject session token"},
		{"oversized text", KindTurn, "s1", strings.Replace(goodTurn, `hi there`, strings.Repeat("x", 70<<10), 1), CodeOversized, "text"},
		{"oversized payload", KindTurn, "s1", strings.Replace(goodTurn, `hi there`, strings.Repeat("x", 300<<10), 1), CodeOversized, "payload"},
		{"invalid utf8", KindTurn, "s1", strings.Replace(goodTurn, `hi there`, "hi \xff", 1), CodeInvalidField, "payload"},
		{"unknown type", "shout", "s1", goodTurn, CodeUnknownType, "subject"},
		{"bad op", KindControl, "s1", `{"v":1,"session":"s1","op":"explode"}`, CodeInvalidField, "op"},
		{"configure without config", KindControl, "s1", `{"v":1,"session":"s1","op":"configure"}`, CodeMissingField, "config"},
		{"configure bad trigger", KindControl, "s1", `{"v":1,"session":"s1","op":"configure","config":{"trigger":"always"}}`, CodeInvalidField, "config.trigger"},
		{"configure min_fold_tokens", KindControl, "s1", `{"v":1,"session":"s1","op":"configure","config":{"min_fold_tokens":2000}}`, "", ""},
		{"configure min_fold_tokens off", KindControl, "s1", `{"v":1,"session":"s1","op":"configure","config":{"min_fold_tokens":0}}`, "", ""},
		{"configure negative min_fold_tokens", KindControl, "s1", `{"v":1,"session":"s1","op":"configure","config":{"min_fold_tokens":-1}}`, CodeInvalidField, "config.min_fold_tokens"},
		{"configure huge min_fold_tokens", KindControl, "s1", `{"v":1,"session":"s1","op":"configure","config":{"min_fold_tokens":1000001}}`, CodeInvalidField, "config.min_fold_tokens"},
		{"configure min_fold_tokens not a number", KindControl, "s1", `{"v":1,"session":"s1","op":"configure","config":{"min_fold_tokens":"lots"}}`, CodeInvalidField, "config.min_fold_tokens"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, err := DecodeInbound(tc.kind, tc.session, []byte(tc.data), Limits{})
			if tc.code == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if in.Session != tc.session {
					t.Fatalf("session %q", in.Session)
				}
				return
			}
			ve, ok := AsValidation(err)
			if !ok {
				t.Fatalf("want ValidationError %s/%s, got %v", tc.code, tc.field, err)
			}
			if ve.Code != tc.code || ve.Field != tc.field {
				t.Fatalf("want %s/%s, got %s/%s (%v)", tc.code, tc.field, ve.Code, ve.Field, err)
			}
			if !strings.Contains(err.Error(), tc.field) && tc.field != "" {
				t.Fatalf("error %q does not name field %q", err, tc.field)
			}
		})
	}
}

func TestParseIn(t *testing.T) {
	s, err := NewSubjects("")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		subject, session, kind, code string
	}{
		{"fold.in.abc_1-2.turn", "abc_1-2", "turn", ""},
		{"fold.in.abc.note", "abc", "note", ""},
		{"fold.in.abc.shout", "abc", "shout", CodeUnknownType},
		{"fold.in.a$b.turn", "a$b", "turn", CodeBadSession},
		{"fold.in.abc", "abc", "", CodeBadSubject},
		{"fold.in.abc.turn.x", "abc", "", CodeBadSubject},
		{"other.in.abc.turn", "", "", CodeBadSubject},
	}
	for _, tc := range cases {
		session, kind, err := s.ParseIn(tc.subject)
		if session != tc.session || kind != tc.kind {
			t.Errorf("%s: got %q %q", tc.subject, session, kind)
		}
		if tc.code == "" && err != nil || tc.code != "" && err == nil {
			t.Errorf("%s: err %v, want code %q", tc.subject, err, tc.code)
			continue
		}
		if ve, ok := AsValidation(err); tc.code != "" && (!ok || ve.Code != tc.code) {
			t.Errorf("%s: err %v, want code %q", tc.subject, err, tc.code)
		}
	}
	if _, err := NewSubjects("a.*"); err == nil {
		t.Error("wildcard prefix accepted")
	}
}

func TestValidSession(t *testing.T) {
	for id, want := range map[string]bool{
		"a": true, "A-z_09": true, strings.Repeat("x", 128): true,
		"": false, strings.Repeat("x", 129): false, "a.b": false, "a b": false, "a*": false, "é": false,
	} {
		if got := ValidSession(id); got != want {
			t.Errorf("ValidSession(%q) = %v", id, got)
		}
	}
}

// FuzzDecodeInbound: no input may panic, and every rejection must be a
// ValidationError naming a field.
func FuzzDecodeInbound(f *testing.F) {
	f.Add("turn", "s1", []byte(goodTurn))
	f.Add("note", "s1", []byte(`{"v":1,"session":"s1","note_id":"n","at":"2026-01-02T15:04:05Z","text":"x"}`))
	f.Add("control", "s1", []byte(`{"v":1,"session":"s1","op":"configure","config":{"batch_size":3}}`))
	f.Add("turn", "s1", []byte(`{"v":1,"session":"s1","text":"\xff"}`))
	f.Add("turn", "s1", []byte(strings.Repeat("[", 10000)))
	f.Fuzz(func(t *testing.T, kind, session string, data []byte) {
		in, err := DecodeInbound(kind, session, data, Limits{})
		if err != nil {
			ve, ok := AsValidation(err)
			if !ok || ve.Code == "" || ve.Reason == "" {
				t.Fatalf("rejection is not a complete ValidationError: %#v", err)
			}
			return
		}
		if in.Session != session || !ValidSession(session) {
			t.Fatalf("accepted bad session %q", session)
		}
	})
}

// An event dated further ahead than the skew allows, of the time the
// stream stored it, is rejected naming "at"; within the skew, in the past,
// without a time (a control) or with the check off it is accepted.
func TestCheckClock(t *testing.T) {
	received := time.Date(2026, 11, 22, 20, 0, 0, 0, time.UTC)
	turn := func(at time.Time) Inbound { return Inbound{Kind: KindTurn, Turn: &Turn{At: at}} }
	note := func(at time.Time) Inbound { return Inbound{Kind: KindNote, Note: &Note{At: at}} }
	ctl := func(at time.Time) Inbound { return Inbound{Kind: KindControl, Control: &Control{At: at}} }
	future := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		in   Inbound
		skew time.Duration
		ok   bool
	}{
		{"turn at the skew", turn(received.Add(DefaultMaxClockSkew)), DefaultMaxClockSkew, true},
		{"turn just past the skew", turn(received.Add(DefaultMaxClockSkew + time.Millisecond)), DefaultMaxClockSkew, false},
		{"turn in 9999", turn(future), DefaultMaxClockSkew, false},
		{"note in 9999", note(future), DefaultMaxClockSkew, false},
		{"control in 9999", ctl(future), DefaultMaxClockSkew, false},
		{"control without a time", ctl(time.Time{}), DefaultMaxClockSkew, true},
		{"turn years in the past", turn(received.AddDate(-30, 0, 0)), DefaultMaxClockSkew, true},
		{"turn in 9999, check off", turn(future), 0, true},
	} {
		err := c.in.CheckClock(received, c.skew)
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want accepted %v", c.name, err, c.ok)
		}
		if err != nil {
			ve, ok := AsValidation(err)
			if !ok || ve.Code != CodeInvalidField || ve.Field != "at" || !strings.Contains(ve.Reason, "ahead") {
				t.Errorf("%s: %v, want invalid_field on at saying how far ahead", c.name, err)
			}
		}
	}
}
