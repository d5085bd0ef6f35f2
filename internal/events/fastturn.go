package events

import (
	"bytes"
	"encoding/binary"
	"unicode/utf8"
	"unsafe"
)

// decodeTurnFast decodes the common shape of a turn — one flat JSON object
// of strings and integers, plus an optional flat "meta" object of strings —
// without reflection. It runs on every inbound turn, where encoding/json
// costs about three times as much. It returns ok=false for anything it
// does not handle exactly like encoding/json (escapes other than the
// simple ones, floats, nulls, nesting, duplicate keys, non-RFC 3339 times),
// and the caller then uses encoding/json; FuzzFastTurnAgrees checks that
// whenever it accepts, encoding/json decodes the same Turn.
func decodeTurnFast(data []byte, t *Turn) bool {
	if !utf8.Valid(data) {
		return false // encoding/json would substitute U+FFFD; we reject it later
	}
	d := fastDec{b: data}
	d.ws()
	if !d.eat('{') {
		return false
	}
	// The string fields' raw spans, indexed by their bit's position: they
	// become strings only once the whole object is accepted, all of them
	// copied into one allocation (see strings below).
	var vals [numTurnFields]span
	var seen uint16
	d.ws()
	if d.eat('}') {
		return d.end()
	}
	for {
		d.ws()
		key, ok := d.span()
		if !ok || key.esc {
			return false // no known key needs an escape: let encoding/json decide
		}
		d.ws()
		if !d.eat(':') {
			return false
		}
		d.ws()
		bit, ok := turnField(d.b[key.start:key.end])
		if !ok || seen&(1<<bit) != 0 {
			return false // unknown or repeated field: let encoding/json decide
		}
		seen |= 1 << bit
		switch bit {
		case fieldV:
			n, ok := d.int()
			if !ok {
				return false
			}
			t.V = n
		case fieldTokens:
			n, ok := d.int()
			if !ok {
				return false
			}
			t.Tokens = n
		case fieldContextTokens:
			n, ok := d.int()
			if !ok {
				return false
			}
			t.ContextTokens = n
		case fieldMeta:
			m, ok := d.meta()
			if !ok {
				return false
			}
			t.Meta = m
		case fieldAt:
			v, ok := d.span()
			if !ok {
				return false
			}
			// The same strict RFC 3339 parser time.Time's JSON decoding uses;
			// it keeps nothing of its input, so a timestamp of usual length
			// is parsed from the stack.
			var at [64]byte
			if err := t.At.UnmarshalText(v.appendTo(at[:0], d.b)); err != nil {
				return false
			}
		default:
			v, ok := d.span()
			if !ok {
				return false
			}
			vals[bit] = v
		}
		d.ws()
		if d.eat(',') {
			continue
		}
		if d.eat('}') {
			if !d.end() {
				return false
			}
			d.strings(t, seen, &vals)
			return true
		}
		return false
	}
}

// strings sets t's string fields from their spans. One allocation holds
// them all: a turn's strings are kept or dropped together (the decoded turn
// lives as long as its event is applied or indexed), and one copy instead
// of one per field was most of the decoder's allocations.
func (d *fastDec) strings(t *Turn, seen uint16, vals *[numTurnFields]span) {
	n := 0
	for bit := range numTurnFields {
		if seen&(1<<bit) != 0 {
			n += vals[bit].end - vals[bit].start // an escape only shortens
		}
	}
	if n == 0 {
		return
	}
	buf := make([]byte, 0, n)
	var ends [numTurnFields]int
	for bit := range numTurnFields {
		if seen&(1<<bit) != 0 && vals[bit].start != vals[bit].end {
			buf = vals[bit].appendTo(buf, d.b)
		}
		ends[bit] = len(buf)
	}
	all := unsafe.String(unsafe.SliceData(buf), len(buf)) // buf is not written again
	from := 0
	for bit := range numTurnFields {
		s := all[from:ends[bit]]
		from = ends[bit]
		if seen&(1<<bit) == 0 || s == "" {
			continue
		}
		switch bit {
		case fieldSession:
			t.Session = s
		case fieldTurnID:
			t.TurnID = s
		case fieldSpeaker:
			t.Speaker = s
		case fieldRole:
			t.Role = s
		case fieldText:
			t.Text = s
		case fieldKind:
			t.Kind = s
		case fieldTool:
			t.Tool = s
		}
	}
}

// The fields of a turn, as bit positions in the seen mask.
const (
	fieldV = iota
	fieldSession
	fieldTurnID
	fieldAt
	fieldSpeaker
	fieldRole
	fieldText
	fieldKind
	fieldTool
	fieldTokens
	fieldContextTokens
	fieldMeta
	numTurnFields
)

// turnField returns the bit position of a turn's JSON key. The switch on
// string(key) does not allocate.
func turnField(key []byte) (int, bool) {
	switch string(key) {
	case "v":
		return fieldV, true
	case "session":
		return fieldSession, true
	case "turn_id":
		return fieldTurnID, true
	case "at":
		return fieldAt, true
	case "speaker":
		return fieldSpeaker, true
	case "role":
		return fieldRole, true
	case "text":
		return fieldText, true
	case "kind":
		return fieldKind, true
	case "tool":
		return fieldTool, true
	case "tokens":
		return fieldTokens, true
	case "context_tokens":
		return fieldContextTokens, true
	case "meta":
		return fieldMeta, true
	}
	return 0, false
}

type fastDec struct {
	b []byte
	i int
}

func (d *fastDec) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDec) eat(c byte) bool {
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *fastDec) end() bool {
	d.ws()
	return d.i == len(d.b)
}

// span is a JSON string's contents in the input, between its quotes.
type span struct {
	start, end int
	esc        bool // holds one of the escapes str accepts
}

// appendTo appends the string's value, its escapes resolved.
func (sp span) appendTo(dst, b []byte) []byte {
	raw := b[sp.start:sp.end]
	if !sp.esc {
		return append(dst, raw...)
	}
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' {
			i++
			switch raw[i] {
			case 'n':
				c = '\n'
			case 't':
				c = '\t'
			case 'r':
				c = '\r'
			default: // " \ /: themselves
				c = raw[i]
			}
		}
		dst = append(dst, c)
	}
	return dst
}

// span reads a JSON string with at most the escapes \" \\ \/ \n \t \r,
// like str, without copying it. The closing quote and any backslash are
// found with bytes.IndexByte and control characters eight bytes at a time
// (hasControl): a turn's text is most of its bytes, and a byte-by-byte
// loop over it was a third of the decode.
func (d *fastDec) span() (span, bool) {
	if !d.eat('"') {
		return span{}, false
	}
	sp := span{start: d.i}
	q := -1 // the next quote at or after d.i; found again only once an escape took it
	for {
		if q < d.i {
			k := bytes.IndexByte(d.b[d.i:], '"')
			if k < 0 {
				return span{}, false
			}
			q = d.i + k
		}
		seg := d.b[d.i:q]
		bs := bytes.IndexByte(seg, '\\')
		if bs < 0 {
			if hasControl(seg) {
				return span{}, false
			}
			sp.end = q
			d.i = q + 1
			return sp, true
		}
		// An escape before the quote (which may be the escaped one). Every
		// byte is looked at once: the search goes on after the escape.
		if hasControl(seg[:bs]) {
			return span{}, false
		}
		d.i += bs
		if d.i+1 >= len(d.b) {
			return span{}, false
		}
		switch d.b[d.i+1] {
		case '"', '\\', '/', 'n', 't', 'r':
		default:
			return span{}, false // \u, \b, \f: encoding/json handles them
		}
		sp.esc = true
		d.i += 2
	}
}

// hasControl reports whether b holds a byte below 0x20, which a JSON
// string may not hold unescaped. Eight bytes at a time: a word has such a
// byte iff subtracting 0x20 from each byte borrows into a byte whose top
// bit was clear (the classic "has less than n" test, exact for n <= 128).
func hasControl(b []byte) bool {
	const lo, hi = 0x2020202020202020, 0x8080808080808080
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if (w-lo)&^w&hi != 0 {
			return true
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return true
		}
	}
	return false
}

// str reads a JSON string with at most the escapes \" \\ \/ \n \t \r.
func (d *fastDec) str() (string, bool) {
	if !d.eat('"') {
		return "", false
	}
	start := d.i
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := string(d.b[start:d.i])
			d.i++
			return s, true
		case c == '\\':
			return d.strEscaped(start)
		case c < 0x20:
			return "", false
		}
		d.i++
	}
	return "", false
}

func (d *fastDec) strEscaped(start int) (string, bool) {
	buf := append([]byte(nil), d.b[start:d.i]...)
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			d.i++
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c == '\\':
			if d.i+1 >= len(d.b) {
				return "", false
			}
			switch d.b[d.i+1] {
			case '"':
				buf = append(buf, '"')
			case '\\':
				buf = append(buf, '\\')
			case '/':
				buf = append(buf, '/')
			case 'n':
				buf = append(buf, '\n')
			case 't':
				buf = append(buf, '\t')
			case 'r':
				buf = append(buf, '\r')
			default:
				return "", false // \u, \b, \f: encoding/json handles them
			}
			d.i += 2
			continue
		case c < 0x20:
			return "", false
		}
		buf = append(buf, c)
		d.i++
	}
	return "", false
}

// int reads a JSON integer that fits an int without a sign surprise.
func (d *fastDec) int() (int, bool) {
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || d.i-digits > 15 || (d.b[digits] == '0' && d.i-digits > 1) {
		return 0, false
	}
	if d.i < len(d.b) && (d.b[d.i] == '.' || d.b[d.i] == 'e' || d.b[d.i] == 'E') {
		return 0, false
	}
	n := 0 // at most 15 digits: no overflow
	for _, c := range d.b[digits:d.i] {
		n = n*10 + int(c-'0')
	}
	if digits > start {
		n = -n
	}
	return n, true
}

func (d *fastDec) meta() (map[string]string, bool) {
	if !d.eat('{') {
		return nil, false
	}
	m := map[string]string{}
	d.ws()
	if d.eat('}') {
		return m, true
	}
	for {
		d.ws()
		k, ok := d.str()
		if !ok {
			return nil, false
		}
		if _, dup := m[k]; dup {
			return nil, false
		}
		d.ws()
		if !d.eat(':') {
			return nil, false
		}
		d.ws()
		v, ok := d.str()
		if !ok {
			return nil, false
		}
		m[k] = v
		d.ws()
		if d.eat(',') {
			continue
		}
		if d.eat('}') {
			return m, true
		}
		return nil, false
	}
}
