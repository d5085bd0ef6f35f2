package offline_test

import (
	"context"
	"fmt"

	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/offline"
)

func Example() {
	s := offline.New()
	res, err := s.Summarize(context.Background(), fold.Request{
		Session:         "voice-42",
		Profile:         fold.ProfileVoice,
		PreviousSummary: "Alice and Bob are talking about Marvel Rivals. Alice asked Bob to join ranked at 9 pm.",
		Turns: []fold.Turn{
			{Speaker: "Alice", Role: "user", Text: "hey guys! lol"},
			{Speaker: "Alice", Role: "user", Text: "ok so let's try the new team comp on Tokyo 2099."},
			{Speaker: "Bob", Role: "user", Text: "yeah. I keep dying as Hulk though"},
			{Speaker: "Alice", Role: "user", Text: "maybe try Jeff the Land Shark?"},
			{Speaker: "Bob", Role: "user", Text: "sounds good"},
			{Speaker: "James", Role: "user", Text: "Clanky, what's the weather in Paris tomorrow?"},
			{Speaker: "Clanky", Role: "assistant", Text: "Light rain and 12 degrees in Paris tomorrow."},
			{Speaker: "Bob", Role: "user", Text: "haha nice"},
		},
		Notes: []fold.Note{
			{Source: "James", Text: "James is screen-sharing Marvel Rivals on Tokyo as Winter Soldier."},
		},
		MaxChars: 1200,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Model)
	fmt.Println(res.Summary)
	// Output:
	// offline
	// Alice, Bob, James and Clanky are talking about Marvel Rivals and Tokyo 2099. Alice asked Bob to join ranked at 9 pm. Alice suggested they try the new team comp on Tokyo 2099. Bob keeps dying as Hulk. Alice also asked: maybe try Jeff the Land Shark? Clanky said Light rain and 12 degrees in Paris tomorrow. On James's screen: James is screen-sharing Marvel Rivals on Tokyo as Winter Soldier.
}
