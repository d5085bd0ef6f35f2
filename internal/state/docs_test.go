package state

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// The docs state the dedup memories' sizes the code has: "the last N
// turn ids" and "the last N facts".
func TestDocsStateTheDedupSizes(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../../README.md")
	checks := []struct {
		re   *regexp.Regexp
		want int
	}{
		{regexp.MustCompile(`last (\d+)\s+turn ids`), maxRecentIDs},
		{regexp.MustCompile(`last (\d+)\s+facts`), maxMemoryIDs},
	}
	found := make([]int, len(checks))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range checks {
			for _, m := range c.re.FindAllSubmatch(data, -1) {
				found[i]++
				if n, _ := strconv.Atoi(string(m[1])); n != c.want {
					t.Errorf("%s: %q, but the code keeps %d", f, m[0], c.want)
				}
			}
		}
	}
	for i, c := range checks {
		if found[i] == 0 {
			t.Errorf("no doc says %q any more: update this test", c.re)
		}
	}
}
