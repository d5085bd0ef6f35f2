package offline

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// bareList finds a sentence of s that lists more than four bare nouns:
// single lower-case words in a run of ", " / " and " separated items
// ("they discussed overwatch, rusty, snacks, maps and leaving").
func bareList(s string) (string, bool) {
	for _, sent := range splitSentences(s) {
		items := strings.Split(strings.ReplaceAll(strings.TrimRight(sent, ".!?"), " and ", ", "), ", ")
		run := 0
		for i, it := range items {
			// A segment of one word is an item; a longer one ends the run,
			// and its last word may start the next one ("Tomás and Lena
			// discussed overwatch, rusty, …"), unless it is the last
			// segment ("…, snacks and the maps app").
			fs := strings.Fields(it)
			w := ""
			switch {
			case len(fs) == 1:
				w = fs[0]
			case len(fs) > 1 && i < len(items)-1:
				run = 0
				w = fs[len(fs)-1]
			}
			r, _ := utf8.DecodeRuneInString(w)
			if w != "" && unicode.IsLower(r) && !strings.ContainsAny(w, "0123456789$") {
				run++
				if run > 4 {
					return sent, true
				}
			} else {
				run = 0
			}
		}
	}
	return "", false
}

func TestBareList(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"Until 00:25, Tomás and Lena discussed overwatch, rusty, snacks, maps and leaving.", true},
		{"They talked about knives, forks, spoons, plates and cups. Then they left.", true},
		{"Alice, Bob, Carol, Dave and Eve are talking about the venue in Lisbon and catering.", false},
		{"From 14:02 to 14:20, Alice and Bob talked about the venue, the maps app and hotel rooms.", false},
		{"Bob said red, green, blue and white are fine.", false},
	} {
		if _, got := bareList(c.s); got != c.want {
			t.Errorf("bareList(%q) = %v, want %v", c.s, got, c.want)
		}
	}
}

// No summary of the demo, voice, agent or synthetic sessions has a
// sentence that is a list of more than four bare nouns.
func TestNoBareNounLists(t *testing.T) {
	_, vv, _ := voiceReplay(t)
	_, av, _ := agentReplay(t)
	all := append(vv, av...)
	ts, ns := demoSession(3, 240)
	all = append(all, rollingFold(t, New(), ts, ns, 10, 1200)...)
	ts, ns = synthSession(5, 300)
	all = append(all, rollingFold(t, New(), ts, ns, 10, 1200)...)
	for i, v := range all {
		if s, ok := bareList(v); ok {
			t.Errorf("summary %d lists bare nouns: %q\n%s", i+1, s, v)
		}
	}
}

// composed are the sentences of s that the summarizer composes itself (the
// opening and period lines), not the statements it reports.
func composed(s string) string {
	var out []string
	for _, sent := range splitSentences(s) {
		if strings.Contains(sent, " talking about ") || strings.Contains(sent, " talked about ") || strings.Contains(sent, " working on ") {
			out = append(out, sent)
		}
	}
	return strings.Join(out, " ")
}
