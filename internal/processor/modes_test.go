package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
)

// sizedTurn publishes turn i of session with a bot-reported token size and
// alternating user/assistant roles (an exchange is a user turn).
func (r *rig) sizedTurn(session string, i, tokens int) {
	r.t.Helper()
	id := fmt.Sprintf("%s-t%03d", session, i)
	role, speaker := "user", "Alice"
	if i%2 == 1 {
		role, speaker = "assistant", "Bot"
	}
	r.Publish(r.Layout.Subjects.In(session, events.KindTurn), events.Turn{
		V: 1, Session: session, TurnID: id, At: t0.Add(time.Duration(i) * 10 * time.Second),
		Speaker: speaker, Role: role, Text: fmt.Sprintf("message number %03d from %s", i, speaker), Tokens: tokens,
	}, id)
}

func (r *rig) sizedTurns(session string, from, to, tokens int) {
	r.t.Helper()
	for i := from; i < to; i++ {
		r.sizedTurn(session, i, tokens)
	}
}

func decodeAll[T any](r *rig, session, kind string) []T {
	r.t.Helper()
	var out []T
	for _, m := range r.Outbound(session, kind) {
		var v T
		if err := json.Unmarshal(m.Data, &v); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func lifecycleOf(evs []events.Lifecycle, typ string) []events.Lifecycle {
	var out []events.Lifecycle
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Mode evict: no model call; drop the oldest turns to targetUtilization of
// the window, keep at least minKeepMessages, publish the eviction note.
func TestModeEvictDropsOldestWithoutAModel(t *testing.T) {
	r := newRig(t)
	r.start(Config{
		Mode: fold.ModeEvict, RecallEnabled: true,
		Tokens: fold.TokenPolicy{ContextWindow: 2000, ReserveTokens: 200},
		Evict:  fold.EvictPolicy{TargetUtilization: 0.5, MinKeepMessages: 4},
	})
	// 19 turns × 100 tokens = 1900 > 1800 (window − reserve): evict 9 to
	// reach 1000 (50% of 2000).
	r.sizedTurns("ev", 0, 20, 100)
	s := r.Settled("ev", 20, 9)
	if r.llm.Calls() != 0 {
		t.Fatalf("mode evict called the model %d times", r.llm.Calls())
	}
	if !strings.HasPrefix(s.Summary, "[Context rolled: 9 messages evicted (900 tokens).") || !strings.Contains(s.Summary, "2026-11-22T20:00:00Z to 2026-11-22T20:01:20Z") {
		t.Fatalf("eviction note: %q", s.Summary)
	}
	if s.Evicted != 9 || s.EvictedTokens != 900 {
		t.Fatalf("evicted totals %d/%d, want 9/900", s.Evicted, s.EvictedTokens)
	}
	var evs []events.Evicted
	r.Eventually("evicted event", func() bool { evs = decodeAll[events.Evicted](r, "ev", events.KindEvicted); return len(evs) == 1 })
	e := evs[0]
	if e.Count != 9 || e.Tokens != 900 || e.FromTurn != 0 || e.ToTurn != 8 || e.Cursor != 9 || !e.First.Equal(t0) || !e.Last.Equal(t0.Add(80*time.Second)) {
		t.Fatalf("evicted event: %+v", e)
	}
	sums := r.Summaries("ev")
	if len(sums) != 1 || sums[0].Mode != "evict" || sums[0].Tier != "evicted" || sums[0].Summary != s.Summary || sums[0].Cursor != 9 {
		t.Fatalf("summary-updated: %+v", sums)
	}
	done := lifecycleOf(r.Lifecycle("ev"), events.EventCompactionCompleted)
	if len(done) != 1 || done[0].Mode != "evict" || done[0].Cause != fold.CauseThreshold {
		t.Fatalf("lifecycle: %+v", done)
	}

	// A second eviction keeps the note cumulative.
	r.sizedTurns("ev", 20, 30, 100) // 11 kept + 10 = 2100 tokens at turn 29: trigger at 1900 first
	r.Eventually("second eviction", func() bool { return len(r.Summaries("ev")) == 2 })
	// The summary is published before the checkpoint is written, so the
	// checkpoint may still hold the first eviction for a moment.
	second := r.Summaries("ev")[1]
	r.Eventually("second eviction checkpointed", func() bool { s = r.Checkpoint("ev"); return s.Cursor == second.Cursor })
	if !strings.HasPrefix(s.Summary, fmt.Sprintf("[Context rolled: %d messages evicted", s.Evicted)) || s.Evicted <= 9 ||
		!strings.Contains(s.Summary, "Evicted range: 2026-11-22T20:00:00Z to") {
		t.Fatalf("cumulative note: %q (evicted %d)", s.Summary, s.Evicted)
	}
}

// Mode evict's fallback: evict without recall is amnesia, so it summarizes.
func TestModeEvictWithoutRecallFallsBackToTokens(t *testing.T) {
	r := newRig(t)
	r.start(Config{
		Mode:   fold.ModeEvict,
		Tokens: fold.TokenPolicy{ContextWindow: 2000, ReserveTokens: 200, KeepRecentMessages: 4, KeepRecentTokens: 400},
		Evict:  fold.EvictPolicy{TargetUtilization: 0.5},
	})
	r.sizedTurns("fb", 0, 18, 100) // 1700 > emergency 1600 (80%)
	r.Eventually("a fold", func() bool { return len(r.Summaries("fb")) == 1 })
	if got := r.Summaries("fb")[0]; got.Mode != "tokens" || r.llm.Calls() == 0 {
		t.Fatalf("fallback: mode %q, model calls %d", got.Mode, r.llm.Calls())
	}
	if len(r.Outbound("fb", events.KindEvicted)) != 0 {
		t.Fatal("evicted without recall")
	}
}

// Mode interval: fold every N exchanges keeping keep_recent verbatim, with the
// context sources' answers merged into the block.
func TestModeIntervalMergesContextSources(t *testing.T) {
	r := newRig(t)
	var mu sync.Mutex
	var asked []contextsource.Request
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := contextsource.Serve(ctx, r.NC, contextsource.ServiceConfig{Name: "calendar", Subject: "ctx.calendar"},
		func(_ context.Context, req contextsource.Request) (string, error) {
			mu.Lock()
			asked = append(asked, req)
			mu.Unlock()
			return "Edgewood Park hike 9am-12pm completed.", nil
		}, r.Log); err != nil {
		t.Fatal(err)
	}
	r.start(Config{ContextSources: []contextsource.Source{
		{Label: "Calendar", Subject: "ctx.calendar", Prompt: "Summarize events.", Timeout: 5 * time.Second},
		{Label: "Mail", Subject: "ctx.mail", Timeout: 200 * time.Millisecond}, // nobody answers
	}})
	r.Control("iv", events.OpConfigure, &events.SessionConfig{Mode: events.ModeInterval})
	// 10 turns = 5 exchanges: fold all but the last 6.
	r.sizedTurns("iv", 0, 10, 0)
	s := r.Settled("iv", 10, 4)
	lines := strings.Split(s.Summary, "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "[Session summary — ") || lines[1] != "Conversation: Alice and Bob discussed messages 000 to 003." ||
		lines[2] != "Calendar: Edgewood Park hike 9am-12pm completed." || lines[3] != "Mail: (source unavailable)" {
		t.Fatalf("interval block:\n%s", s.Summary)
	}
	mu.Lock()
	got := asked[0]
	mu.Unlock()
	if !got.From.Equal(t0) || !got.To.Equal(t0.Add(30*time.Second)) || got.Prompt != "Summarize events." || got.Session != "iv" {
		t.Fatalf("source asked %+v, want the folded window 20:00:00–20:00:30", got)
	}
	// Five more exchanges: the next fold sees only the conversation part.
	r.sizedTurns("iv", 10, 20, 0)
	r.Settled("iv", 20, 14)
	reqs := r.llm.Requests()
	last := reqs[len(reqs)-1].Content()
	if strings.Contains(last, "Edgewood") || !strings.Contains(last, "discussed messages 000 to 003") {
		t.Fatalf("second fold's prompt should carry the conversation summary only:\n%s", last)
	}
	if ev := lifecycleOf(r.Lifecycle("iv"), events.EventCompactionCompleted); len(ev) != 2 || ev[0].Mode != "interval" || ev[0].Cause != fold.CauseInterval {
		t.Fatalf("lifecycle: %+v", ev)
	}
}

// Mode tokens: trigger on tokens, keep a token-budgeted tail, fold the
// old turns in chunks with the summary carried from chunk to chunk.
func TestModeTokensChunksWithRollingContext(t *testing.T) {
	r := newRig(t)
	r.start(Config{Mode: fold.ModeTokens, Tokens: fold.TokenPolicy{
		ContextWindow: 4000, ReserveTokens: 400, KeepRecentTokens: 400, KeepRecentMessages: 2, IdleAfter: time.Hour,
	}})
	// 33 × 100 = 3300 > 3200 (80%): keep 4 (400 tokens), fold 29 in
	// chunks of ≤ 1000 tokens: 10 + 10 + 9.
	r.sizedTurns("tk", 0, 33, 100)
	s := r.Settled("tk", 33, 29)
	reqs := r.llm.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d summarizer calls, want 3 chunks", len(reqs))
	}
	if c := reqs[1].Content(); !strings.Contains(c, "discussed messages 000 to 009") || !strings.Contains(c, "message number 019") || strings.Contains(c, "message number 009 ") {
		t.Fatalf("chunk 2 should carry chunk 1's summary and its own turns:\n%s", c)
	}
	if s.Summary != "Alice and Bob discussed messages 020 to 028." {
		t.Fatalf("summary %q", s.Summary)
	}
	done := lifecycleOf(r.Lifecycle("tk"), events.EventCompactionCompleted)
	if len(done) != 1 || done[0].Chunks != 3 || done[0].Cause != fold.CauseEmergency || done[0].Tier != "full" || done[0].Mode != "tokens" {
		t.Fatalf("lifecycle: %+v", done)
	}
	started := lifecycleOf(r.Lifecycle("tk"), events.EventCompactionStarted)
	if started[0].Estimate != 3300 || started[0].Limit != 3200 {
		t.Fatalf("started: estimate %d limit %d", started[0].Estimate, started[0].Limit)
	}
}

// Tier 3: past the emergency threshold, a summarizer that keeps
// failing yields a placeholder instead of an overflowing session; the
// previous summary is kept in it.
func TestModeTokensPlaceholderAfterRepeatedFailures(t *testing.T) {
	r := newRig(t)
	r.llm.SetFunc(func(int, openaitest.Request) openaitest.Reply { return openaitest.ServerError() })
	r.start(Config{Mode: fold.ModeTokens, Tokens: fold.TokenPolicy{ContextWindow: 4000, ReserveTokens: 400, KeepRecentTokens: 400, KeepRecentMessages: 2}})
	r.sizedTurns("ph", 0, 33, 100)
	s := r.Settled("ph", 33, 29)
	if !strings.Contains(s.Summary, "Summary unavailable") {
		t.Fatalf("placeholder summary: %q", s.Summary)
	}
	failed := lifecycleOf(r.Lifecycle("ph"), events.EventCompactionFailed)
	done := lifecycleOf(r.Lifecycle("ph"), events.EventCompactionCompleted)
	if len(failed) < 2 || len(done) != 1 || done[0].Tier != string(fold.TierPlaceholder) {
		t.Fatalf("failed %d, completed %+v; want two failures then a placeholder tier", len(failed), done)
	}
}

// A quiet session above the idle threshold is folded without another event.
func TestModeTokensIdleFold(t *testing.T) {
	r := newRig(t)
	r.start(Config{Mode: fold.ModeTokens, Tokens: fold.TokenPolicy{
		ContextWindow: 4000, ReserveTokens: 400, KeepRecentTokens: 400, KeepRecentMessages: 2,
		IdleAfter: time.Second, IdleThreshold: 0.5,
	}})
	r.sizedTurns("idle", 0, 25, 100) // 2500: above 50%, below 80%
	r.Settled("idle", 25, 21)
	done := lifecycleOf(r.Lifecycle("idle"), events.EventCompactionCompleted)
	if len(done) != 1 || done[0].Cause != fold.CauseIdle || done[0].Trigger != "idle" {
		t.Fatalf("lifecycle: %+v", done)
	}
}

// Memory extraction: facts next to the summary are published once per session.
func TestMemoriesPublishedAndDeduplicated(t *testing.T) {
	r := newRig(t)
	calls := 0
	r.llm.SetFunc(func(_ int, req openaitest.Request) openaitest.Reply {
		calls++
		mem := "- Alice prefers tea\n- The budget is 2k"
		if calls > 1 {
			mem = "- alice prefers tea.\n- The deadline is Friday"
		}
		return openaitest.OK(echoSummary(req) + "\n<memories>\n" + mem + "\n</memories>")
	})
	r.start(Config{})
	r.Turns("mem", 71)
	r.Settled("mem", 71, 20)
	var got []events.Memories
	r.Eventually("two memory events", func() bool { got = decodeAll[events.Memories](r, "mem", events.KindMemory); return len(got) == 2 })
	if strings.Join(got[0].Memories, "|") != "Alice prefers tea|The budget is 2k" || strings.Join(got[1].Memories, "|") != "The deadline is Friday" ||
		got[0].Version != 1 || got[1].Version != 2 {
		t.Fatalf("memory events: %+v", got)
	}
	if s := r.Checkpoint("mem"); strings.Contains(s.Summary, "memories") || strings.Contains(s.Summary, "tea") {
		t.Fatalf("memories leaked into the summary: %q", s.Summary)
	}
}

// Observation masking: old tool outputs reach the model as
// placeholders, the call with them.
func TestToolOutputsMaskedBeforeSummarizing(t *testing.T) {
	r := newRig(t)
	r.start(Config{MaskToolOutputsAfter: time.Minute, Window: fold.Window{Recent: 4, Batch: 4}})
	secret := strings.Repeat("grep output line with many details ", 20)
	old := time.Now().Add(-time.Hour)
	for i, tr := range []events.Turn{
		{Speaker: "Alice", Role: "user", Text: "find the config"},
		{Speaker: "agent", Role: "assistant", Kind: "tool_call", Tool: "grep", Text: `grep -r "timeout" ./config`},
		{Speaker: "grep", Role: "tool", Kind: "tool_result", Tool: "grep", Text: secret},
		{Speaker: "agent", Role: "assistant", Text: "the timeout is 30s"},
		{Speaker: "Alice", Role: "user", Text: "thanks"}, {Speaker: "Alice", Role: "user", Text: "one"},
		{Speaker: "Alice", Role: "user", Text: "two"}, {Speaker: "Alice", Role: "user", Text: "three"},
		{Speaker: "Alice", Role: "user", Text: "four"},
	} {
		tr.V, tr.Session, tr.TurnID, tr.At = 1, "mask", fmt.Sprintf("m%d", i), old.Add(time.Duration(i)*time.Second)
		r.Publish(r.Layout.Subjects.In("mask", events.KindTurn), tr, tr.TurnID)
	}
	r.Settled("mask", 9, 4)
	c := r.llm.Requests()[0].Content()
	if strings.Contains(c, "grep output line") || strings.Contains(c, `"timeout" ./config`) ||
		!strings.Contains(c, "[tool output of grep masked") || !strings.Contains(c, "[tool call to grep masked") || !strings.Contains(c, "find the config") {
		t.Fatalf("masked prompt:\n%s", c)
	}
	if done := lifecycleOf(r.Lifecycle("mask"), events.EventCompactionCompleted); len(done) != 1 || done[0].MaskedTurns != 2 {
		t.Fatalf("lifecycle: %+v", done)
	}
}

// With recent 4 / batch 4, the batch [0, 4) would end
// between an assistant's tool call (turn 3) and its result (turn 4), and
// the verbatim part would start with an orphan result, which providers
// reject. The fold takes the exchange whole instead, also when the
// processor restarts between the call and its result (the exchange's state
// is in the checkpoint).
func TestFoldNeverSplitsAToolCallFromItsResult(t *testing.T) {
	r := newRig(t)
	cfg := Config{Window: fold.Window{Recent: 4, Batch: 4}}
	_, stop := r.start(cfg)
	turns := []events.Turn{
		{Speaker: "Alice", Role: "user", Text: "find the config"},
		{Speaker: "agent", Role: "assistant", Text: "looking"},
		{Speaker: "Alice", Role: "user", Text: "the timeout one"},
		{Speaker: "agent", Role: "assistant", Kind: "tool_call", Tool: "grep", Text: `grep -r "timeout" ./config`},
		{Speaker: "grep", Role: "tool", Kind: "tool_result", Tool: "grep", Text: "config/app.yaml: timeout: 30s"},
		{Speaker: "agent", Role: "assistant", Text: "the timeout is 30s"},
		{Speaker: "Alice", Role: "user", Text: "thanks"}, {Speaker: "Alice", Role: "user", Text: "one"},
		{Speaker: "Alice", Role: "user", Text: "two"},
	}
	pub := func(i int) {
		tr := turns[i]
		tr.V, tr.Session, tr.TurnID, tr.At = 1, "pairs", fmt.Sprintf("p%d", i), t0.Add(time.Duration(i)*time.Second)
		r.Publish(r.Layout.Subjects.In("pairs", events.KindTurn), tr, tr.TurnID)
	}
	for i := range 4 {
		pub(i)
	}
	r.Settled("pairs", 4, 0)
	stop()
	r.start(cfg)
	for i := 4; i < len(turns); i++ {
		pub(i)
	}
	s := r.Settled("pairs", 9, 5)
	if got := r.Summaries("pairs"); len(got) != 1 || got[0].Cursor != 5 || got[0].FoldedTurns != 5 {
		t.Fatalf("summaries %+v, want one fold of turns 0-4", got)
	}
	if !strings.Contains(r.llm.Requests()[0].Content(), "timeout: 30s") {
		t.Fatalf("the folded batch lacks the tool result:\n%s", r.llm.Requests()[0].Content())
	}
	if s.Tools != nil {
		t.Fatalf("tool state %+v left after the exchange was folded", s.Tools)
	}
}

// End: a final fold of everything still verbatim, then the
// state is archived and cleared; later events are refused by name.
func TestEndFoldsArchivesAndRefuses(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	r.Turns("end", 30)
	r.Settled("end", 30, 0)
	r.Control("end", events.OpEnd, nil)
	var s = r.Checkpoint("end")
	r.Eventually("archived", func() bool { s = r.Checkpoint("end"); return s.Archived })
	if !s.Ended || s.Total != 0 || s.Summary != "" || s.Version != 1 {
		t.Fatalf("tombstone: %+v", s)
	}
	arch, err := r.Store.LoadArchive(context.Background(), "end", 0)
	if err != nil || arch == nil {
		t.Fatalf("archive: %v %v", arch, err)
	}
	if arch.Summary != "Alice and Bob discussed messages 000 to 029." || arch.Cursor != 30 || arch.Total != 30 {
		t.Fatalf("archived state: summary %q cursor %d total %d", arch.Summary, arch.Cursor, arch.Total)
	}
	if ev := lifecycleOf(r.Lifecycle("end"), events.EventSessionArchived); len(ev) != 1 || ev[0].Reason != "end" {
		t.Fatalf("lifecycle: %+v", ev)
	}
	if sums := r.Summaries("end"); len(sums) != 1 || sums[0].Cursor != 30 {
		t.Fatalf("final summary: %+v", sums)
	}
	r.Turns("end", 1)
	r.Eventually("refused turn in the dead-letter stream", func() bool {
		for _, m := range r.DeadLetters() {
			if m.Header.Get(events.HeaderErrorCode) == events.CodeSessionEnded {
				return true
			}
		}
		return false
	})
	// reset revives it, with summary versions still increasing.
	r.Control("end", events.OpReset, nil)
	r.Turns("end", 61)
	r.Eventually("a fold after the reset", func() bool { return len(r.Summaries("end")) == 2 })
	if v := r.Summaries("end")[1].Version; v != 2 {
		t.Fatalf("version after reset %d, want 2", v)
	}
}

// Reset policy idle: the first event after the silence starts a new life;
// the old one is archived.
func TestResetPolicyIdle(t *testing.T) {
	r := newRig(t)
	r.start(Config{})
	r.Control("rp", events.OpConfigure, &events.SessionConfig{ResetPolicy: events.ResetIdle, ResetIdleMinutes: 30})
	r.Turns("rp", 5) // at t0 … t0+40s
	r.Settled("rp", 5, 0)
	r.Publish(r.Layout.Subjects.In("rp", events.KindTurn), events.Turn{V: 1, Session: "rp", TurnID: "late", At: t0.Add(2 * time.Hour), Speaker: "Alice", Role: "user", Text: "back again"}, "late")
	s := r.Settled("rp", 1, 0)
	if s.Epoch != 1 || s.Config == nil || s.Config.ResetPolicy != events.ResetIdle {
		t.Fatalf("after the idle reset: epoch %d config %+v", s.Epoch, s.Config)
	}
	arch, err := r.Store.LoadArchive(context.Background(), "rp", 0)
	if err != nil || arch == nil || arch.Total != 5 {
		t.Fatalf("archive of the old life: %+v %v", arch, err)
	}
	if ev := lifecycleOf(r.Lifecycle("rp"), events.EventSessionReset); len(ev) != 1 || ev[0].Reason != events.ResetIdle {
		t.Fatalf("lifecycle: %+v", ev)
	}
}

// configure is checked against the deployment's settings too, and a bad
// one is dead-lettered naming the field, the session unchanged.
func TestConfigureRejectedAgainstDeployment(t *testing.T) {
	r := newRig(t)
	r.start(Config{RecallEnabled: true})
	r.Control("cf", events.OpConfigure, &events.SessionConfig{Mode: events.ModeEvict, TargetUtilization: 0.95})
	r.Control("cf", events.OpConfigure, &events.SessionConfig{Mode: "rolling"})
	r.Eventually("two rejections", func() bool { return len(r.DeadLetters()) == 2 })
	dl := r.DeadLetters()
	if f := dl[0].Header.Get(events.HeaderErrorField); f != "config" || !strings.Contains(dl[0].Header.Get(events.HeaderError), "target utilization") {
		t.Fatalf("first rejection: field %q: %s", f, dl[0].Header.Get(events.HeaderError))
	}
	if f := dl[1].Header.Get(events.HeaderErrorField); f != "config.mode" {
		t.Fatalf("second rejection: field %q", f)
	}
	r.Turns("cf", 1)
	if s := r.Settled("cf", 1, 0); s.Config != nil {
		t.Fatalf("a rejected configure changed the session: %+v", s.Config)
	}
}
