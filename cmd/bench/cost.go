package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/demo"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/fold/prompt"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/tokens"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

// costAnswer is the model's answer in the cost section: a summary close to
// the default 1200-character budget (the offline summarizer's final summary
// of a two-hour session), so every fold after the first carries a full-size
// previous summary.
const costAnswer = "Alice, Bob, Carol and Dave are talking about Marvel Rivals, Klyntar and Star-Lord. Alice suggested we queue ranked in Marvel Rivals tonight, we need 3 more wins for Diamond 3, and Bob and Carol agreed. Carol asked Bob: maybe try Jeff the Land Shark instead? Bob said yes. Dave said we agreed to stop at 11:30 pm because Dave has work at 8 tomorrow, and Alice agreed. Dave asked: Can someone remind me to send the tournament form by Friday? On Bob's screen: Bob is screen-sharing Marvel Rivals, playing Hulk on Tokyo 2099, 2 deaths in the first fight. Bob suggested we try dive comp with Spider-Man and Venom on Yggsgard, and Dave agreed. On Carol's screen: Scoreboard shows Carol with 14 kills as Luna Snow. Dave asked: should we ban Hela next match? Alice said yes. Carol said we decided Bob plays Peni Parker next game and Dave swaps to Mantis. On Alice's screen: Alice is in hero select choosing Invisible Woman. Alice suggested we do one last match on Klyntar and then call it at 11:30, and Dave and Bob agreed. Bob will stream the Saturday cup on Twitch at 7 pm."

// costCase is one setting the conversation is folded with.
type costCase struct {
	name string
	cfg  processor.Config
}

func costCases(minFold int) []costCase {
	return []costCase{
		{"window 50/10", processor.Config{Window: fold.Window{Recent: 50, Batch: 10}}},
		{fmt.Sprintf("window 50/10, min_fold_tokens %d", minFold), processor.Config{Window: fold.Window{Recent: 50, Batch: 10, MinFoldTokens: minFold}}},
		{"tokens, context_window 8192", processor.Config{Mode: fold.ModeTokens, Tokens: fold.TokenPolicy{ContextWindow: 8192}}},
		{"tokens, context_window 16384", processor.Config{Mode: fold.ModeTokens, Tokens: fold.TokenPolicy{ContextWindow: 16384}}},
	}
}

// costSection counts the tokens the summarizer is sent per folded turn,
// over the folded turns' own tokens, for a generated voice conversation
// folded through the openai backend (prompts as sent over HTTP, counted
// with cl100k_base), and the same for re-summarizing the whole history at
// every call instead. The conversation is folded twice: one utterance a
// turn, and coalesced the way a voice bot publishes a group moment (a
// few utterances, "Alice: … Bob: …", as one turn).
func costSection(ctx context.Context, w io.Writer, o opts) error {
	tok, err := tokens.New("cl100k_base")
	if err != nil {
		return err
	}
	utterances := demo.Conversation(7, o.costTurns)
	fmt.Fprintf(w, "model cost: summarizer input tokens over the folded turns' own text tokens (cl100k_base), openai backend, every fold landed before the next turn\n")
	var met []string
	for _, wl := range []struct {
		what  string
		turns []events.Turn
	}{
		{"one utterance a turn", utterances},
		{fmt.Sprintf("coalesced, %d utterances a turn", costCoalesce), coalesce(utterances, costCoalesce)},
	} {
		text := 0
		for _, t := range wl.turns {
			text += tok.Count(t.Text)
		}
		fmt.Fprintf(w, "  %d-utterance voice conversation, %s: %d turns, %d text tokens, %.1f a turn\n", len(utterances), wl.what, len(wl.turns), text, float64(text)/float64(len(wl.turns)))
		fmt.Fprintf(w, "    %-36s %-6s %-6s %-9s %-10s %-15s %-11s %-14s %-9s %s\n", "setting", "calls", "turns", "turn tok", "input tok", "ratio (<= 1.3)", "line floor", "whole history", "verbatim", "per call: prompt + previous summary + turn lines")
		for _, c := range costCases(o.costMinFold) {
			r, err := costRun(ctx, tok, wl.turns, c.cfg)
			if err != nil {
				return fmt.Errorf("%s, %s: %w", wl.what, c.name, err)
			}
			if r.calls == 0 {
				fmt.Fprintf(w, "    %-36s no fold in %d turns\n", c.name, len(wl.turns))
				continue
			}
			calls := float64(r.calls)
			if ratio(r.inputToks, r.turnToks) <= 1.3 {
				met = append(met, c.name+" ("+wl.what+")")
			}
			fmt.Fprintf(w, "    %-36s %-6d %-6d %-9d %-10d %-15.2f %-11.2f %-14.2f %-9d %.0f + %.0f + %.0f\n", c.name, r.calls, r.folded, r.turnToks, r.inputToks,
				ratio(r.inputToks, r.turnToks), ratio(r.lineToks, r.turnToks), ratio(r.wholeToks, r.turnToks), r.verbatim/len(wl.turns),
				float64(r.inputToks-r.prevToks-r.lineToks)/calls, float64(r.prevToks)/calls, float64(r.lineToks)/calls)
		}
	}
	fmt.Fprintln(w, "  ratio: each request's system + user message over the text of the turns it folded; whole history: the same calls with every earlier turn's line instead of the previous summary")
	fmt.Fprintln(w, "  line floor: the folded turns' transcript lines alone (\"Speaker: text\", one a line) over their text: no batching gets below it; ~3.8 tokens of name, colon and newline a line are 55% of a 7-token utterance")
	fmt.Fprintln(w, "  verbatim: text tokens of the unfolded turns (cursor on) after each turn, averaged: what the bot's own prompt carries besides the summary")
	fmt.Fprintln(w, "  window 50/10 misses by design: each call re-reads the prompt and a full previous summary for a batch of 10 turns")
	if len(met) == 0 {
		met = []string{"none"}
	}
	fmt.Fprintf(w, "  target <= 1.3 met by: %s\n", strings.Join(met, "; "))
	return nil
}

// costCoalesce is how many utterances make one turn in the coalesced
// conversation.
const costCoalesce = 4

// coalesce merges every k consecutive utterances into one turn, the way
// a voice bot's room-aware coalescing hands a group moment over: the
// speakers' names move into the text.
func coalesce(in []events.Turn, k int) []events.Turn {
	var out []events.Turn
	for i := 0; i < len(in); i += k {
		group := in[i:min(i+k, len(in))]
		parts := make([]string, len(group))
		for j, u := range group {
			parts[j] = u.Speaker + ": " + u.Text
		}
		t := group[0]
		t.TurnID = fmt.Sprintf("g%04d", i/k)
		t.Speaker, t.Role, t.Text = "voice channel", "user", strings.Join(parts, " ")
		out = append(out, t)
	}
	return out
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

type costResult struct {
	calls, folded                                      int
	turnToks, inputToks, prevToks, lineToks, wholeToks int
	// verbatim is the text tokens of the turns from the cursor on after
	// each turn, summed: what a bot's prompt carries besides the summary.
	verbatim int
}

// rangeRe is the default templates' "turns <first>–<last>, " header.
var rangeRe = regexp.MustCompile(`turns (\d+)–(\d+), `)

// costRun folds the conversation through a processor with cfg and counts
// what the chat-completions server received. Turns are published one at a
// time with trigger generate, and the bench waits for the answer to each
// check (and for any fold it started, and the catch-up after it) before
// the next turn: folds land between turns, as they do in a voice session
// whose turns are seconds apart, so the batches do not depend on how fast
// this machine ingests.
func costRun(ctx context.Context, tok *tokens.Counter, turns []events.Turn, cfg processor.Config) (costResult, error) {
	var r costResult
	e, err := newEnv(false)
	if err != nil {
		return r, err
	}
	defer e.close()
	l, kv, err := e.provision(ctx, "fold")
	if err != nil {
		return r, err
	}
	srv := openaitest.New(nil)
	defer srv.Close()
	srv.SetFallback(openaitest.OK(costAnswer))
	sum, err := openai.New(openai.Config{BaseURL: srv.URL, APIKey: "bench", Model: "bench-mini"}, zerolog.Nop())
	if err != nil {
		return r, err
	}
	cfg.Trigger = processor.TriggerGenerate
	p, err := processor.New(cfg, processor.Deps{
		JS: e.js, Layout: l, Store: state.NewStore(e.js, kv), Summarizer: sum, Log: benchLog(),
	})
	if err != nil {
		return r, err
	}
	evs := make(chan *nats.Msg, 4096)
	sub, err := e.nc.ChanSubscribe(l.Subjects.Out("cost", events.KindEvent), evs)
	if err != nil {
		return r, err
	}
	defer sub.Unsubscribe()
	if err := e.nc.Flush(); err != nil {
		return r, err
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(rctx) }()
	<-p.Ready()

	running := map[string]bool{} // folds started and not completed
	var cursor int64
	// next returns the next lifecycle event, keeping track of folds.
	next := func() (events.Lifecycle, error) {
		var ev events.Lifecycle
		select {
		case m := <-evs:
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				return ev, err
			}
		case <-time.After(30 * time.Second):
			return ev, fmt.Errorf("no lifecycle event for 30 s (%d folds running)", len(running))
		case <-ctx.Done():
			return ev, ctx.Err()
		}
		switch ev.Type {
		case events.EventCompactionStarted:
			running[ev.FoldID] = true
		case events.EventCompactionCompleted:
			delete(running, ev.FoldID)
			cursor = ev.NewCursor
		case events.EventCompactionFailed:
			return ev, fmt.Errorf("fold failed: %s", ev.Error)
		}
		return ev, nil
	}
	own := make([]int, len(turns))
	for i, t := range turns {
		own[i] = tok.Count(t.Text)
	}
	unfolded := 0 // text tokens of the turns [cursor, i]
	generate := mustJSON(events.Control{V: events.Version, Session: "cost", Op: events.OpGenerate})
	for i := range turns {
		t := turns[i]
		t.Session = "cost"
		if _, err := e.js.Publish(ctx, l.Subjects.In("cost", events.KindTurn), mustJSON(t)); err != nil {
			return r, err
		}
		for settled := false; !settled; {
			if _, err := e.js.Publish(ctx, l.Subjects.In("cost", events.KindControl), generate); err != nil {
				return r, err
			}
			var ev events.Lifecycle
			for ev.Trigger != "generate" {
				if ev, err = next(); err != nil {
					return r, err
				}
			}
			// A fold started (by this check, or a catch-up still running):
			// let it land, then check again.
			settled = ev.Type == events.EventCompactionSkipped && ev.Reason != string(fold.SkipAlreadyInFlight)
			for len(running) > 0 {
				if _, err := next(); err != nil {
					return r, err
				}
			}
		}
		unfolded = 0
		for j := cursor; j <= int64(i); j++ {
			unfolded += own[j]
		}
		r.verbatim += unfolded
	}
	cancel()
	if err := <-stopped; err != nil {
		return r, err
	}

	// What each turn costs as its transcript line, from the requests.
	line := make([]int, len(turns))
	for k, req := range srv.Requests() {
		var system, user string
		for _, m := range req.Messages {
			switch m.Role {
			case "system":
				system = m.Content
			case "user":
				user = m.Content
			}
		}
		in := tok.Count(system) + tok.Count(user)
		head, body, ok := strings.Cut(user, "<"+prompt.TagTranscript+">\n")
		m := rangeRe.FindAllStringSubmatch(head, -1)
		if !ok || m == nil {
			return r, fmt.Errorf("request %d: no transcript or no turn range (re-compaction pass?)", k)
		}
		from, _ := strconv.Atoi(m[len(m)-1][1])
		to, _ := strconv.Atoi(m[len(m)-1][2])
		body, _, _ = strings.Cut(body, "\n</"+prompt.TagTranscript+">")
		lines := strings.Split(body, "\n")
		if len(lines) != to-from+1 || to >= len(turns) {
			return r, fmt.Errorf("request %d: %d transcript lines for turns %d..%d", k, len(lines), from, to)
		}
		prev := 0
		if _, after, ok := strings.Cut(head, "<"+prompt.TagPrevious+">\n"); ok {
			before, _, _ := strings.Cut(after, "\n</"+prompt.TagPrevious+">")
			prev = tok.Count(before)
		}
		lineToks, earlier := 0, 0
		for j, l := range lines {
			line[from+j] = tok.Count(l + "\n")
			lineToks += line[from+j]
			r.turnToks += own[from+j]
		}
		for j := range from {
			earlier += line[j] // every earlier turn was sent before
		}
		r.calls++
		r.folded += len(lines)
		r.inputToks += in
		r.prevToks += prev
		r.lineToks += lineToks
		r.wholeToks += in - prev + earlier
	}
	return r, nil
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
