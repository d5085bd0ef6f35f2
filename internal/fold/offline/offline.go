// Package offline is foldstream's network-free summarizer backend, the default when no API key is configured.
//
// It is extractive and deterministic. Each turn is read once, when it is folded: its sentences that say something
// (greetings, thanks, laughter, backchannels, transcription marks and repeats are dropped) become statements attributed
// to their speaker, in reported speech a person would write ("I keep dying as Hulk" → "Bob keeps dying as Hulk.",
// "we're on Ilios" → "Marco said they're on Ilios."; what cannot be put in the third person without garbling it is
// quoted), with relative dates resolved against when they were said ("yesterday (5 May 2026)", package reldate). Open
// questions are kept until someone answers them (a backchannel answers nothing). For agent sessions a tool call and its
// result become one clause (the tool, its salient argument, the outcome, never the output) and a newer run of the same
// command replaces the older; the user's instructions weigh most.
//
// What the summarizer knows after a fold is a structured state (state.go): the participants, the statements of the
// current period, the closed periods (when, who, what about, their best statements), and the facts returned as
// memories. It travels in Result.State to the next fold, which adds the batch's statements to it; the summary is
// rendered from it and never read back. A state this version cannot read is built again from the session's turns when
// the request gives them (fold.Rebuild); a summary without a state that matches it (a checkpoint from before the state,
// another backend's summary, an unreadable state without those turns) is read as prose once. The session goes on structured.
//
// The summary is one paragraph: the participants and what they are talking about ("Alice, Bob and Carol are talking
// about Marvel Rivals and Tokyo 2099."), then one line per closed period ("From 14:02 to 14:20, Alice and Bob talked
// about the venue in Lisbon and catering.", with the dates when the conversation spans days) with its best statements,
// then the current statements; two in a row by one speaker are one sentence ("Bob said the venue is booked, and the
// caterer wants a deposit."). A statement whose fact a newer one changed is replaced. Statements are kept by worth for
// their length: the words no kept line says yet, weighed by how often the conversation said them (counts.go), plus
// decisions, questions, names and numbers. Speech loses false starts and hedges (tighten.go). Older periods merge into
// coarser ones, so the summary covers the whole conversation.
//
// Budgets are counted in runes (Unicode code points), as the engine does.
//
// Each fold also returns offline memories (Result.Memories and MemoryItems): the batch's statements that hold a durable
// fact, with speaker, turn and time; a restated fact is not returned again and a changed one supersedes the older
// (memory.go), also per speaker and subject across folds (likes, did, plans, owns, where: person.go).
package offline

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/held"
	"github.com/foldstream/foldstream/internal/sentence"
)

const (
	// Model is the value of Result.Model and Name().
	Model = "offline"
	// DefaultMaxChars is the budget used when Request.MaxChars is not set.
	DefaultMaxChars = 1200
)

type config struct {
	extraFiller  map[string]bool
	fillers      []string // extraFiller's, longest first (one that opens another is tried after it)
	maxFillerLen int      // bytes of the longest filler word
	log          zerolog.Logger

	defaultMaxChars, maxParticipants, maxTopics, maxUnitsPerTurn, maxNotes int
}

// Option configures a Summarizer.
type Option func(*config)

// WithDefaultMaxChars sets the budget used when a request has MaxChars ≤ 0 (default 1200).
func WithDefaultMaxChars(n int) Option {
	return func(c *config) { c.defaultMaxChars = cmp.Or(max(n, 0), c.defaultMaxChars) }
}

// WithMaxParticipants caps how many participants the opening sentence names (default 5, as many as fit in 80 runes,
// no name cut); the rest are counted ("and 3 others").
func WithMaxParticipants(n int) Option {
	return func(c *config) { c.maxParticipants = cmp.Or(max(n, 0), c.maxParticipants) }
}

// WithMaxTopics caps the topics named in the opening sentence (default 2; 0 names none).
func WithMaxTopics(n int) Option {
	return func(c *config) {
		if n >= 0 {
			c.maxTopics = n
		}
	}
}

// WithMaxSentencesPerTurn caps how many sentences of one turn can reach the summary (default 3), so that a monologue or
// a pasted document cannot dominate it.
func WithMaxSentencesPerTurn(n int) Option {
	return func(c *config) { c.maxUnitsPerTurn = cmp.Or(max(n, 0), c.maxUnitsPerTurn) }
}

// WithMaxNotes caps the screen notes of one fold that are read (default 8).
func WithMaxNotes(n int) Option {
	return func(c *config) { c.maxNotes = cmp.Or(max(n, 0), c.maxNotes) }
}

// WithFillerWords adds words that open a sentence without saying anything (a community's "pog", "kekw"); they are
// dropped like "um" and "yeah".
func WithFillerWords(words ...string) Option {
	return func(c *config) {
		for _, w := range words {
			if w = strings.ToLower(strings.TrimSpace(w)); w != "" {
				c.extraFiller[w] = true
			}
		}
	}
}

// WithLogger sets where a state that cannot be read is reported (default: nowhere).
func WithLogger(l zerolog.Logger) Option { return func(c *config) { c.log = l } }

// Summarizer is the offline backend, safe for concurrent use. All it knows of a session is in the request's state; it
// keeps the state it returned while those bytes are live (keep), so that their next fold need not decode them.
type Summarizer struct {
	cfg   config
	rooms sync.Pool        // *scratch
	held  held.Map[*state] // (at most 4,096: ~33 KB each after the ingest bench's five folds)
}

// scratch is the room one fold works in: the state's word counts, and what reading sentences, picking statements and
// finding topics use. A Summarizer keeps its scratches between folds so that a fold allocates little; a fold reads
// nothing a fold before it left there (each part is reset first) but the lexicon of the words seen and weights written.
type scratch struct {
	lex          lexicon
	terms        []string    // a text's terms (termsOf)
	ks           []*field    // what the lexicon knows of a sentence's fields (sentences)
	stmts, sents []stmt      // a batch's; the memories' candidates
	kinds        [][2]string // the kind and slot of each of those candidates (personFact)
	tf           []int32     // how many of a batch's statements say each word (by its number)
	voc          wordCounts
	cands        []cand
	worth, bound []float64 // what each of those is worth, in one pick; each candidate at most
	said, named  termSet
	phrases      []phrase
	slots        []int32       // a phrase's place in phrases, by its key (topics); pickCovering's order
	seen, lines  []string      // the words of the topics chosen; the summary's sentences (compose)
	out          codec         // what writes the state (appendJSON), and in w the state written
	floatBits    [256]uint64   // weights written (appendJSONFloat), by their bits' hash: what a fold finds here it would write
	floatText    [256][32]byte // and how: their JSON, its length in the last byte
}

// New returns an offline summarizer.
func New(opts ...Option) *Summarizer {
	c := config{defaultMaxChars: DefaultMaxChars, maxParticipants: 5, maxTopics: 2, maxUnitsPerTurn: 3, maxNotes: 8,
		extraFiller: map[string]bool{}, log: zerolog.Nop()}
	for _, o := range opts {
		o(&c)
	}
	c.fillers = slices.SortedFunc(maps.Keys(c.extraFiller), func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	for _, w := range append(slices.Clone(c.fillers), leadFiller...) {
		c.maxFillerLen = max(c.maxFillerLen, len(w))
	}
	return &Summarizer{cfg: c, rooms: sync.Pool{New: func() any { return new(scratch) }}, held: held.Map[*state]{Max: 4096}}
}

// Name returns "offline".
func (s *Summarizer) Name() string { return Model }

// Summarize folds req into a new running summary and state. It fails only when ctx is done or with fold.ErrStateUnreadable (load).
func (s *Summarizer) Summarize(ctx context.Context, req fold.Request) (fold.Result, error) {
	budget := cmp.Or(max(req.MaxChars, 0), s.cfg.defaultMaxChars)
	sc := s.rooms.Get().(*scratch)
	defer s.rooms.Put(sc)
	st, err := s.load(req, &sc.lex)
	if err = cmp.Or(ctx.Err(), err); err != nil {
		return fold.Result{}, err
	}
	st.sc, st.src, st.srcSeq = sc, req.PreviousState, st.seq
	prev := strings.TrimSpace(req.PreviousSummary)
	mems, changed := []fold.Memory(nil), false
	if !req.Recompact {
		mems, changed = s.fold(req, st, budget)
	}
	if !changed && prev != "" && runeLen(prev) <= budget && st.Sum == 0 && oneLine(prev, 0) == prev {
		// Nothing new, and the summary read as prose fits: it stays as it was (rendering it anew could only reword it).
		st.Sum, st.said = hashString(prev), prev
		return fold.Result{Summary: prev, Model: Model, State: s.keep(st), Memories: nil}, nil
	}
	summary := st.render(budget, s.cfg.maxParticipants, s.cfg.maxTopics)
	if len(summary) > budget && runeLen(summary) > budget { // (no more runes than bytes)
		summary = sentence.Clamp(summary, budget)
	}
	if summary == "" && len(req.Turns) > 0 {
		// The engine treats an empty summary as a failed fold: whenever there was input, say at least who was there.
		for _, t := range req.Turns {
			if !isToolTurn(t) {
				st.addName(displayName(t))
			}
		}
		st.Small = true
		summary = st.render(budget, s.cfg.maxParticipants, s.cfg.maxTopics)
	}
	st.Sum, st.said = hashString(summary), summary
	res := fold.Result{Summary: summary, Model: Model, State: s.keep(st)}
	for i, m := range mems {
		if i == 0 { // (mems is the fold's own)
			res.Memories, res.MemoryItems = make([]string, 0, len(mems)), mems
		}
		res.Memories = append(res.Memories, m.Text)
	}
	return res, nil
}

// load is the session's state before this fold: the request's (held, or decoded) when it goes with the previous summary,
// else that summary read as prose; an error (fold.ErrStateUnreadable) when req.Earlier gives the turns to build it again.
func (s *Summarizer) load(req fold.Request, lx *lexicon) (*state, error) {
	prev := strings.TrimSpace(req.PreviousSummary)
	if len(req.PreviousState) > 0 {
		st, ok := s.held.Take(req.PreviousState)
		var err error
		if !ok {
			st, err = decodeState(req.PreviousState)
		}
		switch {
		case err != nil && req.Earlier != nil:
			return nil, fold.Unreadable(err)
		case err != nil:
			s.cfg.log.Warn().Err(err).Str("event", "offline_state_unreadable").Str("session", req.Session).
				Int("bytes", len(req.PreviousState)).Msg("summarizer state unreadable; reading the previous summary as prose instead")
		case prev == "" || prev == st.said || st.Sum == hashString(prev):
			return st, nil
		}
	}
	if prev == "" {
		return &state{V: stateVersion}, nil
	}
	return fromProse(prev, lx), nil
}

// fold adds the batch's turns and notes to st and returns the memories they hold.
func (s *Summarizer) fold(req fold.Request, st *state, budget int) ([]fold.Memory, bool) {
	st.Agent = st.Agent || req.Profile == fold.ProfileAgent
	b := s.extract(req, st, st.scratch())
	st.counts().add(b.stmts)
	st.Voc = st.voc.String()
	st.Agent = st.Agent || slices.ContainsFunc(req.Turns, isToolTurn)
	names := len(st.Names) + st.Others
	for _, n := range b.speakers {
		st.addName(n)
	}
	changed := len(b.stmts) > 0 || names != len(st.Names)+st.Others || b.answered >= 0
	if b.answered >= 0 && b.answered < len(st.Open) {
		st.Open = append(st.Open[:b.answered], st.Open[b.answered+1:]...)
	}
	mems := st.memories(req, b)
	if len(b.stmts) > 0 {
		st.Small = false
		for i := range st.Open {
			st.Open[i].Batch = false
		}
		st.supersede(b.stmts)
		st.Open = st.lex().mergeToolRuns(append(st.Open, b.stmts...))
		st.Topics = st.Topics[:min(len(st.Topics), 1)] // the new statements name the rest
	} else if b.hadTurns && b.allFiller && len(st.Open) == 0 && len(st.Periods) == 0 {
		st.Small = true
	}
	st.closePeriods(budget)
	return mems, changed
}
