// Command gen writes what is derived from the declarations of
// internal/events (Settings) and the modes' files (internal/fold): what
// the wire contract needs of the modes (internal/events/settings_gen.go),
// the settings' and the modes' properties of the v1 schemas and the
// tables of docs/modes.md (Generated). Run it with go generate
// ./internal/events (make generate); its test fails while a committed
// file differs from what it writes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

func main() {
	root := flag.String("root", ".", "the repository's root directory")
	flag.Parse()
	for rel, gen := range Generated {
		path := filepath.Join(*root, rel)
		if err := rewrite(path, gen); err != nil {
			fmt.Fprintf(os.Stderr, "gen: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}

func rewrite(path string, gen func([]byte) ([]byte, error)) error {
	in, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := gen(in)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
