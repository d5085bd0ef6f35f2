package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/foldstream/foldstream/internal/demo"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/fold/openai/openaitest"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/tokens"
	"github.com/rs/zerolog"
)

// costAnswer is the model's answer in the cost section: a summary close to
// the default 1200-character budget (the offline summarizer's final summary
// of a two-hour session), so every fold after the first carries a full-size
// previous summary.
const costAnswer = "Alice, Bob, Carol and Dave are talking about Marvel Rivals, Klyntar and Star-Lord. Alice suggested we queue ranked in Marvel Rivals tonight, we need 3 more wins for Diamond 3, and Bob and Carol agreed. Carol asked Bob: maybe try Jeff the Land Shark instead? Bob said yes. Dave said we agreed to stop at 11:30 pm because Dave has work at 8 tomorrow, and Alice agreed. Dave asked: Can someone remind me to send the tournament form by Friday? On Bob's screen: Bob is screen-sharing Marvel Rivals, playing Hulk on Tokyo 2099, 2 deaths in the first fight. Bob suggested we try dive comp with Spider-Man and Venom on Yggsgard, and Dave agreed. On Carol's screen: Scoreboard shows Carol with 14 kills as Luna Snow. Dave asked: should we ban Hela next match? Alice said yes. Carol said we decided Bob plays Peni Parker next game and Dave swaps to Mantis. On Alice's screen: Alice is in hero select choosing Invisible Woman. Alice suggested we do one last match on Klyntar and then call it at 11:30, and Dave and Bob agreed. Bob will stream the Saturday cup on Twitch at 7 pm."

// costSection counts the tokens the summarizer is sent per folded turn,
// over the folded turns' own tokens, for a generated voice conversation
// folded through the openai backend (prompts as sent over HTTP, counted
// with cl100k_base), and the same for re-summarizing the whole history at
// every fold instead.
func costSection(ctx context.Context, w io.Writer, o opts) error {
	fmt.Fprintf(w, "model cost: summarizer input tokens over the folded turns' own tokens (cl100k_base), %d-turn voice conversation, openai backend\n", o.costTurns)
	fmt.Fprintf(w, "  %-8s %-6s %-10s %-14s %-12s %-22s %s\n", "window", "folds", "turn tok", "input tok", "per turn", "ratio (target <= 1.3)", "whole history ratio")
	for _, batch := range []int{10, 25, 50} {
		r, err := costRun(ctx, o.costTurns, fold.Window{Recent: 50, Batch: batch})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-8s %-6d %-10d %-14d %-12.1f %-22.2f %.2f\n", fmt.Sprintf("50/%d", batch), r.folds, r.turnToks, r.inputToks,
			float64(r.inputToks)/float64(r.turnsFolded), float64(r.inputToks)/float64(r.turnToks), float64(r.wholeToks)/float64(r.turnToks))
	}
	return nil
}

type costResult struct {
	folds, turnsFolded             int
	turnToks, inputToks, wholeToks int
}

func costRun(ctx context.Context, n int, win fold.Window) (costResult, error) {
	var r costResult
	tok, err := tokens.New("cl100k_base")
	if err != nil {
		return r, err
	}
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
	p, err := processor.New(processor.Config{Window: win}, processor.Deps{
		JS: e.js, Layout: l, Store: state.NewStore(e.js, kv), Summarizer: sum, Log: benchLog(),
	})
	if err != nil {
		return r, err
	}
	var folds []processor.FoldTiming
	done := make(chan struct{}, 1024)
	p.ObserveFolds(func(t processor.FoldTiming) {
		folds = append(folds, t) // on the one session's shard: no lock needed until it is read below
		done <- struct{}{}
	})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(rctx) }()
	<-p.Ready()
	turns := demo.Conversation(7, n)
	for i := range turns {
		turns[i].Session = "cost"
		if _, err := e.js.Publish(ctx, l.Subjects.In("cost", events.KindTurn), mustJSON(turns[i])); err != nil {
			return r, err
		}
	}
	want := 0
	if over := n - win.Recent - win.Batch; over > 0 {
		want = (over + win.Batch - 1) / win.Batch
	}
	for got := 0; got < want; got++ {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			return r, fmt.Errorf("%d of %d folds landed", got, want)
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
	cancel()
	if err := <-stopped; err != nil {
		return r, err
	}
	reqs := srv.Requests()
	if len(reqs) != want {
		return r, fmt.Errorf("%d summarizer calls for %d folds (re-compactions?)", len(reqs), want)
	}
	// What one transcript line costs, as the whole-history alternative
	// would send it again at every fold.
	line := make([]int, n)
	own := make([]int, n)
	for i, t := range turns {
		own[i] = tok.Count(t.Text)
		line[i] = tok.Count(fmt.Sprintf("[%d] %s (%s): %s", i, t.Speaker, t.Role, t.Text))
	}
	prevToks := tok.Count(costAnswer)
	for k, req := range reqs {
		in := 0
		for _, m := range req.Messages {
			in += tok.Count(m.Content)
		}
		from := folds[k].From
		to := min(int(from)+win.Batch, n)
		batchToks := 0
		for i := int(from); i < to; i++ {
			batchToks += own[i]
		}
		earlier := 0
		for i := 0; i < int(from); i++ {
			earlier += line[i]
		}
		prev := 0
		if k > 0 {
			prev = prevToks
		}
		r.inputToks += in
		r.turnToks += batchToks
		r.turnsFolded += to - int(from)
		// The same call without the previous summary, with every earlier
		// turn instead.
		r.wholeToks += in - prev + earlier
	}
	r.folds = len(reqs)
	return r, nil
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}
