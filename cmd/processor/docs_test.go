package main

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/fold/prompt"
)

// The README's settings table states the defaults the flags have: each
// row "| `--a`, `--b` | da, db | …" whose default is a plain number,
// duration or word is checked against the flag set.
func TestReadmeFlagDefaultsMatchTheFlags(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var o options
	fs := newFlagSet("run", &o)
	checked := 0
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 4 {
			continue
		}
		names := strings.Split(cols[1], ",")
		defs := strings.Split(cols[2], ",")
		if len(names) != len(defs) {
			continue // "(embedded)", "20% of the window, 10": prose, not values
		}
		for i, n := range names {
			name := strings.TrimPrefix(strings.Trim(strings.TrimSpace(n), "`"), "--")
			f := fs.Lookup(name)
			if f == nil {
				t.Errorf("README documents --%s, which the processor does not have", name)
				continue
			}
			doc := strings.Trim(strings.TrimSpace(defs[i]), "`")
			if name == "summarizer" && doc == "when" {
				continue // the summarizers table's header
			}
			if doc == "none" && f.DefValue == "" {
				continue
			}
			if doc == "" || strings.ContainsAny(doc, "(+%") || strings.Contains(doc, " ") {
				continue // "0 (off)", "+15s", "host name + random": prose
			}
			if !sameDefault(f, doc) {
				t.Errorf("README says --%s defaults to %q; the flag's default is %q", name, doc, f.DefValue)
			}
			checked++
		}
	}
	if checked < 20 {
		t.Errorf("only %d defaults checked: has the table's format changed?", checked)
	}
}

func sameDefault(f *flag.Flag, doc string) bool {
	if doc == f.DefValue {
		return true
	}
	if d1, err := time.ParseDuration(doc); err == nil {
		d2, err := time.ParseDuration(f.DefValue)
		return err == nil && d1 == d2
	}
	if x1, err := strconv.ParseFloat(doc, 64); err == nil {
		x2, err := strconv.ParseFloat(f.DefValue, 64)
		return err == nil && x1 == x2
	}
	return false
}

// The README's config file example, which replaces a prompt template, is
// accepted as printed: its keys are flags and its template renders the
// turns.
func TestReadmeConfigExampleLoads(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "Replace any template from the config file:\n\n```json\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("README: no config file example after \"Replace any template from the config file:\"")
	}
	file := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(file, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	var o options
	if err := parseOptions(newFlagSet("run", &o), &o, []string{"--config", file}, func(string) string { return "" }); err != nil {
		t.Fatalf("README's config example: %v", err)
	}
	if len(o.prompts) == 0 {
		t.Fatal("README's config example replaces no template")
	}
	if _, err := prompt.Load(o.prompts); err != nil {
		t.Errorf("README's config example: %v", err)
	}
}
