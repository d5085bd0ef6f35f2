// Package demo is the bot behind "processor demo": it publishes a scripted
// voice-channel conversation to foldstream and prints the summary updates
// that come back, so one command shows the whole loop working. The
// conversation generator is exported for tests and the README example.
package demo

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
)

// turnSpacing is how far apart consecutive turns are in "at": a voice
// channel's pace, so summaries show realistic time ranges.
const turnSpacing = 10 * time.Second

// conversationStart is the fixed "at" of turn 0. Run shifts everything to
// the wall clock; a fixed base here keeps Conversation deterministic.
func conversationStart() time.Time { return time.Date(2026, 5, 2, 19, 30, 0, 0, time.UTC) }

// game is one game the friends may be playing tonight.
type game struct {
	name  string
	maps  []string
	roles [3]string
	site  string
}

type trip struct {
	place, lodging string
	price          int
	temp           int
}

// cast is everything the seed decides once: who is talking, what they play
// and where they are going. Conversation and Notes derive it the same way so
// that the notes talk about the same people and places as the turns.
type cast struct {
	people [4]string // 0 organises, 1 drives, 2 asks questions, 3 jokes
	bot    string
	game   game
	trip   trip
	date   string
	pet    string
}

// speaker indexes into cast.people; botSpeaker is the voice assistant,
// anyone picks a random person other than the previous speaker.
const (
	botSpeaker = 4
	anyone     = -1
)

type line struct {
	who  int
	text string
}

var (
	firstNames = []string{"Alice", "Marco", "Priya", "Jonas", "Keiko", "Dev", "Sam", "Lena", "Tomás", "Ifeoma"}
	botNames   = []string{"Juniper", "Echo", "Pip"}
	games      = []game{
		{"Valorant", []string{"Ascent", "Lotus", "Split", "Haven"}, [3]string{"duelist", "controller", "sentinel"}, "B site"},
		{"Overwatch 2", []string{"King's Row", "Circuit Royal", "Numbani", "Ilios"}, [3]string{"tank", "DPS", "support"}, "the first point"},
	}
	trips = []trip{
		{"Lake Tahoe", "cabin", 240, 24},
		{"Joshua Tree", "desert house", 190, 27},
		{"Mount Hood", "lodge", 310, 18},
		{"Santa Cruz", "beach house", 280, 23},
	}
	tripDates = []string{"Saturday, May 16", "Saturday, June 6", "Saturday, June 13", "Saturday, September 19"}
	pets      = []string{"Biscuit", "Mochi", "Pepper"}

	// fillers carry no content: backchannels, laughter, reactions. The
	// summarizer should drop them, which is part of what the demo shows.
	fillers = []string{"lol", "haha", "hahaha", "yeah", "mm-hm", "right", "ok", "true", "wait what", "no way",
		"lmao", "yep", "sure", "nice", "oh no", "one sec", "uh huh", "oh nice", "same"}
)

// Scripted parts, in the order they happen. Placeholders are filled from
// the cast: {A}..{D} people, {bot}, {game}, {map}, {map2}, {role0..2},
// {site}, {place}, {lodging}, {date}, {price}, {each}, {pet}, {temp}.
var (
	intro = []line{
		{0, "hey, can everyone hear me?"},
		{1, "yep, loud and clear"},
		{3, "sorry, grabbing snacks, my pizza gets here in 20 minutes. what are we playing tonight?"},
		{0, "{game}? we never finished the ranked grind last week"},
		{2, "fine by me, but I'm rusty, I haven't played since Tuesday"},
		{3, "{C} you're always rusty"},
		{2, "rude. accurate, but rude"},
	}
	setup = []line{
		{0, "queue popped, we got {map}"},
		{1, "ugh, {map} again. I'll play {role0} then"},
		{2, "can someone else take {role2} this time? I did it all of last night"},
		{3, "fine, I'll do {role2}. {C}, you take {role1}"},
		{0, "plan for this one: we group up and push {site} together, no solo flanks"},
		{1, "agreed, and we save ultimates for the second fight"},
		{3, "update on my pizza: it's 45 minutes now, they're slammed"},
		{botSpeaker, "Quick tip: on {map}, the route to {site} has the shortest rotation from your spawn."},
		{3, "thanks {bot}, very helpful as always"},
	}
	tripPlan = []line{
		{0, "ok while we wait for the next match: the trip. are we still doing {place} on {date}?"},
		{1, "I'm in. I can drive, my car fits four plus the bags"},
		{2, "how much was the {lodging} per night again?"},
		{0, "about ${price} a night, so roughly ${each} each for two nights"},
		{3, "does the {lodging} allow dogs? otherwise I need someone to watch {pet}"},
		{0, "no idea, the listing doesn't say. I'll message the host"},
		{2, "what time do we leave on Saturday?"},
		{1, "let's say 8 am from my place, to beat the traffic"},
		{3, "8 am on a Saturday should be illegal"},
		{0, "ok, decided: {place}, {date}, leaving 8 am from {B}'s place. I'll book the {lodging} tonight"},
		{2, "one thing nobody answered: who's bringing the grill? I don't think the {lodging} has one"},
		{botSpeaker, "The forecast for {place} on {date} is sunny with a high around {temp} degrees."},
		{1, "perfect, hiking on Sunday then"},
		{0, "everyone send me ${each} by Wednesday so I can pay the deposit"},
	}
	secondMap = []line{
		{0, "next map is {map2}"},
		{3, "finally, I love {map2}"},
		{1, "same plan? group up and push {site}"},
		{2, "yes, but let's not waste ultimates in the first fight this time"},
	}
	// action lines are game chatter; {X} is a random other player.
	actions = []string{
		"{X} is flanking left, watch out",
		"I'm low, falling back",
		"nice shot {X}!",
		"they're stacking {site} again",
		"why did nobody follow me in?",
		"I had him, I swear I had him",
		"ok reset, reset, group up",
		"that was so close, one more second and we had it",
		"rotate, they're going the other way",
		"someone cover me, I'm reviving {X}",
		"{X}, use your ultimate now",
		"I'm out of ammo, anyone got some?",
	}
	// callbacks come back to the plan and small talk between rounds late
	// in a long session, so later folds still have something to keep.
	callbacks = [][]line{
		{{3, "did the host ever answer about dogs?"}, {0, "not yet, I'll ping them again tomorrow"}},
		{{2, "should we bring board games for the {lodging}?"}, {1, "yes, I'll bring Codenames"}},
		{{1, "is anyone else's ping terrible right now?"}, {2, "mine's fine, it's your wifi"}},
		{{2, "wait, are we staying Saturday to Monday?"}, {0, "yes, two nights, checkout Monday at 11"}},
		{{3, "{A}, did you actually book the {lodging}?"}, {0, "booked! confirmation is in the group chat"}},
		{{2, "still no answer on the grill by the way"}, {3, "I can borrow my neighbour's, maybe"}},
		{{botSpeaker, "Reminder: {A} asked everyone to send ${each} by Wednesday."}, {3, "yes yes, sending it now"}},
	}
	wrap = []line{
		{0, "last game for me, I have work tomorrow"},
		{3, "gg everyone, {C} carried"},
		{2, "I did not carry, I died nine times"},
		{0, "reminder: ${each} by Wednesday, and somebody figure out the grill"},
		{1, "night all, see you on {date}"},
	}
)

func newCast(seed int64) cast {
	r := rand.New(rand.NewPCG(uint64(seed), 0xca57))
	perm := r.Perm(len(firstNames))
	var c cast
	for i := range c.people {
		c.people[i] = firstNames[perm[i]]
	}
	c.bot = botNames[r.IntN(len(botNames))]
	c.game = games[r.IntN(len(games))]
	mp := r.Perm(len(c.game.maps))
	c.game.maps = []string{c.game.maps[mp[0]], c.game.maps[mp[1]], c.game.maps[mp[2]], c.game.maps[mp[3]]}
	c.trip = trips[r.IntN(len(trips))]
	c.date = tripDates[r.IntN(len(tripDates))]
	c.pet = pets[r.IntN(len(pets))]
	return c
}

func (c *cast) fill(s string) string {
	return strings.NewReplacer(
		"{A}", c.people[0], "{B}", c.people[1], "{C}", c.people[2], "{D}", c.people[3], "{bot}", c.bot,
		"{game}", c.game.name, "{map}", c.game.maps[0], "{map2}", c.game.maps[1],
		"{role0}", c.game.roles[0], "{role1}", c.game.roles[1], "{role2}", c.game.roles[2], "{site}", c.game.site,
		"{place}", c.trip.place, "{lodging}", c.trip.lodging, "{date}", c.date, "{pet}", c.pet,
		"{price}", fmt.Sprint(c.trip.price), "{each}", fmt.Sprint(c.trip.price*2/4), "{temp}", fmt.Sprint(c.trip.temp),
	).Replace(s)
}

// generator appends turns until it has n.
type generator struct {
	r     *rand.Rand
	c     cast
	n     int
	turns []events.Turn
	prev  int // previous speaker, to avoid anyone talking twice in a row by chance
}

func (g *generator) full() bool { return len(g.turns) >= g.n }

func (g *generator) other(not int) int {
	for {
		if p := g.r.IntN(4); p != not {
			return p
		}
	}
}

func (g *generator) add(who int, text string) {
	if g.full() {
		return
	}
	i := len(g.turns)
	name, role := g.c.bot, "assistant"
	if who != botSpeaker {
		name, role = g.c.people[who], "user"
	}
	jitter := time.Duration(g.r.IntN(3000)) * time.Millisecond
	g.turns = append(g.turns, events.Turn{
		V:       events.Version,
		TurnID:  fmt.Sprintf("t%04d", i),
		At:      conversationStart().Add(time.Duration(i)*turnSpacing + jitter),
		Speaker: name,
		Role:    role,
		Text:    text,
		Kind:    "speech",
	})
	g.prev = who
}

// say adds a substantive line, sometimes preceded by someone's filler, the
// way a real voice channel interleaves "lol" and "yeah" with content.
func (g *generator) say(l line) {
	who := l.who
	if who == anyone {
		who = g.other(g.prev)
	}
	if who != botSpeaker && g.r.IntN(10) < 3 {
		// Someone other than the previous and the next speaker reacts.
		f := g.other(who)
		for f == g.prev {
			f = g.other(who)
		}
		g.add(f, fillers[g.r.IntN(len(fillers))])
	}
	text := g.c.fill(l.text)
	if strings.Contains(text, "{X}") {
		text = strings.ReplaceAll(text, "{X}", g.c.people[g.other(who)])
	}
	g.add(who, text)
}

func (g *generator) script(ls []line) {
	for _, l := range ls {
		g.say(l)
	}
}

// round plays k lines of game chatter and ends with the score.
func (g *generator) round(k int, us, them *int) {
	for range k {
		g.say(line{anyone, actions[g.r.IntN(len(actions))]})
	}
	if g.r.IntN(3) > 0 {
		*us++
		g.say(line{anyone, fmt.Sprintf("round won! that's %d-%d", *us, *them)})
	} else {
		*them++
		g.say(line{anyone, fmt.Sprintf("we lost that one, %d-%d now", *us, *them)})
	}
}

// Conversation returns n turns of four friends in a voice channel playing a
// game and planning a weekend trip, with a voice assistant chiming in. The
// same seed gives the same turns; Session is left empty for the caller.
// Turn ids are t0000, t0001, … and "at" advances about 10 s per turn.
func Conversation(seed int64, n int) []events.Turn {
	if n <= 0 {
		return nil
	}
	g := &generator{r: rand.New(rand.NewPCG(uint64(seed), 0xc0ffee)), c: newCast(seed), n: n, prev: -1}
	// The wrap-up closes the session if there is room for it; the body stops
	// short to leave that room.
	body := n
	if n >= 40 {
		body = n - len(wrap)
	}
	g.n = body
	us, them := 0, 0
	g.script(intro)
	g.script(setup)
	g.round(3, &us, &them)
	g.round(3, &us, &them)
	g.script(tripPlan)
	g.script(secondMap)
	us, them = 0, 0
	cb := g.r.Perm(len(callbacks))
	for i := 0; !g.full(); i++ {
		g.round(4, &us, &them)
		if i%2 == 1 {
			g.script(callbacks[cb[(i/2)%len(cb)]])
		}
		if i%4 == 3 {
			// A new map keeps late game chatter from looking like a loop.
			next := g.c.game.maps[2+(i/4)%2]
			us, them = 0, 0
			g.say(line{0, "gg, next map is " + next})
		}
	}
	g.n = n
	for _, l := range wrap {
		g.add(l.who, g.c.fill(l.text))
	}
	return g.turns
}

// Notes returns the screen-watch notes of the conversation with the same
// seed: what the bot saw on shared screens and evicted from its live
// buffer. Their "at" falls between turns of Conversation(seed, n) for n of
// about 45 or more; Run publishes each one before the first turn after it.
func Notes(seed int64) []events.Note {
	c := newCast(seed)
	texts := []struct {
		after time.Duration
		text  string
	}{
		{75 * time.Second, "{A}'s screen: {game} lobby, map {map} selected, team chat: 'group up, push {site}'"},
		{185 * time.Second, "{D}'s screen: scoreboard on {map}, {D} leads the team with 14 eliminations"},
		{275 * time.Second, "{A}'s screen: listing for the {lodging} at {place}, sleeps 4, ${price}/night, 'pets considered on request', check-in 3 pm"},
		{425 * time.Second, "{B}'s screen: maps app, route to {place}, 3 h 40 min leaving 8:00 am"},
	}
	notes := make([]events.Note, len(texts))
	for i, t := range texts {
		notes[i] = events.Note{
			V:      events.Version,
			NoteID: fmt.Sprintf("n%02d", i),
			// +5 s puts a note between two turns rather than on one.
			At:     conversationStart().Add(t.after + 5*time.Second),
			Source: "screen",
			Text:   c.fill(t.text),
		}
	}
	return notes
}
