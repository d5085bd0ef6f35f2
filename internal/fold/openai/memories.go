package openai

import (
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/speaker"
)

// memoryItems are the model's memories with where they came from: a
// memory that opens with the name of one of the batch's speakers ("Bob
// mains Hulk") is that speaker's, from the turn of theirs that shares the
// most words with it (the latest on a tie); any other memory has neither
// speaker nor turn. The ID depends on the speaker and the text alone, so
// that the same fact gets the same ID in a later fold.
func memoryItems(memories []string, turns []fold.Turn) []fold.Memory {
	if len(memories) == 0 {
		return nil
	}
	var names []string
	for _, t := range turns {
		if n := speaker.Name(strings.TrimSpace(t.Speaker)); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	// "Anna Lee" before "Anna"
	slices.SortStableFunc(names, func(a, b string) int { return len(b) - len(a) })
	out := make([]fold.Memory, 0, len(memories))
	for _, text := range memories {
		m := fold.Memory{Text: text}
		for _, n := range names {
			if rest, ok := strings.CutPrefix(text, n); ok && (rest == "" || strings.IndexFunc(rest[:1], unicode.IsLetter) < 0) {
				m.Speaker = n
				break
			}
		}
		if m.Speaker != "" {
			words := contentWords(text)
			best := -1
			for i, t := range turns {
				if speaker.Name(strings.TrimSpace(t.Speaker)) != m.Speaker {
					continue
				}
				if n := sharedWords(words, t.Text); best < 0 || n >= sharedWords(words, turns[best].Text) {
					best = i
				}
			}
			if best >= 0 {
				m.TurnID, m.At = turns[best].TurnID, turns[best].At
			}
		}
		h := fnv.New64a()
		h.Write([]byte(m.Speaker + "\x00" + strings.ToLower(text)))
		m.ID = "m" + strconv.FormatUint(h.Sum64()&0xffffffffffff, 16)
		out = append(out, m)
	}
	return out
}

// contentWords are the lower-cased words of s longer than three letters.
func contentWords(s string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if len([]rune(w)) > 3 && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// sharedWords counts the words of ws that s has.
func sharedWords(ws []string, s string) int {
	have := contentWords(s)
	n := 0
	for _, w := range ws {
		if slices.Contains(have, w) {
			n++
		}
	}
	return n
}
