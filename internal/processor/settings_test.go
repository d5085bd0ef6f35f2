package processor

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"testing"

	"github.com/foldstream/foldstream/internal/events"
)

// Every declared setting (events.Settings) a session configures reaches
// its policy: a configure with a value other than the deployment's changes
// the policy the session folds with. The other surfaces of each setting
// are walked in cmd/processor (TestEverySettingOnEverySurface).
func TestEverySettingIsApplied(t *testing.T) {
	base := Config{}.withDefaults().policy()
	// Read by the session's reset policy (state.Session.ResetDue) from
	// the checkpoint's config, not by the fold policy.
	byReset := map[string]bool{"reset_idle_minutes": true, "reset_hour": true}
	for _, s := range events.Settings {
		if byReset[s.Key] {
			continue
		}
		v := s.Min + 1
		if s.Exclusive {
			v = (s.Min + s.Max) / 2
		}
		var c events.SessionConfig
		if err := json.Unmarshal([]byte(fmt.Sprintf(`{%q: %s}`, s.Key, strconv.FormatFloat(v, 'f', -1, 64))), &c); err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("%s=%v: %v", s.Key, v, err)
		}
		if got := withOverrides(base, &c); reflect.DeepEqual(got, base) {
			t.Errorf("configure %s=%v left the session's policy as the deployment's", s.Key, v)
		}
	}
}
