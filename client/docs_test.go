package client_test

import (
	"os"
	"regexp"
	"testing"
)

// docs/builders.md shows the example programs in full; they must be the
// files under client/examples/, which their own tests run.
func TestBuildersDocShowsTheExamplesVerbatim(t *testing.T) {
	doc, err := os.ReadFile("../docs/builders.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)<!-- file: (\\S+) -->\n```go\n(.*?)```\n").FindAllSubmatch(doc, -1)
	if len(blocks) != 2 {
		t.Fatalf("docs/builders.md has %d marked example blocks, want 2 (bot and builder)", len(blocks))
	}
	for _, b := range blocks {
		src, err := os.ReadFile("../" + string(b[1]))
		if err != nil {
			t.Fatalf("docs/builders.md shows %s: %v", b[1], err)
		}
		if string(src) != string(b[2]) {
			t.Errorf("docs/builders.md's copy of %s differs from the file: update the doc", b[1])
		}
	}
}
