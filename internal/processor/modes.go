package processor

import (
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
)

// maxPolicies bounds a shard's resolved per-session policies.
const maxPolicies = 4096

// resolve applies what the deployment imposes on every policy: without
// recall, a mode that needs it folds in the mode it names instead
// (fold.Policy.WithRecall; warned at start and at configure).
func (p *Processor) resolve(pol fold.Policy) fold.Policy { return pol.WithRecall(p.cfg.RecallEnabled) }

// withOverrides applies a session's configure op to the policy: each
// declared setting (events.Settings) the config sets, to its field.
func withOverrides(p fold.Policy, c *events.SessionConfig) fold.Policy {
	if c.Mode != "" {
		p.Mode = fold.Mode(c.Mode)
	}
	if c.ContextWindow > 0 {
		// A reserve set for the deployment's window is not one for this
		// window: unless the session sets its own, it follows the window.
		p.Tokens.ReserveTokens = 0
	}
	for _, s := range events.Settings {
		if v, set := s.Value(c); set {
			p.Apply(s.Key, v)
		}
	}
	return p
}

// checkConfigure refuses a configure op whose settings, merged with the
// deployment's policy pol, cannot work (e.g. a reserve above a smaller
// window).
func checkConfigure(pol fold.Policy, c *events.SessionConfig) error {
	if err := withOverrides(pol, c).Validate(); err != nil {
		return &events.ValidationError{Code: events.CodeInvalidField, Field: "config", Reason: err.Error() + " (with the deployment's defaults for the fields not set)"}
	}
	return nil
}

func (ls *live) unfoldedTokens() int { return ls.tokSum.Of(ls.s) }
