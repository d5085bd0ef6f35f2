package crashtest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/foldstream/foldstream/internal/state"
)

// The watcher reads checkpoints as the processor writes them, a
// summarizer's state compressed after the JSON included.
func TestWatcherReadsACompressedState(t *testing.T) {
	w := &Watcher{batch: 2, last: map[string]*state.Session{}, history: map[string][]string{}}
	s := state.New("s1")
	var st strings.Builder
	st.WriteString(`{"v":1,"open":[`)
	for i := range 60 {
		fmt.Fprintf(&st, `{"who":"Alice","text":"Alice and Bob planned match %d for Saturday","terms":["alic","bob","plan","match"]},`, i)
	}
	st.WriteString(`{}]}`)
	s.SummaryState = []byte(st.String())
	for v := range 3 {
		s.Version, s.Cursor, s.Total, s.Summary = uint64(v), int64(2*v), int64(2*v), fmt.Sprintf("summary %d", v)
		data, err := s.Encode(nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "\x00") {
			t.Fatalf("the state was not written compressed after the JSON: %q", data)
		}
		w.observe("s1", uint64(v+1), data)
	}
	if len(w.problems) != 0 || w.updates != 3 {
		t.Fatalf("%d updates, problems: %q", w.updates, w.problems)
	}
	if got := w.last["s1"]; got == nil || string(got.SummaryState) != st.String() {
		t.Fatal("the watcher did not keep the state it read")
	}
}
