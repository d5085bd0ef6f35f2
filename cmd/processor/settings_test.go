package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// Every setting is declared once (events.Settings); this walks each one
// over every surface derived from it: configure validation, the flag (its
// default and usage), the environment variable and the config file key,
// the schema's range and the docs table. Where the processor applies a
// configured value is walked in internal/processor
// (TestEverySettingIsApplied).
func TestEverySettingOnEverySurface(t *testing.T) {
	schema := configSchema(t)
	docs, err := os.ReadFile("../../docs/modes.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docs), events.DocsTable()) {
		t.Errorf("docs/modes.md does not hold the settings table derived from events.Settings; put this between its settings markers:\n%s", events.DocsTable())
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

			// the schema's range is the declaration's.
			if got, want := schema[s.Key], schemaRange(s); got != want {
				t.Errorf("schema/v1/control.json %s: range %s, declared %s", s.Key, got, want)
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
			if want := flagValue(s, s.Default); !sameDefault(f, want) {
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
func configSchema(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../../schema/v1/control.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Config struct {
				Properties map[string]rangeSchema `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for key, p := range doc.Properties.Config.Properties {
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

type rangeSchema struct {
	Type             string        `json:"type"`
	Const            *float64      `json:"const"`
	Minimum          *float64      `json:"minimum"`
	Maximum          *float64      `json:"maximum"`
	ExclusiveMinimum *float64      `json:"exclusiveMinimum"`
	ExclusiveMaximum *float64      `json:"exclusiveMaximum"`
	AnyOf            []rangeSchema `json:"anyOf"`
}
