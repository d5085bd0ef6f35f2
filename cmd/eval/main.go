// Command eval is foldstream's continuity benchmark (make eval,
// docs/continuity.md). It replays each development meeting through a real
// processor as a bot would, then asks the context service, for every
// question whose evidence has left the verbatim window, what a prompt
// builder would get, and prints how much of the reference answer each
// context holds, beside plain truncation of the same size, the whole
// transcript and the annotated evidence. It reports; it never asserts.
//
//	go run ./cmd/eval [-data DIR] [-meetings N | -only Bed002,ES2006a]
//	                  [-budgets 2000,4000,10000] [-sitting N] [-spread N] [-pairs] [-v] [-json]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// opts are the command's flags.
type opts struct {
	data     string
	only     []string
	meetings int
	// budgets are the query-aware context's character budgets; budget
	// the largest (-explore's).
	budgets  []int
	budget   int
	verbose  bool
	json     bool
	quiet    time.Duration
	timeout  time.Duration
	logLevel string
	explore  bool
	// recallTurns is (b)'s recall_turns (0: the service's default).
	recallTurns int
	// maxSummaryChars overrides the processor's max-summary-chars.
	maxSummaryChars int
	// spread: a question whose evidence runs over more than this many
	// turns is reported apart (query.spread).
	spread int
	// pairs: the questions are asked two at a time (meeting.paired).
	pairs bool
	// sitting: turns a day of the replay (meeting.at; 0: one sitting).
	sitting int
	scoring scoring
}

func main() {
	var o opts
	flag.StringVar(&o.data, "data", "", "directory of QMSum meeting files (*.json); default: shared/data/qmsum/val in the nearest ancestor of the repository that has it (../shared/data/qmsum/val beside a checkout)")
	only := flag.String("only", "", "comma-separated meeting names (file names without .json) to run; default all")
	flag.IntVar(&o.meetings, "meetings", 0, "run this many meetings, spread evenly over the name-sorted list (0 = all)")
	budgets := flag.String("budgets", "2000,4000,10000", "comma-separated character budgets of the query-aware context (b), each measured beside dated truncation and plain retrieval of its size")
	flag.IntVar(&o.recallTurns, "recall-turns", 0, "recall_turns of the query-aware context (b); 0 = the service's default")
	flag.IntVar(&o.sitting, "sitting", 0, "replay each meeting as a chat of many days: this many turns a day, each day's from 09:00 (0 = one sitting, the meeting's pace)")
	flag.IntVar(&o.spread, "spread", 40, "report apart, at each budget, the questions whose annotated evidence runs over more than this many turns, first to last (over two days or more with -sitting at most this)")
	flag.BoolVar(&o.pairs, "pairs", false, "ask the questions two at a time: each with the next whose evidence lies at least -spread turns from its own, as one question with both answers (evidence from two passages far apart)")
	flag.IntVar(&o.maxSummaryChars, "max-summary-chars", 0, "the processor's summary budget (0 = its default, 1200)")
	flag.BoolVar(&o.scoring.stem, "score-stem", false, "score with light-stemmed words (answer and context alike), to check a finding does not hang on word forms")
	flag.BoolVar(&o.verbose, "v", false, "print a row per meeting")
	flag.BoolVar(&o.explore, "explore", false, "also measure reference rankings, packings and summaries (docs/continuity.md, method)")
	flag.BoolVar(&o.json, "json", false, "print the results as JSON (every query's figures) instead of tables")
	flag.DurationVar(&o.quiet, "settle-quiet", 5*time.Second, "a session whose cursor has not moved for this long, with every turn applied and no fold in flight, counts as settled (with a warning) even if a fold is still due")
	flag.DurationVar(&o.timeout, "timeout", 30*time.Minute, "give up after this long")
	flag.StringVar(&o.logLevel, "log-level", "error", "processor and service log level (JSON on stderr): debug, info, warn, error, disabled")
	flag.Parse()
	for _, s := range strings.Split(*only, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.only = append(o.only, strings.TrimSuffix(s, ".json"))
		}
	}
	for _, f := range strings.Split(*budgets, ",") {
		b, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || b < 1 {
			fail(2, fmt.Errorf("-budgets: expected comma-separated positive numbers of characters, got %q", *budgets))
		}
		o.budgets = append(o.budgets, b)
		o.budget = max(o.budget, b)
	}
	if o.recallTurns < 0 {
		fail(2, fmt.Errorf("-recall-turns: expected 0 (the service's default) or a positive count, got %d", o.recallTurns))
	}
	if o.spread < 1 {
		fail(2, fmt.Errorf("-spread: expected a positive count of turns, got %d", o.spread))
	}
	if o.sitting < 0 {
		fail(2, fmt.Errorf("-sitting: expected 0 (one sitting) or a positive count of turns a day, got %d", o.sitting))
	}
	if o.meetings < 0 {
		fail(2, fmt.Errorf("-meetings: expected 0 (all) or a positive count, got %d", o.meetings))
	}
	lvl, err := zerolog.ParseLevel(o.logLevel)
	if err != nil {
		fail(2, fmt.Errorf("-log-level: expected debug, info, warn, error or disabled, got %q", o.logLevel))
	}
	if o.data == "" {
		if o.data, err = defaultData(); err != nil {
			fail(2, err)
		}
	}
	log := zerolog.New(os.Stderr).Level(lvl).With().Timestamp().Logger()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	res, err := run(ctx, o, log)
	if err != nil {
		fail(1, err)
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			fail(1, err)
		}
		return
	}
	res.print(os.Stdout, o.verbose)
	if res.explore != nil {
		res.explore.print(os.Stdout)
	}
}

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "eval:", err)
	os.Exit(code)
}

// dataRel is where the development set lives beside a checkout.
var dataRel = filepath.Join("shared", "data", "qmsum", "val")

// defaultData finds shared/data/qmsum/val in the nearest ancestor of the
// repository root (the directory holding go.mod, from the working
// directory up) that has it: ../shared beside a checkout, or further up
// for a worktree nested deeper.
func defaultData() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("-data: not given, and no go.mod above %s to find ../%s from; pass -data DIR", wd, dataRel)
		}
		root = parent
	}
	for dir := filepath.Dir(root); ; dir = filepath.Dir(dir) {
		cand := filepath.Join(dir, dataRel)
		if st, err := os.Stat(cand); err == nil && st.IsDir() {
			return cand, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("-data: not given, and no %s beside %s or above it; pass -data DIR", dataRel, root)
		}
	}
}

// spread picks n of items evenly (first, last and between), in order.
func spread[T any](items []T, n int) []T {
	if n <= 0 || n >= len(items) {
		return items
	}
	out := make([]T, 0, n)
	for i := range n {
		k := 0
		if n > 1 {
			k = i * (len(items) - 1) / (n - 1)
		}
		out = append(out, items[k])
	}
	return out
}

// run replays the meetings and measures.
func run(ctx context.Context, o opts, log zerolog.Logger) (*results, error) {
	began := time.Now()
	ms, err := loadMeetings(o.data, o.only)
	if err != nil {
		return nil, err
	}
	ms = spread(ms, o.meetings)
	for _, m := range ms {
		m.sitting = o.sitting
	}
	if o.pairs {
		for _, m := range ms {
			m.paired(o.spread)
		}
	}
	if len(ms) == 0 {
		return nil, errors.New("-only: no meeting of that name in -data")
	}
	r, err := startRig(ctx, log, o.maxSummaryChars)
	if err != nil {
		return nil, fmt.Errorf("starting the processor: %w", err)
	}
	defer r.close()
	res := newResults(o, r.window)
	// Every meeting is published before any is measured: one session each,
	// all on the one processor, as concurrent bots would.
	t := time.Now()
	for _, m := range ms {
		if err := r.publish(ctx, m); err != nil {
			return nil, err
		}
		res.Turns += len(m.Turns)
	}
	res.PublishSeconds = time.Since(t).Seconds()
	for _, m := range ms {
		if _, err := r.settle(ctx, m, o.quiet); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			res.Warnings = append(res.Warnings, err.Error())
		}
	}
	res.SettleSeconds = time.Since(t).Seconds()
	if res.QueryAware, err = r.queryAware(ctx, sessionID(ms[0])); err != nil {
		return nil, fmt.Errorf("probing the query field: %w", err)
	}
	for _, m := range ms {
		if err := measure(ctx, r, m, o, res); err != nil {
			return nil, err
		}
	}
	res.finish(time.Since(began))
	return res, nil
}

// writeln is fmt.Fprintf with a newline, for the tables.
func writeln(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
