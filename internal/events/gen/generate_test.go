package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
)

// The schema's settings and modes and the docs' tables are generated from
// the declarations; the committed files must be what the generator writes.
func TestGeneratedFilesAreCommitted(t *testing.T) {
	for rel, gen := range Generated {
		path := filepath.Join("..", "..", "..", rel)
		in, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out, err := gen(in)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !bytes.Equal(in, out) {
			t.Errorf("%s differs from what the declarations generate: run go generate ./internal/events", rel)
		}
	}
	if len(Generated) != 5 {
		t.Errorf("%d generated files, want settings_gen.go, control.json, lifecycle.json, summary-updated.json and docs/modes.md", len(Generated))
	}
}

// A range edited by hand in the schema, or a setting missing from it, is
// written back from the declaration.
func TestControlSchemaIsDerived(t *testing.T) {
	committed, err := os.ReadFile("../../../schema/v1/control.json")
	if err != nil {
		t.Fatal(err)
	}
	last := "reset_idle_minutes" // the schema's last property
	rangeEdit := regexp.MustCompile(`("recent_window": \{[^\n]*"maximum": )10000`)
	drop := regexp.MustCompile(`,\n *"` + last + `": \{[^\n]*\}`)
	if !rangeEdit.Match(committed) || !drop.Match(committed) {
		t.Fatalf("the test's edits do not apply to the schema")
	}
	edited := drop.ReplaceAll(rangeEdit.ReplaceAll(committed, []byte("${1}7")), nil)
	out, err := ControlSchema(edited)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, committed) {
		t.Errorf("regenerated schema differs from the declarations':\n%s", out)
	}
	if _, err := ControlSchema([]byte(`{"properties": {}}`)); err == nil {
		t.Error("a schema without config's properties was accepted")
	}
}

// Each mode's file lists the settings it reads; each is declared, and the
// declaration reports the mode among its readers.
func TestEveryModeSettingIsDeclared(t *testing.T) {
	for _, e := range fold.Engines() {
		for _, key := range e.Settings() {
			s, ok := events.SettingByKey(key)
			if !ok {
				t.Errorf("mode %s reads %q, which events.Settings does not declare", e.Name(), key)
				continue
			}
			if !slices.Contains(s.Modes(), string(e.Name())) {
				t.Errorf("setting %s: modes %v, want %s among them", key, s.Modes(), e.Name())
			}
		}
	}
}

// A configure accepts every registered mode and names the field for one
// that is not; the Go constants name registered modes.
func TestConfigureAcceptsEveryRegisteredMode(t *testing.T) {
	for _, m := range fold.ModeNames() {
		if err := (&events.SessionConfig{Mode: m}).Validate(); err != nil {
			t.Errorf("mode %s: %v", m, err)
		}
	}
	err := (&events.SessionConfig{Mode: "nope"}).Validate()
	if ve, ok := events.AsValidation(err); !ok || ve.Field != "config.mode" || !strings.Contains(err.Error(), strings.Join(fold.ModeNames(), ", ")) {
		t.Errorf("mode nope: %v, want config.mode refused listing the modes", err)
	}
	for _, m := range []string{events.ModeWindow, events.ModeEvict, events.ModeInterval, events.ModeTokens} {
		if _, ok := fold.Lookup(fold.Mode(m)); !ok {
			t.Errorf("events names mode %s, which is not registered", m)
		}
	}
}

// Every setting with a flag sets a field of the fold policy, what it
// applies is what it reads back, and its default is the policy's.
func TestEverySettingHasItsPolicyField(t *testing.T) {
	for _, s := range events.Settings {
		var p fold.Policy
		if p.Field(s.Key) == nil {
			if s.Flag != "" {
				t.Errorf("%s has flag --%s but no fold.Policy field for it to set", s.Key, s.Flag)
			}
			continue
		}
		v := s.Min + 1
		if s.Exclusive {
			v = (s.Min + s.Max) / 2
		}
		if !p.Apply(s.Key, v) || p.Get(s.Key) != v {
			t.Errorf("%s: applied %v, read back %v", s.Key, v, p.Get(s.Key))
		}
		if got, want := s.Default(), fold.DefaultPolicy().Get(s.Key); got != want {
			t.Errorf("%s: default %v, fold.DefaultPolicy holds %v: run go generate ./internal/events", s.Key, got, want)
		}
	}
}
