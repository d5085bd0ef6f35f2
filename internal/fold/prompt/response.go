package prompt

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/fold"
)

var (
	memoriesOpenRe  = regexp.MustCompile(`(?i)<\s*memories\s*>`)
	memoriesCloseRe = regexp.MustCompile(`(?i)<\s*/\s*memories\s*>`)
	summaryRe       = regexp.MustCompile(`(?is)<\s*summary\s*>(.*?)(?:<\s*/\s*summary\s*>|$)`)
	bulletRe        = regexp.MustCompile(`^(?:[-*•]\s+|\d+[.)]\s+)`)
)

// ParseMemories splits a model answer into the summary and the durable
// facts of its optional <memories> block, one per line. A
// block left unclosed (output cut at max tokens) runs to the end. A
// <summary>…</summary> wrapper, which seed-004-style models like to add,
// is removed.
func ParseMemories(answer string) (summary string, memories []string) {
	var kept []string
	seen := map[string]bool{}
	rest := answer
	// Every block is removed: a fact block left in would be published as
	// part of the summary.
	for {
		loc := memoriesOpenRe.FindStringIndex(rest)
		if loc == nil {
			kept = append(kept, strings.TrimSpace(rest))
			break
		}
		kept = append(kept, strings.TrimSpace(rest[:loc[0]]))
		block, after := rest[loc[1]:], ""
		if c := memoriesCloseRe.FindStringIndex(block); c != nil {
			block, after = block[:c[0]], block[c[1]:]
		}
		for _, line := range strings.Split(block, "\n") {
			line = strings.TrimSpace(bulletRe.ReplaceAllString(strings.TrimSpace(line), ""))
			switch strings.ToLower(strings.Trim(line, "().")) {
			case "", "none", "n/a":
				continue
			}
			if !seen[line] {
				seen[line] = true
				memories = append(memories, line)
			}
		}
		rest = after
	}
	summary = strings.Join(kept, "\n")
	if m := summaryRe.FindStringSubmatch(summary); m != nil {
		summary = m[1]
	}
	return strings.TrimSpace(summary), memories
}

// echoWindow is the length of a verbatim instruction snippet that counts
// as echoing the prompt: long enough that a genuine summary does not
// contain it by chance. Windows overlap (echoStep) so that a partial copy
// of a long instruction line is caught too.
const (
	echoWindow = 40
	echoStep   = 10
)

// Echoes reports whether answer (to the prompt system+user rendered for
// req) repeats the prompt instead of summarizing it: it contains one of our
// fence tags, or verbatim a 40-char stretch of an instruction line. Session
// data — fenced blocks, and the request's turns, notes and previous summary
// wherever a custom template put them — is not instruction text: a summary
// legitimately repeats names and phrases from it.
func Echoes(answer string, req fold.Request, system, user string) bool {
	low := strings.ToLower(answer)
	for _, tag := range []string{TagTranscript, TagNotes, TagPrevious} {
		if strings.Contains(low, "<"+tag+">") || strings.Contains(low, "</"+tag+">") {
			return true
		}
	}
	prompt := system + "\n" + user
	d := newData(req)
	data := []string{d.PreviousSummary}
	for _, t := range d.Turns {
		data = append(data, t.Line, t.Text)
	}
	for _, n := range d.Notes {
		data = append(data, n.Line, n.Text)
	}
	for _, s := range data {
		if s != "" {
			prompt = strings.ReplaceAll(prompt, s, "\n")
		}
	}
	for _, line := range instructionLines(prompt) {
		r := []rune(line)
		for i := 0; i+echoWindow <= len(r); i += echoStep {
			if strings.Contains(answer, string(r[i:i+echoWindow])) {
				return true
			}
		}
	}
	return false
}

func instructionLines(prompt string) []string {
	var out []string
	inFence := ""
	for _, line := range strings.Split(prompt, "\n") {
		line = strings.TrimSpace(line)
		if inFence != "" {
			if line == "</"+inFence+">" {
				inFence = ""
			}
			continue
		}
		switch line {
		case "<" + TagTranscript + ">", "<" + TagNotes + ">", "<" + TagPrevious + ">":
			inFence = strings.Trim(line, "<>")
			continue
		}
		// Drop list markers so that "- Keep the newest…" also matches an
		// answer that reproduced the text without the marker.
		line = strings.TrimSpace(bulletRe.ReplaceAllString(line, ""))
		if utf8.RuneCountInString(line) >= echoWindow {
			out = append(out, line)
		}
	}
	return out
}
