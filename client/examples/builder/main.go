// Command builder is a foldstream prompt builder: it waits for the
// session's summary, asks the context service for a packed context within
// a budget, and builds realtime instructions with the summary.
//
//	go run ./client/examples/builder -nats-url nats://127.0.0.1:4222 -session demo-1
//
// Against nats/auth/userpass.conf, log in as the builder with its inbox:
//
//	go run ./client/examples/builder -nats-user builder -nats-password dev-builder-password -inbox-prefix _INBOX_builder
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func main() {
	url := flag.String("nats-url", nats.DefaultURL, "NATS server URL")
	session := flag.String("session", "demo-1", "session id")
	wait := flag.Duration("wait", 30*time.Second, "how long to wait for the first summary")
	follow := flag.Bool("follow", false, "keep printing new summaries until interrupted")
	var l login
	flag.StringVar(&l.user, "nats-user", "", "NATS user (nats/auth/userpass.conf: builder)")
	flag.StringVar(&l.password, "nats-password", "", "NATS password")
	flag.StringVar(&l.inbox, "inbox-prefix", "", "the user's private inbox prefix (nats/auth: _INBOX_<user>)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *url, l, *session, *wait, *follow, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "builder:", err)
		os.Exit(1)
	}
}

const instructions = "You are Clanky, a friendly participant in a Discord voice channel. Keep replies short."

func run(ctx context.Context, url string, l login, session string, wait time.Duration, follow bool, out io.Writer) error {
	natsOpts, clientOpts := l.options()
	nc, err := nats.Connect(url, append(natsOpts, nats.Name("foldstream-example-builder"))...)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	b, err := client.NewBuilder(nc, js, clientOpts...)
	if err != nil {
		return err
	}

	// 1. The latest summary at once (if any), then every new one.
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates, err := b.WatchSummaries(watchCtx, session, client.FromLatest)
	if err != nil {
		return err
	}
	var latest client.SummaryUpdated
	select {
	case latest = <-updates:
		fmt.Fprintf(out, "summary v%d covers turns 0-%d: %s\n\n", latest.Version, latest.CoveredThroughTurn, latest.Summary)
	case <-time.After(wait):
		return errors.New("no summary yet: a session is first folded at 61 turns")
	case <-ctx.Done():
		return ctx.Err()
	}

	// 2. A packed context for the next model call: the freshest turns
	// first, then the summary if it still fits 6000 characters.
	c, err := b.Context(ctx, session, client.Budget{Chars: 6000})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "context: summary %v, %d verbatim turns from %d (%d dropped), %d chars\n%s\n",
		c.Summary != nil, len(c.Turns), c.Cursor+int64(c.DroppedTurns), c.DroppedTurns, c.Chars, c.Prompt())

	// 3. Realtime instructions: the summary as a section, never over
	// 5200 characters in total.
	fmt.Fprintln(out, client.RealtimeInstructions(instructions, latest.Summary, client.DefaultRealtimeCeiling))

	for follow {
		select {
		case s, ok := <-updates:
			if !ok {
				return nil
			}
			fmt.Fprintf(out, "\nsummary v%d covers turns 0-%d: %s\n", s.Version, s.CoveredThroughTurn, s.Summary)
		case <-ctx.Done():
			return nil
		}
	}
	return nil
}

// login is how the example logs in to a server with the shipped auth
// configs (nats/auth): a user, its password, and its private inbox prefix
// _INBOX_<user> (the only reply subjects the user may read). The zero
// value logs in anonymously with the default inbox.
type login struct{ user, password, inbox string }

// options are the connection's and the client's options for l.
func (l login) options() ([]nats.Option, []client.Option) {
	var no []nats.Option
	var co []client.Option
	if l.user != "" {
		// The server checks a bcrypt hash: give the handshake more time
		// than nats.go's default 2s on a busy machine.
		no = append(no, nats.UserInfo(l.user, l.password), nats.Timeout(10*time.Second))
	}
	if l.inbox != "" {
		no = append(no, nats.CustomInboxPrefix(l.inbox))
		co = append(co, client.InboxPrefix(l.inbox)) // checks the connection uses it
	}
	return no, co
}
