package events

import "testing"

func BenchmarkDecodeTurn(b *testing.B) {
	data := []byte(`{"v":1,"session":"sess-00042","turn_id":"sess-00042-17","at":"2026-11-22T20:00:17Z","speaker":"Alice","role":"user","text":"Let's try the new team comp on Tokyo tonight; Bob keeps dying as Hulk so maybe Jeff the land shark instead?"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeInbound(KindTurn, "sess-00042", data, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
