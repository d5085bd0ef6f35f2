// Command bot is a foldstream bot in a few lines: it publishes a voice
// session's turns (and one screen-watch note) with client.Publisher.
//
//	go run ./client/examples/bot -nats-url nats://127.0.0.1:4222 -session demo-1 -turns 61
//
// Against nats/auth/userpass.conf, log in as the bot with its inbox:
//
//	go run ./client/examples/bot -nats-user bot -nats-password dev-bot-password -inbox-prefix _INBOX_bot
package main

import (
	"context"
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
	session := flag.String("session", "demo-1", "session id: 1-128 characters from [A-Za-z0-9_-]")
	turns := flag.Int("turns", 61, "turns to publish (the first fold happens at 61)")
	var l login
	flag.StringVar(&l.user, "nats-user", "", "NATS user (nats/auth/userpass.conf: bot)")
	flag.StringVar(&l.password, "nats-password", "", "NATS password")
	flag.StringVar(&l.inbox, "inbox-prefix", "", "the user's private inbox prefix (nats/auth: _INBOX_<user>)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *url, l, *session, *turns, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "bot:", err)
		os.Exit(1)
	}
}

var lines = []struct{ speaker, text string }{
	{"Alice", "Let's queue ranked in Marvel Rivals tonight, we need three more wins for Diamond."},
	{"Bob", "I keep dying as Hulk on Tokyo 2099."},
	{"Carol", "Bob, maybe try Jeff the Land Shark instead?"},
	{"Dave", "I have to stop at 11:30, I work at 8 tomorrow."},
}

func run(ctx context.Context, url string, l login, session string, turns int, out io.Writer) error {
	natsOpts, clientOpts := l.options()
	nc, err := nats.Connect(url, append(natsOpts, nats.Name("foldstream-example-bot"))...)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", url, err)
	}
	defer nc.Drain()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	// At most 64 turns wait for their acknowledgement at any time:
	// PublishTurnAsync blocks beyond that.
	pub, err := client.NewPublisher(js, append(clientOpts, client.MaxPending(64))...)
	if err != nil {
		return err
	}

	// A screen-watch note the bot just evicted from its live buffer: it
	// is folded into the next summary.
	err = pub.PublishNote(ctx, client.Note{Session: session, NoteID: session + "-n1", Source: "Bob",
		Text: "Bob is screen-sharing Marvel Rivals, playing Hulk on Tokyo 2099."})
	if err != nil {
		return err
	}
	for i := range turns {
		l := lines[i%len(lines)]
		// V and At are filled in; a turn the processor would reject is an
		// error naming the field, and nothing is sent.
		err := pub.PublishTurnAsync(client.Turn{
			Session: session, TurnID: fmt.Sprintf("t%04d", i),
			Speaker: l.speaker, Role: "user", Text: l.text,
		})
		if err != nil {
			return err
		}
	}
	// Close waits for every acknowledgement and reports any publish that
	// failed (safe to re-send: turns are deduplicated by turn_id).
	if err := pub.Close(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "published %d turns and 1 note to session %s\n", turns, session)
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
