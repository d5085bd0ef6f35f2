package events

import (
	"testing"

	"github.com/foldstream/foldstream/internal/fold"
)

// Every setting with a flag sets a field of the fold policy, and what it
// applies is what it reads back.
func TestEverySettingHasItsPolicyField(t *testing.T) {
	for _, s := range Settings {
		if s.Field(&fold.Policy{}) == nil {
			if s.Flag != "" {
				t.Errorf("%s has flag --%s but no fold.Policy field for it to set", s.Key, s.Flag)
			}
			continue
		}
		v := s.Min + 1
		if s.Exclusive {
			v = (s.Min + s.Max) / 2
		}
		var p fold.Policy
		s.Apply(&p, v)
		if got := s.Get(p); got != v {
			t.Errorf("%s: applied %v, read back %v", s.Key, v, got)
		}
	}
}
