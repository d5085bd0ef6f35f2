package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/foldstream/foldstream/internal/fold"
)

//go:generate go run ./gen -root ../..

// What the generator (go generate ./internal/events) writes from the
// declarations, Settings and the registered modes (fold.Engines), and a
// test checks is committed: in schema/v1/control.json, config's mode
// property and the property of every setting; the mode property of
// lifecycle.json and summary-updated.json; in docs/modes.md, the modes
// table and the settings table, each between its markers.

// Generated maps each generated file, by its path under the repository's
// root, to what writes it from the file as committed.
var Generated = map[string]func([]byte) ([]byte, error){
	"schema/v1/control.json":         ControlSchema,
	"schema/v1/lifecycle.json":       LifecycleSchema,
	"schema/v1/summary-updated.json": SummarySchema,
	"docs/modes.md":                  Docs,
}

// Markers of the generated tables in docs/modes.md.
const (
	ModesTableBegin    = "<!-- modes table: generated from the modes' files (go generate ./internal/events) -->"
	ModesTableEnd      = "<!-- end of modes table -->"
	SettingsTableBegin = "<!-- settings table: generated from events.Settings (go generate ./internal/events) -->"
	SettingsTableEnd   = "<!-- end of settings table -->"
)

// Docs is doc (docs/modes.md) with its generated tables replaced by
// ModesTable and DocsTable.
func Docs(doc []byte) ([]byte, error) {
	out, err := replaceBetween(doc, ModesTableBegin, ModesTableEnd, ModesTable())
	if err != nil {
		return nil, err
	}
	return replaceBetween(out, SettingsTableBegin, SettingsTableEnd, DocsTable())
}

func replaceBetween(doc []byte, begin, end, body string) ([]byte, error) {
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("expected the markers %q and %q, in that order", begin, end)
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(begin)])
	b.WriteString("\n")
	b.WriteString(body)
	b.Write(doc[j:])
	return b.Bytes(), nil
}

// ModesTable is the modes table of docs/modes.md, from each mode's file.
func ModesTable() string {
	var b strings.Builder
	b.WriteString("| mode | seed | what it does | settings it reads (besides those of every mode) | file |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, e := range fold.Engines() {
		d := e.Doc()
		seed := d.Seed
		if seed == "" {
			seed = "—"
		}
		keys := "—"
		if s := e.Settings(); len(s) > 0 {
			keys = "`" + strings.Join(s, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | `internal/fold/mode_%s.go` |\n", e.Name(), seed, d.Summary, keys, e.Name())
	}
	return b.String()
}

// ControlSchema is schema (schema/v1/control.json) with config's mode
// property and every setting's property derived from the declarations:
// each property is replaced where it stands, and a declared setting the
// schema lacks is added after the last property.
func ControlSchema(schema []byte) ([]byte, error) {
	props, last, err := propertySpans(schema, "properties", "config", "properties")
	if err != nil {
		return nil, fmt.Errorf("control schema: %w", err)
	}
	type edit struct {
		at, end int
		text    string
	}
	var edits []edit
	indent := lineIndent(schema, last)
	var added strings.Builder
	values := map[string]string{"mode": modeProperty()}
	order := []string{"mode"}
	for _, s := range Settings {
		values[s.Key] = settingProperty(s)
		order = append(order, s.Key)
	}
	for _, key := range order {
		if sp, ok := props[key]; ok {
			edits = append(edits, edit{sp[0], sp[1], values[key]})
			continue
		}
		fmt.Fprintf(&added, ",\n%s%q: %s", indent, key, values[key])
	}
	if added.Len() > 0 {
		edits = append(edits, edit{last, last, added.String()})
	}
	// Apply from the end, so that earlier offsets stay valid.
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].at > edits[j-1].at; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	out := append([]byte(nil), schema...)
	for _, e := range edits {
		out = append(out[:e.at:e.at], append([]byte(e.text), out[e.end:]...)...)
	}
	return out, nil
}

// LifecycleSchema is schema (schema/v1/lifecycle.json) with its mode
// property derived from the registered modes.
func LifecycleSchema(schema []byte) ([]byte, error) {
	d := "The session's mode when the event was published (compaction_* and session_configured; always set by processors with modes, absent from events published before them): " +
		modeList(func(e fold.Engine) string { return "" })
	if fb := fallbacks(); fb != "" {
		d += ". A mode that needs recall, on a processor without recall enabled, reports the mode it falls back to (" + fb + ")"
	}
	return replaceProperty(schema, "mode", outboundMode(d+"."))
}

// SummarySchema is schema (schema/v1/summary-updated.json) with its mode
// property derived from the registered modes.
func SummarySchema(schema []byte) ([]byte, error) {
	d := "Mode of the session that produced it: " + modeList(func(e fold.Engine) string { return ": " + e.Doc().Summary })
	var evicting []string
	for _, e := range fold.Engines() {
		if !e.Summarizes() {
			evicting = append(evicting, string(e.Name()))
		}
	}
	if len(evicting) > 0 {
		d += ". A mode that evicts (" + strings.Join(evicting, ", ") + ") publishes its cumulative eviction note as summary, with model none, and an evicted event carries the details"
	}
	return replaceProperty(schema, "mode", outboundMode(d+"."))
}

// outboundMode is the mode property of an outbound event: every
// registered mode, never empty.
func outboundMode(description string) string {
	quoted := make([]string, 0, len(fold.ModeNames()))
	for _, m := range fold.ModeNames() {
		quoted = append(quoted, jsonString(m))
	}
	return fmt.Sprintf(`{ "description": %s, "enum": [%s] }`, jsonString(description), strings.Join(quoted, ", "))
}

// modeList names every mode with its seed, and what more about each
// returns, separated by semicolons.
func modeList(more func(fold.Engine) string) string {
	var parts []string
	for _, e := range fold.Engines() {
		p := string(e.Name())
		if seeds := e.Doc().Seeds(); seeds != "" {
			p += " (" + seeds + ")"
		}
		parts = append(parts, p+more(e))
	}
	return strings.Join(parts, "; ")
}

// fallbacks lists each mode that needs recall with its fallback.
func fallbacks() string {
	var parts []string
	for _, e := range fold.Engines() {
		if fb := e.WithoutRecall(); fb != "" {
			parts = append(parts, string(e.Name())+" reports "+string(fb))
		}
	}
	return strings.Join(parts, ", ")
}

// replaceProperty is schema with its top-level property key's value
// replaced by value.
func replaceProperty(schema []byte, key, value string) ([]byte, error) {
	props, _, err := propertySpans(schema, "properties")
	if err != nil {
		return nil, err
	}
	sp, ok := props[key]
	if !ok {
		return nil, fmt.Errorf("expected a property %q", key)
	}
	out := append([]byte(nil), schema[:sp[0]]...)
	out = append(out, value...)
	return append(out, schema[sp[1]:]...), nil
}

// settingProperty is a setting's JSON Schema, on one line.
func settingProperty(s Setting) string {
	typ := "integer"
	if s.Exclusive || s.Unit == Fraction {
		typ = "number"
	}
	var rng string
	switch {
	case s.Exclusive:
		rng = fmt.Sprintf(`"anyOf": [{ "const": 0 }, { "exclusiveMinimum": %s, "exclusiveMaximum": %s }]`, num(s.Min), num(s.Max))
	case s.ZeroIsValue || s.Min == 0:
		rng = fmt.Sprintf(`"minimum": %s, "maximum": %s`, num(s.Min), num(s.Max))
	default:
		rng = fmt.Sprintf(`"anyOf": [{ "const": 0 }, { "minimum": %s, "maximum": %s }]`, num(s.Min), num(s.Max))
	}
	return fmt.Sprintf(`{ "description": %s, "type": %q, %s }`, jsonString(settingDescription(s)), typ, rng)
}

// settingDescription is the schema's description of a setting: the modes
// that read it, its doc, its default and its range.
func settingDescription(s Setting) string {
	var b strings.Builder
	switch m := s.Modes(); len(m) {
	case 0:
	case 1:
		b.WriteString("Mode " + m[0] + ": ")
	default:
		b.WriteString("Modes " + strings.Join(m[:len(m)-1], ", ") + " and " + m[len(m)-1] + ": ")
	}
	doc := s.Doc
	if s.Detail != "" {
		doc += "; " + s.Detail
	}
	if b.Len() == 0 && !strings.Contains(strings.Fields(doc)[0], "_") {
		doc = strings.ToUpper(doc[:1]) + doc[1:] // a sentence, not a key
	}
	b.WriteString(doc)
	def := s.DefaultDoc
	if def == "" && s.Flag != "" {
		def = num(s.Default())
	}
	if def != "" {
		fmt.Fprintf(&b, " (default: %s)", def)
	}
	rng := fmt.Sprintf("%s..%s %s", num(s.Min), num(s.Max), s.Unit)
	if s.Exclusive {
		rng = fmt.Sprintf("strictly between %s and %s", num(s.Min), num(s.Max))
	}
	switch {
	case s.ZeroIsValue:
		fmt.Fprintf(&b, ". %s; 0 is a value, not unset: only an absent field keeps the processor's setting.", rng)
	case s.Flag != "":
		fmt.Fprintf(&b, ". 0 keeps the processor's setting, else %s.", rng)
	default:
		fmt.Fprintf(&b, ". 0 = not set, else %s.", rng)
	}
	return b.String()
}

// modeProperty is config's mode property: every registered mode.
func modeProperty() string {
	enum := append([]string{""}, fold.ModeNames()...)
	var d strings.Builder
	d.WriteString("The session's engine, one of the modes (absent or empty keeps the processor's):")
	for i, e := range fold.Engines() {
		if i > 0 {
			d.WriteString(";")
		}
		fmt.Fprintf(&d, " %s", e.Name())
		var about []string
		if seeds := e.Doc().Seeds(); seeds != "" {
			about = append(about, seeds)
		}
		if e.Name() == fold.DefaultMode {
			about = append(about, "the default")
		}
		if len(about) > 0 {
			fmt.Fprintf(&d, " (%s)", strings.Join(about, ", "))
		}
		fmt.Fprintf(&d, ": %s", e.Doc().Summary)
		if fb := e.WithoutRecall(); fb != "" {
			fmt.Fprintf(&d, "; needs recall, else the processor folds in mode %s", fb)
		}
	}
	d.WriteString(".")
	quoted := make([]string, len(enum))
	for i, m := range enum {
		quoted[i] = jsonString(m)
	}
	return fmt.Sprintf(`{ "description": %s, "enum": [%s] }`, jsonString(d.String()), strings.Join(quoted, ", "))
}

// jsonString is s as a JSON string, without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// propertySpans finds the value of each member of the object at want
// (keys from the top) in schema: its byte span, and the end of the last
// one.
func propertySpans(schema []byte, want ...string) (map[string][2]int, int, error) {
	dec := json.NewDecoder(bytes.NewReader(schema))
	spans := map[string][2]int{}
	last := -1
	var walk func(path []string) error
	walk = func(path []string) error {
		if t, err := dec.Token(); err != nil || t != json.Delim('{') {
			return fmt.Errorf("%s: expected an object", strings.Join(path, "."))
		}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := t.(string)
			start := valueStart(schema, int(dec.InputOffset()))
			switch {
			case len(path) < len(want) && key == want[len(path)]:
				if err := walk(append(path, key)); err != nil {
					return err
				}
			default:
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return err
				}
				if len(path) == len(want) {
					spans[key] = [2]int{start, int(dec.InputOffset())}
					last = int(dec.InputOffset())
				}
			}
		}
		_, err := dec.Token() // the closing brace
		return err
	}
	if err := walk(nil); err != nil {
		return nil, 0, err
	}
	if last < 0 {
		return nil, 0, fmt.Errorf("expected %s with at least one member", strings.Join(want, "."))
	}
	return spans, last, nil
}

// valueStart skips the colon and blanks after a key ending at i.
func valueStart(b []byte, i int) int {
	for i < len(b) && (b[i] == ':' || b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// lineIndent is the indentation of the line holding offset i.
func lineIndent(b []byte, i int) string {
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	end := start
	for end < len(b) && (b[end] == ' ' || b[end] == '\t') {
		end++
	}
	return string(b[start:end])
}
