package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// StartAt says where WatchSummaries begins.
type StartAt int

const (
	// FromLatest delivers the session's newest summary-updated first (if
	// there is one), then every new one: a builder that starts late still
	// has the current summary at once.
	FromLatest StartAt = iota
	// FromNew delivers only summaries published after the watch starts.
	FromNew
)

// Builder is the prompt builder's side: it watches summary updates and
// asks the processor's service for packed contexts and session state. It
// is safe for concurrent use.
type Builder struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	cfg       config
	outStream string
}

// NewBuilder returns a Builder. nc carries the service requests; js is
// used for the watch (an ordered consumer on the outbound stream). Options:
// Prefix, RequestTimeout, OnError, InboxPrefix.
func NewBuilder(nc *nats.Conn, js jetstream.JetStream, opts ...Option) (*Builder, error) {
	if nc == nil || js == nil {
		return nil, errors.New("foldstream client: NewBuilder needs a NATS connection and a JetStream context")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	for _, c := range []*nats.Conn{nc, js.Conn()} {
		if err := cfg.checkConn(c); err != nil {
			return nil, err
		}
	}
	return &Builder{nc: nc, js: js, cfg: cfg, outStream: streamName(cfg.subjects.Prefix, "OUT")}, nil
}

// WatchSummaries delivers the session's summary updates in version order
// until ctx ends; then the channel is closed. It reads the outbound stream
// with an ordered consumer, which recreates itself after a disconnect
// without skipping or repeating a message. Messages that do not decode are
// reported to OnError and skipped.
func (b *Builder) WatchSummaries(ctx context.Context, session string, start StartAt) (<-chan SummaryUpdated, error) {
	if err := events.CheckSession("session", session); err != nil {
		return nil, fmt.Errorf("foldstream client: watch summaries: %w", err)
	}
	policy := jetstream.DeliverLastPolicy
	switch start {
	case FromLatest:
	case FromNew:
		policy = jetstream.DeliverNewPolicy
	default:
		return nil, fmt.Errorf("foldstream client: watch summaries: start: expected FromLatest or FromNew, got %d", start)
	}
	subject := b.cfg.subjects.Out(session, events.KindSummary)
	cons, err := b.js.OrderedConsumer(ctx, b.outStream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  policy,
	})
	if err != nil {
		return nil, fmt.Errorf("foldstream client: watch %s on stream %s: %w", subject, b.outStream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("foldstream client: watch %s: %w", subject, err)
	}
	out := make(chan SummaryUpdated, 16)
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			it.Stop() // unblocks Next
		case <-stopped:
		}
	}()
	go func() {
		defer close(out)
		defer close(stopped)
		defer it.Stop()
		for {
			msg, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
					return
				}
				// Missed heartbeats and the like: the ordered consumer
				// resets itself; say so and keep reading.
				b.reportErr(fmt.Errorf("foldstream client: watch %s: %w", subject, err))
				continue
			}
			var ev SummaryUpdated
			if err := json.Unmarshal(msg.Data(), &ev); err != nil {
				b.reportErr(fmt.Errorf("foldstream client: watch %s: undecodable summary-updated skipped: %w", subject, err))
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (b *Builder) reportErr(err error) {
	if b.cfg.onError != nil {
		b.cfg.onError(err)
	}
}

// Context asks the service for the session's packed context within budget
// (zero fields: unlimited). The reply always includes every turn the
// inbound stream holds from the cursor on, within the budget, newest
// first; an unknown session is a *ServiceError for which IsUnknownSession
// holds.
func (b *Builder) Context(ctx context.Context, session string, budget Budget) (*Context, error) {
	if err := events.CheckSession("session", session); err != nil {
		return nil, fmt.Errorf("foldstream client: context: %w", err)
	}
	if budget.Chars < 0 || budget.Tokens < 0 {
		return nil, fmt.Errorf("foldstream client: context: budget: expected non-negative chars and tokens, got %+v", budget)
	}
	var out Context
	req := ContextRequest{Session: session, BudgetChars: budget.Chars, BudgetTokens: budget.Tokens}
	if err := b.request(ctx, EndpointContext, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ContextFor asks for the session's question-aware context: query is the
// live user turn or the question the model is about to answer
// (1..MaxContextQueryChars characters). Within budget, in this priority
// order: the summary, the memories that match the query, the earlier
// turns that best match it (with the neighbours that make them readable,
// in transcript order, each with its speaker, the excerpts of one day
// labelled once with the day: ExcerptRun), then the verbatim
// turns, newest first when the budget is short. Context.Recalled
// lists what was recalled and why (scores); Prompt renders it all.
func (b *Builder) ContextFor(ctx context.Context, session, query string, budget Budget) (*Context, error) {
	if query == "" {
		return nil, fmt.Errorf("foldstream client: context: field \"query\": expected 1..%d characters, got none (use Context for a context without a query)", MaxContextQueryChars)
	}
	return b.ContextWith(ctx, ContextRequest{Session: session, BudgetChars: budget.Chars, BudgetTokens: budget.Tokens, Query: query})
}

// ContextWith sends a context request as it is (every field of
// ContextRequest, e.g. RecallTurns), after checking it as the service
// would: a request the service would refuse is an error naming the field,
// and nothing is sent.
func (b *Builder) ContextWith(ctx context.Context, req ContextRequest) (*Context, error) {
	if err := CheckContext(&req); err != nil {
		return nil, fmt.Errorf("foldstream client: context: %w", err)
	}
	var out Context
	if err := b.request(ctx, EndpointContext, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Session asks the service for the session's checkpointed state.
func (b *Builder) Session(ctx context.Context, session string) (*SessionInfo, error) {
	if err := events.CheckSession("session", session); err != nil {
		return nil, fmt.Errorf("foldstream client: session: %w", err)
	}
	var out SessionInfo
	if err := b.request(ctx, EndpointSession, SessionRequest{Session: session}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (b *Builder) request(ctx context.Context, endpoint string, req, out any) error {
	subject := ServiceSubject(b.cfg.subjects.Prefix, endpoint)
	data, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("foldstream client: encode %s request: %w", endpoint, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.cfg.requestTimeout)
		defer cancel()
	}
	reply, err := b.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return fmt.Errorf("foldstream client: %s: no foldstream service is listening on %s (is the processor running with --service?): %w", endpoint, subject, err)
		}
		return fmt.Errorf("foldstream client: %s request on %s: %w", endpoint, subject, err)
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &ServiceError{Code: code, Description: reply.Header.Get(micro.ErrorHeader)}
	}
	if err := json.Unmarshal(reply.Data, out); err != nil {
		return fmt.Errorf("foldstream client: decode %s reply: %w", endpoint, err)
	}
	return nil
}
