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
