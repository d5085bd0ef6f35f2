package events

import (
	"strconv"
	"unicode/utf8"
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
	var seen uint16
	d.ws()
	if d.eat('}') {
		return d.end()
	}
	for {
		d.ws()
		key, ok := d.str()
		if !ok {
			return false
		}
		d.ws()
		if !d.eat(':') {
			return false
		}
		d.ws()
		bit, ok := turnField(key)
		if !ok || seen&bit != 0 {
			return false // unknown or repeated field: let encoding/json decide
		}
		seen |= bit
		switch key {
		case "v":
			n, ok := d.int()
			if !ok {
				return false
			}
			t.V = n
		case "tokens":
			n, ok := d.int()
			if !ok {
				return false
			}
			t.Tokens = n
		case "context_tokens":
			n, ok := d.int()
			if !ok {
				return false
			}
			t.ContextTokens = n
		case "meta":
			m, ok := d.meta()
			if !ok {
				return false
			}
			t.Meta = m
		default:
			s, ok := d.str()
			if !ok {
				return false
			}
			switch key {
			case "session":
				t.Session = s
			case "turn_id":
				t.TurnID = s
			case "speaker":
				t.Speaker = s
			case "role":
				t.Role = s
			case "text":
				t.Text = s
			case "kind":
				t.Kind = s
			case "tool":
				t.Tool = s
			case "at":
				// The same strict RFC 3339 parser time.Time's JSON decoding uses.
				if err := t.At.UnmarshalText([]byte(s)); err != nil {
					return false
				}
			}
		}
		d.ws()
		if d.eat(',') {
			continue
		}
		if d.eat('}') {
			return d.end()
		}
		return false
	}
}

func turnField(key string) (uint16, bool) {
	switch key {
	case "v":
		return 1 << 0, true
	case "session":
		return 1 << 1, true
	case "turn_id":
		return 1 << 2, true
	case "at":
		return 1 << 3, true
	case "speaker":
		return 1 << 4, true
	case "role":
		return 1 << 5, true
	case "text":
		return 1 << 6, true
	case "kind":
		return 1 << 7, true
	case "tool":
		return 1 << 8, true
	case "tokens":
		return 1 << 9, true
	case "context_tokens":
		return 1 << 10, true
	case "meta":
		return 1 << 11, true
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
	n, err := strconv.Atoi(string(d.b[start:d.i]))
	return n, err == nil
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
