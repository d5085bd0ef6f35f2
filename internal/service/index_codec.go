package service

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/fnv"
	"maps"
	"math/bits"
	"reflect"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/state"
)

// The persisted form of a session's replay (index_store.go keeps it): a
// binary encoding written and read through the index's own types, so
// that a restart loads the index instead of scanning the stream and
// analyzing every turn again.
//
// Versioned: every entry starts with indexFormat and indexFingerprint. The
// fingerprint hashes the shape of the types encoded here (field names,
// types and tags of replay, indexDoc, posting, memory, events.Turn and
// state.Session) and what the analyzer makes of a probe text (stemmer,
// stop words, question words): a change to any of them gives another
// fingerprint, and every entry written before it is rebuilt from the
// stream instead of being read with the wrong meaning. The index's own
// structures (turnIndex, indexBase) count by name only: what they encode
// is their docs and postings, and the rest is what requests keep in
// memory (caches, scratch space), which may change without making a
// stored index mean something else. A change to the encoding itself
// bumps indexFormat.
//
// Layout (little endian; uv = unsigned varint, str = uv length + bytes):
//
//	"FSRX" uv(format) u64(fingerprint) str(key)
//	uv(from) uv(next) uv(lastReset) time(resetAt) uv(applied) uv(read) uv(memNext)
//	uv(memBytes) str(session JSON)
//	uv(#raw turns) uv(#repeated) uv(repeated turns' seq deltas)...
//	uv(#docs) per doc: uv(raw delta) uv(seq delta) uv(len)
//	uv(#words) per word: str(word)
//	per doc, its turn: uv(V) str(turn_id) time(at) uv(speaker) uv(role) uv(kind) uv(tool)
//	  v(tokens) v(context tokens) uv(#meta) per meta: str(key) str(value)
//	  uv(#text words) per text word: uv(word)
//	uv(#terms) uv(#postings of all terms) per term, in increasing order:
//	  str(term) uv(#postings) per posting: uv(doc delta << 1 | tf > 1) [uv(tf - 2)]
//	uv(#memories) per memory: str(id) str(speaker) str(text) str(turnID) str(supersedes) time(at) time(published)
//
// The words are the strings the turns share, numbered in the order the
// turns first use them: a turn's text is its words joined by single
// spaces (split at every space, so any text is kept exactly), its
// speaker, role, kind and tool one word each. A conversation says the
// same few thousand words again and again: a text takes a byte or two a
// word instead of its letters, and a 5,000-turn session's encoding a
// third of what it takes with its texts spelled out. Numbered by first
// use, the words of an index extended after a load are the loaded ones
// and then the new ones, as a build from all of its events numbers them:
// both encode alike.
//
// Decoding reads the doc table, checks the words, the turns and the
// posting lists where they are and notes their offsets (indexBase): a
// turn or a term's postings are decoded when a request uses them.
//
// The key names what the entry was built from (session, stream, layout,
// admission rules); an entry whose key differs is not this session's
// replay and is rebuilt.
const indexFormat = 3

// indexMagic starts every encoded replay.
const indexMagic = "FSRX"

// indexFingerprint identifies the structure and the analysis the
// encoding depends on (see above).
var indexFingerprint = fingerprint()

var (
	// errIndexVersion: written by another format or structure.
	errIndexVersion = errors.New("written by another version of the index")
	// errIndexCorrupt: not a well-formed replay.
	errIndexCorrupt = errors.New("undecodable")
)

func fingerprint() uint64 {
	h := fnv.New64a()
	seen := map[reflect.Type]bool{reflect.TypeFor[turnIndex](): true, reflect.TypeFor[indexBase](): true}
	for _, v := range []any{replay{}, indexDoc{}, posting{}, memory{}, events.Turn{}, state.Session{}} {
		typeShape(h, reflect.TypeOf(v), seen)
	}
	for _, words := range []map[string]bool{stopWords, questionWords} {
		for _, w := range slices.Sorted(maps.Keys(words)) {
			fmt.Fprintf(h, "%s,", w)
		}
	}
	newAnalyzer().each("Bob's batteries weren't discussed: the TOURNAMENT in Tokyo, 2026 ünïcode naïve déjà-vu", func(t string) {
		fmt.Fprintf(h, "%s|", t)
	})
	return h.Sum64()
}

// typeShape writes t's structure to h: kinds, names, field names and
// tags, recursively (each named type once).
func typeShape(h hash.Hash, t reflect.Type, seen map[reflect.Type]bool) {
	fmt.Fprintf(h, "%s:%s:%s(", t.PkgPath(), t.Name(), t.Kind())
	defer fmt.Fprint(h, ")")
	if t.Name() != "" {
		if seen[t] {
			return
		}
		seen[t] = true
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(h, "%s `%s` ", f.Name, f.Tag)
			typeShape(h, f.Type, seen)
		}
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		typeShape(h, t.Elem(), seen)
	case reflect.Map:
		typeShape(h, t.Key(), seen)
		typeShape(h, t.Elem(), seen)
	}
}

// encodeReplay appends rp's persisted form, under key, to b.
func encodeReplay(b []byte, key string, rp *replay) ([]byte, error) {
	sess, err := json.Marshal(rp.sess)
	if err != nil {
		return nil, fmt.Errorf("encoding the replay's session state: %w", err)
	}
	w := indexWriter{b: b}
	w.b = append(w.b, indexMagic...)
	w.uv(indexFormat)
	w.b = binary.LittleEndian.AppendUint64(w.b, indexFingerprint)
	w.str(key)
	w.uv(rp.from)
	w.uv(rp.next)
	w.uv(rp.lastReset)
	w.time(rp.resetAt)
	w.uv(uint64(rp.applied))
	w.uv(uint64(rp.read))
	w.uv(rp.memNext)
	w.uv(uint64(rp.memBytes))
	w.str(string(sess))
	w.uv(uint64(rp.raws))
	w.uv(uint64(len(rp.dups)))
	var prev uint64
	for _, s := range rp.dups {
		w.uv(s - prev)
		prev = s
	}
	x := rp.idx
	w.uv(uint64(x.docs.n()))
	var prevRaw int64
	prev = 0
	for i := range x.docs.n() {
		d := x.docs.at(i)
		w.uv(uint64(d.raw - prevRaw))
		w.uv(d.seq - prev)
		prevRaw, prev = d.raw, d.seq
		w.uv(uint64(d.len))
	}
	// The base's words and turns as they were read, then the turns added
	// since, numbering the words they add after the base's.
	dict := textDict{ids: map[string]uint32{}}
	nbase := 0
	if x.base != nil {
		nbase = x.base.docs
		for i := range x.base.words() {
			dict.id(x.base.word(i))
		}
	}
	added := indexWriter{}
	for d := nbase; d < x.docs.n(); d++ {
		added.turn(x.turns[d], &dict)
	}
	w.uv(uint64(len(dict.words)))
	for _, word := range dict.words {
		w.str(word)
	}
	if nbase > 0 {
		w.b = append(w.b, x.base.turnBytes(0, nbase)...)
	}
	w.b = append(w.b, added.b...)
	// Every term: those read or added (postings) and the base's others,
	// copied as they were read.
	terms := slices.Collect(maps.Keys(x.postings))
	var baseOnly []int
	total := 0
	for _, pl := range x.postings {
		total += len(pl)
	}
	if x.base != nil {
		for i := range x.base.terms() {
			if _, ok := x.postings[x.base.term(i)]; !ok {
				baseOnly = append(baseOnly, i)
				r := x.base.reader(x.base.termAt.at(i))
				r.str()
				total += r.int()
			}
		}
	}
	slices.Sort(terms)
	w.uv(uint64(len(terms) + len(baseOnly)))
	w.uv(uint64(total))
	for len(terms) > 0 || len(baseOnly) > 0 {
		if len(baseOnly) > 0 && (len(terms) == 0 || x.base.term(baseOnly[0]) < terms[0]) {
			w.b = append(w.b, x.base.entry(baseOnly[0])...)
			baseOnly = baseOnly[1:]
			continue
		}
		pl := x.postings[terms[0]]
		w.str(terms[0])
		terms = terms[1:]
		w.uv(uint64(len(pl)))
		var prevDoc int32
		for _, p := range pl {
			if p.tf == 1 {
				w.uv(uint64(p.doc-prevDoc) << 1)
			} else {
				w.uv(uint64(p.doc-prevDoc)<<1 | 1)
				w.uv(uint64(p.tf - 2))
			}
			prevDoc = p.doc
		}
	}
	w.uv(uint64(len(rp.mems)))
	for _, m := range rp.mems {
		w.str(m.id)
		w.str(m.speaker)
		w.str(m.text)
		w.str(m.turnID)
		w.str(m.supersedes)
		w.time(m.at)
		w.time(m.published)
	}
	return w.b, nil
}

type indexWriter struct{ b []byte }

// textDict numbers the words of an encoding's turns in order of first
// use.
type textDict struct {
	ids   map[string]uint32
	words []string
}

// id is word's number, given the next one if it is new.
func (d *textDict) id(word string) uint64 {
	if i, ok := d.ids[word]; ok {
		return uint64(i)
	}
	i := uint32(len(d.words))
	d.ids[word] = i
	d.words = append(d.words, word)
	return uint64(i)
}

func (w *indexWriter) uv(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *indexWriter) v(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *indexWriter) str(s string) {
	w.uv(uint64(len(s)))
	w.b = append(w.b, s...)
}

// time: a zero time is one 0 byte; any other is 1 for UTC, or 2 and its
// zone offset in seconds, then its Unix seconds and nanoseconds. (A named zone is
// kept as its offset: the wire's times are RFC 3339.)
func (w *indexWriter) time(t time.Time) {
	switch _, off := t.Zone(); {
	case t.IsZero():
		w.uv(0)
		return
	case t.Location() == time.UTC:
		w.uv(1)
	default:
		w.uv(2)
		w.v(int64(off))
	}
	w.v(t.Unix())
	w.uv(uint64(t.Nanosecond()))
}

func (w *indexWriter) turn(t *events.Turn, dict *textDict) {
	w.uv(uint64(t.V))
	w.str(t.TurnID)
	w.time(t.At)
	w.uv(dict.id(t.Speaker))
	w.uv(dict.id(t.Role))
	w.uv(dict.id(t.Kind))
	w.uv(dict.id(t.Tool))
	w.v(int64(t.Tokens))
	w.v(int64(t.ContextTokens))
	w.uv(uint64(len(t.Meta)))
	for _, k := range slices.Sorted(maps.Keys(t.Meta)) {
		w.str(k)
		w.str(t.Meta[k])
	}
	w.uv(uint64(strings.Count(t.Text, " ") + 1))
	for text := t.Text; ; {
		i := strings.IndexByte(text, ' ')
		if i < 0 {
			w.uv(dict.id(text))
			break
		}
		w.uv(dict.id(text[:i]))
		text = text[i+1:]
	}
}

// indexHeader reads an encoded replay's version and key; errIndexVersion
// if it was written by another format or structure.
func indexHeader(b []byte) (key string, rest []byte, err error) {
	if !strings.HasPrefix(string(b[:min(len(b), len(indexMagic))]), indexMagic) {
		return "", nil, errIndexCorrupt
	}
	r := indexReader{b: b, s: string(b[:min(len(b), maxHeader)]), off: len(indexMagic)}
	r.b = b[:len(r.s)]
	if format := r.uv(); r.err == nil && format != indexFormat {
		return "", nil, fmt.Errorf("%w (format %d, this one reads %d)", errIndexVersion, format, indexFormat)
	}
	if fp := r.u64(); r.err == nil && fp != indexFingerprint {
		return "", nil, fmt.Errorf("%w (structure %016x, this one is %016x)", errIndexVersion, fp, indexFingerprint)
	}
	key = r.str()
	if r.err != nil {
		return "", nil, r.err
	}
	return key, b[r.off:], nil
}

// maxHeader bounds an encoding's header (magic, versions, key).
const maxHeader = 4096

// decodeReplay decodes what indexHeader left of an encoded replay into a
// replay of session with the service's analyzer and admission rules.
// Every count, index and string is checked, the turns' and posting
// lists' too: bad data is errIndexCorrupt, never a panic or an index that
// breaks its invariants.
//
// The replay keeps a copy of body's words, turns and terms as its
// index's base (indexBase.keep): its turns and posting lists are decoded
// when first used, and its strings (texts, ids, terms) are slices of the
// copy, not an allocation each. body is not held.
func decodeReplay(body []byte, an *analyzer, adm state.Admission, session string) (*replay, error) {
	return decodeReplayIn(body, 0, an, adm, session, false, nil)
}

// decodeReplayOwned is decodeReplay for a body the caller hands over
// (a message read from the store, written by nobody afterwards): the
// replay's base is body's words, turns and terms where they are, not a
// copy, and counts held bytes, the memory body keeps alive (its doc
// table and header too, a few percent more than a copy).
func decodeReplayOwned(body []byte, held int, an *analyzer, adm state.Admission, session string) (*replay, error) {
	return decodeReplayIn(body, max(held, len(body)), an, adm, session, false, nil)
}

// decodeOwn is decodeReplay (held 0) or decodeReplayOwned (held > 0) for
// an encoding this process made itself (encodeReplay), or unpacked from
// a packed form it made or whose encoding it checked when it read it
// from the store (index_pack.go): trusted memory, so the load's checks
// of every word, turn and posting are left out and only the offsets are
// found. Bad data is still errIndexCorrupt where the offsets are read,
// never a panic, but an index that breaks its invariants is not caught:
// never call it on bytes read from outside the process. turnAt, if not
// nil, is where each turn of body starts, then where the last one ends
// (joinTexts found them): they are not looked for again.
func decodeOwn(body []byte, held int, turnAt []uint32, an *analyzer, adm state.Admission, session string) (*replay, error) {
	if held > 0 {
		held = max(held, len(body))
	}
	return decodeReplayIn(body, held, an, adm, session, true, turnAt)
}

// replayNext is the inbound stream sequence an encoded replay (what
// indexHeader left of it) reads next, and the outbound one its memories
// do, read without decoding the rest.
func replayNext(body []byte) (next, memNext uint64, ok bool) {
	r := indexReader{b: body}
	r.uv() // from
	next = r.uv()
	r.uv() // lastReset
	r.time()
	r.int() // applied
	r.int() // read
	memNext = r.uv()
	return next, memNext, r.err == nil
}

// decodeReplayIn decodes body; held > 0: body is the base's (see
// decodeReplayOwned), else it is copied; trusted and turns: see
// decodeOwn.
func decodeReplayIn(body []byte, held int, an *analyzer, adm state.Admission, session string, trusted bool, turns []uint32) (*replay, error) {
	r := indexReader{b: body}
	if len(body) > 0 {
		r.s = unsafe.String(&body[0], len(body))
	}
	if uint64(len(body)) >= 1<<32 {
		return nil, fmt.Errorf("%w: %d bytes, more than an index holds", errIndexCorrupt, len(body))
	}
	rp := newReplay(an, adm, session, 0)
	rp.seen = nil // the indexed turns' ids, when an event is applied
	rp.from = r.uv()
	rp.next = r.uv()
	rp.lastReset = r.uv()
	rp.resetAt = r.time()
	rp.applied = r.int()
	rp.read = r.int()
	rp.memNext = r.uv()
	rp.memBytes = int64(r.int())
	sess := r.str()
	if r.err != nil {
		return nil, r.err
	}
	rp.sess = &state.Session{}
	if err := json.Unmarshal([]byte(sess), rp.sess); err != nil || rp.sess.ID != session {
		return nil, fmt.Errorf("%w: session state", errIndexCorrupt)
	}
	rp.raws = int64(r.int())
	rp.dups = make([]uint64, r.count(1))
	var prev uint64
	for i := range rp.dups {
		d := r.uv()
		if i > 0 && d == 0 {
			r.fail("sequences not increasing")
		}
		prev += d
		rp.dups[i] = prev
	}
	if r.err == nil && (len(rp.dups) > 0 && rp.dups[len(rp.dups)-1] >= rp.next || int64(len(rp.dups)) > rp.raws) {
		r.fail("repeated turns beyond the replay's position")
	}
	x := rp.idx
	ndocs := r.count(3 + minTurnBytes)
	x.docs.reserve(ndocs)
	var raw int64
	prev = 0
	for i := range ndocs {
		dr, ds := r.uv(), r.uv()
		if i > 0 && (dr == 0 || ds == 0) {
			r.fail("docs not increasing")
		}
		raw += int64(dr)
		prev += ds
		n := r.int()
		if r.err != nil {
			return nil, r.err
		}
		x.docs.add(raw, prev, int32(n))
	}
	if ndocs > 0 && (x.docs.raw(ndocs-1) >= rp.raws || x.docs.seq(ndocs-1) >= rp.next) || int64(ndocs+len(rp.dups)) != rp.raws {
		r.fail("docs beyond the replay's position, or not its turns")
	}
	nwords := r.count(1)
	base := &indexBase{b: body, s: r.s, session: session, docs: ndocs}
	wordAt := make([]uint32, nwords+1)
	for i := range nwords {
		wordAt[i] = uint32(r.off)
		r.skip()
	}
	wordAt[nwords] = uint32(r.off)
	turnAt, found := turns, trusted && r.err == nil && len(turns) == ndocs+1 && turns[0] == uint32(r.off) && turns[ndocs] <= uint32(len(body))
	if found {
		r.off = int(turns[ndocs])
	} else {
		turnAt = make([]uint32, ndocs+1)
	}
	for i := range ndocs {
		if found {
			break
		}
		turnAt[i] = uint32(r.off)
		if trusted {
			r.skipTurn()
		} else {
			r.checkTurn(nwords)
		}
		if r.err != nil {
			return nil, r.err
		}
	}
	turnAt[ndocs] = uint32(r.off)
	nterms := r.count(3)
	total := r.count(1)
	termAt := make([]uint32, nterms+1)
	last, seen := "", 0
	for i := range nterms {
		termAt[i] = uint32(r.off)
		term := r.str()
		np := r.count(1)
		if r.err != nil {
			return nil, r.err
		}
		if trusted {
			r.skipPostings(np)
			continue
		}
		if i > 0 && term <= last || np == 0 {
			r.fail("terms not increasing or without postings")
		}
		last = term
		if seen += np; seen > total {
			r.fail("more postings than counted")
		}
		if !r.checkPostings(np, ndocs) {
			return nil, r.err
		}
	}
	termAt[nterms] = uint32(r.off)
	if r.err == nil && !trusted && seen != total {
		r.fail("fewer postings than counted")
	}
	nmems := r.count(7)
	for range nmems {
		// Their own strings: body is not kept (keep, below).
		m := memory{id: r.clone(), speaker: r.clone(), text: r.clone(), turnID: r.clone(), supersedes: r.clone(), at: r.time(), published: r.time(),
			terms: map[string]int32{}}
		if r.err != nil {
			return nil, r.err
		}
		an.each(m.speaker+" "+m.text, func(t string) {
			m.len++
			if t != "" {
				m.terms[t]++
			}
		})
		rp.mems = append(rp.mems, m)
	}
	if r.err == nil && r.off != len(body) {
		r.fail("trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	// The doc table, and the words, turns and terms kept with their
	// offsets.
	x.bytes = int64(ndocs)*docTableBytes + 512
	if ndocs > 0 {
		base.keep(wordAt, turnAt, termAt, held)
		x.base = base
		x.bytes += base.bytes()
	}
	return rp, nil
}

// keep replaces the base's encoding with a copy of the part it reads
// from (the words, the turns and the terms, at wordAt, turnAt and termAt
// in it), and keeps their offsets moved and packed: the rest of the
// entry (its header, doc table, session state and memories) was decoded,
// and the buffer the store read it into is not held. With held > 0 the
// part is not copied: the base is that part of the encoding it was
// handed, which keeps held bytes alive.
func (b *indexBase) keep(wordAt, turnAt, termAt []uint32, held int) {
	from, to := wordAt[0], termAt[len(termAt)-1]
	kept := b.b[from:to:to]
	if held <= 0 {
		kept = append([]byte(nil), kept...) // not cleared first, as make would
	}
	b.held = int64(held)
	for _, at := range [][]uint32{wordAt, turnAt, termAt} {
		for i := range at {
			at[i] -= from
		}
	}
	b.wordAt, b.turnAt, b.termAt = packOffsets(wordAt), packOffsets(turnAt), packOffsets(termAt)
	b.b = kept
	b.s = ""
	if len(kept) > 0 {
		b.s = unsafe.String(&kept[0], len(kept))
	}
}

// checkPostings reads np postings of a list of an index of ndocs docs
// (doc deltas, the first from doc 0, and frequencies) and checks that
// they increase and stay in range; false (and r.err) if not. A tight loop:
// a load checks every posting of the session.
func (r *indexReader) checkPostings(np, ndocs int) bool {
	b, off := r.b, r.off
	doc := uint64(0)
	for j := range np {
		// A doc delta of one or two bytes and a frequency of one, or of
		// one byte after it, read here; anything longer by posting.
		var d, tf uint64
		read := false
		if off+2 < len(b) {
			c0, c1, c2 := uint64(b[off]), uint64(b[off+1]), uint64(b[off+2])
			n := uint64(1)
			v := c0
			if c0 >= 0x80 {
				n, v = 2, c0&0x7f|c1<<7
			}
			next := c1
			if n == 2 {
				next = c2
			}
			switch {
			case c0 >= 0x80 && c1 >= 0x80:
			case v&1 == 0:
				d, tf, read = v>>1, 1, true
				off += int(n)
			case next < 0x80:
				d, tf, read = v>>1, next+2, true
				off += int(n) + 1
			}
		}
		if !read {
			r.off = off
			d, tf = r.posting()
			if r.err != nil {
				return false
			}
			off = r.off
		}
		if j > 0 && d == 0 || d > uint64(ndocs) {
			r.off = off
			r.fail("postings not increasing")
			return false
		}
		doc += d
		if doc >= uint64(ndocs) || tf == 0 || tf > 1<<30 {
			r.off = off
			r.fail("posting out of range")
			return false
		}
	}
	r.off = off
	return true
}

// skipPostings reads past np postings without decoding them (decodeOwn).
func (r *indexReader) skipPostings(np int) {
	b, off := r.b, r.off
	for np > 0 {
		// Eight postings of one byte each, a delta below 64 and a
		// frequency of one (the common case in a long list), at once.
		if np >= 8 && off+8 <= len(b) && binary.LittleEndian.Uint64(b[off:])&0x8181818181818181 == 0 {
			off += 8
			np -= 8
			continue
		}
		np--
		// A doc delta, its low bit set when a frequency follows.
		if off >= len(b) {
			break
		}
		c := b[off]
		more := c&1 == 1
		off++
		for c >= 0x80 && off < len(b) {
			c = b[off]
			off++
		}
		if more {
			for off < len(b) && b[off] >= 0x80 {
				off++
			}
			off++
		}
	}
	if off > len(b) {
		off = len(b)
		r.fail("postings beyond the data")
	}
	r.off = off
}

// skipTurn reads past a turn without its checks (decodeOwn).
func (r *indexReader) skipTurn() { r.skipVarints(skipTurnFixed(r)) }

// skipVarints reads past n varints, eight bytes at a time where it can:
// a varint ends at a byte below 0x80.
func (r *indexReader) skipVarints(n int) {
	if r.err != nil {
		return
	}
	b, off := r.b, r.off
	for off+8 <= len(b) {
		ends := bits.OnesCount64(^binary.LittleEndian.Uint64(b[off:]) & 0x8080808080808080)
		if ends >= n {
			break
		}
		n -= ends
		off += 8
	}
	for ; n > 0 && off < len(b); off++ {
		if b[off] < 0x80 {
			n--
		}
	}
	r.off = off
	if n > 0 {
		r.fail("varints beyond the data")
	}
}

// posting reads a posting's doc delta and frequency.
func (r *indexReader) posting() (delta, tf uint64) {
	v := r.uv()
	if tf = 1; v&1 == 1 {
		tf = r.uv() + 2
	}
	return v >> 1, tf
}

// checkTurn reads a turn as turn does, with its checks, without making
// it; false (and r.err) if it is not well-formed (a word beyond the
// nwords of the encoding, among others).
func (r *indexReader) checkTurn(nwords int) bool {
	r.int() // V
	r.skip()
	switch r.uv() { // At: see time
	case 0:
	case 1:
		r.checkInstant()
	case 2:
		if off := r.v(); off < -86400 || off > 86400 {
			r.fail("bad zone offset")
		}
		r.checkInstant()
	default:
		r.fail("bad time")
	}
	r.checkWords(4, nwords)
	r.v()
	r.v()
	for range r.count(2) {
		r.skip()
		r.skip()
	}
	n := r.count(1)
	if r.err == nil && n == 0 {
		r.fail("text without words")
	}
	r.checkWords(n, nwords)
	return r.err == nil
}

// checkWords reads n words' numbers and checks that they are below
// nwords. A tight loop: a load checks every word of every turn.
func (r *indexReader) checkWords(n, nwords int) {
	b, off := r.b, r.off
	// Words of one or two bytes, without a branch per word while two
	// bytes are left: their faults (a longer number, one out of range)
	// are gathered, and the careful loop below reads them again if any.
	var fault, i int
	for ; i < n && off+1 < len(b); i++ {
		c0, c1 := int(b[off]), int(b[off+1])
		two := c0 >> 7
		v := c0&0x7f | c1<<7*two
		fault |= c1 >> 7 & two
		if v >= nwords {
			fault = 1
		}
		off += 1 + two
	}
	if fault != 0 {
		off, i = r.off, 0
	}
	for ; i < n; i++ {
		r.off = off
		if i := r.int(); r.err == nil && i >= nwords {
			r.fail("word out of range")
		}
		if r.err != nil {
			return
		}
		off = r.off
	}
	r.off = off
}

// skip reads a string without making it.
func (r *indexReader) skip() {
	n := r.int()
	if r.err == nil && n > len(r.b)-r.off {
		r.fail("string beyond the data")
		return
	}
	r.off += n
}

// checkInstant reads what instant reads, with its checks.
func (r *indexReader) checkInstant() {
	r.v()
	if r.uv() >= 1e9 {
		r.fail("bad nanoseconds")
	}
}

// minTurnBytes is the least an encoded turn takes: its V, its turn_id,
// a time, four words, two numbers, its meta and its text's word counts
// and a word, a byte each.
const minTurnBytes = 13

// indexReader reads an encoded replay; the first error sticks and every
// later read returns zero values.
type indexReader struct {
	b   []byte
	s   string // b as a string: strings read are slices of it
	off int
	err error
}

func (r *indexReader) fail(why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at byte %d", errIndexCorrupt, why, r.off)
	}
}

func (r *indexReader) uv() uint64 {
	// One byte, the common case (postings' deltas and frequencies,
	// lengths of short strings), or two (words), without a call.
	if r.err == nil && r.off < len(r.b) {
		if c := r.b[r.off]; c < 0x80 {
			r.off++
			return uint64(c)
		}
		if r.off+1 < len(r.b) && r.b[r.off+1] < 0x80 {
			v := uint64(r.b[r.off]&0x7f) | uint64(r.b[r.off+1])<<7
			r.off += 2
			return v
		}
	}
	return readVarint(r, binary.Uvarint)
}

func (r *indexReader) v() int64 {
	if r.err == nil && r.off < len(r.b) && r.b[r.off] < 0x80 { // one byte, zig-zag
		u := r.b[r.off]
		r.off++
		return int64(u>>1) ^ -int64(u&1)
	}
	return readVarint(r, binary.Varint)
}

// readVarint reads one varint with decode (binary.Uvarint or
// binary.Varint).
func readVarint[T uint64 | int64](r *indexReader, decode func([]byte) (T, int)) T {
	if r.err != nil {
		return 0
	}
	v, n := decode(r.b[r.off:])
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.off += n
	return v
}

// int is a non-negative count or size that fits an int32.
func (r *indexReader) int() int {
	v := r.uv()
	if v > 1<<31-1 {
		r.fail("number out of range")
		return 0
	}
	return int(v)
}

// count is a number of items that take at least min bytes each: never
// more than the bytes left could hold.
func (r *indexReader) count(minBytes int) int {
	n := r.int()
	if r.err == nil && n > (len(r.b)-r.off)/minBytes {
		r.fail("count beyond the data")
		return 0
	}
	return n
}

func (r *indexReader) u64() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 8 {
		r.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *indexReader) str() string {
	n := r.int()
	if r.err != nil {
		return ""
	}
	if n > len(r.b)-r.off {
		r.fail("string beyond the data")
		return ""
	}
	s := r.s[r.off : r.off+n]
	r.off += n
	return s
}

// clone is str, its own copy.
func (r *indexReader) clone() string { return strings.Clone(r.str()) }

func (r *indexReader) time() time.Time {
	switch r.uv() {
	case 0:
		return time.Time{}
	case 1:
		return r.instant().UTC()
	case 2:
		off := r.v()
		if off < -86400 || off > 86400 {
			r.fail("bad zone offset")
			return time.Time{}
		}
		return r.instant().In(time.FixedZone("", int(off)))
	default:
		r.fail("bad time")
		return time.Time{}
	}
}

func (r *indexReader) instant() time.Time {
	sec, nsec := r.v(), r.uv()
	if nsec >= 1e9 {
		r.fail("bad nanoseconds")
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec))
}

// turn reads a turn of b (checked when b was decoded).
func (r *indexReader) turn(t *events.Turn, b *indexBase) {
	t.V = r.int()
	t.Session = b.session
	t.TurnID = r.str()
	t.At = r.time()
	t.Speaker = b.word(r.int())
	t.Role = b.word(r.int())
	t.Kind = b.word(r.int())
	t.Tool = b.word(r.int())
	t.Tokens = int(r.v())
	t.ContextTokens = int(r.v())
	if n := r.count(2); n > 0 {
		t.Meta = make(map[string]string, n)
		for range n {
			k := r.str()
			t.Meta[k] = r.str()
		}
	}
	t.Text = r.text(b)
}

// text reads a text's words and joins them with single spaces: one
// allocation, none for a text of one word.
func (r *indexReader) text(b *indexBase) string {
	n := r.int()
	switch n {
	case 0:
		return ""
	case 1:
		return b.word(r.int())
	}
	var small [64]string
	words := small[:0]
	if n > len(small) {
		words = make([]string, 0, n)
	}
	size := n - 1
	for range n {
		w := b.word(r.int())
		size += len(w)
		words = append(words, w)
	}
	buf := make([]byte, 0, size)
	for i, w := range words {
		if i > 0 {
			buf = append(buf, ' ')
		}
		buf = append(buf, w...)
	}
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}
