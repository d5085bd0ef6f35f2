package service

import (
	"regexp"
	"strings"
	"time"
)

// A memory is read later than it was said: "last week" in a fact stated
// on 8 May 2023 means the week before 8 May 2023, whenever the question
// is asked. resolveDates rewrites the relative times of a memory's text
// against when it was stated, unless the text already gives the date in
// brackets after them (as the offline summarizer writes it: "yesterday
// (7 May 2023)").

var relDate = regexp.MustCompile(`(?i)\b(?:(yesterday|today|tonight|tomorrow)|(last|next|this|coming) (week|month|year|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)|(this) (morning|afternoon|evening))\b`)

// dateLayout is how a resolved relative time gives its day.
const dateLayout = "2 Jan 2006"

// resolveDates is text with each relative time resolved against at (zero:
// text as it is).
func resolveDates(text string, at time.Time) string {
	if at.IsZero() || !relDate.MatchString(text) {
		return text
	}
	day := at.UTC()
	var b strings.Builder
	last := 0
	for _, m := range relDate.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[0], m[1]
		if strings.HasPrefix(text[end:], " (") {
			continue // already resolved
		}
		group := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return strings.ToLower(text[m[2*i]:m[2*i+1]])
		}
		var out string
		switch {
		case group(1) != "":
			out = resolveDay(text[start:end], group(1), day)
		case group(4) != "":
			out = "the " + group(5) + " of " + day.Format(dateLayout)
		default:
			out = resolveSpan(group(2), group(3), day)
		}
		b.WriteString(text[last:start])
		b.WriteString(out)
		last = end
	}
	b.WriteString(text[last:])
	return b.String()
}

// resolveDay is "yesterday (7 May 2023)" for word said on day.
func resolveDay(said, word string, day time.Time) string {
	d := day
	switch word {
	case "yesterday":
		d = day.AddDate(0, 0, -1)
	case "tomorrow":
		d = day.AddDate(0, 0, 1)
	}
	return said + " (" + d.Format(dateLayout) + ")"
}

var weekdayNames = map[string]time.Weekday{"sunday": time.Sunday, "monday": time.Monday, "tuesday": time.Tuesday,
	"wednesday": time.Wednesday, "thursday": time.Thursday, "friday": time.Friday, "saturday": time.Saturday}

// resolveSpan resolves "last week", "next Friday", "this month" … said on
// day: a week as "the week before/after/of <day>", a month or a year by
// name, a weekday (and a weekend, by its Saturday) by its date.
func resolveSpan(which, unit string, day time.Time) string {
	step := map[string]int{"last": -1, "next": 1, "coming": 1, "this": 0}[which]
	switch unit {
	case "week":
		return map[int]string{-1: "the week before ", 0: "the week of ", 1: "the week after "}[step] + day.Format(dateLayout)
	case "month":
		return day.AddDate(0, step, 1-day.Day()).Format("January 2006")
	case "year":
		return day.AddDate(step, 0, 0).Format("2006")
	}
	wd, ok := weekdayNames[unit]
	if unit == "weekend" {
		wd, ok = time.Saturday, true
	}
	if !ok {
		return which + " " + unit
	}
	diff := (int(wd) - int(day.Weekday()) + 7) % 7
	switch {
	case step > 0 && diff == 0:
		diff = 7
	case step < 0:
		diff -= 7
		if diff == 0 {
			diff = -7
		}
	}
	d := day.AddDate(0, 0, diff)
	if unit == "weekend" {
		return "the weekend of " + d.Format(dateLayout)
	}
	return d.Format("Monday ") + d.Format(dateLayout)
}
