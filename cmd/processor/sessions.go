package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/events"
)

// runSessions lists the sessions the processor has checkpointed (the keys
// of its KV bucket) with each one's state from the session service, or
// shows one session in full.
func runSessions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := newClientFlagSet("processor sessions", &o)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "show this session in full (default: list every session)")
	asJSON := fs.Bool("json", false, "JSON output: the session service's replies, one per line")
	if err := parseSessionOptions(fs, &o, args, session); err != nil {
		return err
	}
	if *session != "" {
		if err := events.CheckSession("--session", *session); err != nil {
			return err
		}
	}
	t, err := openTool(&o, stderr, "sessions")
	if err != nil {
		return err
	}
	defer t.close()
	if *session != "" {
		data, err := t.request(ctx, client.EndpointSession, client.SessionRequest{Session: *session})
		if err != nil {
			return err
		}
		if *asJSON {
			_, err := fmt.Fprintf(stdout, "%s\n", data)
			return err
		}
		var info client.SessionInfo
		if err := json.Unmarshal(data, &info); err != nil {
			return fmt.Errorf("session reply: %w", err)
		}
		return showSession(stdout, &info)
	}
	ids, err := t.sessionIDs(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	if !*asJSON {
		fmt.Fprintln(w, "SESSION\tTURNS\tCURSOR\tSUMMARY\tLAG\tLEASE\tSTATE\tLAST ACTIVITY")
	}
	for _, id := range ids {
		data, err := t.request(ctx, client.EndpointSession, client.SessionRequest{Session: id})
		if err != nil {
			if client.IsUnknownSession(err) {
				continue // cleared since the listing (an ended session)
			}
			return err
		}
		if *asJSON {
			fmt.Fprintf(stdout, "%s\n", data)
			continue
		}
		var info client.SessionInfo
		if err := json.Unmarshal(data, &info); err != nil {
			return fmt.Errorf("session %s reply: %w", id, err)
		}
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", info.Session, info.TotalTurns, info.Cursor, summaryCol(&info),
			lagCol(&info), leaseCol(&info), stateCol(&info), timeCol(info.LastActivity))
	}
	if !*asJSON {
		if len(ids) == 0 {
			fmt.Fprintf(w, "(no sessions in bucket %s)\n", t.layout.Bucket)
		}
		return w.Flush()
	}
	return nil
}

// sessionIDs lists the sessions with a checkpoint: the bucket's keys that
// are session ids (chunks, archives and due marks have other shapes).
func (t *tool) sessionIDs(ctx context.Context) ([]string, error) {
	kv, err := t.js.KeyValue(ctx, t.layout.Bucket)
	if err != nil {
		return nil, fmt.Errorf("session bucket %s: %w (has a processor with --prefix %s run on this server?)", t.layout.Bucket, err, t.layout.Subjects.Prefix)
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("session bucket %s: %w", t.layout.Bucket, err)
	}
	var ids []string
	for k := range keys.Keys() {
		if events.ValidSession(k) {
			ids = append(ids, k)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

func summaryCol(i *client.SessionInfo) string {
	switch {
	case i.Version == 0:
		return "-"
	case i.SummaryIsNote:
		return fmt.Sprintf("v%d note (%d evicted)", i.Version, i.Evicted)
	}
	return fmt.Sprintf("v%d %dch", i.Version, i.SummaryChars)
}

func lagCol(i *client.SessionInfo) string {
	if i.CaughtUp {
		return "caught up"
	}
	return fmt.Sprintf("%d events behind", i.PendingEvents)
}

func leaseCol(i *client.SessionInfo) string {
	switch {
	case i.Lease == nil:
		return "-"
	case i.Lease.Held:
		return fmt.Sprintf("folding %d..%d", i.Lease.From, i.Lease.To-1)
	}
	return "expired"
}

func stateCol(i *client.SessionInfo) string {
	var s []string
	if i.Ended {
		s = append(s, "ended")
	}
	if i.Failures > 0 {
		s = append(s, fmt.Sprintf("%d failed folds", i.Failures))
	}
	if i.PendingNotes > 0 {
		s = append(s, fmt.Sprintf("%d notes pending", i.PendingNotes))
	}
	if len(s) == 0 {
		return "live"
	}
	return strings.Join(s, ", ")
}

func timeCol(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// showSession prints one session's state, one field a line.
func showSession(w io.Writer, i *client.SessionInfo) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) { fmt.Fprintf(tw, "%s\t%s\n", k, fmt.Sprintf(format, args...)) }
	row("session", "%s", i.Session)
	row("turns", "%d (cursor %d: turns %d.. are verbatim)", i.TotalTurns, i.Cursor, i.Cursor)
	row("summary", "%s, covers through turn %d, %d folds", summaryCol(i), i.CoveredThroughTurn, i.Compactions)
	row("last fold", "%s", timeCol(i.LastFoldAt))
	row("lag", "%s: applied seq %d, stream's last seq for the session %d", lagCol(i), i.AppliedSeq, i.StreamLastSeq)
	if l := i.Lease; l != nil {
		row("lease", "fold %s of turns %d..%d (+%d notes) by %s until %s, held %v", l.FoldID, l.From, l.To-1, l.Notes, l.Owner, l.Deadline.UTC().Format(time.RFC3339), l.Held)
	} else {
		row("lease", "none (no fold in flight)")
	}
	row("state", "%s", stateCol(i))
	if i.RetryAfter != nil {
		row("retry after", "%s", timeCol(i.RetryAfter))
	}
	if i.Config != nil {
		cfg, _ := json.Marshal(i.Config)
		row("config", "%s", cfg)
	}
	row("last activity", "%s", timeCol(i.LastActivity))
	return tw.Flush()
}
