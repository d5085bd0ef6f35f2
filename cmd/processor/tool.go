package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

// tool is the connection of a subcommand that talks to a running
// processor's NATS server (pub, tail, sessions, context, dlq): it never
// starts a server of its own.
type tool struct {
	nc     *nats.Conn
	js     jetstream.JetStream
	layout broker.Layout
	log    zerolog.Logger
}

// openTool connects with the connection flags in o.
func openTool(o *options, stderr io.Writer, name string) (*tool, error) {
	log, err := newLogger(o, stderr)
	if err != nil {
		return nil, err
	}
	subjects, err := events.NewSubjects(o.prefix)
	if err != nil {
		return nil, fmt.Errorf("--prefix: %w", err)
	}
	if o.natsURL == "" {
		return nil, fmt.Errorf("--nats-url: required, the processor's NATS server (its embedded one listens on %s by default)", defaultClientURL)
	}
	nc, js, err := connect(o, nil, "foldstream-"+name, log)
	if denied := (*broker.InboxDeniedError)(nil); errors.As(err, &denied) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: is a processor running (make run, make demo)? Pass its server with --nats-url", err)
	}
	return &tool{nc: nc, js: js, layout: broker.NewLayout(subjects), log: log}, nil
}

func (t *tool) close() { _ = t.nc.Drain() }

// request asks a service endpoint and returns the reply's body; a micro
// error reply is a *client.ServiceError.
func (t *tool) request(ctx context.Context, endpoint string, req any) ([]byte, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	subject := t.layout.Subjects.Prefix + ".svc." + endpoint
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	reply, err := t.nc.RequestWithContext(ctx, subject, data)
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("%s: no foldstream service answers on %s: is the processor running, with --service and --prefix %s?", endpoint, subject, t.layout.Subjects.Prefix)
		}
		return nil, fmt.Errorf("%s request on %s: %w", endpoint, subject, err)
	}
	if code := reply.Header.Get(micro.ErrorCodeHeader); code != "" {
		return nil, &client.ServiceError{Code: code, Description: reply.Header.Get(micro.ErrorHeader)}
	}
	return reply.Data, nil
}

// printJSON writes v as one line of JSON.
func printJSON(w io.Writer, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
