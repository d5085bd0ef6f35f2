package events

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/foldstream/foldstream/internal/fold"
)

// The schema's settings and modes and the docs' tables are generated from
// the declarations; the committed files must be what the generator writes.
func TestGeneratedFilesAreCommitted(t *testing.T) {
	for rel, gen := range Generated {
		path := filepath.Join("..", "..", rel)
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
	if len(Generated) != 4 {
		t.Errorf("%d generated files, want control.json, lifecycle.json, summary-updated.json and docs/modes.md", len(Generated))
	}
}

// A range edited by hand in the schema, or a setting missing from it, is
// written back from the declaration.
func TestControlSchemaIsDerived(t *testing.T) {
	committed, err := os.ReadFile("../../schema/v1/control.json")
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
			s, ok := SettingByKey(key)
			if !ok {
				t.Errorf("mode %s reads %q, which events.Settings does not declare", e.Name(), key)
				continue
			}
			if !strings.Contains(","+strings.Join(s.Modes(), ",")+",", ","+string(e.Name())+",") {
				t.Errorf("setting %s: modes %v, want %s among them", key, s.Modes(), e.Name())
			}
		}
	}
}

// A configure accepts every registered mode and names the field for one
// that is not.
func TestConfigureAcceptsEveryRegisteredMode(t *testing.T) {
	for _, m := range fold.ModeNames() {
		if err := (&SessionConfig{Mode: m}).Validate(); err != nil {
			t.Errorf("mode %s: %v", m, err)
		}
	}
	err := (&SessionConfig{Mode: "nope"}).Validate()
	if ve, ok := AsValidation(err); !ok || ve.Field != "config.mode" || !strings.Contains(err.Error(), strings.Join(fold.ModeNames(), ", ")) {
		t.Errorf("mode nope: %v, want config.mode refused listing the modes", err)
	}
}
