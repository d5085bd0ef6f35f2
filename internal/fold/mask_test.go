package fold

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var maskNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// mt builds a turn aged age before maskNow (age < 0: no time).
func mt(index int64, role, kind, tool, text string, age time.Duration) Turn {
	t := Turn{Index: index, TurnID: "t" + string(rune('a'+index)), Speaker: "agent", Role: role, Kind: kind, Tool: tool, Text: text, Tokens: 99}
	if age >= 0 {
		t.At = maskNow.Add(-age)
	}
	return t
}

func TestMaskToolOutputs(t *testing.T) {
	big := strings.Repeat("line of grep output\n", 20) // 400 chars
	const (
		old    = 2 * time.Hour
		recent = 10 * time.Minute
		hour   = time.Hour
	)
	call := func(i int64, tool string, age time.Duration) Turn {
		return mt(i, "assistant", "tool_call", tool, `{"pattern":"TODO","path":"internal/"}`, age)
	}
	result := func(i int64, tool string, age time.Duration) Turn {
		return mt(i, "tool", "tool_result", tool, big, age)
	}
	user := func(i int64, age time.Duration) Turn { return mt(i, "user", "chat", "", "please continue", age) }

	tests := []struct {
		name   string
		turns  []Turn
		opt    MaskOptions
		masked []int64 // indexes of masked turns
	}{
		{"zero OlderThan is off", []Turn{call(0, "grep", old), result(1, "grep", old)}, MaskOptions{Now: maskNow}, nil},
		{"negative OlderThan is off", []Turn{call(0, "grep", old), result(1, "grep", old)}, MaskOptions{OlderThan: -hour, Now: maskNow}, nil},
		{"old pair masked", []Turn{user(0, old), call(1, "grep", old), result(2, "grep", old), user(3, recent)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{1, 2}},
		{"recent pair kept", []Turn{call(0, "grep", recent), result(1, "grep", recent)},
			MaskOptions{OlderThan: hour, Now: maskNow}, nil},
		{"old and recent", []Turn{call(0, "grep", old), result(1, "grep", old), call(2, "grep", recent), result(3, "grep", recent)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{0, 1}},
		{"exactly OlderThan is not older", []Turn{call(0, "grep", hour), result(1, "grep", hour)},
			MaskOptions{OlderThan: hour, Now: maskNow}, nil},
		{"result without a time kept", []Turn{call(0, "grep", old), result(1, "grep", -1)},
			MaskOptions{OlderThan: hour, Now: maskNow}, nil},
		{"short result kept with its call", []Turn{call(0, "ls", old), mt(1, "tool", "tool_result", "ls", "a.go b.go", old)},
			MaskOptions{OlderThan: hour, Now: maskNow}, nil},
		{"call masked even when its result's age decides", []Turn{call(0, "grep", 3*hour), result(1, "grep", old)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{0, 1}},
		{"parallel calls pair first in first out",
			[]Turn{call(0, "read", old), call(1, "read", old), result(2, "read", old), result(3, "read", recent)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{0, 2}},
		{"pairing by tool name",
			[]Turn{call(0, "grep", old), call(1, "read", old), result(2, "read", old), result(3, "grep", recent)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{1, 2}},
		{"user turn drops an unanswered call",
			[]Turn{call(0, "grep", 3*hour), user(1, 3*hour), call(2, "grep", old), result(3, "grep", old)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{2, 3}},
		{"result without a call masked alone", []Turn{user(0, old), result(1, "grep", old)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{1}},
		{"unanswered call kept", []Turn{call(0, "grep", old), user(1, old)},
			MaskOptions{OlderThan: hour, Now: maskNow}, nil},
		{"role tool without kind", []Turn{mt(0, "tool", "", "grep", big, old)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{0}},
		{"kind tool_result with another role", []Turn{call(0, "grep", old), mt(1, "user", "tool_result", "grep", big, old)},
			MaskOptions{OlderThan: hour, Now: maskNow}, []int64{0, 1}},
		{"zero Now is time.Now", []Turn{call(0, "grep", old), result(1, "grep", old)},
			MaskOptions{OlderThan: hour}, []int64{0, 1}},
		{"empty input", nil, MaskOptions{OlderThan: hour, Now: maskNow}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.turns)
			got, n := MaskToolOutputs(tc.turns, tc.opt)
			if !slices.Equal(tc.turns, before) {
				t.Fatal("input modified")
			}
			if len(got) != len(tc.turns) {
				t.Fatalf("%d turns out, want %d", len(got), len(tc.turns))
			}
			if n != len(tc.masked) {
				t.Errorf("masked %d, want %d", n, len(tc.masked))
			}
			for i, g := range got {
				in := tc.turns[i]
				if !slices.Contains(tc.masked, in.Index) {
					if g != in {
						t.Errorf("turn %d changed: %+v", in.Index, g)
					}
					continue
				}
				if g.Text == in.Text || !strings.HasPrefix(g.Text, "[tool ") || g.Tokens != 0 {
					t.Errorf("turn %d not masked: %q tokens %d", in.Index, g.Text, g.Tokens)
				}
				g.Text, g.Tokens = in.Text, in.Tokens
				if g != in {
					t.Errorf("turn %d: masking changed more than Text/Tokens: %+v", in.Index, g)
				}
			}
			if len(got) > 0 {
				got[0].Text = "mutated"
				if len(tc.turns) > 0 && tc.turns[0].Text == "mutated" {
					t.Error("output shares the input's backing array")
				}
			}
		})
	}
}

func TestMaskToolOutputsPlaceholders(t *testing.T) {
	out := strings.Repeat("x", 50) + "\n\n   " + strings.Repeat("y", 300)
	tests := []struct {
		name       string
		tool       string
		keep       int
		wantCall   string
		wantResult string
	}{
		{"plain", "grep", 0, "[tool call to grep masked: 12 chars]", "[tool output of grep masked: 355 chars]"},
		{"no tool name", "", 0, "[tool call masked: 12 chars]", "[tool output masked: 355 chars]"},
		{"head kept, whitespace collapsed", "grep", 55, `[tool call to grep masked: 12 chars; began: "grep -n TODO"]`,
			`[tool output of grep masked: 355 chars; began: "` + strings.Repeat("x", 50) + ` yyyy…"]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			turns := []Turn{
				mt(0, "assistant", "tool_call", tc.tool, "grep -n TODO", 2*time.Hour),
				mt(1, "tool", "tool_result", tc.tool, out, 2*time.Hour),
			}
			got, n := MaskToolOutputs(turns, MaskOptions{OlderThan: time.Hour, Now: maskNow, KeepChars: tc.keep})
			if n != 2 || got[0].Text != tc.wantCall || got[1].Text != tc.wantResult {
				t.Errorf("n=%d\ncall   %q want %q\nresult %q want %q", n, got[0].Text, tc.wantCall, got[1].Text, tc.wantResult)
			}
		})
	}
}
