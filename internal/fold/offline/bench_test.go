package offline

import (
	"context"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/fold"
)

// benchVoicePrev is a previous summary as this backend writes it mid-session
// (~1100 chars).
const benchVoicePrev = "Alice, Bob, Carol and Dave are talking about Marvel Rivals, Hulk and Tokyo 2099. " +
	"Alice suggested we queue ranked in Marvel Rivals tonight, we need 3 more wins for Diamond 3, and Bob and Carol agreed. " +
	"Bob keeps dying as Hulk on Tokyo 2099, their Hela deletes Bob every fight. " +
	"Carol asked Bob: maybe try Jeff the Land Shark instead? Bob said yes. " +
	"Dave said we agreed to stop at 11:30 pm because Dave has work at 8 tomorrow, and Alice agreed. " +
	"Carol prefers playing Luna Snow as the main healer. " +
	"Dave asked: Can someone remind me to send the tournament form by Friday? " +
	"Alice said our team name for the Saturday cup is Four Stack. " +
	"On Bob's screen: Bob is screen-sharing Marvel Rivals, playing Hulk on Tokyo 2099, 2 deaths in the first fight. " +
	"Bob said their Star-Lord keeps flanking. Dave said push left side. " +
	"Bob said the Jeff swap is working, Bob went 12 and 3 that game. " +
	"Bob said the enemy Hawkeye is cracked. Alice said they have a Magneto again. " +
	"Bob suggested we try dive comp with Spider-Man and Venom on Yggsgard, and Dave agreed. " +
	"Bob is gonna grab snacks after this. Alice's ping is high right now."

func benchVoiceRequest() fold.Request {
	at := time.Date(2026, 1, 10, 21, 0, 0, 0, time.UTC)
	lines := [][2]string{
		{"Carol", "I'll record the VODs to /home/carol/vods/ranked so we can review them on Sunday afternoon, okay?"},
		{"Dave", "yeah that works for me, but can someone remind me to send the tournament form before Friday night?"},
		{"Alice", "lol sure. Also the check-in link is https://example.gg/cup/4stack and it closes at 6 pm Saturday."},
		{"Bob", "honestly I think we should ban Hela next match, she just deletes our whole backline every single fight"},
		{"Carol", "hahaha yeah she does. I'm gonna swap to Luna Snow if Dave goes Mantis, we need more healing on Klyntar."},
		{"Dave", "ok fine, I'll play Mantis then. My ping is kinda high right now though, like 90 ms, so no promises lol"},
		{"Alice", "Bob, can you stream the Saturday cup on Twitch at 7 pm? My upload is too slow for 1080p these days."},
		{"Bob", "sure, I'll set up OBS tomorrow and test the stream with the new overlay before the first match starts"},
		{"Carol", "nice. wait, did anyone actually check whether Four Stack is still registered for the bracket on Saturday?"},
		{"Alice", "yes I did, we're seeded fourth out of sixteen teams and our first match is against Team Nebula at 7:30"},
	}
	ts := make([]fold.Turn, len(lines))
	for i, l := range lines {
		ts[i] = fold.Turn{Index: int64(200 + i), At: at.Add(time.Duration(i) * 12 * time.Second),
			Speaker: l[0], Role: "user", Text: l[1], Kind: "speech"}
	}
	return fold.Request{
		Session: "bench-voice", Profile: fold.ProfileVoice, PreviousSummary: benchVoicePrev, Turns: ts,
		Notes: []fold.Note{{At: at.Add(50 * time.Second), Source: "Carol",
			Text: "Carol is in hero select on Klyntar, choosing Luna Snow, with Dave on Mantis."}},
		MaxChars: 1200, From: ts[0].At, To: ts[len(ts)-1].At,
	}
}

const benchAgentPrev = "User and Assistant are working on internal/retry/retry.go, API and HTTP 510. " +
	"User asked: Add retry with backoff to internal/retry/retry.go. " +
	"User said only retry timeouts and 5xx, never 4xx, and said don't change the public API. " +
	"Assistant will read the current retry package first. " +
	"Assistant ran read_file (internal/retry/file0.go, internal/retry/file1.go, internal/retry/file2.go): ok. " +
	"Assistant said: Tests pass now. " +
	"Assistant ran read_file (internal/retry/file3.go, internal/retry/file4.go, internal/retry/file5.go and 1 more): ok. " +
	"Assistant ran read_file (internal/retry/file7.go, internal/retry/file8.go): ok. " +
	"Assistant ran read_file (internal/retry/file9.go): ok. " +
	"Assistant said: TestBackoff fails: the loop exits after the first error. " +
	"Assistant ran read_file (internal/retry/file10.go): ok. " +
	"Assistant updated the classifier to treat HTTP 510 as retryable. " +
	"Assistant ran bash (go test ./internal/retry/)."

func benchAgentRequest() fold.Request {
	ts := []fold.Turn{
		{Role: "tool", Kind: "tool_result", Tool: "bash", Text: "--- FAIL: TestBackoff (0.01s)\n    retry_test.go:40: want 3 attempts, got 1\nFAIL\nexit status 1"},
		{Role: "assistant", Text: "TestBackoff still fails: the loop returns on the first 503 instead of sleeping."},
		{Role: "assistant", Kind: "tool_call", Tool: "edit_file", Text: `{"path":"internal/retry/retry.go","old":"return err","new":"continue"}`},
		{Role: "tool", Kind: "tool_result", Tool: "edit_file", Text: "ok"},
		{Role: "assistant", Kind: "tool_call", Tool: "bash", Text: `{"command":"go test ./internal/retry/"}`},
		{Role: "tool", Kind: "tool_result", Tool: "bash", Text: "ok  \tgithub.com/foldstream/foldstream/internal/retry\t0.02s"},
		{Role: "assistant", Text: "Tests pass now. I fixed the loop so 5xx responses sleep with jittered backoff before retrying."},
		{Role: "user", Text: "Looks good. Next, add a Retry-After header test for 429 responses, and keep 4xx non-retryable."},
		{Role: "assistant", Text: "Next I will add TestRetryAfter429 in internal/retry/retry_test.go."},
		{Role: "assistant", Kind: "tool_call", Tool: "read_file", Text: `{"path":"internal/retry/retry_test.go"}`},
	}
	for i := range ts {
		ts[i].Index = int64(120 + i)
	}
	return fold.Request{Session: "bench-agent", Profile: fold.ProfileAgent, PreviousSummary: benchAgentPrev,
		Turns: ts, MaxChars: 1200}
}

// benchLong is an over-long summary (~2300 chars) for the recompaction pass.
const benchLong = "Alice, Bob, Carol and Dave are talking about Magneto, Marvel Rivals and Hulk. " +
	"Alice suggested we queue ranked in Marvel Rivals tonight, we need 3 more wins for Diamond 3, and Bob and Carol agreed. " +
	"Dave said we lost the point. Carol said that ult was insane. Bob said healing now. " +
	"Bob keeps dying as Hulk on Tokyo 2099, their Hela deletes Bob every fight. " +
	"Carol asked Bob: maybe try Jeff the Land Shark instead? Bob said yes. Carol said they're stacking tanks. " +
	"Dave said we agreed to stop at 11:30 pm because Dave has work at 8 tomorrow, and Alice agreed. " +
	"Bob is so tired of this point. Bob got a team kill. Carol prefers playing Luna Snow as the main healer. " +
	"Dave said this map is so long. Dave asked: Can someone remind me to send the tournament form by Friday? " +
	"Alice said watch the flank. Alice said our team name for the Saturday cup is Four Stack. Carol said love it. " +
	"On Bob's screen: Bob is screen-sharing Marvel Rivals, playing Hulk on Tokyo 2099, 2 deaths in the first fight. " +
	"Bob said they have a Magneto again, and needs a drink of water. " +
	"Bob said the Jeff swap is working, Bob went 12 and 3 that game. " +
	"Bob suggested we try dive comp with Spider-Man and Venom on Yggsgard, and Dave agreed. " +
	"Carol will record the VODs to /home/carol/vods/ranked so we can review them Sunday. " +
	"On Carol's screen: Scoreboard shows Carol with 14 kills as Luna Snow. " +
	"Dave asked: should we ban Hela next match? Alice said yes. " +
	"Alice said the tournament check-in link is https://example.gg/cup/4stack, check in before 6 pm Saturday. " +
	"Dave finally hit Diamond 3, thanks for carrying Dave. Alice said their Star-Lord keeps flanking. " +
	"Carol said we decided Bob plays Peni Parker next game and Dave swaps to Mantis. " +
	"Alice suggested we do one last match on Klyntar and then call it at 11:30, and Dave and Bob agreed. " +
	"Bob will stream the Saturday cup on Twitch at 7 pm. Dave asked Carol: can you send me the VOD from the Klyntar game? " +
	"On Alice's screen: Alice is in hero select choosing Invisible Woman. Carol is gonna grab snacks after this."

// benchSummarize folds req over and over. With state, every fold starts
// from the summary and state that folding req once left, as a session's
// next fold does; without, from req's previous summary read as prose (a
// checkpoint written before the state existed, once per session).
func benchSummarize(b *testing.B, req fold.Request, state bool) {
	s := New()
	ctx := context.Background()
	res, err := s.Summarize(ctx, req)
	if err != nil || res.Summary == "" || len(res.State) == 0 {
		b.Fatalf("setup: %q, %v", res.Summary, err)
	}
	if state {
		req.PreviousSummary, req.PreviousState = res.Summary, res.State
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Summarize(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSummarizeVoiceFold is a typical window-mode fold: 10 voice turns
// of ~110 chars, a ~1100-char previous summary and its state, and one
// screen note.
func BenchmarkSummarizeVoiceFold(b *testing.B) { benchSummarize(b, benchVoiceRequest(), true) }

// BenchmarkSummarizeAgentFold is a coding-agent fold: tool calls and
// results, instructions and progress reports.
func BenchmarkSummarizeAgentFold(b *testing.B) { benchSummarize(b, benchAgentRequest(), true) }

// BenchmarkSummarizeAgentFoldProse is BenchmarkSummarizeAgentFold with the
// previous summary read as prose on every fold.
func BenchmarkSummarizeAgentFoldProse(b *testing.B) { benchSummarize(b, benchAgentRequest(), false) }

// BenchmarkRecompact is the re-compaction pass on an over-long summary.
func BenchmarkRecompact(b *testing.B) {
	benchSummarize(b, fold.Request{Recompact: true, PreviousSummary: benchLong, MaxChars: 1200}, false)
}

// BenchmarkSummarizeRollingSession folds the synthetic session in batches of
// 10, each fold carrying the previous output forward as the engine does, so
// no two calls see the same previous summary. ns/op is per fold.
func BenchmarkSummarizeRollingSession(b *testing.B) {
	ts, notes := synthSession(7, 600)
	s := New()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	summary, cursor, ni := "", 0, 0
	var state []byte
	for b.Loop() {
		if cursor >= len(ts) {
			summary, state, cursor, ni = "", nil, 0, 0
		}
		batch := ts[cursor:min(cursor+10, len(ts))]
		var bn []fold.Note
		for ni < len(notes) && !notes[ni].At.After(batch[len(batch)-1].At) {
			bn = append(bn, notes[ni])
			ni++
		}
		res, err := s.Summarize(ctx, fold.Request{Profile: fold.ProfileVoice, PreviousSummary: summary, PreviousState: state,
			Turns: batch, Notes: bn, MaxChars: 1200})
		if err != nil {
			b.Fatal(err)
		}
		summary, state = res.Summary, res.State
		cursor += 10
	}
}
