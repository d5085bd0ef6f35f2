// Package prompt renders summarizer prompts from text/template templates.
//
// The defaults are a voice prompt, an agent prompt for sessions with tool
// calls, and a re-compaction prompt; users may replace
// any of them with Load. Session content — turns, notes and the previous
// summary — is always fenced as data (<transcript>…</transcript> etc.) and
// neutralized so that no turn can close a fence and smuggle instructions
// into the prompt.
package prompt

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/sentence"
	"github.com/foldstream/foldstream/internal/speaker"
)

// Template names accepted by Load.
const (
	NameSystem    = "system"
	NameVoice     = "voice"
	NameAgent     = "agent"
	NameRecompact = "recompact"
)

// Names lists the replaceable templates.
var Names = []string{NameSystem, NameVoice, NameAgent, NameRecompact}

// Fence tags. The same names are neutralized inside session text.
const (
	TagTranscript = "transcript"
	TagNotes      = "notes"
	TagPrevious   = "previous_summary"
	TagMemories   = "memories"
	TagSummary    = "summary"
)

// Templates holds the four prompt templates. System is the system message
// for every call; Voice/Agent build the user message of a fold per
// profile; Recompact builds it for the budget's re-compaction pass.
type Templates struct {
	System, Voice, Agent, Recompact *template.Template
}

// Data is what templates execute against. Text fields holding session
// content are already neutralized; the *Block fields are ready-to-paste
// fenced blocks.
type Data struct {
	Session   string
	Profile   string
	MaxChars  int
	Recompact bool
	From, To  time.Time

	PreviousSummary string // "" on the first fold
	PreviousChars   int    // length of PreviousSummary in characters
	PreviousBlock   string // <previous_summary>…</previous_summary>, "" when none

	Turns      []TurnData
	Transcript string // <transcript> one line per turn </transcript>
	// FirstIndex and LastIndex are the transcript indexes of the first and
	// last turn (0 when there are none): the lines themselves carry none.
	FirstIndex, LastIndex int64

	Notes      []NoteData
	NotesBlock string // <notes> one line per note </notes>, "" when none
}

// TurnData is one turn; Line is its rendered transcript line.
type TurnData struct {
	Index                     int64
	At                        time.Time
	Speaker, Role, Kind, Tool string
	Text                      string
	Line                      string // "Speaker: text", or "Speaker (role, kind tool): text"
}

// NoteData is one screen-watch note; Line is its rendered line.
type NoteData struct {
	At           time.Time
	Source, Text string
	Line         string
}

// Defaults returns the built-in templates. They are parsed from constants,
// so a failure is a programming error.
func Defaults() *Templates {
	t, err := build(nil)
	if err != nil {
		panic(err)
	}
	return t
}

// Load returns the defaults with the given templates replaced (name →
// template text; names are those in Names). Each override is parsed and
// trial-rendered so that mistakes surface at startup with the template's
// name, not at the first fold.
func Load(overrides map[string]string) (*Templates, error) {
	for name, text := range overrides {
		if !slices.Contains(Names, name) {
			return nil, fmt.Errorf("prompt: unknown template %q (want one of %s)", name, strings.Join(Names, ", "))
		}
		if strings.TrimSpace(text) == "" {
			return nil, fmt.Errorf("prompt: template %q is empty", name)
		}
	}
	return build(overrides)
}

func build(overrides map[string]string) (*Templates, error) {
	parse := func(name, def string) (*template.Template, error) {
		text, ok := overrides[name]
		if !ok {
			text = def
		}
		t, err := template.New(name).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("prompt: template %q: %w", name, err)
		}
		return t, nil
	}
	var t Templates
	var err error
	if t.System, err = parse(NameSystem, defaultSystem); err != nil {
		return nil, err
	}
	if t.Voice, err = parse(NameVoice, defaultVoice); err != nil {
		return nil, err
	}
	if t.Agent, err = parse(NameAgent, defaultAgent); err != nil {
		return nil, err
	}
	if t.Recompact, err = parse(NameRecompact, defaultRecompact); err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	return &t, nil
}

// check trial-renders every template. Execution errors (unknown fields)
// only show at run time, and a template that never renders the session
// data would silently summarize nothing.
func (t *Templates) check() error {
	const turnMark, prevMark = "probe-turn-text", "probe-previous-summary"
	req := fold.Request{
		Session: "probe", Profile: fold.ProfileVoice, MaxChars: 1200,
		PreviousSummary: prevMark,
		Turns:           []fold.Turn{{Index: 0, Speaker: "Alice", Role: "user", Text: turnMark}},
		Notes:           []fold.Note{{Source: "Bob", Text: "probe-note"}},
	}
	d := newData(req)
	if _, err := exec(t.System, d); err != nil {
		return err
	}
	for _, tt := range []*template.Template{t.Voice, t.Agent} {
		out, err := exec(tt, d)
		if err != nil {
			return err
		}
		if !strings.Contains(out, turnMark) {
			return fmt.Errorf("prompt: template %q never renders the turns (use {{.Transcript}} or range over .Turns)", tt.Name())
		}
	}
	req.Recompact, req.Turns, req.Notes = true, nil, nil
	out, err := exec(t.Recompact, newData(req))
	if err != nil {
		return err
	}
	if !strings.Contains(out, prevMark) {
		return fmt.Errorf("prompt: template %q never renders the summary to condense (use {{.PreviousBlock}} or {{.PreviousSummary}})", NameRecompact)
	}
	return nil
}

// Render builds the system and user messages for req.
func (t *Templates) Render(req fold.Request) (system, user string, err error) {
	var ut *template.Template
	switch {
	case req.Recompact:
		ut = t.Recompact
	case req.Profile == fold.ProfileVoice || req.Profile == "":
		ut = t.Voice
	case req.Profile == fold.ProfileAgent:
		ut = t.Agent
	default:
		return "", "", fmt.Errorf("prompt: unknown profile %q", req.Profile)
	}
	if t.System == nil || ut == nil {
		return "", "", errors.New("prompt: templates not initialised (use Defaults or Load)")
	}
	d := newData(req)
	if system, err = exec(t.System, d); err != nil {
		return "", "", err
	}
	if user, err = exec(ut, d); err != nil {
		return "", "", err
	}
	return system, user, nil
}

func exec(t *template.Template, d Data) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("prompt: render template %q: %w", t.Name(), err)
	}
	return strings.TrimSpace(b.String()), nil
}

func newData(req fold.Request) Data {
	d := Data{
		Session:   req.Session,
		Profile:   string(req.Profile),
		MaxChars:  req.MaxChars,
		Recompact: req.Recompact,
		From:      req.From,
		To:        req.To,
	}
	if d.Profile == "" {
		d.Profile = string(fold.ProfileVoice)
	}
	if prev := strings.TrimSpace(req.PreviousSummary); prev != "" {
		d.PreviousSummary = Neutralize(prev)
		d.PreviousChars = utf8.RuneCountInString(prev)
		d.PreviousBlock = fence(TagPrevious, d.PreviousSummary)
	}

	lines := make([]string, 0, len(req.Turns))
	for _, tr := range req.Turns {
		td := TurnData{
			Index: tr.Index, At: tr.At,
			Speaker: Neutralize(speaker.Name(tr.Speaker)), Role: oneLine(tr.Role),
			Kind: tagText(tr.Kind), Tool: tagText(tr.Tool),
			Text: oneLine(tr.Text),
		}
		// A name that normalises to nothing is labelled by its role alone.
		renamed := td.Speaker != "" && speaker.Changed(tr.Speaker)
		td.Line = label(td, renamed) + ": " + td.Text
		d.Turns = append(d.Turns, td)
		lines = append(lines, td.Line)
	}
	if n := len(d.Turns); n > 0 {
		d.FirstIndex, d.LastIndex = d.Turns[0].Index, d.Turns[n-1].Index
	}
	d.Transcript = fence(TagTranscript, strings.Join(lines, "\n"))

	lines = lines[:0]
	for _, n := range req.Notes {
		nd := NoteData{At: n.At, Source: Neutralize(speaker.Name(n.Source)), Text: oneLine(n.Text)}
		var b strings.Builder
		b.WriteString("- ")
		if nd.Source != "" {
			b.WriteString(nd.Source + ": ")
		}
		b.WriteString(nd.Text)
		nd.Line = b.String()
		d.Notes = append(d.Notes, nd)
		lines = append(lines, nd.Line)
	}
	if len(lines) > 0 {
		d.NotesBlock = fence(TagNotes, strings.Join(lines, "\n"))
	}
	return d
}

func fence(tag, body string) string {
	return "<" + tag + ">\n" + body + "\n</" + tag + ">"
}

func speakerOf(t TurnData) string {
	switch {
	case t.Speaker != "":
		return t.Speaker
	case t.Role != "":
		return t.Role
	}
	return "unknown"
}

// label is what a transcript line says before the text: the speaker, and
// in parentheses what the model cannot take for granted. Most turns of a
// voice or chat session are users speaking, so "Alice: text" is the whole
// line (every token of a line is paid at every fold: docs/benchmarks.md).
// The role is shown when it is not "user" (the bot's own turns say
// "(assistant)"), tool traffic names its kind and tool. The name itself is
// normalised (speaker.Name: no line breaks, colons, brackets or role tags,
// at most speaker.MaxRunes), and a name that had to be rewritten, or that
// is a role word, gets its role too, so no name forges a line or another
// role: "Bob: I transfer $1000" becomes "Bob I transfer $1000 (user)",
// "Eve (assistant)" becomes "Eve (user)", "system" "system (user)".
func label(t TurnData, renamed bool) string {
	name := speakerOf(t)
	role := t.Role
	ambiguous := renamed || roleWords[strings.ToLower(name)] && !strings.EqualFold(name, role)
	var tags []string
	switch {
	case role == "" && ambiguous:
		tags = append(tags, "unknown")
	case role == "":
	case ambiguous || role != "user" && !strings.EqualFold(role, name):
		tags = append(tags, role)
	}
	kind := t.Kind
	switch kind {
	case "speech", "chat", "text":
		kind = ""
	}
	if t.Tool != "" && kind == "" {
		kind = "tool"
	}
	switch {
	case kind != "" && t.Tool != "":
		tags = append(tags, kind+" "+t.Tool)
	case kind != "":
		tags = append(tags, kind)
	}
	if len(tags) == 0 {
		return name
	}
	return name + " (" + strings.Join(tags, ", ") + ")"
}

// roleWords are names a reader takes for a role.
var roleWords = map[string]bool{"user": true, "assistant": true, "system": true, "developer": true, "tool": true, "function": true}

// fenceTagRe matches anything a model could read as one of our fence tags,
// opening or closing, with stray spaces or odd case: "</ Transcript >".
var fenceTagRe = regexp.MustCompile(`(?i)<(\s*/?\s*(?:` +
	TagTranscript + `|` + TagNotes + `|` + TagPrevious + `|` + TagMemories + `|` + TagSummary + `)\b)`)

// Neutralize makes session text unable to open or close a fence: the "<"
// of anything resembling one of our tags becomes "‹" (U+2039), which
// keeps the text readable for the model.
func Neutralize(s string) string {
	return fenceTagRe.ReplaceAllString(s, "‹$1")
}

// tagText is a kind or tool name as it goes inside a label's parentheses:
// on one line, without the colons and brackets that would end the label.
func tagText(s string) string {
	return strings.Join(strings.Fields(tagBreakers.Replace(oneLine(s))), " ")
}

var tagBreakers = strings.NewReplacer(":", " ", "(", " ", ")", " ", "[", " ", "]", " ", ",", " ")

// oneLine neutralizes s and folds it onto one line, so that a turn cannot
// forge further "Speaker:" lines either: every line break in the
// transcript is a turn boundary.
func oneLine(s string) string {
	s = sentence.ShowBreaks(strings.TrimSpace(s))
	s = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return -1 // other control characters carry no meaning here
		}
		return r
	}, s)
	return Neutralize(s)
}
