package openai

import (
	"testing"

	"github.com/foldstream/foldstream/internal/fold"
)

// A memory is its speaker's when it opens with their name (the longest
// name that fits), from their turn that shares the most words with it;
// the same fact gets the same ID in every fold.
func TestMemoryItemsAttributed(t *testing.T) {
	turns := []fold.Turn{
		{TurnID: "t1", Speaker: "Anna Lee", Text: "I moved to Lisbon in March"},
		{TurnID: "t2", Speaker: "Anna", Text: "I love sushi"},
		{TurnID: "t3", Speaker: "Anna Lee", Text: "anyway, the weather is nice"},
	}
	got := memoryItems([]string{"Anna Lee moved to Lisbon in March.", "Anna loves sushi.", "Annabel is Anna's sister.", "The team meets on Fridays."}, turns)
	want := []struct{ speaker, turn string }{{"Anna Lee", "t1"}, {"Anna", "t2"}, {"", ""}, {"", ""}}
	if len(got) != len(want) {
		t.Fatalf("%d items, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Speaker != w.speaker || got[i].TurnID != w.turn || got[i].ID == "" {
			t.Errorf("item %d %q: speaker %q turn %q id %q, want %q, %q", i, got[i].Text, got[i].Speaker, got[i].TurnID, got[i].ID, w.speaker, w.turn)
		}
	}
	if again := memoryItems([]string{"Anna loves sushi."}, turns[1:2]); again[0].ID != got[1].ID {
		t.Errorf("the same fact got IDs %q and %q", got[1].ID, again[0].ID)
	}
}
