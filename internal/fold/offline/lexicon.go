package offline

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Word lists. They are read-only after package initialization.

// fillerCore words make a sentence filler when everything else in it is
// filler-compatible: greetings, thanks, backchannels, interjections.
var fillerCore = toSet(
	// greetings and goodbyes
	"hi", "hey", "heya", "hiya", "hello", "yo", "sup", "wassup", "whatsup", "howdy",
	"morning", "evening", "afternoon", "gm", "gn", "night", "bye", "goodbye", "cya",
	"later", "welcome", "greetings",
	// thanks
	"thanks", "thank", "thx", "ty", "tysm", "tyvm", "cheers", "appreciate", "appreciated",
	// backchannels and reactions
	"yeah", "yea", "ya", "yah", "yep", "yup", "yes", "ok", "okay", "okey", "k", "kk",
	"mhm", "mmhm", "mmhmm", "mm", "mmm", "hmm", "hm", "uh", "uhh", "um", "umm", "er",
	"erm", "ah", "ahh", "oh", "ooh", "huh", "right", "nice", "cool", "sure", "true",
	"totally", "exactly", "gotcha", "alright", "aight", "word", "bet", "same", "fair",
	"facts", "indeed", "wow", "whoa", "woah", "damn", "dang", "gg", "ggs", "wp", "ggwp",
	"oof", "bruh", "lit", "sweet", "awesome", "great", "noice", "neat", "yikes", "welp",
	"no", "nope", "nah", "yay", "woo", "woohoo", "pog", "poggers", "based", "agreed",
	"absolutely", "definitely", "perfect", "interesting", "wild", "crazy", "insane",
	"hype", "go", "sounds", "fine", "mood", "rip", "f", "sheesh", "omg", "wtf", "jeez",
	"geez", "ugh", "meh", "hmmm", "ahh", "ahhh", "ayy", "ayo", "aha", "ohh", "ohhh",
	"uh-huh", "mm-hmm", "uh-uh", "mhmm", "yess", "yesss", "deal", "works", "understood",
	"copy", "roger", "noted", "makes", "sense", "good", "hear", "you", "np", "nw", "lgtm",
)

// fillerSoft words may appear in a filler sentence but do not make one.
var fillerSoft = toSet(
	"it", "that", "that's", "thats", "this", "is", "so", "much", "very", "a", "the",
	"all", "guys", "everyone", "everybody", "folks", "man", "dude", "bro", "sis",
	"mate", "buddy", "fam", "y'all", "yall", "again", "too", "and", "my", "god",
	"gosh", "lord", "for", "real", "fr", "up", "what's", "whats", "how's", "hows",
	"how", "are", "going", "it's", "its", "doing", "i", "am", "i'm", "im", "well",
	"just", "me", "we", "let's", "lets", "do", "to", "oh", "of", "course", "was",
	"be", "pretty", "really", "super", "kinda", "haha", "there", "here", "back",
	"everything", "anyone", "down", "with", "in", "on", "again", "then", "one",
	"good", "bad", "lol", "got", "ya", "yah", "thing", "stuff", "way", "sounds",
	"like", "plan", "idea", "for", "sure", "see", "u", "yo", "ur", "please", "pls", "plz",
	"shot", "game", "games", "job", "try", "played", "work", "round", "close", "call",
	"looks", "look", "lgtm", "ship",
	"moves", "move", "play", "stuff", "lmk", "haha", "cute", "funny", "hilarious",
)

// agreeWords in a filler reply to a proposal or question count as assent;
// negWords as dissent.
var agreeWords = toSet("yes", "yeah", "yea", "yep", "yup", "sure", "ok", "okay", "agreed",
	"deal", "bet", "definitely", "absolutely", "perfect", "down", "sounds", "works",
	"fine", "alright", "aight", "roger", "copy", "yess", "yesss", "lgtm", "looks")
var negWords = toSet("no", "nope", "nah", "not", "don't", "dont", "never")

// leadStrip words are removed from the start of a sentence; leadStripComma
// words only when followed by a comma.
var leadStrip = toSet("yeah", "yea", "yep", "yup", "ok", "okay", "so", "um", "umm", "uh",
	"uhh", "er", "erm", "oh", "ohh", "hmm", "hm", "alright", "aight", "anyway", "anyways",
	"hey", "yo", "mhm", "mm", "mmm", "welp", "lol", "lmao", "haha", "yes", "ah", "ahh",
	"hi", "hello")
var leadStripComma = toSet("right", "like", "well", "look", "listen", "wait", "actually",
	"honestly", "basically", "man", "dude", "bro", "guys", "sure", "cool", "nice", "okay",
	"fine", "see", "and", "but", "now", "true", "great", "awesome", "perfect")

// stopwords are ignored when comparing sentences and counting content.
var stopwords = toSet(
	"a", "an", "the", "and", "or", "but", "if", "then", "so", "to", "of", "in", "on",
	"at", "by", "for", "with", "about", "as", "into", "from", "up", "down", "out", "over",
	"is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "have",
	"has", "had", "i", "me", "my", "we", "us", "our", "you", "your", "he", "him", "his",
	"she", "her", "they", "them", "their", "it", "its", "this", "that", "these", "those",
	"there", "here", "what", "which", "who", "whom", "when", "where", "why", "how",
	"not", "no", "yes", "just", "really", "very", "too", "also", "can", "could", "would",
	"should", "will", "shall", "may", "might", "must", "i'm", "it's", "that's", "we're",
	"you're", "they're", "i'll", "we'll", "i've", "we've", "don't", "doesn't", "didn't",
	"can't", "won't", "isn't", "aren't", "wasn't", "let's", "lets", "like", "some", "any",
	"all", "more", "most", "than", "now", "get", "got", "go", "going", "gonna", "wanna",
	"gotta", "yeah", "ok", "okay", "said", "says", "say", "asked", "ask", "suggested",
	"agreed", "told", "thinks", "think", "one", "thing", "kind", "sort", "well", "still",
	"even", "only", "maybe", "oh", "um", "uh", "lol", "s", "re", "ll", "ve", "d", "t",
)

// commonWords are frequent words of everyday English that name no topic:
// common verbs, adverbs, adjectives and vague nouns. A topic phrase has
// none of them (see isTopicWord).
var commonWords = toSet(
	// verbs
	"think", "thinks", "thought", "thinking", "know", "knows", "knew", "known", "knowing",
	"mean", "means", "meant", "meaning", "want", "wants", "wanted", "wanting", "get", "gets",
	"getting", "gotten", "goes", "went", "gone", "say", "saying", "see", "sees", "saw", "seen",
	"seeing", "look", "looked", "looking", "make", "makes", "made", "making", "take", "takes",
	"took", "taken", "taking", "come", "comes", "came", "coming", "put", "puts", "putting",
	"try", "tries", "tried", "trying", "need", "needs", "needed", "needing", "use", "uses",
	"used", "using", "tell", "tells", "telling", "give", "gives", "gave", "given", "giving",
	"find", "finds", "found", "let", "guess", "guessing", "suppose", "supposed", "seem",
	"seems", "seemed", "feel", "feels", "felt", "talk", "talks", "talked", "talking",
	"mention", "mentioned", "liked", "keep", "keeps", "kept", "start", "starts", "started",
	"happen", "happens", "happened", "doing", "done", "having", "hope", "remember",
	"wonder", "wondering", "understand", "agree", "asking", "call", "called", "wait",
	"bring", "brought", "turn", "turns", "turned", "stay", "sit", "stand", "hear", "heard",
	"wish", "care", "bother", "figure", "figured", "supposed", "tend", "ended", "end",
	"works", "worked", "help", "change", "changed", "show", "showed", "move", "set",
	"sounds", "sound", "exist", "exists", "depend", "depends", "belong", "matter", "matters",
	"check", "stuck", "okay", "basically", "happy", "prefer", "prefers", "lost", "left",
	"forever", "decide", "decides", "provide", "provides", "terrible", "awful", "strong",
	"thingy", "etcetera", "etc",
	// vague nouns and pronoun-like words
	"thing", "things", "stuff", "way", "ways", "lot", "lots", "bit", "bits", "kind", "kinds",
	"sort", "sorts", "type", "types", "something", "anything", "everything", "nothing",
	"somebody", "someone", "anybody", "anyone", "everybody", "everyone", "nobody", "people",
	"person", "guy", "guys", "time", "times", "fact", "point", "points", "idea", "ideas",
	"question", "questions", "case", "cases", "part", "parts", "sense", "reason", "example",
	"number", "numbers", "problem", "problems", "issue", "issues", "place", "side", "course",
	"moment", "minute", "minutes", "second", "seconds", "hour", "hours", "day", "days",
	"week", "weeks", "month", "months", "year", "years", "today", "yesterday", "tomorrow",
	"whatever", "whenever", "wherever", "whoever", "somewhere", "anywhere", "everywhere",
	"somehow", "anyhow", "ones", "yours", "mine", "ours", "theirs", "hers", "himself",
	"herself", "itself", "themselves", "ourselves", "myself", "yourself",
	// adjectives, adverbs and quantifiers
	"good", "great", "bad", "nice", "big", "little", "small", "large", "different", "same",
	"whole", "able", "certain", "other", "others", "another", "else", "kinda", "sorta",
	"anyway", "anyways", "though", "although", "already", "still", "even", "also", "again",
	"always", "never", "ever", "sometimes", "usually", "often", "once", "twice", "much",
	"many", "more", "most", "less", "least", "few", "enough", "very", "too", "quite",
	"rather", "almost", "exactly", "definitely", "obviously", "probably", "possibly",
	"maybe", "perhaps", "actually", "really", "pretty", "sure", "right", "wrong", "true",
	"false", "first", "second", "third", "last", "next", "new", "old", "long", "short",
	"high", "low", "real", "whether", "either", "neither", "both", "each", "every", "such",
	"instead", "otherwise", "anymore", "later", "earlier", "soon", "yet", "far", "away",
	"back", "around", "together", "along", "else", "ago", "easy", "hard", "best", "better",
	"worse", "worst", "fine", "okay", "cool", "interesting", "important", "possible",
	"likely", "specific", "particular", "general", "generally", "certainly", "clearly",
	"simply", "necessarily", "especially", "anyhow", "somewhat", "completely", "entirely",
	"fairly", "mostly", "mainly", "nearly", "hardly", "slightly", "currently", "recently",
	"finally", "eventually", "immediately", "directly", "apparently", "essentially",
	"literally", "totally", "seriously", "honestly", "personally", "hopefully", "sorry",
	"thank", "thanks", "please", "alright", "whole", "yeah", "yes", "nope", "huh",
	"gonna", "wanna", "gotta", "kinda", "dunno", "lemme", "gimme", "cause", "cuz",
	"within", "without", "across", "through", "throughout", "toward", "towards", "upon",
	"among", "between", "behind", "beyond", "during", "until", "unless", "since",
	"because", "while", "whereas", "except", "per", "via", "versus", "against",
	"after", "before", "off", "past", "above", "below", "under", "near", "bunch", "busy",
	"nice", "fun", "funny", "weird", "strange", "whole",
	"run", "runs", "add", "adds", "play", "plays", "read", "write", "send", "ask",
	"it's", "that's", "there's", "what's", "here's", "who's", "where's", "let's",
)

// Attribution verbs of rendered sentences; ignored for near-duplicate checks.
var attribution = toSet("said", "asked", "suggested", "agreed", "offered", "told", "noted",
	"ran", "screen", "said yes", "said no")

// commonCaps are capitalized words that are not named entities.
var commonCaps = toSet("i", "i'm", "i'll", "i've", "i'd", "ok", "okay", "yeah", "lol",
	"lmao", "haha", "oh", "the", "a", "an", "and", "but", "so", "if", "then", "we",
	"you", "he", "she", "they", "it", "this", "that", "what", "why", "how", "when",
	"where", "who", "yes", "no", "hey", "hi", "hello", "thanks", "please", "gg",
	"omg", "wtf", "lfg", "brb", "afk", "imo", "tbh", "idk", "btw", "fyi", "asap",
	"screen", "on", "user", "assistant", "system", "tool", "earlier", "later", "let's",
	"maybe", "also", "just", "well", "like", "do", "did", "can", "could", "should",
	"would", "will", "is", "are", "was", "my", "our", "your", "not", "don't", "ah",
	"mr", "mrs", "ms", "dr")

// Modal and past-tense words that do not change after a third-person
// subject, and ambiguous present/past forms that are left alone.
var noConj = toSet("can", "could", "will", "would", "shall", "should", "may", "might",
	"must", "can't", "cannot", "couldn't", "won't", "wouldn't", "shouldn't", "mustn't",
	"didn't", "wasn't", "ought", "used", "had", "did", "was", "hadn't", "cant", "wont",
	"didnt", "wasnt", "couldnt", "wouldnt", "shouldnt",
	// irregular past
	"said", "made", "went", "got", "saw", "took", "came", "knew", "thought", "told",
	"found", "gave", "left", "felt", "kept", "lost", "won", "ran", "bought", "brought",
	"built", "caught", "taught", "fought", "sold", "sent", "spent", "stood",
	"understood", "wrote", "ate", "drank", "drove", "flew", "forgot", "fell", "heard",
	"held", "meant", "met", "paid", "rode", "rang", "sang", "sat", "slept", "spoke",
	"stole", "swam", "threw", "woke", "wore", "began", "broke", "chose", "froze", "hid",
	"led", "lit", "shot", "shook", "slid", "struck", "stuck", "swore", "tore", "became",
	"dealt", "dug", "drew", "fed", "forgave", "grew", "hung", "laid", "lay", "lent",
	"mistook", "overslept", "rose", "sought", "spun", "swung", "wept", "wound", "beat",
	// ambiguous present/past
	"put", "set", "cut", "read", "hit", "let", "quit", "hurt", "cost", "shut", "spread",
	"bid", "cast", "fit", "split", "burst", "upset")

// Adverbs skipped between "I" and its verb.
var preVerbAdverbs = toSet("just", "really", "also", "still", "never", "always", "actually",
	"literally", "totally", "already", "only", "kinda", "probably", "definitely",
	"usually", "even", "honestly", "basically", "seriously", "finally", "mostly",
	"sometimes", "often", "rarely", "barely", "almost", "def", "prob", "truly",
	"genuinely", "personally", "generally", "normally", "obviously", "clearly", "sorta",
	"totes", "lowkey", "highkey", "legit", "uh", "um", "uhh", "umm", "like", "now",
	"then", "too", "sometimes", "again", "today", "currently", "no", "longer")

var secondPerson = toSet("you", "your", "you're", "youre", "yours", "yourself",
	"yourselves", "u", "ur", "you'll", "you've", "you'd", "ya")

// imperativeVerbs open an instruction ("Add a flag", "Fix the test").
var imperativeVerbs = toSet("add", "fix", "implement", "write", "create", "remove", "delete",
	"update", "refactor", "make", "change", "rename", "run", "build", "deploy", "test",
	"move", "use", "replace", "support", "handle", "port", "migrate", "investigate",
	"find", "check", "review", "document", "explain", "install", "upgrade", "downgrade",
	"revert", "merge", "commit", "push", "open", "close", "send", "book", "schedule",
	"remind", "set", "configure", "enable", "disable", "keep", "avoid", "stop", "start",
	"switch", "split", "combine", "rewrite", "generate", "bump", "pin", "drop", "wire",
	"expose", "return", "log", "measure", "profile", "benchmark", "debug", "clean", "ensure")

// Phrases (in plain() form, space delimited) that signal traits.
var (
	questionStarts = []string{" who ", " what ", " when ", " where ", " why ", " how ",
		" who's ", " what's ", " where's ", " when's ", " how's ", " whats ", " wheres ",
		" which ", " whose ", " can you ", " could you ", " would you ", " will you ",
		" can we ", " could we ", " should we ", " should i ", " can i ", " do you ",
		" does anyone ", " did you ", " are you ", " is it ", " is there ", " are we ",
		" anyone ", " does it ", " do we ", " did we ", " have you ", " has anyone "}
	requestPhrases = []string{" can you ", " could you ", " would you ", " will you ",
		" please ", " pls ", " plz ", " can someone ", " could someone ", " can somebody ",
		" can anyone ", " could anyone ", " remind me ", " i need you ", " help me ",
		" tell me ", " send me ", " show me ", " give me ", " let me know ", " make sure "}
	proposalStarts = []string{" let's ", " lets ", " let us ", " how about ", " what about ",
		" what if ", " why don't we ", " why dont we ", " why not ", " maybe we ",
		" we should ", " we could ", " should we ", " i suggest ", " i propose ",
		" i vote ", " we might as well ", " we need to ", " we gotta ", " we have to "}
	strongDecision = []string{" decided ", " decide ", " agreed ", " agree on ", " we'll ",
		" we will ", " the plan ", " plan is ", " settled ", " final ", " let's do ",
		" from now on ", " deal ", " we're going to ", " we are going to ", " confirmed ",
		" locked in ", " sign up ", " signed up ", " registered ", " scheduled ",
		" said yes ", " committed ", " promise "}
	weakDecision = []string{" will ", " i'll ", " going to ", " gonna ", " plan ", " plans ",
		" planning ", " tomorrow ", " tonight ", " next week ", " schedule ", " deadline ",
		" by friday ", " by monday ", " at noon ", " later today ", " offered ", " i'm going ",
		" need to ", " have to ", " gotta "}
	preferencePhrases = []string{" prefer ", " prefers ", " i want ", " wants ", " wanna ",
		" i like ", " likes ", " i love ", " loves ", " i hate ", " hates ", " favorite ",
		" favourite ", " rather ", " i'd like ", " don't like ", " can't stand ", " main "}
	donePhrases = []string{" done ", " fixed ", " implemented ", " added ", " created ",
		" passed ", " passes ", " passing ", " merged ", " committed ", " finished ",
		" resolved ", " completed ", " works now ", " updated ", " removed ", " renamed ",
		" refactored ", " wrote ", " deployed ", " shipped "}
	nextPhrases = []string{" next ", " todo ", " to do ", " remaining ", " still need ",
		" in progress ", " working on ", " then ", " after that ", " next step ", " pending ",
		" blocked ", " now "}
	constraintPhrases = []string{" must ", " must not ", " never ", " always ", " don't ",
		" do not ", " only ", " without ", " required ", " requirement ", " constraint ",
		" not allowed ", " no more than ", " at most ", " at least ", " keep ", " avoid "}
)

// Word classes: the bits of lexicon entries.
const (
	lxFillerCore uint32 = 1 << iota
	lxFillerSoft
	lxAgree
	lxNeg
	lxLeadStrip
	lxLeadStripComma
	lxStop
	lxAttribution
	lxCommonCaps
	lxCalendar
	lxConnector
	lxLightDrop
	lxNumber // numberWords
	lxPlan   // willWords
	lxSelf   // firstPersonOpeners
	lxCommon // commonWords
	lxAbbrev // abbrevs
	lxShift  // shiftWords
)

// lexicon maps a word to the classes (word lists) it belongs to, so that a
// word is looked up once rather than once per list. It is read-only after
// package initialization.
var lexicon = func() *wordTable {
	m := map[string]uint32{}
	for _, c := range []struct {
		bit uint32
		set map[string]bool
	}{
		{lxFillerCore, fillerCore}, {lxFillerSoft, fillerSoft}, {lxAgree, agreeWords},
		{lxNeg, negWords}, {lxLeadStrip, leadStrip}, {lxLeadStripComma, leadStripComma},
		{lxStop, stopwords}, {lxAttribution, attribution}, {lxCommonCaps, commonCaps},
		{lxCalendar, calendarWords}, {lxConnector, topicConnectors}, {lxLightDrop, lightDropWords},
		{lxNumber, numberWords}, {lxPlan, willWords}, {lxSelf, firstPersonOpeners},
		{lxCommon, commonWords}, {lxAbbrev, abbrevs}, {lxShift, shiftWords},
	} {
		for w := range c.set {
			m[w] |= c.bit
		}
	}
	return newWordTable(m)
}()

// wordTable is a read-only hash table of words, faster than a map for the
// short keys of the word lists, and able to look a word up lowercased
// without lowercasing it first. tags[i] is a byte of the hash of keys[i]
// (never 0) or 0 for an empty slot: a probe reads the small tags array
// and compares a key only where its tag matches, so most words (in no
// list) are found absent without reading a key.
type wordTable struct {
	mask uint32
	tags []uint8
	keys []string
	vals []uint32
}

func newWordTable(m map[string]uint32) *wordTable {
	size := 16
	for size < 4*len(m) {
		size <<= 1
	}
	t := &wordTable{mask: uint32(size - 1), tags: make([]uint8, size), keys: make([]string, size), vals: make([]uint32, size)}
	for k, v := range m {
		if k == "" {
			panic("offline: empty word in a word list")
		}
		h := hashLower(k)
		i := h & t.mask
		for t.tags[i] != 0 {
			i = (i + 1) & t.mask
		}
		t.tags[i], t.keys[i], t.vals[i] = wordTag(h), k, v
	}
	return t
}

// wordTag is the tag of a word whose hashLower is h: its top byte, never 0.
func wordTag(h uint32) uint8 { return uint8(h>>24) | 1 }

// hashLower is FNV-1a of s with ASCII letters lowercased.
func hashLower(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// get returns the value of word s (0 when absent).
func (t *wordTable) get(s string) uint32 {
	if s == "" {
		return 0
	}
	h := hashLower(s)
	tag := wordTag(h)
	for i := h & t.mask; t.tags[i] != 0; i = (i + 1) & t.mask {
		if t.tags[i] == tag && t.keys[i] == s {
			return t.vals[i]
		}
	}
	return 0
}

// getLower returns the value of strings.ToLower(s).
func (t *wordTable) getLower(s string) uint32 {
	if !isASCII(s) {
		return t.get(strings.ToLower(s))
	}
	if s == "" {
		return 0
	}
	h := hashLower(s)
	tag := wordTag(h)
	for i := h & t.mask; t.tags[i] != 0; i = (i + 1) & t.mask {
		if k := t.keys[i]; t.tags[i] == tag && len(k) == len(s) && asciiLowerEq(s, k) {
			return t.vals[i]
		}
	}
	return 0
}

// asciiLowerEq reports whether ASCII s lowercased is lower.
func asciiLowerEq(s, lower string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// lexLower is the lexicon entry of strings.ToLower(s).
func lexLower(s string) uint32 { return lexicon.getLower(s) }

// lexVariants returns the classes of the normalized word n (exact) and the
// classes of n or of n with letter runs collapsed to two or to one ("yeahhh",
// "sooo", "okkk"), as a lookup in each word list would find them.
func lexVariants(n string) (exact, any uint32) { return lexVariantsOf(n, lexicon.get(n)) }

// lexVariantsOf is lexVariants(n), given exact = lexicon.get(n).
func lexVariantsOf(n string, exact uint32) (_, any uint32) {
	if !hasRunOver(n, 1) {
		return exact, exact // all three variants are n
	}
	var buf [lowerBufLen]byte
	if len(n) > len(buf) {
		return exact, exact | lexicon.get(collapseRuns(n, 2)) | lexicon.get(collapseRuns(n, 1))
	}
	return exact, exact | lexicon.get(string(appendCollapsed(buf[:0], n, 2))) | lexicon.get(string(appendCollapsed(buf[:0], n, 1)))
}

// Phrase classes, as bits of a phraseMatch.
const (
	phQuestionStart uint16 = 1 << iota // prefix only
	phProposalStart                    // prefix only
	phRequest
	phStrongDecision
	phWeakDecision
	phPreference
	phDone
	phNext
	phConstraint
	phLets      // " let's "
	phSuggested // " suggested "
	phOffered   // " offered "

	phPrefixOnly = phQuestionStart | phProposalStart
)

// phrase is one entry of phraseIndex: a space-delimited phrase and the
// classes it belongs to.
type phrase struct {
	text string
	bits uint16
}

// phraseIndex maps the first word of every trait phrase to its phrases, so
// that a plain() string is matched against all lists in one pass over its
// words rather than one substring search per phrase. It is read-only after
// package initialization.
var phraseIndex = func() map[string][]phrase {
	idx := map[string][]phrase{}
	add := func(bits uint16, list ...string) {
		for _, ph := range list {
			first, _, _ := strings.Cut(ph[1:], " ")
			found := false
			for i := range idx[first] {
				if idx[first][i].text == ph {
					idx[first][i].bits |= bits
					found = true
				}
			}
			if !found {
				idx[first] = append(idx[first], phrase{text: ph, bits: bits})
			}
		}
	}
	add(phQuestionStart, questionStarts...)
	add(phProposalStart, proposalStarts...)
	add(phRequest, requestPhrases...)
	add(phStrongDecision, strongDecision...)
	add(phWeakDecision, weakDecision...)
	add(phPreference, preferencePhrases...)
	add(phDone, donePhrases...)
	add(phNext, nextPhrases...)
	add(phConstraint, constraintPhrases...)
	add(phLets, " let's ")
	add(phSuggested, " suggested ")
	add(phOffered, " offered ")
	return idx
}()

// phraseTable maps the first words of phraseIndex to 1 + their index in
// phraseLists, for a faster lookup.
var phraseTable, phraseLists = func() (*wordTable, [][]phrase) {
	m := map[string]uint32{}
	var lists [][]phrase
	for w, l := range phraseIndex {
		lists = append(lists, l)
		m[w] = uint32(len(lists))
	}
	return newWordTable(m), lists
}()

// phrasesOf returns the phrases that start with word w.
func phrasesOf(w string) []phrase {
	if i := phraseTable.get(w); i > 0 {
		return phraseLists[i-1]
	}
	return nil
}

// matchPhrases reports the phrase classes found in p, a plain() string:
// phrases of the prefix-only classes count at the start of p only.
// It is equivalent to strings.Contains(p, phrase) (or strings.HasPrefix for
// the prefix classes) over every phrase of every list: each phrase starts
// and ends with a space and p's words are separated by single spaces, so a
// phrase can only occur where one of p's words starts.
func matchPhrases(p string) uint16 {
	var bits uint16
	for i := 0; i < len(p); {
		if p[i] != ' ' {
			i++
			continue
		}
		start := i + 1
		end := start
		for end < len(p) && p[end] != ' ' {
			end++
		}
		if end == len(p) {
			break
		}
		for _, ph := range phrasesOf(p[start:end]) {
			b := ph.bits
			if i > 0 {
				b &^= phPrefixOnly
			}
			if b&^bits != 0 && strings.HasPrefix(p[i:], ph.text) {
				bits |= b
			}
		}
		i = end
	}
	return bits
}

// hasPrefixClass reports whether p starts with a phrase of class bit.
func hasPrefixClass(p string, bit uint16) bool {
	if len(p) == 0 || p[0] != ' ' {
		return false
	}
	w, _, ok := strings.Cut(p[1:], " ")
	if !ok {
		return false
	}
	for _, ph := range phrasesOf(w) {
		if ph.bits&bit != 0 && strings.HasPrefix(p, ph.text) {
			return true
		}
	}
	return false
}

// isInjection is injectionRe.MatchString(s). ASCII text is matched by
// matchInjectionASCII in one pass; the regular expression runs only on
// non-ASCII text (which case folding could turn into a match: "ſ" folds to
// "s").
func isInjection(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return injectionRe.MatchString(s)
		}
	}
	return matchInjectionASCII(s)
}

// matchInjectionASCII is injectionRe.MatchString(s) for ASCII s. The
// expression's first alternative reads deterministically: after the verb
// and its white space comes either one of the optional words (then white
// space again) or one of the nouns, never both (no optional word shares a
// prefix with a noun or with another optional word, and none starts with
// white space), so the scan needs no backtracking. The other alternatives
// are literals.
func matchInjectionASCII(s string) bool {
	for i := 0; i+1 < len(s); i++ {
		if !injectionFirst[s[i]] {
			continue
		}
		// (the first two letters, lowercased, pick the literal to try:
		// most positions pick none)
		var ok bool
		switch uint16(s[i]|0x20)<<8 | uint16(s[i+1]|0x20) {
		case 'i'<<8 | 'g':
			ok = hasPrefixLower(s[i:], "ignore") && injectionTail(s[i+len("ignore"):])
		case 'd'<<8 | 'i':
			ok = hasPrefixLower(s[i:], "disregard") && injectionTail(s[i+len("disregard"):])
		case 'd'<<8 | 'e':
			ok = hasPrefixLower(s[i:], "developer mode")
		case 'f'<<8 | 'o':
			ok = hasPrefixLower(s[i:], "forget") && injectionTail(s[i+len("forget"):])
		case 'o'<<8 | 'v':
			ok = hasPrefixLower(s[i:], "override") && injectionTail(s[i+len("override"):])
		case 's'<<8 | 'y':
			ok = hasPrefixLower(s[i:], "system prompt")
		case 'y'<<8 | 'o':
			ok = hasPrefixLower(s[i:], "you are now")
		case 'j'<<8 | 'a':
			ok = hasPrefixLower(s[i:], "jailbreak")
		case 'n'<<8 | 'e':
			ok = hasPrefixLower(s[i:], "new instructions")
		}
		if ok {
			return true
		}
	}
	return false
}

// injectionFirst flags the first letters (in either case) of the literals
// matchInjectionASCII tries.
var injectionFirst = func() (t [256]bool) {
	for _, c := range "idfosyjn" {
		t[c], t[c-('a'-'A')] = true, true
	}
	return t
}()

// injectionTail reports whether s starts with what injectionRe's first
// alternative needs after its verb: \s+(all\s+|any\s+|…)*(instructions|
// prompts?|messages|rules|context), in any case.
func injectionTail(s string) bool {
	i := skipRESpace(s, 0)
	if i == 0 {
		return false
	}
	for {
		t := s[i:]
		for _, n := range injectionNouns {
			if hasPrefixLower(t, n) {
				return true
			}
		}
		adv := 0
		for _, o := range injectionFillers {
			if hasPrefixLower(t, o) {
				adv = len(o)
				break
			}
		}
		if adv == 0 {
			return false
		}
		j := skipRESpace(s, i+adv)
		if j == i+adv {
			return false
		}
		i = j
	}
}

// injectionNouns and injectionFillers are the words of injectionRe's first
// alternative ("prompts?" is "prompt": a prefix match).
var (
	injectionNouns   = []string{"instructions", "prompt", "messages", "rules", "context"}
	injectionFillers = []string{"all", "any", "the", "your", "previous", "prior", "above", "earlier"}
)

// skipRESpace returns the index of the first byte of s from i on that is
// not in the regular expressions' \s class ([\t\n\f\r ]).
func skipRESpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\f' || s[i] == '\r') {
		i++
	}
	return i
}

// hasPrefixLower reports whether s starts with lower, an ASCII lowercase
// literal, in any ASCII case.
func hasPrefixLower(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for j := 0; j < len(lower); j++ {
		c := s[j]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[j] {
			return false
		}
	}
	return true
}

var injectionRe = regexp.MustCompile(`(?i)(ignore|disregard|forget|override)\s+(all\s+|any\s+|the\s+|your\s+|previous\s+|prior\s+|above\s+|earlier\s+)*(instructions|prompts?|messages|rules|context)|system prompt|you are now|developer mode|jailbreak|new instructions`)

// isLaugh reports laughter tokens: lol, lmao, haha, hehe, xd, rofl, …
func isLaugh(n string) bool {
	n = collapseRuns(n, 2)
	switch {
	case n == "":
		return false
	case strings.HasPrefix(n, "lol") || strings.HasPrefix(n, "lmao") ||
		strings.HasPrefix(n, "lmfao") || strings.HasPrefix(n, "rofl") ||
		strings.HasPrefix(n, "kek") || n == "xd" || n == "xdd" || n == "lul" ||
		n == "omegalul" || n == "lolz" || n == "lulz" || n == "ded" || n == "dead" ||
		n == "hah" || n == "heh":
		return true
	}
	// ha, haha, hahaha, hehe, hihi, ahah, jaja, kkkk
	if len(n) >= 2 {
		ok := true
		for i := 0; i < len(n); i++ {
			c := n[i]
			if c != 'h' && c != 'a' && c != 'e' && c != 'i' && c != 'j' {
				ok = false
				break
			}
		}
		if ok && strings.ContainsAny(n, "hj") && strings.ContainsAny(n, "aei") {
			return true
		}
	}
	return false
}

// appendCollapsed appends collapseRuns(s, max) to dst.
func appendCollapsed(dst []byte, s string, max int) []byte {
	var prev rune
	run := 0
	for _, r := range s {
		if r == prev {
			run++
		} else {
			prev, run = r, 1
		}
		if run <= max {
			dst = utf8.AppendRune(dst, r)
		}
	}
	return dst
}
