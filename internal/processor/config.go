// Package processor is foldstream's engine: it consumes the inbound stream,
// applies each session's events in order on one owner (a shard goroutine),
// keeps hot state in memory with checkpoints written behind to the KV
// bucket, runs folds off the ingest path and publishes the outcome.
package processor

import (
	"fmt"
	"time"

	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
)

// Clock is the time source; tests pass a controllable one.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// TokenCounter counts tokens of text (BPE, or the chars/4×1.2 fallback).
type TokenCounter interface{ Count(text string) int }

// Trigger modes: evaluate on every turn, or only on generate control events
// (the bot's generation-driven trigger).
const (
	TriggerTurn     = "turn"
	TriggerGenerate = "generate"
)

// Config tunes the processor. Zero values take the defaults.
type Config struct {
	// Mode is the deployment's default mode; sessions may override it.
	Mode    fold.Mode
	Window  fold.Window
	Trigger string // turn | generate
	Profile fold.Profile
	// Settings of the other modes; zero fields take seed defaults (a
	// negative Tokens.IdleAfter turns idle folds off).
	Tokens               fold.TokenPolicy
	Evict                fold.EvictPolicy
	Interval             fold.IntervalPolicy
	MaskToolOutputsAfter time.Duration
	// RecallEnabled says evicted turns can be searched (the context
	// service's recall endpoint runs). Without it mode evict would be
	// amnesia, so it falls back to mode tokens with a warning.
	RecallEnabled bool
	// KeepEnded keeps an ended session's checkpoint as it is instead of
	// the final fold, archive and clear.
	KeepEnded bool
	// ContextSources are asked for the folded window at every fold of a
	// session in mode interval.
	ContextSources []contextsource.Source
	// Durable consumer name. It is deleted and recreated at its ack floor
	// on every attach, so exactly one engine may use it at a time: with
	// partitions, one per partition (see internal/partition). When it
	// keeps refusing to be read or re-created, the engine moves to
	// <Consumer>-r<id> (Processor.ConsumerName); every attach deletes
	// the names it does not create.
	Consumer string
	// FilterSubjects are the consumer's filters; empty reads the whole
	// inbound layout. A partition engine reads its partition's subjects.
	FilterSubjects []string
	// Owns reports whether a session belongs to this engine; sessions with
	// interrupted folds (due marks) of other partitions are left to their
	// owners. Nil owns every session.
	Owns func(session string) bool
	// InstanceID names this process in fold leases.
	InstanceID string
	// Shards is the number of session owners (goroutines).
	Shards int
	// FlushInterval bounds, under load, how long a session's change waits
	// for its checkpoint (and its ack): a session is written once its
	// oldest unwritten change is this old, so one write covers all its
	// turns since. A shard whose input is quiet, with nothing more
	// pending on the consumer, writes at once.
	FlushInterval time.Duration
	// FlushBatch forces a shard flush once this many acks are pending.
	FlushBatch int
	// FoldTimeout bounds one fold, including the summarizer's retries.
	FoldTimeout time.Duration
	// LeaseTTL is how long a fold lease blocks other folds; it must exceed
	// FoldTimeout so a live fold is never overtaken.
	LeaseTTL time.Duration
	// RetryBackoff is the first wait after a failed fold (doubling, capped
	// at RetryBackoffMax) before the next trigger may retry.
	RetryBackoff    time.Duration
	RetryBackoffMax time.Duration
	// BreakerOpenFor and BreakerMaxOpenFor time the summarizer's circuit
	// breaker (retry.Breaker) when Deps has none: after an error no retry
	// can fix (auth, model not found, a run of bad requests) model calls
	// stop for BreakerOpenFor (default 1m), then one probe call goes; each
	// failed probe doubles the wait up to BreakerMaxOpenFor (default 30m).
	BreakerOpenFor    time.Duration
	BreakerMaxOpenFor time.Duration
	// IdleCompact packs a session that has had no event for this long and
	// has nothing pending (no unwritten change, unacknowledged message or
	// fold in flight) into its compact idle form: its cached turn payloads
	// are dropped (its next fold reads its batch from the stream) and its
	// state is kept as a few hundred bytes, unpacked without a KV read on
	// its next event or wake (idle.go). Zero takes the default, 1s;
	// negative keeps sessions unpacked until IdleEvict.
	IdleCompact time.Duration
	// IdleEvict drops a clean, idle session from memory; its state stays
	// in the KV bucket and is loaded on its next event.
	IdleEvict time.Duration
	// ShutdownGrace is how long in-flight folds may finish on shutdown
	// before they are abandoned (lease cleared, nothing moved).
	ShutdownGrace time.Duration
	// MaxConcurrentFolds bounds folds running at once across all sessions;
	// more wait for a slot within their fold timeout. A CPU-bound
	// summarizer (offline) must not starve ingest of its cores, and a
	// remote model should not get a burst of thousands of calls at once.
	MaxConcurrentFolds int
	// MaxAckPending bounds unacknowledged messages on the consumer.
	MaxAckPending int
	AckWait       time.Duration
	Limits        events.Limits
	// MaxClockSkew is how far an event's at may be ahead of the time the
	// inbound stream stored it; a later one is rejected (skew.go). Zero
	// takes events.DefaultMaxClockSkew; negative accepts any time.
	MaxClockSkew time.Duration

	// deadLetterAttempts overrides how often a dead-letter publish that
	// got no answer is tried (deadLetterAttempts): tests that need the
	// worker still retrying while they look set it high.
	deadLetterAttempts int
	// loadRetries overrides how many more times a session's checkpoint
	// read that failed is tried before the consumer is rewound
	// (loadRetries): tests that need it still retrying while they look
	// set it high.
	loadRetries int
}

func (c Config) withDefaults() Config {
	if c.Trigger == "" {
		c.Trigger = TriggerTurn
	}
	// Each mode's settings left unset take its defaults (fold).
	pol := c.policy().WithDefaults()
	c.Mode, c.Window, c.Tokens, c.Evict, c.Interval = pol.Mode, pol.Window, pol.Tokens, pol.Evict, pol.Interval
	if c.Profile == "" {
		c.Profile = fold.ProfileVoice
	}
	if c.Consumer == "" {
		c.Consumer = "foldstream"
	}
	if c.Shards <= 0 {
		c.Shards = 8
	}
	// Acks are invisible to bots (they get the stream's publish ack), so
	// checkpoints can wait: with many sessions, each write then covers
	// several turns of its session instead of about one.
	if c.FlushInterval <= 0 {
		c.FlushInterval = time.Second
	}
	if c.FlushBatch <= 0 {
		c.FlushBatch = 16384
	}
	if c.FoldTimeout <= 0 {
		c.FoldTimeout = 60 * time.Second
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = c.FoldTimeout + 15*time.Second
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 2 * time.Second
	}
	if c.RetryBackoffMax <= 0 {
		c.RetryBackoffMax = 2 * time.Minute
	}
	if c.IdleCompact == 0 {
		c.IdleCompact = time.Second
	}
	if c.IdleEvict <= 0 {
		c.IdleEvict = 2 * time.Minute
	}
	if c.ShutdownGrace <= 0 {
		c.ShutdownGrace = 10 * time.Second
	}
	if c.MaxConcurrentFolds <= 0 {
		c.MaxConcurrentFolds = 32
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 1 << 18
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxClockSkew == 0 {
		c.MaxClockSkew = events.DefaultMaxClockSkew
	}
	return c
}

// Validate reports settings that cannot work, naming the setting. The
// modes' settings are checked by the policy's Validate, against their
// declarations (events.Settings).
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Trigger != TriggerTurn && c.Trigger != TriggerGenerate:
		return fmt.Errorf("trigger: expected %q or %q, got %q", TriggerTurn, TriggerGenerate, c.Trigger)
	case c.LeaseTTL <= c.FoldTimeout:
		return fmt.Errorf("lease TTL (%s) must exceed the fold timeout (%s), or a live fold could be overtaken", c.LeaseTTL, c.FoldTimeout)
	case c.Profile != fold.ProfileVoice && c.Profile != fold.ProfileAgent:
		return fmt.Errorf("profile: expected voice or agent, got %q", c.Profile)
	}
	for i, src := range c.ContextSources {
		if err := src.Validate(); err != nil {
			return fmt.Errorf("context source %d: %w", i+1, err)
		}
	}
	return c.policy().Validate()
}

// policy is the deployment's default compaction policy.
func (c Config) policy() fold.Policy {
	return fold.Policy{
		Mode: c.Mode, Window: c.Window, Tokens: c.Tokens, Evict: c.Evict, Interval: c.Interval,
		MaskToolOutputsAfter: c.MaskToolOutputsAfter,
	}
}
