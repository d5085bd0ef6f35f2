package service

import (
	"testing"
	"time"
)

func TestResolveDates(t *testing.T) {
	said := time.Date(2023, 5, 8, 18, 30, 0, 0, time.UTC) // a Monday
	cases := map[string]string{
		"Alice moved to Lisbon last week.":           "Alice moved to Lisbon the week before 8 May 2023.",
		"Bob starts the new job next week":           "Bob starts the new job the week after 8 May 2023",
		"She ran a marathon yesterday!":              "She ran a marathon yesterday (7 May 2023)!",
		"Yesterday (7 May 2023) she ran.":            "Yesterday (7 May 2023) she ran.",
		"They met last Friday and again next Monday": "They met Friday 5 May 2023 and again Monday 15 May 2023",
		"He quit smoking last year.":                 "He quit smoking 2022.",
		"The exam is next month.":                    "The exam is June 2023.",
		"We hiked this morning.":                     "We hiked the morning of 8 May 2023.",
		"Camping this weekend":                       "Camping the weekend of 13 May 2023",
		"Nothing relative here; a weekly meeting.":   "Nothing relative here; a weekly meeting.",
	}
	for in, want := range cases {
		if got := resolveDates(in, said); got != want {
			t.Errorf("resolveDates(%q) = %q, want %q", in, got, want)
		}
	}
	if got := resolveDates("last week", time.Time{}); got != "last week" {
		t.Errorf("without a time: %q", got)
	}
}
