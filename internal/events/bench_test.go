package events

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func BenchmarkDecodeTurn(b *testing.B) {
	data := []byte(`{"v":1,"session":"sess-00042","turn_id":"sess-00042-17","at":"2026-11-22T20:00:17Z","speaker":"Alice","role":"user","text":"Let's try the new team comp on Tokyo tonight; Bob keeps dying as Hulk so maybe Jeff the land shark instead?"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeInbound(KindTurn, "sess-00042", data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeTurnLong decodes a turn of a paragraph's text (~600
// characters), where the string scan is most of the work.
func BenchmarkDecodeTurnLong(b *testing.B) {
	text := strings.Repeat("Bob keeps dying as Hulk on Tokyo, so tonight we try Jeff the land shark and a double-tank comp. ", 6)
	data := []byte(`{"v":1,"session":"sess-00042","turn_id":"sess-00042-17","at":"2026-11-22T20:00:17Z","speaker":"Alice","role":"user","text":"` + text + `"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeInbound(KindTurn, "sess-00042", data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

var benchLifecycle = Lifecycle{V: 1, Session: "sess-00042", Type: EventCompactionCompleted, At: time.Date(2026, 11, 25, 20, 1, 2, 300, time.UTC),
	FoldID: "3ScEFX2ABCDEFGHIJKLMNO", Trigger: "turn", Mode: "window", Cause: "window", Cursor: 60, TotalTurns: 71,
	OldCursor: 50, NewCursor: 60, CoveredThroughTurn: 59, SummaryChars: 96, Version: 6, Tier: "model", LatencyMS: 2, Model: "instant"}

// BenchmarkLifecycleEncode compares the processor's encoder with
// encoding/json on a compaction_completed event.
func BenchmarkLifecycleEncode(b *testing.B) {
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := benchLifecycle.AppendJSON(make([]byte, 0, 512)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&benchLifecycle); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchMemories is a fold's memories as the offline summarizer extracts
// them on the bench's text: five, each with its item.
var benchMemories = func() Memories {
	at := time.Date(2026, 11, 25, 20, 1, 2, 0, time.UTC)
	m := Memories{V: 1, Session: "sess-00042", Version: 3, FoldID: "NUID4242424242", Model: "offline", At: at}
	for i, text := range []string{"Carol's screen shows 14 kills as Luna Snow this game, her best score since the season started.",
		"Alice says they should warm up at 6:30 with two quick games before the bracket.",
		"Dave offered to set up a custom lobby on Thursday evening.",
		"They play the winner of Team Comet on Saturday at 8 in the evening.",
		"Team Comet beat them last month (October 2026) with a triple support comp."} {
		m.Memories = append(m.Memories, text)
		m.Items = append(m.Items, MemoryItem{ID: "m" + string(rune('a'+i)), Speaker: "Carol", Text: text, TurnID: "sess-00042-61", At: at})
	}
	return m
}()

// BenchmarkMemoriesEncode compares the processor's encoder with
// encoding/json on a fold's memories event.
func BenchmarkMemoriesEncode(b *testing.B) {
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := benchMemories.AppendJSON(make([]byte, 0, 2048)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&benchMemories); err != nil {
				b.Fatal(err)
			}
		}
	})
}
