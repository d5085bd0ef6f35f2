// Command bench measures foldstream against references taken in the same
// run on the same server (see docs/benchmarks.md). It never asserts: it
// reports medians over several runs, with the spread.
//
//	go run ./cmd/bench [-sections ingest,fold,memory,cost,recovery,recall,clients] [-runs 3]
//	                   [-turns 100000] [-sessions 1,1000,10000]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// opts are the command's flags.
type opts struct {
	sections      []string
	turns         int
	sessions      []int
	runs          int
	summarizer    string
	flushInterval time.Duration
	cpuProfile    io.Writer
	memProfile    string
	memSessions   int
	memTurns      int
	memWait       time.Duration
	memArgs       []string
	costTurns     int
	costMinFold   int
	recoverTurns  int
	recallTurns   int
	// recallSessions of recallSessionTurns each: the recall section's
	// scale line.
	recallSessions, recallSessionTurns int
	// recallScaleDir keeps the scale line's server store between runs;
	// recallScaleBudget is its instance's index budget (0: the default).
	recallScaleDir    string
	recallScaleBudget int64
	// recallScaleRef is how many requests the instance without the
	// index store answers beside it (0: none).
	recallScaleRef int
	// recallScaleMemory: the measured instance's index store is kept in
	// the server's memory (service.IndexStoreInMemory).
	recallScaleMemory bool
	// repeated: the ingest and fold sections' turns all say benchText (one
	// sentence) instead of benchLines.
	repeated                      bool
	clientsTurns, clientsContexts int
}

var allSections = []string{"ingest", "fold", "memory", "cost", "recovery", "recall", "clients"}

// recallScaleSection is the recall section's scale line alone (not in
// the default sections: recall runs it).
const recallScaleSection = "recall-scale"

func main() {
	var o opts
	sections := flag.String("sections", strings.Join(allSections, ","), "comma-separated sections to run: "+strings.Join(allSections, ", ")+" (or "+recallScaleSection+": the recall section's scale line alone)")
	flag.IntVar(&o.turns, "turns", 100000, "turns per ingest and fold measurement")
	sessionsFlag := flag.String("sessions", "1,1000,10000", "comma-separated session counts (ingest)")
	flag.IntVar(&o.runs, "runs", 3, "runs per measurement (median and spread reported)")
	ingestText := flag.String("ingest-text", "varied", "what the ingest and fold sections' turns say: varied (50 distinct lines of four speakers in turn) or repeated (every turn the same sentence)")
	flag.StringVar(&o.summarizer, "summarizer", "offline", "ingest fold backend: offline (CPU on the same cores), http (the openai backend against an in-process chat-completions server that answers at once) instant (an in-process summarizer that answers at once) or instant-sized (one that answers at once with the offline summarizer's outputs of a fifth fold: what those cost without its CPU)")
	flag.DurationVar(&o.flushInterval, "flush-interval", 0, "processor checkpoint interval (0 = the processor's default)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the ingest section's processor runs (with -sections recall-scale: of the scale line's measured instance during its timed requests) to this file")
	flag.StringVar(&o.memProfile, "memprofile", "", "write an allocation profile of the ingest section's first processor run to this file (and its start to <file>.base: go tool pprof -base <file>.base <file>)")
	flag.IntVar(&o.memSessions, "mem-sessions", 10000, "live sessions for the memory section")
	flag.IntVar(&o.memTurns, "mem-turns", 10, "turns per session in the memory section")
	flag.DurationVar(&o.memWait, "mem-wait", 2*time.Second, "memory section: how long the sessions stay idle before RSS is read (below the processor's 2-minute idle eviction)")
	memArgs := flag.String("mem-args", "", "memory section: extra processor flags, space-separated (e.g. \"--idle-compact 0\" for no compact idle form)")
	flag.IntVar(&o.costTurns, "cost-turns", 2400, "utterances of the voice conversation folded in the cost section")
	flag.IntVar(&o.costMinFold, "cost-min-fold-tokens", 4000, "min_fold_tokens of the cost section's amortized window line")
	flag.IntVar(&o.recoverTurns, "recover-turns", 10000, "turns of the session rebuilt and replayed in the recovery section")
	flag.IntVar(&o.recallTurns, "recall-turns", 10000, "turns of the session asked for question-aware contexts in the recall section")
	flag.IntVar(&o.recallSessions, "recall-sessions", 1000, "recall section, scale line: active sessions asked at random (0 skips the line)")
	flag.IntVar(&o.recallSessionTurns, "recall-session-turns", 5000, "recall section, scale line: turns of each session")
	flag.StringVar(&o.recallScaleDir, "recall-scale-dir", "", "recall section, scale line: keep its server's store in this directory, and reuse the turns published and applied there by an earlier run with the same -recall-sessions and -recall-session-turns (empty: a temporary directory, removed)")
	flag.IntVar(&o.recallScaleRef, "recall-scale-ref", 20, "recall section, scale line: requests to an instance without the index store (every miss builds from the stream), printed beside it (0 skips that line)")
	flag.BoolVar(&o.recallScaleMemory, "recall-scale-store-memory", false, "recall section, scale line: the measured instance keeps its index store in the server's memory (--recall-index-store-memory), filled with the entries of the file bucket before it starts; otherwise in files, read since the server started")
	flag.Int64Var(&o.recallScaleBudget, "recall-scale-budget", 0, "recall section, scale line: the measured instance's recall index budget in bytes (0: the service's default, 256 MiB); with fewer sessions, a smaller budget keeps the share of them that fits")
	flag.IntVar(&o.clientsTurns, "clients-turns", 20000, "clients section: turns each client publishes with acks awaited")
	flag.IntVar(&o.clientsContexts, "clients-contexts", 500, "clients section: timed context requests of each client")
	flag.Parse()
	switch *ingestText {
	case "varied":
	case "repeated":
		o.repeated = true
	default:
		fmt.Fprintf(os.Stderr, "bench: -ingest-text %q: expected varied or repeated\n", *ingestText)
		os.Exit(2)
	}
	o.memArgs = strings.Fields(*memArgs)
	for _, s := range strings.Split(*sections, ",") {
		s = strings.TrimSpace(s)
		if !slices.Contains(allSections, s) && s != recallScaleSection {
			fail(2, fmt.Errorf("-sections: expected some of %s,%s, got %q", strings.Join(allSections, ","), recallScaleSection, s))
		}
		o.sections = append(o.sections, s)
	}
	for _, s := range strings.Split(*sessionsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fail(2, fmt.Errorf("-sessions: expected positive integers, got %q", s))
		}
		o.sessions = append(o.sessions, n)
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(2, err)
		}
		defer f.Close()
		o.cpuProfile = f
	}
	if err := run(os.Stdout, o); err != nil {
		fail(1, err)
	}
}

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(code)
}

func run(w io.Writer, o opts) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	began := time.Now()
	fmt.Fprintf(w, "foldstream bench: in-process nats-server, file storage, %d CPUs, %s, medians of %d runs (min..max)\n",
		runtime.NumCPU(), runtime.Version(), o.runs)
	for _, s := range o.sections {
		fmt.Fprintln(w)
		var err error
		switch s {
		case "ingest":
			err = ingestSection(ctx, w, o)
		case "fold":
			err = foldSection(ctx, w, o)
		case "memory":
			err = memorySection(ctx, w, o)
		case "cost":
			err = costSection(ctx, w, o)
		case "recovery":
			err = recoverySection(ctx, w, o)
		case "recall":
			err = recallSection(ctx, w, o)
		case recallScaleSection:
			err = recallScale(ctx, w, o.recallSessions, o.recallSessionTurns, o.recallScaleBudget, o.recallScaleRef, o.recallScaleDir, o.recallScaleMemory, o.cpuProfile)
		case "clients":
			err = clientsSection(ctx, w, o)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	fmt.Fprintf(w, "\nbench took %s\n", time.Since(began).Round(time.Second))
	return nil
}

// medSpread formats the median and the min..max spread.
func medSpread(xs []float64, f string) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf(f+" ("+f+".."+f+")", median(s), s[0], s[len(s)-1])
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// quantile of sorted durations, nearest rank.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
