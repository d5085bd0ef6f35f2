package service

import "testing"

// A question asks when by its first word "when", by "how long", or by
// "what" or "which" and a unit of the calendar; "when" inside a question
// is a conjunction.
func TestAsksWhen(t *testing.T) {
	for q, want := range map[string]bool{
		"When did Caroline go to the support group?":              true,
		"when's the tournament?":                                  true,
		"How long has Bob had his dog?":                           true,
		"Which day did they meet?":                                true,
		"What year did Alice move to Porto?":                      true,
		"In what months did they travel?":                         true,
		"What did the group say when discussing the budget?":      false,
		"What did Alice paint?":                                   false,
		"Who was there, and what did they decide about the date?": false,
		"": false,
	} {
		if got := asksWhen(q); got != want {
			t.Errorf("asksWhen(%q) = %v, want %v", q, got, want)
		}
	}
}
