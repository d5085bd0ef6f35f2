package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"hash/fnv"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
)

// codecStates are states as folds leave them (a synthetic session folded
// in batches, an agent session) and one with every kind of string the
// JSON encoding escapes.
func codecStates(t *testing.T) []*state {
	t.Helper()
	var out []*state
	ts, notes := synthSession(3, 200)
	s := New()
	summary, ni := "", 0
	var prev []byte
	for c := 0; c < len(ts); c += 10 {
		b := ts[c:min(c+10, len(ts))]
		var bn []fold.Note
		for ni < len(notes) && !notes[ni].At.After(b[len(b)-1].At) {
			bn = append(bn, notes[ni])
			ni++
		}
		res, err := s.Summarize(context.Background(), fold.Request{Profile: fold.ProfileVoice, PreviousSummary: summary,
			PreviousState: prev, Turns: b, Notes: bn, MaxChars: 1200})
		if err != nil {
			t.Fatal(err)
		}
		summary, prev = res.Summary, res.State
		var st state
		if err := json.Unmarshal(res.State, &st); err != nil {
			t.Fatal(err)
		}
		out = append(out, &st)
	}
	res, err := s.Summarize(context.Background(), benchAgentRequest())
	if err != nil {
		t.Fatal(err)
	}
	var agent state
	if err := json.Unmarshal(res.State, &agent); err != nil {
		t.Fatal(err)
	}
	odd := "a \"quote\", a \\ back\\slash, <tag> & co, \t\n\r\b\f\x01\x1f\x7f, é ü 漢字 😀, \u2028\u2029, bad \xff\xfe end"
	out = append(out, &agent, &state{V: stateVersion, Sum: math.MaxUint64, Agent: true, Names: []string{odd, "Bob"}, Others: 3,
		Periods: []period{{}, {From: -1, To: 1 << 40, Names: []string{odd}, Topics: []string{"x"},
			Stmts: []stmt{{Text: ""}, {Sp: odd, At: 1, Text: odd, W: 1e-9, K: kTool, Terms: odd, Key: odd, Ph: odd, Batch: true}}}},
		Open: []stmt{{Text: "t", W: 1e22}, {Text: "u", W: -0.5}, {Text: "v", W: 7.999999999999999},
			{Sp: "Ann Lee", Text: `Ann said, "a <b> & c\d"`, Terms: "said", W: 2}, {Sp: "Bo", Text: "é \u00e9", Key: "k\"", W: 3}, {Text: "w", K: 261}},
		Facts:  []fact{{ID: "m1"}, {ID: odd, Sp: odd, Key: odd, Num: odd}},
		Topics: []string{odd}, Small: true})
	return out
}

// TestStateCodecMatchesEncodingJSON: the state is written byte for byte
// as encoding/json writes it, and read back as encoding/json reads it.
func TestStateCodecMatchesEncodingJSON(t *testing.T) {
	for i, st := range codecStates(t) {
		want, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := st.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("state %d written as\n%s\nencoding/json writes\n%s", i, got, want)
		}
		var std state
		if err := json.Unmarshal(want, &std); err != nil {
			t.Fatal(err)
		}
		read, err := decodeState(want)
		if err != nil {
			t.Fatalf("state %d: %v", i, err)
		}
		if !reflect.DeepEqual(*read, std) {
			t.Fatalf("state %d read as\n%+v\nencoding/json reads\n%+v", i, *read, std)
		}
	}
}

// TestStatementsWrittenAgainFollowTheirFields: a fold writes the statements, facts and people's facts it did not change
// by copying them from the state it read (written by the fold before); what it changed is written anew, and the whole is
// as encoding/json writes it.
func TestStatementsWrittenAgainFollowTheirFields(t *testing.T) {
	for i, st := range codecStates(t) {
		if len(st.Open) > 0 { // (a copy of a statement in a period, as closing one makes: the two change apart)
			st.Periods = append(st.Periods, period{Stmts: []stmt{st.Open[0]}})
		}
		for round := range 7 {
			prev, _, err := st.appendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			st.src, st.srcSeq = prev, st.seq // (as the next fold reads it)
			for j := range st.Open {
				switch x := &st.Open[j]; (j + round) % 7 {
				case 0:
					x.Text += "x"
				case 1:
					x.W++
				case 2:
					x.Key, x.Batch = x.Key+"k", !x.Batch
				case 3: // (its text as its JSON wrote it: bytes of the state read, not the same string)
					q, _ := json.Marshal(x.Text)
					x.Text = string(q[1 : len(q)-1])
				case 4: // (the start of what it was)
					x.Sp = x.Sp[:len(x.Sp)/2]
				case 5: // (as long as it was)
					x.Terms = strings.ToUpper(x.Terms)
				case 6: // (its kind's last byte)
					x.K %= 256
				}
			}
			for j := range st.Facts {
				if (j+round)%3 == 0 {
					st.Facts[j].Num += " n=1"
				}
			}
			for j := range st.People {
				for k := range st.People[j].Facts {
					if (j+k+round)%3 == 0 {
						st.People[j].Facts[k].At++
					}
				}
			}
			want, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			for pass := range 2 { // (and again, as encode does after shedding: the state read is the same)
				if got, _, err := st.appendJSON(nil); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("state %d, round %d, pass %d: written again as\n%s\nencoding/json writes\n%s (%v)", i, round, pass, got, want, err)
				}
			}
		}
	}
}

// TestWeightsWrittenAsEncodingJSON: weights written again from what the scratch keeps of those it wrote are as
// encoding/json writes them, however many share a place there.
func TestWeightsWrittenAsEncodingJSON(t *testing.T) {
	st := &state{V: stateVersion}
	for i := range 2000 {
		st.Open = append(st.Open, stmt{Text: "t", W: float64(i)*0.05 - 50 + 1e-7*float64(i%7)})
	}
	for round := range 3 {
		for i := range st.Open {
			st.Open[i].W = st.Open[(i+round*7)%len(st.Open)].W * float64(1-2*(round%2)) // (others, in other places)
		}
		want, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if got, _, err := st.appendJSON(nil); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("round %d: weights written as\n%s\nencoding/json writes\n%s (%v)", round, got, want, err)
		}
	}
}

// TestReadStateOddJSON: what encoding/json accepts besides what the codec
// writes (spaces, other key orders, unknown keys, nulls, escapes) reads the
// same; what it refuses (every cut of a state, stray bytes) fails.
func TestReadStateOddJSON(t *testing.T) {
	for _, in := range []string{
		` { "sum" : 5 , "v" : 1 , "extra" : { "a" : [ 1 , "x" , null , true , { } ] } , "names" : [ "A\u00e9\ud83d\ude00" , "\ud800x" ] } `,
		`{"v":1,"sum":2,"open":[{"text":"a\/b\"c\\","w":-1.5e-3,"k":null,"sp":null}],"periods":null,"facts":[{"id":"x","sum":18446744073709551615}]}`,
		`{"v":1,"sum":0,"periods":[{},{"from":0,"stmts":[]}],"small":false,"agent":true}`,
		`{"v":1,"sum":3,"names":["a\u00e9\u2028\"\\\/\b\f\n\r\t\u0001z","\ud83d\ude00"]}`, // (in the order written)
	} {
		var std state
		if err := json.Unmarshal([]byte(in), &std); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		got, err := decodeState([]byte(in))
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		// (an empty JSON array reads as an empty slice there, nil here)
		if a, b := mustJSON(t, got), mustJSON(t, &std); a != b {
			t.Fatalf("%s read as\n%s\nencoding/json reads\n%s", in, a, b)
		}
	}
	valid, _, err := codecStates(t)[0].appendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(valid) {
		if _, err := decodeState(valid[:n]); err == nil {
			t.Fatalf("the state cut at byte %d was read: %s", n, valid[:n])
		}
	}
	for _, in := range []string{`{"v":1}x`, `{"v":"1"}`, `{"v":1.5}`, `{"sum":-1}`, `{"open":[{"text":"a` + "\x01" + `"}]}`,
		`{"names":["\x"]}`, `{"names":["\u12"]}`, `{"v":1,}`, `[1]`, `{"agent":tru}`, `{"v" 1}`, ``} {
		if _, err := decodeState([]byte(in)); err == nil {
			t.Errorf("%q was read", in)
		}
	}
}

func mustJSON(t *testing.T, st *state) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestStateCodecRefusesNaN: a weight that is not a number cannot be
// written (encoding/json refuses it too).
func TestStateCodecRefusesNaN(t *testing.T) {
	st := &state{V: stateVersion, Open: []stmt{{Text: "x", W: math.NaN()}}}
	if _, _, err := st.appendJSON(nil); err == nil {
		t.Fatal("NaN written")
	}
	if _, err := json.Marshal(st); err == nil {
		t.Fatal("encoding/json wrote NaN")
	}
}

// A state whose numbers JSON would not read ("01", "+1", ".5", "1.") is refused as encoding/json refuses it, and
// one of the numbers JSON writes is read.
func TestStateNumbersAreJSONs(t *testing.T) {
	for _, n := range []string{"00", "01", "+1", "-01", ".5", "1.", "1.e5", "1e", "1e+", "1e+-5", "--1", "-", "1ee5", "1.2.3"} {
		for _, s := range []string{`{"v":` + n + `,"sum":0}`, `{"v":1,"sum":0,"open":[{"text":"x","w":` + n + `}]}`} {
			if st, err := decodeState([]byte(s)); err == nil {
				t.Errorf("%s read as %+v; want an error", s, *st)
			}
		}
	}
	for _, n := range []string{"0", "-0", "0.5", "-0.25", "12.5e3", "1E-7", "1e+21", "3e0"} {
		s := `{"v":1,"sum":0,"open":[{"text":"x","w":` + n + `}]}`
		want, err := strconv.ParseFloat(n, 64)
		if st, derr := decodeState([]byte(s)); err != nil || derr != nil || st.Open[0].W != want {
			t.Errorf("%s: %v, %v; want w %v", s, st, derr, want)
		}
	}
}

// The state's hashes are FNV-1a, as hash/fnv computes it: a checkpoint
// written by an older build still matches its summary.
func TestHashStringIsFNV64a(t *testing.T) {
	for _, s := range []string{"", "a", "Alice, Bob and Carol are talking about Tokyo.", "é 漢字 \x00 \xff"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := hashString(s), h.Sum64(); got != want {
			t.Errorf("hashString(%q) = %d, want %d", s, got, want)
		}
		for i := range len(s) {
			if got := fnvAdd(hashString(s[:i]), s[i:]); got != h.Sum64() {
				t.Errorf("fnvAdd(hashString(%q), %q) = %d, want %d", s[:i], s[i:], got, h.Sum64())
			}
		}
	}
	// fnvAddLower hashes s lower-cased, eight bytes at a time: every byte at every place of a word, and a non-ASCII s.
	for n := range 20 {
		for at := range n {
			for b := range 256 {
				s := []byte(strings.Repeat("aZ@[`{", 4)[:n])
				s[at] = byte(b)
				if got, want := fnvAddLower(7, string(s)), fnvAdd(7, strings.ToLower(string(s))); got != want {
					t.Fatalf("fnvAddLower(7, %q) = %d, want %d (fnvAdd of it lower-cased)", s, got, want)
				}
			}
		}
	}
}

// TestTokenBitsAreTokenRunes holds tokenTerms' table of ASCII token bytes
// to what it says: letters, digits, ' - $ and %.
func TestTokenBitsAreTokenRunes(t *testing.T) {
	for c := range byte(utf8.RuneSelf) {
		want := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '\'' || c == '-' || c == '$' || c == '%'
		if got := tokenBits[c>>6]>>(c&63)&1 != 0; got != want {
			t.Errorf("byte %q: in tokenBits %v, want %v", rune(c), got, want)
		}
	}
}

// TestStateOfVersion1: a state an older build wrote (version 1: each fact
// with its full hash beside the ID) reads as the state now written, so a
// session goes on from it as it would from its own.
func TestStateOfVersion1(t *testing.T) {
	ts, _ := synthSession(2, 120)
	s, ctx := New(), context.Background()
	var res fold.Result
	for c := 0; c < 100; c += 10 {
		var err error
		res, err = s.Summarize(ctx, fold.Request{PreviousSummary: res.Summary, PreviousState: res.State, Turns: ts[c : c+10], MaxChars: 1200})
		if err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(res.State))
	d.UseNumber() // (the hashes are beyond a float's integers)
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	facts, _ := m["facts"].([]any)
	if len(facts) == 0 {
		t.Fatalf("no facts in %s", res.State)
	}
	m["v"] = 1
	for i, f := range facts {
		f.(map[string]any)["sum"] = uint64(math.MaxUint64) - uint64(i)
	}
	v1, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	next := fold.Request{PreviousSummary: res.Summary, Turns: ts[100:110], MaxChars: 1200}
	want, err := s.Summarize(ctx, fold.Request{PreviousSummary: next.PreviousSummary, PreviousState: res.State, Turns: next.Turns, MaxChars: 1200})
	if err != nil {
		t.Fatal(err)
	}
	next.PreviousState = v1
	got, err := s.Summarize(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if got.Summary != want.Summary || !reflect.DeepEqual(got.MemoryItems, want.MemoryItems) || !bytes.Equal(got.State, want.State) {
		t.Fatalf("after a state of version 1:\n%q %+v\nafter the same state now written:\n%q %+v", got.Summary, got.MemoryItems, want.Summary, want.MemoryItems)
	}
}

// A state written by an older build (testdata of the state package: a
// real version-1 state, its word counts sorted and each "word:count")
// decodes with what it holds, and so does the same state marked version
// 2; a version this build does not know is refused (the session then
// goes on from its summary read as prose).
func TestOlderStateVersionsDecode(t *testing.T) {
	v1, err := os.ReadFile("../../state/testdata/offline_state.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{`{"v":1,`, `{"v":2,`} {
		data := append([]byte(v), bytes.TrimPrefix(v1, []byte(`{"v":1,`))...)
		st, err := decodeState(data)
		if err != nil {
			t.Fatalf("%s…: %v", v, err)
		}
		if len(st.Facts) == 0 || len(st.Periods) == 0 || len(st.Voc) == 0 {
			t.Fatalf("%s…: %d facts, %d periods, %d counted words; expected the state's", v, len(st.Facts), len(st.Periods), len(st.Voc))
		}
	}
	if _, err := decodeState(append([]byte(`{"v":99,`), bytes.TrimPrefix(v1, []byte(`{"v":1,`))...)); err == nil {
		t.Fatal("version 99 decoded; expected it refused")
	}
}
