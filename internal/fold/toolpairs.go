package fold

// A fold boundary splits the transcript into the folded part and the
// verbatim part that a bot sends to its model as messages. Providers
// reject a message list whose tool result has no tool call before it, and
// a list that ends with a tool call awaiting its result, so no boundary may
// fall inside a tool exchange: between an assistant's tool call and its
// results, or between parallel calls. ToolExchange marks the turns that a
// boundary may not precede ("joined" to the turn before them); Check.Joined
// carries the marks into Plan, and splitChunks keeps a chunk's exchanges
// whole the same way.

// MaxJoinedRun bounds a run of joined turns. A bot that sends calls and
// never their results would otherwise join every later turn and no fold
// could ever start: after this many joined turns in a row a boundary is
// allowed again.
const MaxJoinedRun = 32

// maxOpenCalls bounds the calls an exchange waits for.
const maxOpenCalls = 1 << 10

// ToolExchange follows the tool traffic of a transcript, turn by turn.
// The zero value is the start of a transcript (or of a fold's turns).
type ToolExchange struct {
	Open int // tool calls still awaiting a result
	Run  int // joined turns in a row, up to the last one seen
}

// IsToolResult reports whether a turn of this role and kind is a tool
// result (mask.go's rule: Role "tool" or Kind "tool_result").
func IsToolResult(role, kind string) bool { return role == "tool" || kind == "tool_result" }

// IsToolCall reports whether a turn of this role and kind is a tool call.
func IsToolCall(role, kind string) bool { return kind == "tool_call" && role != "tool" }

// Next records the next turn and reports whether it is joined to the turn
// before it: a tool result, or any turn but a user's while calls await
// their results (a parallel call, the assistant's text between a call and
// its result). A user turn ends the exchange, as in MaskToolOutputs: calls
// it leaves unanswered never get a result the provider would accept.
func (x *ToolExchange) Next(role, kind string) bool {
	result := IsToolResult(role, kind)
	user := role == "user" && !result
	joined := !user && (result || x.Open > 0) && x.Run < MaxJoinedRun
	switch {
	case user:
		x.Open = 0
	case result:
		x.Open = max(0, x.Open-1)
	case IsToolCall(role, kind):
		x.Open = min(maxOpenCalls, x.Open+1)
	}
	if joined {
		x.Run++
	} else {
		x.Run = 0
	}
	return joined
}

// joinedTurns marks the turns of one fold that a chunk boundary may not
// precede.
func joinedTurns(turns []Turn) []bool {
	var x ToolExchange
	out := make([]bool, len(turns))
	for i, t := range turns {
		out[i] = x.Next(t.Role, t.Kind)
	}
	return out
}

// pairedEnd moves a fold's end to a boundary that splits no tool exchange.
// to is where the mode would end the fold [from, to); it is kept when the
// turn at to is not joined to the one before it. Otherwise the fold first
// grows up to limit (the end of what the mode may fold, for mode window
// the start of the recent window), so that the exchange is folded whole,
// and else shrinks, so that it stays verbatim whole. from means no fold is
// possible yet: the exchange spans all the turns the mode may fold, and as
// the session goes on the limit moves past it.
func (c Check) pairedEnd(from, to, limit int64) int64 {
	if c.Joined == nil || to >= c.Total || !c.joined(to) {
		return to
	}
	for end := to + 1; end <= limit; end++ {
		if end == c.Total || !c.joined(end) {
			return end
		}
	}
	for end := to - 1; end > from; end-- {
		if !c.joined(end) {
			return end
		}
	}
	return from
}

// joined reports whether the turn at transcript index i is joined to the
// one before it.
func (c Check) joined(i int64) bool {
	return i > c.Cursor && i < c.Total && c.Joined(int(i-c.Cursor))
}
