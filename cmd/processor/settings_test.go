package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/processor"
)

// Every setting is declared once (events.Settings, and the modes that
// read it in their files); this walks each one over every surface derived
// from it: configure validation, the flag (its default and usage), the
// environment variable and the config file key, the generated schema (its
// range and the modes its description names) and the docs' settings
// table row. Where the processor applies a configured value is walked in
// internal/processor (TestEverySettingIsApplied); that the generated
// files are what the generator writes, in internal/events/gen.
func TestEverySettingOnEverySurface(t *testing.T) {
	props := configProperties(t)
	schema := configSchema(props)
	descriptions := configDescriptions(props)
	docs, err := os.ReadFile("../../docs/modes.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, s := range events.Settings {
		t.Run(s.Key, func(t *testing.T) {
			keys[s.Key] = true
			// configure validation: in range accepted, out of range
			// refused naming the field.
			ok, bad := probe(s)
			if err := configure(t, s.Key, ok).Validate(); err != nil {
				t.Errorf("configure %s=%v: %v, want it accepted", s.Key, ok, err)
			}
			if err := configure(t, s.Key, bad).Validate(); err == nil || !fieldIs(err, "config."+s.Key) {
				t.Errorf("configure %s=%v: %v, want it refused naming config.%s", s.Key, bad, err, s.Key)
			}
			if v, set := s.Value(configure(t, s.Key, ok)); !set || v != ok {
				t.Errorf("the declaration reads %s as %v (set %v), want %v", s.Key, v, set, ok)
			}

			// the schema's range is the declaration's, and its
			// description names the modes that read it.
			if got, want := schema[s.Key], schemaRange(s); got != want {
				t.Errorf("schema/v1/control.json %s: range %s, declared %s", s.Key, got, want)
			}
			for _, m := range s.Modes() {
				if lead, _, _ := strings.Cut(descriptions[s.Key], ":"); !strings.Contains(lead, m) {
					t.Errorf("schema/v1/control.json %s: description %q does not name mode %s, which reads it", s.Key, descriptions[s.Key], m)
				}
			}
			// the docs row: key, flag, environment variable, modes.
			row := docsRow(string(docs), s.Key)
			modes := "all"
			if len(s.Modes()) > 0 {
				modes = strings.Join(s.Modes(), ", ")
			}
			for _, want := range []string{s.EnvVar(), "| " + modes + " |"} {
				if !strings.Contains(row, want) {
					t.Errorf("docs/modes.md row of %s %q lacks %q", s.Key, row, want)
				}
			}
			if s.Flag != "" && !strings.Contains(row, "`--"+s.Flag+"`") {
				t.Errorf("docs/modes.md row of %s %q lacks its flag --%s", s.Key, row, s.Flag)
			}

			if s.Flag == "" {
				return // a session-only setting
			}
			// the flag: default and usage from the declaration.
			var o options
			fs := newFlagSet("run", &o)
			f := fs.Lookup(s.Flag)
			if f == nil {
				t.Fatalf("no flag --%s", s.Flag)
			}
			if f.Usage != s.Usage() {
				t.Errorf("--%s usage %q, declared %q", s.Flag, f.Usage, s.Usage())
			}
			if want := flagValue(s, s.Default()); !sameDefault(f, want) {
				t.Errorf("--%s default %q, declared %s", s.Flag, f.DefValue, want)
			}
			// the environment variable and the config file key set it.
			want := flagValue(s, ok)
			o = options{}
			fs = newFlagSet("run", &o)
			if err := parseOptions(fs, &o, nil, func(k string) string {
				if k == s.EnvVar() {
					return want
				}
				return ""
			}); err != nil {
				t.Fatal(err)
			}
			if got := fs.Lookup(s.Flag); !sameDefault(got, want) && got.Value.String() != want {
				t.Errorf("%s=%s: --%s is %s", s.EnvVar(), want, s.Flag, got.Value)
			}
			// ... and reaches the processor's configuration.
			cfg := processorConfig(&o, nil)
			pol := fold.Policy{Window: cfg.Window, Tokens: cfg.Tokens, Evict: cfg.Evict, Interval: cfg.Interval, MaskToolOutputsAfter: cfg.MaskToolOutputsAfter}
			if got := pol.Get(s.Key); got != ok {
				t.Errorf("%s=%s: the processor's configuration holds %v", s.EnvVar(), want, got)
			}
			file := filepath.Join(t.TempDir(), "c.json")
			body, _ := json.Marshal(map[string]any{s.Flag: json.RawMessage(jsonValue(s, ok))})
			if err := os.WriteFile(file, body, 0o600); err != nil {
				t.Fatal(err)
			}
			o = options{}
			fs = newFlagSet("run", &o)
			if err := parseOptions(fs, &o, []string{"--config", file}, func(string) string { return "" }); err != nil {
				t.Fatalf("config file %s: %v", body, err)
			}
			if got := fs.Lookup(s.Flag).Value.String(); !equalValues(got, want) {
				t.Errorf("config file %s: --%s is %s, want %s", body, s.Flag, got, want)
			}
		})
	}
	// Every numeric key of the schema's config is declared.
	for key := range schema {
		if !keys[key] {
			t.Errorf("schema/v1/control.json has config.%s with a range, which events.Settings does not declare", key)
		}
	}
}

// docsRow is the settings table's row of key in docs.
func docsRow(docs, key string) string {
	for _, line := range strings.Split(docs, "\n") {
		if strings.HasPrefix(line, "| `"+key+"` |") {
			return line
		}
	}
	return ""
}

// configProperties reads control.json's config properties.
func configProperties(t *testing.T) map[string]propertySchema {
	t.Helper()
	data, err := os.ReadFile("../../schema/v1/control.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Config struct {
				Properties map[string]propertySchema `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Properties.Config.Properties
}

// configDescriptions are the descriptions of control.json's config
// properties.
func configDescriptions(props map[string]propertySchema) map[string]string {
	out := map[string]string{}
	for k, p := range props {
		out[k] = p.Description
	}
	return out
}

// probe is a value in range and one out of it.
func probe(s events.Setting) (ok, bad float64) {
	switch {
	case s.Exclusive:
		return (s.Min + s.Max) / 2, s.Max
	case s.Min+1 <= s.Max:
		return s.Min + 1, s.Max + 1
	}
	return s.Min, s.Max + 1
}

func configure(t *testing.T, key string, v float64) *events.SessionConfig {
	t.Helper()
	var c events.SessionConfig
	if err := json.Unmarshal([]byte(fmt.Sprintf(`{%q: %s}`, key, strconv.FormatFloat(v, 'f', -1, 64))), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

func fieldIs(err error, field string) bool {
	ve, ok := events.AsValidation(err)
	return ok && ve.Field == field
}

// flagValue is v as the flag prints it: seconds as a duration.
func flagValue(s events.Setting, v float64) string {
	if s.Unit == events.Seconds {
		return (time.Duration(v) * time.Second).String()
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// jsonValue is v as a config file writes it: a duration as a string.
func jsonValue(s events.Setting, v float64) string {
	if s.Unit == events.Seconds {
		return strconv.Quote(flagValue(s, v))
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func equalValues(a, b string) bool {
	if a == b {
		return true
	}
	if d1, err := time.ParseDuration(a); err == nil {
		d2, err := time.ParseDuration(b)
		return err == nil && d1 == d2
	}
	x1, err1 := strconv.ParseFloat(a, 64)
	x2, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && x1 == x2
}

// schemaRange renders the set of values a declaration accepts, as
// schemaRanges renders the schema's.
func schemaRange(s events.Setting) string {
	lo, hi := "[", "]"
	if s.Exclusive {
		lo, hi = "(", ")"
	}
	r := fmt.Sprintf("%s%g,%g%s", lo, s.Min, s.Max, hi)
	if !s.ZeroIsValue && !(s.Min == 0 && !s.Exclusive) {
		r = "0 or " + r
	}
	return r
}

// configSchema reads the ranges of the numeric properties of
// control.json's config: {minimum, maximum}, or anyOf [{const 0},
// {minimum|exclusiveMinimum, maximum|exclusiveMaximum}]. An integer range
// 0..n is the same set as 0 or 1..n, and is rendered so.
func configSchema(props map[string]propertySchema) map[string]string {
	out := map[string]string{}
	for key, p := range props {
		if p.Type != "integer" && p.Type != "number" {
			continue
		}
		r := p
		zero := false
		for _, alt := range p.AnyOf {
			if alt.Const != nil && *alt.Const == 0 {
				zero = true
			} else {
				r = alt
			}
		}
		lo, hi, min, max := "[", "]", r.Minimum, r.Maximum
		if r.ExclusiveMinimum != nil {
			lo, min = "(", r.ExclusiveMinimum
		}
		if r.ExclusiveMaximum != nil {
			hi, max = ")", r.ExclusiveMaximum
		}
		if min == nil || max == nil {
			out[key] = "unbounded"
			continue
		}
		s := fmt.Sprintf("%s%g,%g%s", lo, *min, *max, hi)
		if zero {
			s = "0 or " + s
		}
		out[key] = s
	}
	return out
}

// propertySchema is one property of control.json's config: its description
// and, for a number, its range.
type propertySchema struct {
	Description      string           `json:"description"`
	Type             string           `json:"type"`
	Const            *float64         `json:"const"`
	Minimum          *float64         `json:"minimum"`
	Maximum          *float64         `json:"maximum"`
	ExclusiveMinimum *float64         `json:"exclusiveMinimum"`
	ExclusiveMaximum *float64         `json:"exclusiveMaximum"`
	AnyOf            []propertySchema `json:"anyOf"`
}

// Every registered mode (one file under internal/fold) reaches every
// surface without a line elsewhere: --mode's usage and the processor's
// configuration, a configure's validation, the generated schemas' enums
// (control's config.mode, the outbound events' mode) and the docs' modes
// table.
func TestEveryModeOnEverySurface(t *testing.T) {
	data, err := os.ReadFile("../../schema/v1/control.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Config struct {
				Properties struct {
					Mode struct {
						Enum []string `json:"enum"`
					} `json:"mode"`
				} `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	docs, err := os.ReadFile("../../docs/modes.md")
	if err != nil {
		t.Fatal(err)
	}
	var o options
	usage := newFlagSet("run", &o).Lookup("mode").Usage
	engines := fold.Engines()
	if len(engines) == 0 {
		t.Fatal("no modes registered")
	}
	for _, e := range engines {
		m := string(e.Name())
		if !strings.Contains(usage, m) {
			t.Errorf("--mode usage %q does not name mode %s", usage, m)
		}
		if err := (processor.Config{Mode: e.Name(), RecallEnabled: true}).Validate(); err != nil {
			t.Errorf("--mode %s: %v", m, err)
		}
		if err := (&events.SessionConfig{Mode: m}).Validate(); err != nil {
			t.Errorf("configure mode %s: %v", m, err)
		}
		if !slices.Contains(doc.Properties.Config.Properties.Mode.Enum, m) {
			t.Errorf("schema/v1/control.json: config.mode's enum %v lacks %s", doc.Properties.Config.Properties.Mode.Enum, m)
		}
		for _, f := range []string{"lifecycle.json", "summary-updated.json"} {
			if enum := outboundModes(t, f); !slices.Contains(enum, m) {
				t.Errorf("schema/v1/%s: mode's enum %v lacks %s", f, enum, m)
			}
		}
		row := docsRow(string(docs), m)
		if !strings.Contains(row, "mode_"+m+".go") || !strings.Contains(row, e.Doc().Summary) {
			t.Errorf("docs/modes.md has no modes table row for %s naming its file and doc: %q", m, row)
		}
	}
	if got, want := len(doc.Properties.Config.Properties.Mode.Enum), len(engines)+1; got != want {
		t.Errorf("config.mode's enum has %d values, want the %d modes and \"\"", got, want-1)
	}
}

// outboundModes is the enum of the mode property of an outbound event's
// schema.
func outboundModes(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile("../../schema/v1/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Mode struct {
				Enum []string `json:"enum"`
			} `json:"mode"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Properties.Mode.Enum
}

// --idle-after 0 turns idle folds off, as its usage says; by default they
// are on.
func TestIdleAfterZeroTurnsIdleFoldsOff(t *testing.T) {
	for args, off := range map[string]bool{"0": true, "": false} {
		var o options
		fs := newFlagSet("run", &o)
		var argv []string
		if args != "" {
			argv = []string{"--idle-after", args}
		}
		if err := parseOptions(fs, &o, argv, func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		if got := processorConfig(&o, nil).Tokens.IdleAfter; (got < 0) != off {
			t.Errorf("--idle-after %q: the processor's idle wait is %s, want off %v", args, got, off)
		}
	}
}

// Every setting has one range check (events.Setting.Check), and every
// surface calls it: a value out of a setting's declared range is refused
// by the processor's flag, a configure, the processor's configuration and
// the policy a session folds with, each naming the setting's key.
func TestEverySurfaceRefusesASettingOutOfRange(t *testing.T) {
	for _, s := range events.Settings {
		for _, bad := range outOfRange(s) {
			t.Run(fmt.Sprintf("%s=%v", s.Key, bad), func(t *testing.T) {
				if err := configure(t, s.Key, bad).Validate(); !fieldIs(err, "config."+s.Key) {
					t.Errorf("configure: %v, want it refused naming config.%s", err, s.Key)
				}
				if s.Flag != "" {
					var o options
					fs := newFlagSet("run", &o)
					if err := fs.Set(s.Flag, flagValue(s, bad)); !fieldIs(err, s.Key) {
						t.Errorf("--%s %s: %v, want it refused naming %s", s.Flag, flagValue(s, bad), err, s.Key)
					}
				}
				pol := fold.DefaultPolicy()
				if !pol.Apply(s.Key, bad) {
					return // read from the session's config (reset policy), not a policy
				}
				if s.Unit == events.Seconds && bad < 0 {
					return // a negative duration in a policy is off
				}
				if err := pol.Validate(); !fieldIs(err, s.Key) {
					t.Errorf("fold policy: %v, want it refused naming %s", err, s.Key)
				}
				cfg := processor.Config{Window: pol.Window, Tokens: pol.Tokens, Evict: pol.Evict, Interval: pol.Interval, MaskToolOutputsAfter: pol.MaskToolOutputsAfter}
				if err := cfg.Validate(); !fieldIs(err, s.Key) {
					t.Errorf("processor configuration: %v, want it refused naming %s", err, s.Key)
				}
			})
		}
	}
}

// 0 keeps the deployment's value in a configure; as the deployment's own
// value (flag, environment, config file) it is refused where it is not a
// value of the setting, naming the setting and its range, and accepted
// where it is.
func TestEverySettingFlagRefusesZeroWhereItIsNoValue(t *testing.T) {
	checked := 0
	for _, s := range events.Settings {
		if s.Flag == "" {
			continue
		}
		var o options
		err := newFlagSet("run", &o).Set(s.Flag, flagValue(s, 0))
		if s.ZeroIsValue || s.Default() == 0 || s.Unit == events.Seconds {
			if err != nil {
				t.Errorf("--%s 0: %v, want it accepted", s.Flag, err)
			}
			continue
		}
		checked++
		if !fieldIs(err, s.Key) || !strings.Contains(err.Error(), "expected ") || !strings.Contains(err.Error(), fmt.Sprintf("the default is %g", s.Default())) {
			t.Errorf("--%s 0: %v, want it refused naming %s, its range and its default", s.Flag, err, s.Key)
		}
	}
	if checked == 0 {
		t.Fatal("no setting refuses 0")
	}
}

// outOfRange are values just outside a setting's declared range, and a
// negative one.
func outOfRange(s events.Setting) []float64 {
	if s.Exclusive {
		return []float64{s.Min - 0.5, s.Max, s.Max + 0.5}
	}
	bad := []float64{-1, s.Max + 1}
	if s.Min > 1 {
		bad = append(bad, s.Min-1)
	}
	return bad
}
