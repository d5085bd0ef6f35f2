package contextsource_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/contextsource"
	"github.com/foldstream/foldstream/internal/events"
)

func TestValidateNamesTheField(t *testing.T) {
	good := contextsource.Source{Label: "Calendar", Subject: "ctx.calendar", Prompt: "Next 4 hours.", Timeout: 2 * time.Second}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	zero := good
	zero.Timeout = 0
	if err := zero.Validate(); err != nil || zero.EffectiveTimeout() != contextsource.DefaultTimeout {
		t.Errorf("zero timeout: %v, effective %s", err, zero.EffectiveTimeout())
	}
	for _, tc := range []struct {
		name  string
		edit  func(*contextsource.Source)
		field string
	}{
		{"missing label", func(s *contextsource.Source) { s.Label = "" }, "label"},
		{"blank label", func(s *contextsource.Source) { s.Label = "   " }, "label"},
		{"long label", func(s *contextsource.Source) { s.Label = strings.Repeat("é", 41) }, "label"},
		{"label with colon", func(s *contextsource.Source) { s.Label = "Mail: work" }, "label"},
		{"label with newline", func(s *contextsource.Source) { s.Label = "Mail\nwork" }, "label"},
		{"label padded", func(s *contextsource.Source) { s.Label = " Mail" }, "label"},
		{"label Conversation", func(s *contextsource.Source) { s.Label = "conversation" }, "label"},
		{"missing subject", func(s *contextsource.Source) { s.Subject = "" }, "subject"},
		{"wildcard *", func(s *contextsource.Source) { s.Subject = "ctx.*" }, "subject"},
		{"wildcard >", func(s *contextsource.Source) { s.Subject = "ctx.>" }, "subject"},
		{"empty token", func(s *contextsource.Source) { s.Subject = "ctx..calendar" }, "subject"},
		{"trailing dot", func(s *contextsource.Source) { s.Subject = "ctx.calendar." }, "subject"},
		{"space", func(s *contextsource.Source) { s.Subject = "ctx.my calendar" }, "subject"},
		{"long subject", func(s *contextsource.Source) { s.Subject = strings.Repeat("a", 257) }, "subject"},
		{"long prompt", func(s *contextsource.Source) { s.Prompt = strings.Repeat("a", 4097) }, "prompt"},
		{"negative timeout", func(s *contextsource.Source) { s.Timeout = -time.Second }, "timeout"},
		{"timeout over 30s", func(s *contextsource.Source) { s.Timeout = 31 * time.Second }, "timeout"},
	} {
		s := good
		tc.edit(&s)
		err := s.Validate()
		ve, ok := events.AsValidation(err)
		if !ok || ve.Field != tc.field {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.field)
		} else if !strings.Contains(err.Error(), `field "`+tc.field+`"`) {
			t.Errorf("%s: message %q does not name the field", tc.name, err)
		}
	}
	max := good
	max.Label, max.Timeout, max.Subject = strings.Repeat("é", 40), 30*time.Second, "$ctx.calendar-v2.eu_west"
	if err := max.Validate(); err != nil {
		t.Errorf("limits are inclusive: %v", err)
	}
}

func TestParseSources(t *testing.T) {
	srcs, err := contextsource.ParseSources([]byte(`[
		{"label":"Calendar","subject":"ctx.calendar","prompt":"Events and the next 4 hours.","timeout":"1500ms"},
		{"label":"Mail","subject":"ctx.mail","timeout":2.5},
		{"label":"Tasks","subject":"ctx.tasks"}
	]`))
	if err != nil {
		t.Fatal(err)
	}
	want := []contextsource.Source{
		{Label: "Calendar", Subject: "ctx.calendar", Prompt: "Events and the next 4 hours.", Timeout: 1500 * time.Millisecond},
		{Label: "Mail", Subject: "ctx.mail", Timeout: 2500 * time.Millisecond},
		{Label: "Tasks", Subject: "ctx.tasks", Timeout: contextsource.DefaultTimeout},
	}
	if len(srcs) != len(want) {
		t.Fatalf("got %+v", srcs)
	}
	for i := range want {
		if srcs[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, srcs[i], want[i])
		}
	}
	if srcs, err := contextsource.ParseSources([]byte("  ")); err != nil || srcs != nil {
		t.Errorf("blank: %v %v", srcs, err)
	}
	for _, tc := range []struct{ doc, want string }{
		{`{"label":"Calendar"}`, "expected a JSON array"},
		{`[{"label":"Calendar","subject":"ctx.calendar","subjet":"x"}]`, `[0]: field "subjet": not a field of a context source; expected label, subject, prompt or timeout`},
		{`[{"label":"Calendar","subject":7}]`, `[0]: field "subject": expected a JSON string, got number`},
		{`[{"label":"Calendar","subject":"ctx.calendar"},{"label":"Mail","subject":"ctx.*"}]`, `[1]: field "subject"`},
		{`[{"label":"Calendar","subject":"ctx.calendar","timeout":"soon"}]`, `[0]: field "timeout"`},
		{`[{"label":"Calendar","subject":"ctx.calendar","timeout":"1m"}]`, `[0]: field "timeout"`},
		{`[{"label":"Calendar","subject":"ctx.a"},{"label":"calendar","subject":"ctx.b"}]`, `[1]: field "label"`},
		{`[{"subject":"ctx.a"}]`, `[0]: field "label"`},
	} {
		if _, err := contextsource.ParseSources([]byte(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.doc, err, tc.want)
		}
	}
}

// The same value works as a flag, an environment variable or a config
// setting: a JSON array, or the path of a file holding one.
func TestSourcesFlag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sources.json")
	if err := os.WriteFile(path, []byte(`[{"label":"Mail","subject":"ctx.mail"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, arg := range []string{`[{"label":"Mail","subject":"ctx.mail"}]`, path} {
		var srcs contextsource.Sources
		fs := flag.NewFlagSet("processor", flag.ContinueOnError)
		fs.Var(&srcs, "context-sources", "context sources")
		if err := fs.Parse([]string{"--context-sources", arg}); err != nil {
			t.Fatal(err)
		}
		if len(srcs) != 1 || srcs[0].Label != "Mail" || srcs[0].Timeout != contextsource.DefaultTimeout {
			t.Errorf("%s: %+v", arg, srcs)
		}
		// String round-trips through Set.
		var again contextsource.Sources
		if err := again.Set(srcs.String()); err != nil || len(again) != 1 || again[0] != srcs[0] {
			t.Errorf("String %q → %+v, %v", srcs.String(), again, err)
		}
	}
	var srcs contextsource.Sources
	if err := srcs.Set(filepath.Join(t.TempDir(), "missing.json")); err == nil || !strings.Contains(err.Error(), "JSON array or the path") {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte(`[{"label":"Mail"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := srcs.Set(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `field "subject"`) {
		t.Errorf("bad file: %v", err)
	}
	if srcs.String() != "" {
		t.Errorf("empty String: %q", srcs.String())
	}
}
