package contextsource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/rs/zerolog"
)

// Error codes a source built with Handler sends in Nats-Service-Error-Code.
const (
	ErrCodeBadRequest = "400"
	ErrCodeInternal   = "500"
)

// AnswerFunc answers one request: the text to merge into the session
// summary (one short paragraph; the Asker single-lines it and clamps it to
// MaxAnswerChars), or an error, which the source reports to the Asker.
type AnswerFunc func(ctx context.Context, req Request) (string, error)

// Handler adapts answer to a micro handler that speaks the protocol: it
// decodes and validates the request (a bad one is answered with code 400
// naming the field), calls answer, and replies {v, text}, or on an error
// the micro error headers with code 500 and the body {v, error}. ctx is
// passed to answer.
func Handler(ctx context.Context, answer AnswerFunc, log zerolog.Logger) micro.Handler {
	return micro.ContextHandler(ctx, func(ctx context.Context, req micro.Request) {
		r, err := DecodeRequest(req.Data())
		code := ErrCodeBadRequest
		var text string
		if err == nil {
			code = ErrCodeInternal
			text, err = answer(ctx, r)
		}
		if err != nil {
			if _, ok := events.AsValidation(err); ok && code == ErrCodeInternal {
				code = ErrCodeBadRequest // answer said the request is wrong
			}
			log.Warn().Str("event", "context_source_request_failed").Str("session", r.Session).Str("code", code).
				Err(err).Msg("could not answer a context-source request")
			if rerr := req.Error(code, err.Error(), mustJSON(ErrorReply(err.Error()))); rerr != nil {
				log.Warn().Err(rerr).Str("event", "context_source_reply_failed").Msg("could not send error reply")
			}
			return
		}
		if rerr := req.RespondJSON(TextReply(text)); rerr != nil {
			log.Warn().Err(rerr).Str("event", "context_source_reply_failed").Msg("could not send reply")
			return
		}
		log.Debug().Str("event", "context_source_request").Str("session", r.Session).
			Time("from", r.From).Time("to", r.To).Int("chars", len([]rune(text))).Msg("context-source request answered")
	})
}

// ServiceConfig describes a context source service for Serve.
type ServiceConfig struct {
	// Name is the micro service name ([A-Za-z0-9_-]+), e.g.
	// "calendar-context"; it is what `nats micro ls` lists.
	Name string
	// Version is the service's semver version; default "1.0.0".
	Version string
	// Description is shown by `nats micro info`.
	Description string
	// Subject is the subject the source answers on (a Source's Subject).
	Subject string
	// Metadata is added to the service's metadata.
	Metadata map[string]string
}

// Serve registers a context source on nc as a NATS micro service with one
// endpoint, "context", on cfg.Subject (queue group "q": run several
// instances to share the load). It serves until ctx ends or the returned
// service is stopped, and answers as soon as Serve returns.
func Serve(ctx context.Context, nc *nats.Conn, cfg ServiceConfig, answer AnswerFunc, log zerolog.Logger) (micro.Service, error) {
	if nc == nil || answer == nil {
		return nil, errors.New("contextsource: a NATS connection and an answer function are required")
	}
	if err := checkSubject(cfg.Subject); err != nil {
		return nil, fmt.Errorf("contextsource: %w", err)
	}
	if cfg.Version == "" {
		cfg.Version = "1.0.0"
	}
	md := map[string]string{"protocol": "foldstream-context-source", "wire": fmt.Sprintf("v%d", Version)}
	for k, v := range cfg.Metadata {
		md[k] = v
	}
	svc, err := micro.AddService(nc, micro.Config{
		Name: cfg.Name, Version: cfg.Version, Description: cfg.Description, Metadata: md,
		ErrorHandler: func(_ micro.Service, err *micro.NATSError) {
			log.Error().Str("event", "context_source_service_error").Str("subject", err.Subject).Str("error", err.Description).Msg("service subscription error")
		},
	})
	if err != nil {
		return nil, fmt.Errorf("contextsource: register %q: %w", cfg.Name, err)
	}
	err = svc.AddEndpoint("context", Handler(ctx, answer, log), micro.WithEndpointSubject(cfg.Subject),
		micro.WithEndpointMetadata(map[string]string{"format": "application/json",
			"description": `{"v":1,"session","from","to","prompt"?} → {"v":1,"text"} | {"v":1,"error"}`}))
	if err == nil {
		err = nc.Flush() // the subscription is live when Serve returns
	}
	if err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("contextsource: endpoint on %s: %w", cfg.Subject, err)
	}
	context.AfterFunc(ctx, func() { _ = svc.Stop() })
	return svc, nil
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // Reply always marshals
	}
	return data
}
