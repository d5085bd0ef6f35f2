package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// appendJSONer is an outbound event with its own encoder.
type appendJSONer interface {
	AppendJSON([]byte) ([]byte, error)
}

// agree fails unless v's AppendJSON gives what encoding/json gives (both
// errors, or the same bytes), appended after a prefix that must be kept.
func agree(t *testing.T, name string, v appendJSONer) {
	t.Helper()
	want, werr := json.Marshal(v)
	got, gerr := v.AppendJSON([]byte("prefix"))
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("%s: encoding/json error %v, AppendJSON error %v", name, werr, gerr)
	}
	if werr != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("prefix")) || !bytes.Equal(got[len("prefix"):], want) {
		t.Fatalf("%s:\nAppendJSON    %s\nencoding/json prefix%s", name, got, want)
	}
}

// fill sets every field of the struct v points to a non-zero value derived
// from k, so that a field AppendJSON leaves out (one added to the type
// later, say) shows as a difference.
func fill(t *testing.T, v any, k int, text string) {
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(text + rv.Type().Field(i).Name)
		case reflect.Int, reflect.Int64, reflect.Int32:
			f.SetInt(int64(k*31 + i - 40))
		case reflect.Uint64, reflect.Uint32:
			f.SetUint(uint64(k*17 + i + 1))
		case reflect.Pointer:
			b := k%2 == 0
			f.Set(reflect.ValueOf(&b))
		case reflect.Struct:
			if f.Type() != reflect.TypeOf(time.Time{}) {
				t.Fatalf("field %s: fill does not know %s", rv.Type().Field(i).Name, f.Type())
			}
			zone := time.FixedZone("x", (k%5-2)*3600+k%2*1800)
			f.Set(reflect.ValueOf(time.Date(2026, 11, 25, 20, k%60, i, k*1234567, zone)))
		default:
			t.Fatalf("field %s: fill does not know %s", rv.Type().Field(i).Name, f.Kind())
		}
	}
}

func TestAppendJSONAgrees(t *testing.T) {
	retry := true
	lifecycles := map[string]*Lifecycle{
		"zero": {},
		"started": {V: 1, Session: "sess-00042", Type: EventCompactionStarted, At: time.Date(2026, 11, 25, 20, 1, 2, 300, time.UTC),
			FoldID: "NUID42", Trigger: "turn", Mode: "window", Cause: "window", Cursor: 50, TotalTurns: 61, RecentStart: 11,
			Eligible: 11, BatchSize: 10, BatchFrom: 0, BatchTo: 9},
		"failed":   {V: 1, Session: "s", Type: EventCompactionFailed, Retryable: &retry, Error: `model said "no" <html> & more`, LatencyMS: -1},
		"negative": {Cursor: -5, TotalTurns: -1, Version: 1 << 63},
	}
	for name, ev := range lifecycles {
		agree(t, "Lifecycle "+name, ev)
	}
	summaries := map[string]*SummaryUpdated{
		"zero": {},
		"fold": {V: 1, Session: "sess-00042", Version: 7, Summary: "Alice and Bob planned the Tokyo match;\nBob keeps dying as Hulk.",
			Cursor: 70, CoveredThroughTurn: 69, From: time.Unix(1700000000, 5).UTC(), To: time.Unix(1700000600, 0).UTC(),
			FoldedTurns: 10, SummaryChars: 60, SummaryTokens: 15, OriginalTokens: 300, Mode: "window", Tier: "model",
			Compactions: 7, Epoch: 2, Model: "instant", LatencyMS: 3, At: time.Now()},
		"bad time": {At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for name, s := range summaries {
		agree(t, "SummaryUpdated "+name, s)
	}
	at := time.Date(2026, 11, 25, 20, 1, 2, 300, time.FixedZone("x", -3600))
	memories := map[string]*Memories{
		"zero":     {},
		"no items": {V: 1, Session: "s", Version: 3, FoldID: "f", Memories: []string{"Alice prefers tea.", `Bob said "<no> & yes"`}, At: at},
		"empty":    {Memories: []string{}, Items: []MemoryItem{}},
		"items": {V: 1, Session: "sess-7", Version: 9, FoldID: "NUID", Memories: []string{"Alice moved to Lyon.", "Bob is rusty   ünï"},
			Items: []MemoryItem{{ID: "m1", Speaker: "Alice", Text: "Alice moved to Lyon.", TurnID: "t-4", At: at, Supersedes: "m0"},
				{ID: "m2", Text: "Bob is rusty \u2028 ünï \xff"}},
			Model: "offline", At: at},
		"bad item time": {Items: []MemoryItem{{ID: "m", At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		"bad time":      {At: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for name, m := range memories {
		agree(t, "Memories "+name, m)
	}
	texts := []string{"", "plain ", "quote\" back\\ slash/ ", "<b>&amp;</b> ", "ctl \x00\x01\b\f\n\r\t\x1f\x7f ",
		"é ü 日本 🎮 ", "bad \xff\xfe utf8 \xe2\x28\xa1 ", "sep \u2028\u2029 ", "\xed\xa0\x80 surrogate "}
	for k, text := range texts {
		var ev Lifecycle
		fill(t, &ev, k, text)
		agree(t, "Lifecycle, every field set, text "+text, &ev)
		var s SummaryUpdated
		fill(t, &s, k, text)
		agree(t, "SummaryUpdated, every field set, text "+text, &s)
		var item MemoryItem
		fill(t, &item, k, text)
		m := Memories{V: k, Session: text, Version: uint64(k), FoldID: text, Memories: []string{text, text + text}, Items: []MemoryItem{item, item}, Model: text, At: item.At}
		agree(t, "Memories, every item field set, text "+text, &m)
	}
}

// JSONPlain (eight bytes at a time) holds every byte at every place of a
// string to the byte table, and a plain string is written as it is.
func TestJSONPlain(t *testing.T) {
	for n := range 20 {
		for at := range n {
			for b := range 256 {
				s := []byte(strings.Repeat("a", n))
				s[at] = byte(b)
				want := b < utf8.RuneSelf && jsonPlain[b]
				if got := JSONPlain(string(s)); got != want {
					t.Fatalf("JSONPlain(%q) = %v, want %v", s, got, want)
				}
				if want && string(AppendJSONString(nil, string(s))) != `"`+string(s)+`"` {
					t.Fatalf("%q not written as it is", s)
				}
			}
		}
	}
}

// AppendJSONStringUTF8 writes what AppendJSONString writes, and reports
// the strings that are not UTF-8 (those written with U+FFFD), wherever
// their bytes are.
func TestAppendJSONStringUTF8(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" <&> \u2028 é 🎮", "\\ufffd as text", "\xff", "bad \xff\xfe end",
		"a long plain prefix of more than sixteen bytes, then \xe2\x28\xa1", "\xed\xa0\x80 surrogate", "\uFFFD itself"} {
		got, valid := AppendJSONStringUTF8([]byte("x"), s)
		if want := AppendJSONString([]byte("x"), s); string(got) != string(want) || valid != utf8.ValidString(s) {
			t.Errorf("AppendJSONStringUTF8(%q) = %s, %v; want %s, %v", s, got, valid, want, utf8.ValidString(s))
		}
	}
}

func FuzzAppendJSONAgrees(f *testing.F) {
	f.Add("sess-1", "summary <&> \u2028", int64(5), uint64(7), int64(1700000000), int64(0), false)
	f.Add("\xff", "\x00\"\\", int64(-1), uint64(0), int64(-62135596800), int64(999999999), true)
	f.Fuzz(func(t *testing.T, a, b string, n int64, u uint64, sec, nsec int64, flag bool) {
		at := time.Unix(sec, nsec)
		ev := Lifecycle{V: int(n), Session: a, Type: b, At: at, FoldID: b, Reason: a, Cursor: n, TotalTurns: -n, BatchTo: n,
			Version: u, Error: a + b, Model: b, LatencyMS: n}
		if flag {
			ev.Retryable = &flag
		}
		agree(t, "Lifecycle", &ev)
		s := SummaryUpdated{V: int(n), Session: a, Version: u, Summary: b, Cursor: n, From: at, To: at.Add(time.Duration(n)),
			Epoch: uint32(u), Mode: a, At: at.In(time.FixedZone("f", int(n%86400)))}
		agree(t, "SummaryUpdated", &s)
		m := Memories{V: int(n), Session: a, Version: u, FoldID: b, Memories: []string{a, b},
			Items: []MemoryItem{{ID: a, Speaker: b, Text: a + b, TurnID: b, At: at, Supersedes: a}}, Model: b, At: at}
		if flag {
			m.Items[0].At = time.Time{}
		}
		agree(t, "Memories", &m)
	})
}
