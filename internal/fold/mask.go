package fold

import (
	"strconv"
	"strings"
	"time"
)

// MaskOptions configures MaskToolOutputs.
type MaskOptions struct {
	// OlderThan: tool results older than this (Now − Turn.At) are masked.
	// 0 (or negative) turns masking off.
	OlderThan time.Duration
	// Now is the reference time; zero means time.Now().
	Now time.Time
	// KeepChars is how much of the head of the masked text (whitespace
	// collapsed) the placeholder keeps; 0 keeps none.
	KeepChars int
}

// MaskToolOutputs hides old tool outputs behind placeholders (observation
// masking, after JetBrains' finding that it often beats
// summarisation), keeping the agent's reasoning turns intact.
//
// A tool result is a turn with Role "tool" or Kind "tool_result". It is
// masked when its At is known and older than OlderThan relative to Now (a
// turn without a time is never masked), and when the placeholder is
// actually shorter than its text (masking never grows a turn). Its text
// becomes "[tool output of <tool> masked: <N> chars]" (N in runes; with
// KeepChars, `; began: "<head>…"` before the "]"; without a Tool,
// "[tool output masked: <N> chars]").
//
// A tool call (Kind "tool_call") is paired with a result. fold.Turn has no
// call id, so pairing is by order and tool name: a result pairs with the
// earliest still unpaired call of the same Tool before it (first in, first
// out, which matches parallel calls whose results come back in call
// order); a user turn (Role "user", not a tool result) ends the exchange
// and drops the unpaired calls before it, so a call that never got a
// result cannot capture a later call's result. A call is masked exactly
// when its result is ("[tool call to <tool> masked: <N> chars]"): a call
// and its result are always kept or masked together. Unpaired calls and
// results without a call follow their own rule (calls kept; results by
// age and size).
//
// Masked turns keep Index, TurnID, At, Speaker, Role, Kind and Tool; their
// Tokens is reset to 0 (unknown) since the text changed. MaskToolOutputs
// returns a new slice (the input is never modified, also when masking is
// off) and the number of turns masked (calls included).
func MaskToolOutputs(turns []Turn, opt MaskOptions) ([]Turn, int) {
	out := make([]Turn, len(turns))
	copy(out, turns)
	if opt.OlderThan <= 0 || len(turns) == 0 {
		return out, 0
	}
	now := opt.Now
	if now.IsZero() {
		now = time.Now()
	}

	pending := map[string][]int{} // tool → indexes of unpaired calls, oldest first
	masked := 0
	for i, t := range turns {
		switch {
		case isToolResult(t):
			call := -1
			if q := pending[t.Tool]; len(q) > 0 {
				call, pending[t.Tool] = q[0], q[1:]
			}
			if t.At.IsZero() || now.Sub(t.At) <= opt.OlderThan {
				continue
			}
			ph := maskText("output", "of", t.Tool, t.Text, opt.KeepChars)
			if runeLen(ph) >= runeLen(t.Text) {
				continue
			}
			out[i].Text, out[i].Tokens = ph, 0
			masked++
			if call >= 0 {
				c := turns[call]
				out[call].Text, out[call].Tokens = maskText("call", "to", c.Tool, c.Text, opt.KeepChars), 0
				masked++
			}
		case t.Kind == "tool_call":
			pending[t.Tool] = append(pending[t.Tool], i)
		case t.Role == "user":
			clear(pending)
		}
	}
	return out, masked
}

func isToolResult(t Turn) bool { return t.Role == "tool" || t.Kind == "tool_result" }

// maskText renders a placeholder: "[tool <what> <prep> <tool> masked: N
// chars]", or "[tool <what> masked: N chars]" without a tool name.
func maskText(what, prep, tool, text string, keep int) string {
	var b strings.Builder
	b.WriteString("[tool ")
	b.WriteString(what)
	if tool != "" {
		b.WriteString(" " + prep + " " + tool)
	}
	b.WriteString(" masked: ")
	b.WriteString(strconv.Itoa(runeLen(text)))
	b.WriteString(" chars")
	if keep > 0 {
		head := []rune(strings.Join(strings.Fields(text), " "))
		if len(head) > 0 {
			b.WriteString(`; began: "`)
			if len(head) > keep {
				b.WriteString(string(head[:keep]))
				b.WriteString("…")
			} else {
				b.WriteString(string(head))
			}
			b.WriteString(`"`)
		}
	}
	b.WriteString("]")
	return b.String()
}
