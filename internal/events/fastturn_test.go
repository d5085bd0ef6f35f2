package events

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFastTurnDecodes(t *testing.T) {
	cases := []struct {
		in   string
		fast bool
	}{
		{goodTurn, false}, // unknown field: encoding/json decides
		{`{"v":1,"session":"s1","turn_id":"t1","at":"2026-01-02T15:04:05.123+02:00","speaker":"Al","role":"user","text":"say \"hi\"\n\\o/","tokens":12,"meta":{"lang":"en"}}`, true},
		{` { "v" : 1 , "text" : "x" } `, true},
		{`{"tool":"t\\","session":"","turn_id":"a\/b","speaker":"x\"y","text":"","kind":"k","v":-12}`, true},
		{`{"v":1,"text":"caf\u00e9"}`, false},
		{`{"v":1.0}`, false},
		{`{"v":1,"v":2}`, false},
		{`{"V":1}`, false},
		{`{"kind":null}`, false},
		{`{"at":"2026-01-02 15:04:05"}`, false},
		{`{"v":1}x`, false},
		{`{"meta":{"a":"1","a":"2"}}`, false},
	}
	for _, c := range cases {
		var fast Turn
		ok := decodeTurnFast([]byte(c.in), &fast)
		if ok != c.fast {
			t.Errorf("%s: fast path %v, want %v", c.in, ok, c.fast)
			continue
		}
		if ok {
			var slow Turn
			if err := json.Unmarshal([]byte(c.in), &slow); err != nil || !reflect.DeepEqual(fast, slow) {
				t.Errorf("%s: fast %+v, encoding/json %+v (%v)", c.in, fast, slow, err)
			}
		}
	}
}

// Whenever the fast path accepts, encoding/json must decode the same turn.
func FuzzFastTurnAgrees(f *testing.F) {
	f.Add([]byte(`{"v":1,"session":"s1","turn_id":"t1","at":"2026-01-02T15:04:05Z","speaker":"Al","role":"user","text":"hi \\\"there\\\"","tokens":3}`))
	f.Add([]byte(`{"meta":{"k":"v"},"at":"2026-01-02T15:04:05.5-07:00","context_tokens":-0}`))
	f.Add([]byte(`{"text":"a\tb\\/c","tool":"bash","kind":"tool_result"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast Turn
		if !decodeTurnFast(data, &fast) {
			return
		}
		var slow Turn
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", err, data)
		}
		if !fast.At.Equal(slow.At) || fast.At.Location().String() != slow.At.Location().String() {
			t.Fatalf("time differs: %v vs %v", fast.At, slow.At)
		}
		fast.At, slow.At = time.Time{}, time.Time{}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast %+v\nslow %+v\ninput %q", fast, slow, data)
		}
	})
}

// hasControl agrees with a byte-by-byte check for every length up to three
// words and every position of a control byte, next to bytes just above
// the bound and with the top bit set (which must not borrow into a
// false positive).
func TestHasControl(t *testing.T) {
	naive := func(b []byte) bool {
		for _, c := range b {
			if c < 0x20 {
				return true
			}
		}
		return false
	}
	for n := 0; n <= 24; n++ {
		for _, fill := range []byte{0x20, 0x21, 0x7f, 0x80, 0xa0, 0xff, 'a'} {
			b := bytes.Repeat([]byte{fill}, n)
			if got := hasControl(b); got != naive(b) {
				t.Fatalf("%x: got %v", b, got)
			}
			for i := range n {
				for _, c := range []byte{0x00, 0x09, 0x0a, 0x1f} {
					b[i] = c
					if !hasControl(b) {
						t.Fatalf("%x: control byte %#x at %d not seen", b, c, i)
					}
					b[i] = fill
				}
			}
		}
	}
}

// A string of many escapes, escaped quotes among them, decodes to what it
// says: the closing quote found before an escaped one is looked for again
// after it.
func TestFastTurnManyEscapes(t *testing.T) {
	text := strings.Repeat(`a\n`, 20000) + strings.Repeat(`\"`, 20000)
	data := []byte(`{"v":1,"session":"s","turn_id":"t","at":"2026-11-22T20:00:00Z","speaker":"A","role":"user","text":"` + text + `"}`)
	var fast Turn
	if !decodeTurnFast(data, &fast) {
		t.Fatal("not decoded")
	}
	want := strings.Repeat("a\n", 20000) + strings.Repeat(`"`, 20000)
	if fast.Text != want {
		t.Fatalf("text of %d bytes, want %d", len(fast.Text), len(want))
	}
}
