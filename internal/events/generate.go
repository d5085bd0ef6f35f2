package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/foldstream/foldstream/internal/fold"
)

//go:generate go run ./gen -schema ../../schema/v1/control.json -docs ../../docs/modes.md

// What the generator (go generate ./internal/events) writes from the
// declarations, Settings and the registered modes (fold.Engines), and a
// test checks is committed: in schema/v1/control.json, config's mode
// property and the property of every setting; in docs/modes.md, the modes
// table and the settings table, each between its markers.

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
	props, last, err := configProperties(schema)
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
		def = num(s.Default)
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
		if seed := e.Doc().Seed; seed != "" {
			about = append(about, "seed "+seed)
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

// configProperties finds the value of each property of
// properties.config.properties in schema: its byte span, and the end of
// the last one.
func configProperties(schema []byte) (map[string][2]int, int, error) {
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
			want := []string{"properties", "config", "properties"}
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
		return nil, 0, errors.New("expected properties.config.properties with at least one property")
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
