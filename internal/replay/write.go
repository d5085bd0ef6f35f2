package replay

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/foldstream/foldstream/internal/events"
)

// timeFormat is RFC 3339 with fixed milliseconds, so that columns line up
// and events a few ms apart are still told apart.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// textLimit is how much of a turn, note or summary the text timeline shows
// unless asked for everything: enough to recognise the line.
const textLimit = 120

// errWriter keeps the first write error so the formatting code stays
// readable; the caller returns it once at the end.
type errWriter struct {
	w   io.Writer
	err error
}

func (ew *errWriter) printf(format string, args ...any) {
	if ew.err != nil {
		return
	}
	_, ew.err = fmt.Fprintf(ew.w, format, args...)
}

// WriteText writes a human timeline, one line per entry, then a totals line.
// Turn, note and summary text is cut to about 120 characters unless showText.
func (t *Timeline) WriteText(w io.Writer, showText bool) error {
	ew := &errWriter{w: w}
	if t.Totals.Entries == 0 {
		ew.printf("no events for session %q in %s, %s or %s\n", t.Session, t.Streams[0], t.Streams[1], t.Streams[2])
		if t.Totals.Incomplete {
			ew.printf("warning: a stream stopped delivering early (messages expired or purged during the read)\n")
		}
		return ew.err
	}
	ew.printf("session %s: %d events (%s %d, %s %d, %s %d) from %s to %s\n", t.Session, t.Totals.Entries,
		t.Streams[0], t.Totals.InEvents, t.Streams[1], t.Totals.OutEvents, t.Streams[2], t.Totals.DeadLetters,
		t.Totals.First.Format(timeFormat), t.Totals.Last.Format(timeFormat))
	for i := range t.Entries {
		e := &t.Entries[i]
		label, detail := describe(e, showText)
		ew.printf("%s  %-9s %s\n", e.Time.Format(timeFormat), label, detail)
	}
	ew.printf("%s\n", t.totalsLine())
	return ew.err
}

// describe returns the label column and the detail text of one entry.
func describe(e *Entry, showText bool) (string, string) {
	cut := func(s string) string { return clip(s, showText) }
	invalid := ""
	if e.Invalid != "" {
		invalid = "  [INVALID: " + e.Invalid + "]"
	}
	switch e.Kind {
	case KindTurn:
		if e.Turn == nil {
			return "turn", "(undecodable)" + invalid + " " + rawText(e, showText)
		}
		idx := "#" + strconv.FormatInt(e.Turn.Index, 10)
		if e.Turn.Index < 0 {
			idx = "#-"
		}
		s := fmt.Sprintf("%-5s %s (%s): %s", idx, e.Turn.Speaker, e.Turn.Role, cut(e.Turn.Text))
		if e.Turn.Duplicate {
			s += fmt.Sprintf("  [duplicate turn_id %s, not counted]", e.Turn.TurnID)
		}
		return "turn", s + invalid
	case KindNote:
		if e.Note == nil {
			return "note", "(undecodable)" + invalid + " " + rawText(e, showText)
		}
		src := ""
		if e.Note.Source != "" {
			src = "[" + e.Note.Source + "] "
		}
		return "note", src + cut(e.Note.Text) + invalid
	case KindControl:
		if e.Control == nil {
			return "control", "(undecodable)" + invalid + " " + rawText(e, showText)
		}
		s := e.Control.Op
		if e.Control.Config != nil {
			b, _ := json.Marshal(e.Control.Config)
			s += " " + string(b)
		}
		return "control", s + invalid
	case KindSummary:
		if e.Summary == nil {
			return "fold", "(undecodable summary)" + invalid + " " + rawText(e, showText)
		}
		s := e.Summary
		d := fmt.Sprintf("v%d [%d..%d] → cursor %d, %d chars, tier %s, model %s, %dms",
			s.Version, s.FoldedFrom, s.CoveredThroughTurn, s.Cursor, s.SummaryChars, orDash(s.Tier), orDash(s.Model), s.LatencyMS)
		if s.FoldedNotes > 0 {
			d += fmt.Sprintf(", %d notes", s.FoldedNotes)
		}
		if s.Summary != "" {
			d += ": " + cut(s.Summary)
		}
		return "fold", d
	case events.EventCompactionSkipped:
		return "skip", fmt.Sprintf("%s (cursor %d, total %d)", orDash(e.Event.Reason), e.Event.Cursor, e.Event.TotalTurns)
	case events.EventCompactionStarted:
		ev := e.Event
		return "start", fmt.Sprintf("fold %s[%d..%d] trigger %s (cursor %d, total %d, eligible %d, notes %d)",
			foldID(ev.FoldID), ev.BatchFrom, ev.BatchTo, orDash(ev.Trigger), ev.Cursor, ev.TotalTurns, ev.Eligible, ev.PendingNoteCount)
	case events.EventCompactionCompleted:
		ev := e.Event
		return "done", fmt.Sprintf("fold %scursor %d → %d, v%d, %d chars, tier %s, %dms",
			foldID(ev.FoldID), ev.OldCursor, ev.NewCursor, ev.Version, ev.SummaryChars, orDash(ev.Tier), ev.LatencyMS)
	case events.EventCompactionFailed:
		ev := e.Event
		retry := "not retryable"
		if ev.Retryable != nil && *ev.Retryable {
			retry = "retryable"
		}
		return "FAIL", fmt.Sprintf("fold %s[%d..%d] %s, %s, model %s: %s",
			foldID(ev.FoldID), ev.BatchFrom, ev.BatchTo, orDash(ev.ErrorClass), retry, orDash(ev.Model), cut(ev.Error))
	case KindRejected:
		r := e.Rejected
		field := ""
		// The processor's reason usually names the field already.
		if r.Field != "" && !strings.Contains(r.Reason, strconv.Quote(r.Field)) {
			field = " field " + strconv.Quote(r.Field)
		}
		from := ""
		if r.OriginalSubject != "" {
			from = fmt.Sprintf(" (from %s seq %s)", r.OriginalSubject, orDash(r.OriginalSeq))
		}
		return "REJECTED", fmt.Sprintf("%s%s: %s%s", orDash(r.Code), field, cut(r.Reason), from)
	case KindWarning:
		return "WARNING", e.Warning
	}
	if e.Event != nil {
		// Other lifecycle types (session_ended, session_reset, ...).
		s := e.Event.Type
		if e.Event.Reason != "" {
			s += " " + e.Event.Reason
		}
		return "event", fmt.Sprintf("%s (cursor %d, total %d)", s, e.Event.Cursor, e.Event.TotalTurns)
	}
	return e.Kind, strings.TrimSpace(invalid + " " + rawText(e, showText))
}

func rawText(e *Entry, showText bool) string {
	if len(e.Raw) > 0 {
		return clip(string(e.Raw), showText)
	}
	return clip(e.Payload, showText)
}

// clip flattens s to one line and cuts it to textLimit runes unless full.
func clip(s string, full bool) string {
	s = strings.Join(strings.Fields(s), " ")
	if full {
		return s
	}
	r := []rune(s)
	if len(r) <= textLimit {
		return s
	}
	return string(r[:textLimit]) + "…"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func foldID(id string) string {
	if id == "" {
		return ""
	}
	return id + " "
}

func (t *Timeline) totalsLine() string {
	tt := &t.Totals
	var b strings.Builder
	fmt.Fprintf(&b, "totals: %d turns (%d duplicate), %d notes", tt.Turns, tt.DuplicateTurns, tt.Notes)
	if tt.InvalidInbound > 0 {
		fmt.Fprintf(&b, ", %d invalid inbound", tt.InvalidInbound)
	}
	fmt.Fprintf(&b, ", %d rejected; folds %d started, %d completed, %d failed", tt.DeadLetters, tt.FoldsStarted, tt.FoldsCompleted, tt.FoldsFailed)
	if len(tt.Skips) > 0 {
		b.WriteString("; skips")
		for _, k := range slices.Sorted(maps.Keys(tt.Skips)) {
			fmt.Fprintf(&b, " %s=%d", k, tt.Skips[k])
		}
	}
	vs := make([]string, len(tt.SummaryVersions))
	for i, v := range tt.SummaryVersions {
		vs[i] = strconv.FormatUint(v, 10)
	}
	if len(vs) == 0 {
		vs = []string{"none"}
	}
	fmt.Fprintf(&b, "; summary versions %s; cursor %d", strings.Join(vs, ","), tt.Cursor)
	if n := len(tt.Warnings); n > 0 {
		fmt.Fprintf(&b, "; %d WARNING(S)", n)
	}
	if tt.Incomplete {
		b.WriteString("; INCOMPLETE (messages expired or were purged during the read)")
	}
	return b.String()
}

// WriteJSON writes JSON Lines: one object per entry, then a final object of
// kind "totals". An empty timeline is just the totals line.
func (t *Timeline) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // transcripts contain <, > and &; keep them readable
	for i := range t.Entries {
		if err := enc.Encode(&t.Entries[i]); err != nil {
			return fmt.Errorf("replay: write entry %d: %w", i, err)
		}
	}
	if err := enc.Encode(&t.Totals); err != nil {
		return fmt.Errorf("replay: write totals: %w", err)
	}
	return nil
}
