// Command context-source-example is a context source for foldstream's
// interval mode: a calendar that, asked for a window
// [from, to] of a session, answers with the entries of a JSON file that
// fall in the window and those coming up in the hours after it.
//
//	go run ./cmd/context-source-example --nats-url nats://127.0.0.1:4222 \
//	    --subject ctx.calendar --label Calendar --data cmd/context-source-example/calendar.json
//
// It is a NATS micro service, so `nats micro ls` lists it and `nats micro
// info calendar-context` shows its endpoint. Try it by hand with
//
//	nats request ctx.calendar '{"v":1,"session":"s1","from":"2026-03-02T09:15:00Z","to":"2026-03-02T13:15:00Z"}'
//
// The data file is a JSON array of entries {"at", "end"?, "text"}, times
// in RFC 3339. See docs/context-sources.md for the protocol.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
	_ "time/tzdata" // --tz works without the system's zone database (containers)

	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "context-source-example:", err)
		}
		os.Exit(2)
	}
}

// entry is one timestamped entry of the data file.
type entry struct {
	At   time.Time `json:"at"`
	End  time.Time `json:"end,omitzero"`
	Text string    `json:"text"`
}

// calendar answers context-source requests from a list of entries.
type calendar struct {
	label   string
	entries []entry // sorted by At
	horizon time.Duration
	loc     *time.Location
}

func loadEntries(path string) ([]entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var es []entry
	if err := json.Unmarshal(data, &es); err != nil {
		return nil, fmt.Errorf("%s: expected a JSON array of {\"at\",\"end\"?,\"text\"}: %w", path, err)
	}
	for i, e := range es {
		switch {
		case e.At.IsZero():
			return nil, fmt.Errorf("%s: entry [%d]: field \"at\": required, an RFC 3339 time", path, i)
		case strings.TrimSpace(e.Text) == "":
			return nil, fmt.Errorf("%s: entry [%d]: field \"text\": required", path, i)
		case !e.End.IsZero() && e.End.Before(e.At):
			return nil, fmt.Errorf("%s: entry [%d]: field \"end\": before \"at\"", path, i)
		}
	}
	slices.SortStableFunc(es, func(a, b entry) int { return a.At.Compare(b.At) })
	return es, nil
}

// answer reports the entries that overlap [from, to] and those that start
// within the horizon after to.
func (c *calendar) answer(_ context.Context, req contextsource.Request) (string, error) {
	var past, next []string
	for _, e := range c.entries {
		end := e.End
		if end.IsZero() {
			end = e.At
		}
		switch {
		case !e.At.After(req.To) && !end.Before(req.From):
			past = append(past, c.happened(e, req.To))
		case e.At.After(req.To) && !e.At.After(req.To.Add(c.horizon)):
			next = append(next, fmt.Sprintf("%s at %s, in %s.", e.Text, c.clock(e.At, req.To), inDuration(e.At.Sub(req.To))))
		}
	}
	if len(past) == 0 && len(next) == 0 {
		return fmt.Sprintf("No %s entries from %s to %s, none in the next %s.", strings.ToLower(c.label),
			c.clock(req.From, req.To), c.clock(req.To, req.To), inDuration(c.horizon)), nil
	}
	if len(next) == 0 {
		next = append(next, fmt.Sprintf("Nothing in the next %s.", inDuration(c.horizon)))
	}
	return strings.Join(append(past, next...), " "), nil
}

// happened describes an entry that overlaps the window ending at to.
func (c *calendar) happened(e entry, to time.Time) string {
	switch {
	case e.End.IsZero():
		return fmt.Sprintf("%s at %s.", e.Text, c.clock(e.At, to))
	case e.End.After(to):
		return fmt.Sprintf("%s since %s, until %s.", e.Text, c.clock(e.At, to), c.clock(e.End, to))
	default:
		return fmt.Sprintf("%s %s-%s completed.", e.Text, c.clock(e.At, to), c.clock(e.End, e.At))
	}
}

// clock formats t in the calendar's zone, with the date when it is not the
// day of ref.
func (c *calendar) clock(t, ref time.Time) string {
	t, ref = t.In(c.loc), ref.In(c.loc)
	if t.YearDay() != ref.YearDay() || t.Year() != ref.Year() {
		return t.Format("Jan 2 3:04 PM")
	}
	return t.Format("3:04 PM")
}

// inDuration is "45 min", "2 h", "1 h 30 min".
func inDuration(d time.Duration) string {
	d = d.Round(time.Minute)
	h, m := int(d.Hours()), int(d.Minutes())%60
	switch {
	case h == 0:
		return fmt.Sprintf("%d min", m)
	case m == 0:
		return fmt.Sprintf("%d h", h)
	default:
		return fmt.Sprintf("%d h %d min", h, m)
	}
}

// serviceName makes a micro service name from a label: "Calendar" →
// "calendar-context".
func serviceName(label string) string {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, label)
	return strings.Trim(name, "-") + "-context"
}

// run serves until ctx ends; ready, if not nil, is called once the
// source answers.
func run(ctx context.Context, args []string, stderr io.Writer, ready func()) error {
	fs := flag.NewFlagSet("context-source-example", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("nats-url", nats.DefaultURL, "NATS server URL(s), comma-separated")
	subject := fs.String("subject", "ctx.calendar", "subject to answer on (the processor's context source \"subject\")")
	label := fs.String("label", "Calendar", "what the entries are, for the service name and the answers")
	data := fs.String("data", "", "JSON file of entries [{\"at\",\"end\"?,\"text\"}] (required), e.g. cmd/context-source-example/calendar.json")
	horizon := fs.Duration("horizon", 4*time.Hour, "also report entries starting this long after the window")
	tz := fs.String("tz", "UTC", "time zone of the answers (IANA name, e.g. Europe/Rome)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *data == "" {
		return errors.New("--data is required: a JSON file of entries [{\"at\",\"end\"?,\"text\"}]")
	}
	if *horizon < 0 {
		return fmt.Errorf("--horizon must not be negative, got %s", *horizon)
	}
	if strings.TrimSpace(*label) == "" {
		return errors.New("--label must not be empty")
	}
	loc, err := time.LoadLocation(*tz)
	if err != nil {
		return fmt.Errorf("--tz: %w", err)
	}
	entries, err := loadEntries(*data)
	if err != nil {
		return err
	}
	log := zerolog.New(stderr).With().Timestamp().Str("service", serviceName(*label)).Logger()
	nc, err := nats.Connect(*url, nats.Name("foldstream-context-source-"+serviceName(*label)))
	if err != nil {
		return fmt.Errorf("connect to %s: %w", *url, err)
	}
	defer nc.Close()
	cal := &calendar{label: *label, entries: entries, horizon: *horizon, loc: loc}
	svc, err := contextsource.Serve(ctx, nc, contextsource.ServiceConfig{
		Name:        serviceName(*label),
		Description: fmt.Sprintf("foldstream context source: %s entries of a window and the next %s", strings.ToLower(*label), inDuration(*horizon)),
		Subject:     *subject,
		Metadata:    map[string]string{"label": *label},
	}, cal.answer, log)
	if err != nil {
		return err
	}
	log.Info().Str("event", "context_source_started").Str("subject", *subject).Int("entries", len(entries)).
		Str("id", svc.Info().ID).Msg("context source serving")
	if ready != nil {
		ready()
	}
	<-ctx.Done()
	if err := svc.Stop(); err != nil {
		return err
	}
	log.Info().Str("event", "context_source_stopped").Msg("context source stopped")
	return nil
}
