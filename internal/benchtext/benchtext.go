// Package benchtext holds the text of the ingest benchmark's turns, shared
// by cmd/bench's ingest section and the offline summarizer's benchmark of
// the same folds, so both measure the same workload.
package benchtext

// Lines returns what the ingest section's turns say, in turn: a voice
// session's talk (plans, questions, answers, asides, times and names),
// each line distinct (speaker, text), about as long as the bench's one
// repeated sentence on average, so that a fold summarizes ten different
// sentences as it does in a real session. The slice is the caller's.
func Lines() [][2]string { return append([][2]string(nil), lines[:]...) }

var lines = [...][2]string{
	{"Alice", "Let's try the new team comp on Tokyo tonight; Bob keeps dying as Hulk so maybe Jeff the land shark instead?"},
	{"Bob", "honestly I think we should ban Hela next match, she just deletes our whole backline every single fight"},
	{"Carol", "I'll record the VODs to /home/carol/vods/ranked so we can review them on Sunday afternoon, okay?"},
	{"Dave", "yeah that works for me, but can someone remind me to send the tournament form before Friday night?"},
	{"Alice", "sure. Also the check-in link is https://example.gg/cup/4stack and it closes at 6 pm on Saturday."},
	{"Carol", "hahaha yeah she does. I'm gonna swap to Luna Snow if Dave goes Mantis, we need more healing on Klyntar."},
	{"Dave", "ok fine, I'll play Mantis then. My ping is kinda high right now though, like 90 ms, so no promises"},
	{"Alice", "Bob, can you stream the Saturday cup on Twitch at 7 pm? My upload is too slow for 1080p these days."},
	{"Bob", "sure, I'll set up OBS tomorrow and test the stream with the new overlay before the first match starts"},
	{"Carol", "wait, did anyone actually check whether Four Stack is still registered for the bracket on Saturday?"},
	{"Alice", "yes I did, we're seeded fourth out of sixteen teams and our first match is against Team Nebula at 7:30"},
	{"Bob", "their Star-Lord keeps flanking us from the left side, somebody needs to peel for Carol when he dives"},
	{"Dave", "I can hold the point as Magneto if you two push the upper route, just call it when you see the tank"},
	{"Carol", "we lost the last two games on Yggsgard, so let's pick Tokyo 2099 or Klyntar if we get the choice"},
	{"Alice", "note for later: we agreed to stop at 11:30 pm tonight because Dave has work at 8 tomorrow morning at the office"},
	{"Bob", "I went 12 and 3 that game as Jeff the Land Shark, the swap is definitely working, thanks for the tip Alice"},
	{"Dave", "my headset keeps cutting out every few seconds, give me two minutes to plug in the spare one from the drawer"},
	{"Carol", "the enemy Hawkeye is cracked, he hit every headshot on me from the high ground near the bridge"},
	{"Alice", "how about we run dive comp with Spider-Man and Venom next round and see if it catches them off guard"},
	{"Bob", "I'm down for dive, but only if someone plays a real healer, I don't want to solo heal the whole match again"},
	{"Dave", "I finally hit Diamond 3 after that win, that's the rank I wanted before the season ends in March"},
	{"Carol", "can we do a short review of the Klyntar VOD on Sunday at 4? It should take about half an hour"},
	{"Alice", "Sunday at 4 is fine for me, I'll bring the notes and the comps from the last scrim against Team Nebula"},
	{"Bob", "remind me to buy the new battle pass on Friday, it's 10 dollars and it has the Venom skin I wanted"},
	{"Dave", "does anyone know if the patch on Thursday nerfs Hela? I read something about her damage falloff"},
	{"Carol", "the patch notes say her damage drops by 10 percent at long range, so she should be less oppressive"},
	{"Alice", "good, then we stop banning her and ban Hawkeye instead, he's been the real problem in every game all week"},
	{"Bob", "I'm gonna grab snacks before the next game, anyone want anything from the kitchen while I'm up?"},
	{"Dave", "grab me a water please, and the chips on the kitchen counter if there are any left over from yesterday"},
	{"Carol", "my screen shows 14 kills as Luna Snow this game, which is my best score since the season started"},
	{"Alice", "for the cup we should warm up at 6:30 with two quick games so nobody starts the bracket cold"},
	{"Bob", "I'll make the Discord event for the cup tonight and ping everyone an hour before the check-in closes"},
	{"Dave", "my brother might join as a sub if Carol can't make it on Saturday, he plays Peni Parker and Groot mostly"},
	{"Carol", "I should be there on time, but my train only gets in at 6:15, so the warm-up might be tight for me"},
	{"Alice", "then Dave's brother warms up with us and Carol takes over his slot once she's home and logged in"},
	{"Bob", "the Venom ult combo with Magneto worked twice in a row, we should practice it in customs this week"},
	{"Dave", "let me set up a custom lobby on Thursday evening, we can drill the combo for thirty minutes before ranked"},
	{"Carol", "the scoreboard says we're up 2 to 1 in the series, one more map and we take the whole thing tonight"},
	{"Alice", "careful on the last point, they always stack their ults there and wipe us if we group up too early"},
	{"Bob", "I'm low on health, falling back to the big health pack near the spawn door, cover me for a second"},
	{"Dave", "their healer is out of position on the right balcony, Carol can you snipe her from the roof?"},
	{"Carol", "got her, the healer is down, push now while the rest of them are waiting for the respawn timer"},
	{"Alice", "nice push everyone, that's the series, we play the winner of Team Comet on Saturday at 8 in the evening"},
	{"Bob", "Team Comet beat us last month with a triple support comp, we should have an answer ready for that"},
	{"Dave", "I think a triple tank front line could break triple support, worth testing in the custom on Thursday"},
	{"Carol", "let's write all of this into the shared team doc so we don't forget any of it before Saturday's cup"},
	{"Alice", "I'll update the team doc tonight with the new bans, the comps and the warm-up plan for Saturday"},
	{"Bob", "quick question, are we still using the old voice channel or the new one Dave made last week?"},
	{"Dave", "the new one, it has the push-to-talk bot and the match timer, the old one will be deleted on Monday"},
	{"Carol", "okay I'm heading off now, good games everyone, see you all on Thursday evening for the custom lobby"},
}
