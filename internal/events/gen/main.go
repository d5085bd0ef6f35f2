// Command gen writes what is derived from the declarations of
// internal/events (Settings) and the modes' files (internal/fold): the
// settings' and the mode's properties of schema/v1/control.json and the
// tables of docs/modes.md. Run it with go generate ./internal/events; a
// test of internal/events fails while a committed file differs from what
// it writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/foldstream/foldstream/internal/events"
)

func main() {
	schema := flag.String("schema", "", "path of schema/v1/control.json")
	docs := flag.String("docs", "", "path of docs/modes.md")
	flag.Parse()
	if *schema == "" || *docs == "" {
		fmt.Fprintln(os.Stderr, "gen: expected -schema and -docs")
		os.Exit(2)
	}
	for _, f := range []struct {
		path string
		gen  func([]byte) ([]byte, error)
	}{{*schema, events.ControlSchema}, {*docs, events.Docs}} {
		if err := rewrite(f.path, f.gen); err != nil {
			fmt.Fprintf(os.Stderr, "gen: %s: %v\n", f.path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string, gen func([]byte) ([]byte, error)) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := gen(in)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
