// Package broker connects foldstream to NATS: it starts the embedded
// nats-server when no URL is configured, dials a real server or cluster with
// the configured credentials, and provisions the streams and KV bucket.
package broker

import (
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures the in-process nats-server.
type EmbeddedConfig struct {
	StoreDir string // JetStream store directory
	Host     string // listen address; default 127.0.0.1
	Port     int    // default 4222; -1 picks a free port
	// NoListen runs without a TCP listener (in-process connections only).
	NoListen bool
}

// StartEmbedded starts a single-node nats-server with JetStream and waits
// until it accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("embedded nats-server: store dir is required")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = 4222
	}
	opts := &server.Options{
		ServerName: "foldstream-embedded",
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true, // the processor owns signal handling
		DontListen: cfg.NoListen,
		MaxPayload: 1 << 20,
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats-server: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats-server on %s:%d did not become ready in 10s (port in use? try --embedded-port -1)", cfg.Host, cfg.Port)
	}
	return ns, nil
}
