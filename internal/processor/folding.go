package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// foldJob is what a fold goroutine needs; it holds copies, never the live
// session, so the shard keeps sole ownership of state.
type foldJob struct {
	session  string
	foldID   string
	trigger  string
	profile  fold.Profile
	window   fold.Window
	prev     string
	from, to int64
	turns    []state.TurnRef
	notes    []state.NoteRef
	payloads payloads  // of the batch, when this owner saw them
	started  time.Time // the check that found the fold due
	prevVer  uint64
	// summarySeq: the outbound sequence of version prevVer, which the
	// publish expects as the subject's last (0: none, or not known).
	summarySeq uint64
	epoch      uint32
	compactns  int
	policy     fold.Policy
	cause      string
	exchanges  int  // the session's exchange count when the fold started
	final      bool // the end-of-session fold: archive once it lands
	// placeholderOK allows the placeholder tier if the summarizer fails.
	placeholderOK bool
	// probe: this fold's model call is the summarizer breaker's probe.
	probe bool
	// placeholderOnly: the breaker is open and the session is past its
	// emergency threshold: tier 3 without calling the model.
	placeholderOnly bool
	// model: the fold calls the summarizer (fold.Decision.Model); one that
	// does not needs no slot, no breaker and not the batch's text.
	model bool
	// evicted: the session's evictions before this fold (fold.Request).
	evicted fold.Eviction

	// prevState is the session's SummaryState, passed to the summarizer.
	prevState []byte
}

type foldResult struct {
	job     foldJob
	out     fold.Outcome
	err     error
	summary *events.SummaryUpdated // what was published (set once sent)
	seq     uint64                 // the outbound sequence it was stored at
	// conflict: the publish found the subject's last summary elsewhere
	// than the session's SummarySeq (another owner's, or one this
	// checkpoint never recorded); last is what the subject holds now.
	// republished: the result was published again after that.
	conflict    bool
	last        summaryRecord
	republished bool
	summarized  time.Time // wall time the summarizer returned (FoldTiming)
	sent        time.Time // wall time the publish left (FoldTiming)
	// model is set when the summarizer failed, as opposed to reading the
	// batch or recording the summary on NATS.
	model    bool
	origToks int
	sumToks  int
	nTurns   int
	nNotes   int
	fromT    time.Time
	toT      time.Time
	masked   int // tool turns masked before summarizing
	// text: out.State as a checkpoint stores it (state.StoredText), made
	// off the loop; nil without a state.
	text *state.StateText
}

// foldRunner runs folds off the loop, one goroutine each: it bounds the
// folds running at once (slots), reads each batch (the payloads the loop
// kept, else the inbound stream), asks the context sources of mode
// interval, calls the summarizer under the engine's budget policy and
// reports the call to the breaker. It touches no session state; the
// recorder publishes what it returns.
type foldRunner struct {
	sum      fold.Summarizer
	breaker  *retry.Breaker
	slots    *foldSlots // fold concurrency limit, shared by a process's engines
	tokens   TokenCounter
	inStream jetstream.Stream
	js       jetstream.JetStream // reads of the inbound stream sent at once (readMissing)
	layout   broker.Layout       // and of a session's earlier events (earlierTurns), under these rules
	adm      state.Admission
	rebuilds chan struct{} // earlierTurns' reads running (Shared's)
	asker    *contextsource.Asker
	sources  []contextsource.Source // Config.ContextSources
	clock    Clock
	log      zerolog.Logger
	panics   prometheus.Counter // summarizer calls that panicked
}

// newFoldRunner is a shard's fold runner, on the processor's parts.
func (p *Processor) newFoldRunner() *foldRunner {
	return &foldRunner{sum: p.sum, breaker: p.breaker, slots: p.slots, tokens: p.tokens, inStream: p.inStream, js: p.js, layout: p.layout, adm: p.adm, rebuilds: p.rebuilds, asker: p.asker,
		sources: p.cfg.ContextSources, clock: p.clock, log: p.log, panics: p.m.panics}
}

// runFold reads the batch from the stream and calls the summarizer under
// the engine's budget policy. It touches no session state.
func (p *foldRunner) runFold(ctx context.Context, job foldJob) foldResult {
	r := foldResult{job: job}
	req := fold.Request{Session: job.session, Profile: job.profile, PreviousSummary: job.prev, PreviousState: job.prevState, MaxChars: job.window.MaxSummaryChars,
		Turns: make([]fold.Turn, 0, len(job.turns)), Evicted: job.evicted}
	if !job.model {
		// No summarizer call (mode evict): the engine's outcome comes from
		// the turns as applied, their index, time and tokens.
		p.refBatch(&req, &r)
		r.out, r.err = p.summarize(ctx, job, req)
		if r.err == nil {
			r.sumToks = p.tokens.Count(r.out.Summary)
		}
		r.summarized = time.Now()
		return r
	}
	called := false // the summarizer was called, and the breaker told
	defer func() {
		if job.probe && !called {
			p.breaker.Release() // the next fold probes instead
		}
	}()
	slot, err := p.slots.take(ctx)
	if err != nil {
		r.err = fmt.Errorf("waiting for one of %d fold slots: %w", p.slots.size(), err)
		return r
	}
	defer p.slots.give(slot)
	read := p.readMissing(ctx, job)
	for i, ref := range job.turns {
		kept, _ := job.payloads.at(ref.Seq)
		t := kept.turn // as the event loop decoded it, when this owner did
		if t == nil {
			t = new(events.Turn)
			if kept.data == nil {
				kept.data = read[ref.Seq]
			}
			if err := p.readEvent(ctx, ref.Seq, kept.data, t); err != nil {
				r.err = err
				return r
			}
		}
		tokens := t.Tokens
		if tokens == 0 {
			tokens = p.tokens.Count(t.Text)
		}
		r.origToks += tokens
		req.Turns = append(req.Turns, fold.Turn{
			Index: job.from + int64(i), TurnID: t.TurnID, At: t.At, Speaker: t.Speaker, Role: t.Role,
			Text: t.Text, Kind: t.Kind, Tool: t.Tool, Tokens: tokens,
		})
	}
	for _, ref := range job.notes {
		var n events.Note
		data := job.payloads.get(ref.Seq)
		if data == nil {
			data = read[ref.Seq]
		}
		if err := p.readEvent(ctx, ref.Seq, data, &n); err != nil {
			r.err = err
			return r
		}
		text := truncateRunes(n.Text, job.window.MaxNoteChars)
		r.origToks += p.tokens.Count(text)
		req.Notes = append(req.Notes, fold.Note{NoteID: n.NoteID, At: n.At, Source: n.Source, Text: text})
	}
	req.From, req.To = foldSpan(req)
	r.fromT, r.toT = req.From, req.To
	r.nTurns, r.nNotes = len(req.Turns), len(req.Notes)
	pol := job.policy
	if pol.MaskToolOutputsAfter > 0 {
		// Masked before summarizing: an old tool output costs
		// the model tokens and rarely matters once its call is answered.
		req.Turns, r.masked = fold.MaskToolOutputs(req.Turns, fold.MaskOptions{OlderThan: pol.MaskToolOutputsAfter, Now: p.clock.Now()})
	}
	if len(job.prevState) > 0 && len(job.turns) > 0 {
		req.Earlier = func(ctx context.Context, why error) ([]fold.Turn, []fold.Note, error) {
			return p.earlierTurns(ctx, job, why)
		}
	}
	if len(p.sources) > 0 {
		req.Sources = func(ctx context.Context, from, to time.Time) []contextsource.Answer {
			return p.asker.Ask(ctx, job.session, from, to, p.sources)
		}
	}
	if job.placeholderOnly {
		p.log.Warn().Str("event", "compaction_placeholder").Str("session", job.session).Str("fold_id", job.foldID).
			Msg("summarizer unavailable (breaker open) past the emergency threshold; folding with a placeholder (tier 3)")
		r.out = fold.Placeholder(req.PreviousSummary, req.Turns, req.Notes, job.window.MaxSummaryChars)
		r.sumToks = p.tokens.Count(r.out.Summary)
		r.summarized = time.Now()
		return r
	}
	slot.run(func() { r.out, r.err = p.summarize(ctx, job, req) })
	called = true
	p.breaker.Record(p.clock.Now(), r.err, job.probe)
	if r.err != nil && job.placeholderOK && ctx.Err() == nil {
		p.log.Warn().Err(r.err).Str("event", "compaction_placeholder").Str("session", job.session).Str("fold_id", job.foldID).
			Msg("summarizer failed again past the emergency threshold; folding with a placeholder (tier 3)")
		r.out, r.err = fold.Placeholder(req.PreviousSummary, req.Turns, req.Notes, job.window.MaxSummaryChars), nil
	}
	r.model = r.err != nil
	if r.err == nil {
		r.sumToks = p.tokens.Count(r.out.Summary)
		if len(r.out.State) > 0 {
			r.text = state.StoredText(r.out.State)
		}
	}
	r.summarized = time.Now()
	return r
}

// earlierTurns reads again the session's turns before the job's batch
// (fold.Request.Earlier), and the notes folds took with them, for a
// summarizer that cannot read the state the checkpoint carries (why) to
// build it again (fold.Rebuild): the session's inbound events before the
// batch's first, applied to a new session under the rules the loop applies
// (rebuildSession), the current epoch's kept. They must be the turns the
// checkpoint's cursor counts (job.from), within maxEarlierTurns and
// maxEarlierBytes; else (the stream no longer holds them all: max-age, a
// purge; a read error; the time fold.Rebuild gives it) it fails and the
// summarizer reads the previous summary as prose. At most maxRebuilds run
// at once in a process (after a rollback every session may need one).
// Either way is logged at warn: the state was lost (a bug, or a checkpoint
// a newer version wrote).
func (p *foldRunner) earlierTurns(ctx context.Context, job foldJob, why error) ([]fold.Turn, []fold.Note, error) {
	turns, notes, err := p.readEarlier(ctx, job)
	if err != nil {
		p.log.Warn().Err(err).Str("event", "summarizer_state_rebuild_failed").Str("session", job.session).Str("fold_id", job.foldID).
			Str("why", why.Error()).Msg("summarizer state unreadable and the turns it covered could not be read again; the summarizer reads the previous summary as prose")
		return nil, nil, err
	}
	p.log.Warn().Str("event", "summarizer_state_rebuild").Str("session", job.session).Str("fold_id", job.foldID).Str("why", why.Error()).
		Int("turns", len(turns)).Int("notes", len(notes)).Msg("summarizer state unreadable; building it again from the session's earlier turns in the inbound stream")
	return turns, notes, nil
}

// readEarlier is earlierTurns' read: the turns [0, job.from) of the
// session's current epoch, and its notes the job does not take, from its
// inbound events before the batch.
func (p *foldRunner) readEarlier(ctx context.Context, job foldJob) ([]fold.Turn, []fold.Note, error) {
	if job.from > maxEarlierTurns {
		return nil, nil, fmt.Errorf("%d turns before the batch, more than the %d a fold reads and folds again", job.from, maxEarlierTurns)
	}
	select {
	case p.rebuilds <- struct{}{}:
		defer func() { <-p.rebuilds }()
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("waiting for one of the %d reads of earlier turns: %w", cap(p.rebuilds), ctx.Err())
	}
	byseq, notes, size := map[uint64]*events.Turn{}, map[uint64]*events.Note{}, 0
	s, _, err := rebuildSession(ctx, p.inStream, p.layout, p.adm, job.session, job.turns[0].Seq, func(seq uint64, in events.Inbound, e state.Effect) error {
		switch e {
		case state.EffectTurn:
			byseq[seq], size = in.Turn, size+len(in.Turn.Text)
		case state.EffectNote:
			notes[seq], size = in.Note, size+len(in.Note.Text)
		}
		if size > maxEarlierBytes {
			return fmt.Errorf("the turns and notes before the batch hold more than the %d bytes of text a fold reads again", maxEarlierBytes)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if s.Total != job.from || int64(len(s.Turns)) != s.Total-s.Cursor {
		return nil, nil, fmt.Errorf("the inbound stream holds turns %d to %d of the session, the summary covers %d", s.Cursor, s.Total, job.from)
	}
	turns := make([]fold.Turn, 0, len(s.Turns))
	for i, ref := range s.Turns {
		t := byseq[ref.Seq]
		if t == nil {
			return nil, nil, fmt.Errorf("turn %d (inbound sequence %d) was not read", s.Cursor+int64(i), ref.Seq)
		}
		turns = append(turns, fold.Turn{Index: s.Cursor + int64(i), TurnID: t.TurnID, At: t.At, Speaker: t.Speaker, Role: t.Role,
			Text: t.Text, Kind: t.Kind, Tool: t.Tool, Tokens: ref.Tokens})
	}
	var folded []fold.Note // the current epoch's notes before the batch, but those this fold takes
	for _, ref := range s.PendingNotes {
		if n := notes[ref.Seq]; n != nil && !slices.ContainsFunc(job.notes, func(j state.NoteRef) bool { return j.Seq == ref.Seq }) {
			folded = append(folded, fold.Note{NoteID: n.NoteID, At: n.At, Source: n.Source, Text: truncateRunes(n.Text, job.window.MaxNoteChars)})
		}
	}
	return turns, folded, nil
}

// Bounds of earlierTurns. A session past them goes on from its summary's
// prose. Reading a turn again takes ~60 µs (direct gets one after
// another), folding it again 15-50 µs at the default batch size; with
// fold.Rebuild's half of the fold's time as the limit, 100,000 turns fit
// in the default 60 s fold timeout. The bytes bound what a read holds (64
// MiB, a thousand of the longest turns; ~20,000 turns of chat); reads run
// maxRebuilds at a time in a process, each holding a fold slot.
const (
	maxEarlierTurns = 100_000
	maxEarlierBytes = 64 << 20
	maxRebuilds     = 2
)

// summarize calls the summarizer under the job's engine. A panic in the
// call is this fold's error, not the process's end: the fold fails as a
// model error does (the summary and cursor stay, the batch is retried
// after the session's backoff) and other sessions go on, where a crash
// would come back with every redelivery of the session's events.
func (p *foldRunner) summarize(ctx context.Context, job foldJob, req fold.Request) (out fold.Outcome, err error) {
	defer func() {
		if v := recover(); v != nil {
			out, err = fold.Outcome{}, p.panicked(job, v, debug.Stack())
		}
	}()
	return job.policy.Engine().Summarize(ctx, p.sum, req, job.policy, p.tokens.Count)
}

// panicked counts and logs a summarizer call that panicked with v, and
// returns the fold's error. A runtime error (an index out of range, a nil
// map) is logged and returned as it is; any other value may quote the
// transcript, so the error and the error-level log name only its type,
// and its value is logged at debug. The stack holds no text.
func (p *foldRunner) panicked(job foldJob, v any, stack []byte) error {
	p.panics.Inc()
	what := fmt.Sprintf("a %T", v)
	if re, ok := v.(runtime.Error); ok {
		what = re.Error()
	}
	p.log.Error().Str("event", "summarizer_panic").Str("session", job.session).Str("fold_id", job.foldID).
		Str("panic", what).Str("stack", string(stack)).
		Msg("the summarizer panicked; this session's fold fails and is retried after its backoff, other sessions go on")
	if _, ok := v.(runtime.Error); !ok {
		p.log.Debug().Str("event", "summarizer_panic_value").Str("session", job.session).Str("fold_id", job.foldID).
			Str("panic", fmt.Sprint(v)).Msg("the summarizer's panic value")
	}
	return fmt.Errorf("summarizer panicked: %s", what)
}

// refBatch fills req and r from the batch's references alone: each turn's
// index, time and tokens as applied, the pending notes counted.
func (p *foldRunner) refBatch(req *fold.Request, r *foldResult) {
	job := r.job
	for i, ref := range job.turns {
		r.origToks += ref.Tokens
		req.Turns = append(req.Turns, fold.Turn{Index: job.from + int64(i), At: time.UnixMilli(ref.At).UTC(), Tokens: ref.Tokens})
	}
	req.From, req.To = foldSpan(*req)
	r.fromT, r.toT = req.From, req.To
	r.nTurns, r.nNotes = len(req.Turns), len(job.notes)
}

// readMissing reads from the inbound stream the events of the batch that
// this owner did not keep (its session was packed since they came, or
// read from its checkpoint), with direct gets sent at once instead of one
// round trip each (broker.ReadSeqs): a packed session's next fold has all
// of them to read. What it does not read (a lone event, a stream without
// direct gets, an error) is read one by one by readEvent, which reports
// what cannot be read.
func (p *foldRunner) readMissing(ctx context.Context, job foldJob) map[uint64][]byte {
	info := p.inStream.CachedInfo()
	if info == nil || !info.Config.AllowDirect {
		return nil
	}
	var seqs []uint64
	for _, ref := range job.turns {
		if kept, _ := job.payloads.at(ref.Seq); kept.turn == nil && kept.data == nil {
			seqs = append(seqs, ref.Seq)
		}
	}
	for _, ref := range job.notes {
		if job.payloads.get(ref.Seq) == nil {
			seqs = append(seqs, ref.Seq)
		}
	}
	if len(seqs) < 2 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	read := make(map[uint64][]byte, len(seqs))
	if err := broker.ReadSeqs(ctx, p.js, info.Config.Name, seqs, read); err != nil {
		// A warning: the batch read should not fail where single reads
		// work (an account that may not send direct gets waits here for
		// the timeout before its fold fails on them).
		p.log.Warn().Err(err).Str("event", "batch_read_failed").Str("session", job.session).Msg("reading the fold's events one by one")
	}
	return read
}

// readEvent decodes the inbound event at seq from data when the owner kept
// it, else from the stream.
func (p *foldRunner) readEvent(ctx context.Context, seq uint64, data []byte, v any) error {
	if data == nil {
		raw, err := p.inStream.GetMsg(ctx, seq)
		if err != nil {
			return fmt.Errorf("read inbound event at sequence %d (expired from the stream? check max_age): %w", seq, err)
		}
		data = raw.Data
	}
	var err error
	if t, ok := v.(*events.Turn); ok {
		err = events.DecodeTurn(data, t) // the common case: the fast decoder
	} else {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		return fmt.Errorf("decode inbound event at sequence %d: %w", seq, err)
	}
	return nil
}

func foldSpan(req fold.Request) (from, to time.Time) {
	for _, t := range req.Turns {
		if from.IsZero() || t.At.Before(from) {
			from = t.At
		}
		if t.At.After(to) {
			to = t.At
		}
	}
	for _, n := range req.Notes {
		if from.IsZero() || n.At.Before(from) {
			from = n.At
		}
		if n.At.After(to) {
			to = n.At
		}
	}
	return from, to
}

func truncateRunes(s string, max int) string {
	if max <= 0 || utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}
