package offline

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/benchtext"
	"github.com/foldstream/foldstream/internal/fold"
)

// The property tests replay two real-looking sessions (testdata/
// voice_trip.txt, four friends planning a trip over a game; testdata/
// agent_session.txt, a coding agent with tool calls) through the engine's
// budget policy in folds of 10 turns, as the processor does, and check
// one property of the summaries or memories each.

// propBase is a Wednesday afternoon: "yesterday" is Tuesday 5 May 2026.
var propBase = time.Date(2026, 5, 6, 15, 0, 0, 0, time.UTC)

// loadTurns reads a transcript file: "Speaker: text" lines (voice) or
// "role|kind|tool|text" lines (agent, "\n" escaped). Lines starting with
// '#' are comments.
func loadTurns(t *testing.T, path string) []fold.Turn {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []fold.Turn
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		i := len(out)
		tr := fold.Turn{Index: int64(i), TurnID: fmt.Sprintf("turn-%03d", i), At: propBase.Add(time.Duration(i) * 20 * time.Second)}
		if p := strings.SplitN(l, "|", 4); len(p) == 4 {
			tr.Role, tr.Kind, tr.Tool, tr.Text = p[0], p[1], p[2], strings.ReplaceAll(p[3], `\n`, "\n")
			if tr.Role == "user" {
				tr.Speaker = "User"
			}
		} else {
			sp, text, _ := strings.Cut(l, ": ")
			tr.Speaker, tr.Role, tr.Text, tr.Kind = sp, "user", text, "speech"
		}
		out = append(out, tr)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// replay folds the turns in batches of 10 with one Summarizer and the
// engine's budget policy, and returns every summary version and every
// memory returned, in order.
func replay(t *testing.T, ts []fold.Turn, profile fold.Profile, maxChars int) (versions []string, mems []fold.Memory) {
	t.Helper()
	s := New()
	prev := ""
	var state []byte
	for c := 0; c < len(ts); c += 10 {
		b := ts[c:min(c+10, len(ts))]
		out, err := fold.Summarize(context.Background(), s, fold.Request{Session: "prop-" + string(profile), Profile: profile,
			PreviousSummary: prev, PreviousState: state, Turns: b, MaxChars: maxChars, From: b[0].At, To: b[len(b)-1].At})
		if err != nil {
			t.Fatal(err)
		}
		if n := runeLen(out.Summary); n > maxChars {
			t.Fatalf("v%d over budget: %d > %d", len(versions)+1, n, maxChars)
		}
		if len(out.MemoryItems) != len(out.Memories) {
			t.Fatalf("v%d: %d memory items for %d memories", len(versions)+1, len(out.MemoryItems), len(out.Memories))
		}
		prev, state = out.Summary, out.State
		versions = append(versions, out.Summary)
		mems = append(mems, out.MemoryItems...)
	}
	return versions, mems
}

func voiceReplay(t *testing.T) ([]fold.Turn, []string, []fold.Memory) {
	ts := loadTurns(t, "testdata/voice_trip.txt")
	v, m := replay(t, ts, fold.ProfileVoice, 1200)
	return ts, v, m
}

func agentReplay(t *testing.T) ([]fold.Turn, []string, []fold.Memory) {
	ts := loadTurns(t, "testdata/agent_session.txt")
	v, m := replay(t, ts, fold.ProfileAgent, 1200)
	return ts, v, m
}

func logVersions(t *testing.T, vs []string) {
	t.Helper()
	for i, v := range vs {
		t.Logf("v%d: %s", i+1, v)
	}
}

// A number stated in one fold is still there three folds later.
func TestPropNumberSurvivesThreeFolds(t *testing.T) {
	ts, vs, _ := voiceReplay(t)
	first := -1
	for i, v := range vs {
		if strings.Contains(v, "$95") {
			first = i
			break
		}
	}
	if first < 0 || first+3 >= len(vs) {
		logVersions(t, vs)
		t.Fatalf("\"$95\" first in version %d of %d: need three later folds", first+1, len(vs))
	}
	for i := first; i <= first+3; i++ {
		for _, want := range []string{"$190", "$95"} {
			if !strings.Contains(vs[i], want) {
				logVersions(t, vs)
				t.Fatalf("v%d lost %q (stated in v%d)", i+1, want, first+1)
			}
		}
	}
	// The same holds for the agent's constraints: port and deadline.
	_, avs, _ := agentReplay(t)
	for i := 0; i < 4 && i < len(avs); i++ {
		if !strings.Contains(avs[i], "30 seconds") {
			logVersions(t, avs)
			t.Fatalf("agent v%d lost \"30 seconds\"", i+1)
		}
	}
	_ = ts
}

// "sure" after a question does not answer it: no version records an
// answer, and the question stays open.
func TestPropBackchannelAnswersNothing(t *testing.T) {
	_, vs, _ := voiceReplay(t)
	for i, v := range vs {
		for _, bad := range []string{`said (yes|no)\b`, "Tomás agreed", "Jonas agreed"} {
			if regexp.MustCompile(bad).MatchString(v) {
				t.Errorf("v%d records a backchannel as an answer (%q): %s", i+1, bad, v)
			}
		}
	}
	if !strings.Contains(vs[1], "who's bringing the grill?") {
		logVersions(t, vs)
		t.Errorf("v2 lost the open question about the grill")
	}
	// A question answered by a statement is not kept as open: the answer is.
	if strings.Contains(vs[0], "asked: how much is it?") || !strings.Contains(vs[0], "$190") {
		t.Errorf("v1 keeps an answered question or lost its answer: %s", vs[0])
	}
}

// No sentence appears twice in a version, and the opening line is not
// stacked: one per version.
func TestPropNoSentenceTwice(t *testing.T) {
	_, vv, _ := voiceReplay(t)
	_, av, _ := agentReplay(t)
	for _, vs := range [][]string{vv, av} {
		for i, v := range vs {
			seen := map[string]bool{}
			for _, s := range splitSentences(v) {
				k := strings.ToLower(strings.TrimSpace(s))
				if seen[k] {
					t.Errorf("v%d repeats %q: %s", i+1, s, v)
				}
				seen[k] = true
			}
			if n := strings.Count(v, " talking about ") + strings.Count(v, " working on ") + strings.Count(v, " in the session."); n > 1 {
				t.Errorf("v%d stacks %d opening lines: %s", i+1, n, v)
			}
		}
	}
}

// No word or name is cut: every word of every version is a word of the
// transcript (or of the summary's own phrasing), never a strict prefix or
// suffix of one; "King's Row" is never "Row".
func TestPropNoWordCut(t *testing.T) {
	for _, run := range []func(*testing.T) ([]fold.Turn, []string, []fold.Memory){voiceReplay, agentReplay} {
		ts, vs, mems := run(t)
		vocab := map[string]bool{}
		var words []string
		for _, tr := range ts {
			for _, w := range strings.FieldsFunc(tr.Text+" "+tr.Speaker+" "+tr.Tool, notWordRune) {
				w = strings.ToLower(w)
				if !vocab[w] {
					vocab[w] = true
					words = append(words, w)
				}
			}
		}
		texts := append([]string(nil), vs...)
		for _, m := range mems {
			texts = append(texts, m.Text)
		}
		for i, v := range texts {
			for _, w := range strings.FieldsFunc(v, notWordRune) {
				lw := strings.ToLower(w)
				if vocab[lw] || len(lw) < 2 {
					continue
				}
				for _, x := range words {
					if x != lw && (strings.HasPrefix(x, lw) && len(lw) < len(x)-2 || strings.HasSuffix(x, lw) && len(lw) < len(x)-2) {
						t.Errorf("text %d has %q, a cut of %q: %s", i+1, w, x, v)
						break
					}
				}
			}
			if strings.Contains(v, "Row") && !strings.Contains(v, "King's Row") {
				t.Errorf("text %d cuts King's Row: %s", i+1, v)
			}
		}
	}
}

func notWordRune(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '\'' || r > 127)
}

// Relative dates are resolved against the time the turn was said.
func TestPropDatesResolved(t *testing.T) {
	_, vs, mems := voiceReplay(t)
	all := strings.Join(vs, "\n")
	for _, m := range mems {
		all += "\n" + m.Text
	}
	for _, want := range []string{
		"yesterday (5 May 2026)",   // Lena, on Wednesday 6 May
		"next Friday (8 May 2026)", // Jonas's dentist: the first Friday after
		"tonight (6 May 2026)",     // Marco's deposit
	} {
		if !strings.Contains(all, want) {
			logVersions(t, vs)
			t.Errorf("no %q in the summaries or memories", want)
		}
	}
}

// Memories carry speaker, turn and time; a restated fact is not returned
// again; a changed fact supersedes the older one.
func TestPropMemories(t *testing.T) {
	ts, _, mems := voiceReplay(t)
	byTurn := map[string]fold.Turn{}
	for _, tr := range ts {
		byTurn[tr.TurnID] = tr
	}
	ids := map[string]fold.Memory{}
	texts := map[string]bool{}
	for _, m := range mems {
		t.Logf("%s %s %s %s supersedes=%q", m.ID, m.TurnID, m.Speaker, m.Text, m.Supersedes)
		tr, ok := byTurn[m.TurnID]
		if !ok || m.Speaker != tr.Speaker || !m.At.Equal(tr.At) || m.ID == "" {
			t.Errorf("memory %q: turn %q speaker %q at %v: not its turn's", m.Text, m.TurnID, m.Speaker, m.At)
		}
		if _, dup := ids[m.ID]; dup || texts[strings.ToLower(m.Text)] {
			t.Errorf("memory %q returned twice", m.Text)
		}
		ids[m.ID], texts[strings.ToLower(m.Text)] = m, true
	}
	find := func(sub string) (fold.Memory, bool) {
		for _, m := range mems {
			if strings.Contains(m.Text, sub) {
				return m, true
			}
		}
		return fold.Memory{}, false
	}
	for _, want := range []string{"Sweden", "vegetarian", "Siemens", "$190"} {
		if _, ok := find(want); !ok {
			t.Errorf("no memory about %q", want)
		}
	}
	old, ok1 := find("$190 a night")
	upd, ok2 := find("$210 a night")
	if !ok1 || !ok2 {
		t.Fatalf("price memories missing: %v %v", ok1, ok2)
	}
	if upd.Supersedes != old.ID {
		t.Errorf("the $210 memory supersedes %q, want %q (the $190 one)", upd.Supersedes, old.ID)
	}
	// The agent's port changed from 8443 to 9443.
	_, avs, amems := agentReplay(t)
	var p1, p2 fold.Memory
	for _, m := range amems {
		switch {
		case strings.Contains(m.Text, "port 8443") && p1.ID == "":
			p1 = m
		case strings.Contains(m.Text, "port 9443") && p2.ID == "":
			p2 = m
		}
	}
	if p1.ID == "" || p2.ID == "" || p2.Supersedes != p1.ID {
		t.Errorf("port memories: %+v then %+v: want the second to supersede the first", p1, p2)
	}
	// The summary answers with the new port.
	last := avs[len(avs)-1]
	if !strings.Contains(last, "9443") {
		t.Errorf("final agent summary lost the new port: %s", last)
	}
}

// Transcription marks, tokenizer spacing and spelled-out acronyms are
// cleaned from speech; other text is left as it was.
func TestCleanSpeech(t *testing.T) {
	cases := []struct{ in, want string }{
		{"OK , we 're on . So {disfmarker} just make sure it 's on .", "OK, we're on. So just make sure it's on."},
		{"I think {vocalsound} the L_C_D_s are n't cheap , right ?", "I think the LCDs aren't cheap, right?"},
		{"[laughter] yeah <noise> the T_V_ one", "yeah the TV one"},
		{"set my_var to {\"a\": 1} in a_b.go", "set my_var to {\"a\": 1} in a_b.go"},
		{"plain text, nothing to do.", "plain text, nothing to do."},
		{"first line {gap}\n\n second , line", "first line\nsecond, line"},
	}
	for _, c := range cases {
		if got := cleanSpeech(c.in); got != c.want {
			t.Errorf("cleanSpeech(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNeedsCleanFindsWhatCleanSpeechCleans: needsClean, which decides
// whether a turn is cleaned at all, finds a bracket, a '_', or a space
// before punctuation, an apostrophe or "n't", wherever it is in the text.
func TestNeedsCleanFindsWhatCleanSpeechCleans(t *testing.T) {
	parts := []string{"a", "word", " ", "{", "[", "<", "_", "}", ",", ".", "?", "!", ";", ":", "'", "n't", "n", "é", "\xff", "\t"}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 100000 {
		var b strings.Builder
		for range rng.IntN(8) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		s, want := b.String(), false
		for i := 0; i < len(s); i++ {
			want = want || strings.IndexByte("{[<_", s[i]) >= 0 ||
				s[i] == ' ' && i+1 < len(s) && (strings.IndexByte(",.?!;:'", s[i+1]) >= 0 || strings.HasPrefix(s[i+1:], "n't"))
		}
		if got := needsClean(s); got != want {
			t.Fatalf("needsClean(%q) = %v, want %v", s, got, want)
		}
	}
}

// A note that names its screen itself is labelled once.
func TestNoteLabelledOnce(t *testing.T) {
	for _, src := range []string{"screen", "Marco", ""} {
		got := summarize(t, fold.Request{Turns: turns("Marco: okay sharing now"),
			Notes: []fold.Note{{Source: src, At: t0.Add(5 * time.Second), Text: "Marco's screen: listing for the beach house at Santa Cruz, sleeps 4, $240 a night."}}})
		if n := strings.Count(got, "screen"); n != 1 || !strings.Contains(got, "On Marco's screen: listing for the beach house at Santa Cruz") {
			t.Errorf("source %q: %q", src, got)
		}
	}
}

// A question left open at the end of one fold is dropped when the next
// fold opens with its answer, and kept when the next fold opens with a
// backchannel and something else.
func TestQuestionAnsweredInNextFold(t *testing.T) {
	s := New()
	fold1 := turns("Marco: the cabin is booked for the weekend of the 14th.", "Lena: when do we leave on Saturday?")
	ctx := context.Background()
	r1, err := s.Summarize(ctx, fold.Request{Session: "q", Turns: fold1, MaxChars: 1200})
	if err != nil || !strings.Contains(r1.Summary, "Lena asked: when do we leave on Saturday?") {
		t.Fatalf("v1 = %q, %v: want the open question", r1.Summary, err)
	}
	for _, c := range []struct {
		next []string
		open bool
	}{
		{[]string{"Marco: we leave at 9 am from my place.", "Jonas: ok"}, false},
		{[]string{"Tomás: sure", "Tomás: their Reinhardt is alone, push left."}, true},
	} {
		b := turns(c.next...)
		for i := range b {
			b[i].Index += 2
		}
		r2, err := s.Summarize(ctx, fold.Request{Session: "q", PreviousSummary: r1.Summary, PreviousState: r1.State, Turns: b, MaxChars: 1200})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(r2.Summary, "when do we leave"); got != c.open {
			t.Errorf("after %q: question kept = %v, want %v: %q", c.next, got, c.open, r2.Summary)
		}
	}
}

// TestKeywordsFindWhatContainsFinds: keywords.in, which skips ahead over
// text that cannot hold a keyword, finds one exactly when a search for each
// keyword in the lower-cased text does, in texts strewn with the keywords,
// each of their letters in either case.
func TestKeywordsFindWhatContainsFinds(t *testing.T) {
	sets := [][]string{{"decided", "agree", "let's", "we will", "plan", "i'll", "will ", "only"}, {"will", "can", "'ll", "may"},
		{"tructio", "prompt", "age"}, {"ab", "b@"}, factWordList}
	const bytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ '@`.,!1"
	r := rand.New(rand.NewPCG(1, 2))
	for _, ws := range sets {
		k := newKeywords(ws...)
		for range 20000 {
			b := make([]byte, r.IntN(30))
			for i := range b {
				b[i] = bytes[r.IntN(len(bytes))]
				if w := ws[r.IntN(len(ws))]; r.IntN(3) == 0 && i+len(w) <= len(b) {
					for j := range len(w) { // (each letter in either case)
						b[i+j] = w[j] &^ (0x20 * byte(r.IntN(2)*b2i(isLetter(w[j]))))
					}
				}
			}
			want := slices.ContainsFunc(ws, func(w string) bool { return strings.Contains(strings.ToLower(string(b)), w) })
			if got := k.in(string(b)); got != want {
				t.Fatalf("keywords %q in %q: %v, want %v", ws, b, got, want)
			}
		}
	}
}

// TestKeywordsRefuseOneByte: a keyword of one byte, which in would never
// find, is refused when the set is made.
func TestKeywordsRefuseOneByte(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("newKeywords took a keyword of one byte")
		}
	}()
	newKeywords("plan", "a")
}

// TestHasPhraseMatchesWholeWords: a topic counts as named already only
// when the text names it as whole words.
func TestHasPhraseMatchesWholeWords(t *testing.T) {
	for _, c := range []struct {
		s, t string
		want bool
	}{
		{"the price list and the party", "ice", false}, {"the price list and the party", "art", false},
		{"the price list and the party", "price list", true}, {"ice, then the party", "ice", true},
		{"the party. ice", "ice", true}, {"price ice", "ice", true}, {"café", "caf", false}, {"the list", "", false},
	} {
		if got := hasPhrase([]byte(c.s), c.t); got != c.want {
			t.Errorf("hasPhrase(%q, %q) = %v, want %v", c.s, c.t, got, c.want)
		}
	}
}

// TestLexiconGivesEachWordItsLexeme: a lexicon answers every word with the
// word's own lexeme, however often words that share a slot of near (the same
// length, first, middle and last bytes) take turns.
func TestLexiconGivesEachWordItsLexeme(t *testing.T) {
	words := []string{"team", "tram", "teem", "planning", "plunging", "plan", "'s", "a", "é", "éé", "tokyo", "toyko", "running", "rowing"}
	r := rand.New(rand.NewPCG(3, 4))
	var lx lexicon
	for range 20000 {
		w := words[r.IntN(len(words))]
		if got, want := lx.get(w), newLexeme(w); got != want {
			t.Fatalf("%q: %+v, want %+v", w, got, want)
		}
	}
}

// The lexicon reads a field as written as each of its readers would: its terms as appendTerms' tokens give them,
// and its flags as statFields and report test the word: ffGroup on the speaker's "we" (groupPerson's), ffModal on
// a modal reported speech puts in the past ("will", "we'll"; not "I'll": the speaker's own).
func TestLexiconReadsFieldsAsTheirReadersDo(t *testing.T) {
	fields := []string{"We", "we're", "our,", "Ourselves.", "us?", "you", "You'll", "I", "I'll", "i'm", "My", "me.",
		"will", "Will", "can't", "won't,", "they'll", "It'll", "'ll", "scan", "/home/carol/vods", "7:30", "90ms",
		"Hulk's", "(yesterday", "\"Tokyo,\"", "é", "É,", "Éva", "éva.", "\u212Aelvin", "kelvin", "uh-huh", "the,", "The", ";the:", "...", ",", "l0ng-w0rd-" + strings.Repeat("x", 60), "K", "Kelvin"}
	for _, l := range benchtext.Lines() {
		fields = append(fields, strings.Fields(l[1])...)
	}
	var lx lexicon
	for _, f := range fields {
		k := lx.field(f)
		if got, want := k.terms, lx.tokenTerms(nil, 0, f); !slices.Equal(got, want) {
			t.Errorf("%q: terms %q, want %q", f, got, want)
		}
		c, p := statFields([]*field{k, k}), strings.ToLower(strings.Trim(f, `.,!?;:"()`))
		for _, x := range []struct {
			flag fieldFlags
			want bool
		}{{ffDigit, c.nums > 0}, {ffName, c.names > 0}, {ffFirst, firstPerson[p]}, {ffSecond, secondPerson[p]},
			{ffGroup, groupPerson[strings.ToLower(strings.TrimRight(f, `.,!?;:"`))] != ""}, {ffModal, isModal(f)}} {
			if k.is(x.flag) != x.want {
				t.Errorf("%q: flag %b is %v, want %v", f, x.flag, k.is(x.flag), x.want)
			}
		}
		for _, g := range fields { // (repeated's comparison)
			if got, want := sameWords([]*field{k}, []*field{lx.field(g)}), equalFold(trimCut(f, ",.;:"), trimCut(g, ",.;:")); got != want {
				t.Errorf("sameWords(%q, %q) = %v, want %v", f, g, got, want)
			}
		}
	}
	acts := slices.Clone(opinion) // (report looks for them only after a first word of actStarts)
	for _, a := range speechActs {
		acts = append(acts, a[0])
	}
	for _, a := range acts {
		if w := lx.field(strings.Fields(a)[0]).low; !actStarts[w] {
			t.Errorf("%q opens with %q, not in actStarts", a, w)
		}
	}
}

// Speech loses what a person writing it down leaves out: intensifiers
// inside a sentence (not after a negation), an attempt broken off and
// started again, a cut word without a vowel; a repetition that means
// something stays. An opinion that must be quoted is reported as one.
func TestSpeechTightened(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"Bob: the rubber case is really cheap to make", "Bob said the rubber case is cheap to make."},
		{"Bob: the rubber case is not really cheap to make", "Bob said the rubber case is not really cheap to make."},
		{"Bob: the remote looks pretty but it feels strong", "Bob said the remote looks pretty but it feels strong."},
		{"Bob: I would mov I would then shift the focus to Switchboard", `Bob said, "I would mov I would then shift the focus to Switchboard."`}, // a restart stays: "mov" is not known to be cut
		{"Bob: the scroll button was also th already mentioned", "Bob said the scroll button was also already mentioned."},
		{"Bob: a lot of people and a lot of money went into the launch", "Bob said a lot of people and a lot of money went into the launch."},
		{"Bob: the budget is what it is for the launch", "Bob said the budget is what it is for the launch."},
		{"Bob: I think it's cheap", "Bob thought it's cheap."},
		{"Bob: I think you should put more time in the design", `Bob thought, "You should put more time in the design."`},
		{"Bob: we watched tv last night and the pdf was sent", "Bob said they watched tv last night (9 Jan 2026) and the pdf was sent."},
		{"Bob: the dr said the pr for the crm and the cms is in sql", "Bob said the dr said the pr for the crm and the cms is in sql."},
		{"Bob: the pm wants an mvp before the bbq", "Bob said the pm wants an mvp before the bbq."},
		{"Bob: hr sent a dm about the dvd and the lcd", "Bob said hr sent a dm about the dvd and the lcd."},
		{"Bob: a crate is a kg and the walk is a km", "Bob said a crate is a kg and the walk is a km."},
		{"Bob: , like, sort", ""}, // a comma alone before ", like," (it used to panic)
		{"Bob: what I want is what I need for the launch", `Bob said, "What I want is what I need for the launch."`},
		{"Bob: the more you know the more you grow in this team", `Bob said, "The more you know the more you grow in this team."`},
		{"Bob: when you do this when you do that the remote breaks", `Bob said, "When you do this when you do that the remote breaks."`},
		{"Bob: we booked it for the for the launch", "Bob said they booked it for the launch."},
		{"Bob: the caterer wants a deposit, I guess", "Bob said the caterer wants a deposit."}, // a clause at the end that names nothing
		{"Bob: we need chairs and tables, and so on", "Bob said they need chairs and tables."},
		{"Bob: the venue is booked for Friday, right?", "Bob asked: the venue is booked for Friday?"},              // (the question stays one)
		{"Bob: the florist can't come, I don't think so", `Bob said, "The florist can't come, I don't think so."`}, // a negation stays
		{"Bob: we need more chairs, another 40", "Bob said they need more chairs, another 40."},                    // a number is named
	} {
		if got := summarize(t, fold.Request{Turns: turns("Alice: hi", c.line)}); !strings.Contains(got, c.want) {
			t.Errorf("%q:\ngot  %q\nwant %q", c.line, got, c.want)
		}
	}
}

// isModal reports a field whose word, without the punctuation after it, is a modal of pastModal or ends in "'ll"
// after a word other than "I".
func isModal(f string) bool {
	core := strings.TrimRight(f, ".,!?;:")
	c, ll := strings.CutSuffix(core, "'ll")
	return pastModal[core] != "" || ll && c != "" && c != "I"
}
