package offline

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/foldstream/foldstream/internal/events"
)

// The state's JSON is written and read here without reflection: every
// fold reads and writes the whole state, and encoding/json spent more on
// it than the fold spends reading its turns. The bytes are those
// encoding/json writes for the state's struct tags (the codec test checks
// it), so that replay and the inspector show the state as JSON; strings
// are quoted by the outbound events' writer, so the two cannot drift.

// appendJSON appends st's JSON to b, each field after a comma (closeObject).
func (st *state) appendJSON(b []byte) ([]byte, error) {
	lists := [][]stmt{st.Open}
	for _, p := range st.Periods {
		lists = append(lists, p.Stmts)
	}
	for _, ss := range lists {
		for _, x := range ss {
			if math.IsNaN(x.W) || math.IsInf(x.W, 0) {
				return nil, fmt.Errorf("offline state: weight %v of %q is not a number", x.W, x.Text)
			}
		}
	}
	n := len(b)
	b = strconv.AppendInt(append(b, `,"v":`...), int64(st.V), 10)
	b = strconv.AppendUint(append(b, `,"sum":`...), st.Sum, 10)
	b = optBool(b, `,"agent":true`, st.Agent)
	b = optStrings(b, `,"names":`, st.Names)
	b = optInt(b, `,"others":`, int64(st.Others))
	b = appendList(b, `,"periods":`, st.Periods, appendPeriod)
	b = appendList(b, `,"open":`, st.Open, appendStmt)
	b = appendList(b, `,"facts":`, st.Facts, func(b []byte, f *fact) []byte {
		n := len(b)
		b = events.AppendJSONString(append(b, `,"id":`...), f.ID)
		b = optString(b, `,"sp":`, f.Sp)
		b = optString(b, `,"key":`, f.Key)
		b = optString(b, `,"num":`, f.Num)
		return closeObject(strconv.AppendUint(append(b, `,"sum":`...), f.Sum, 10), n)
	})
	b = optStrings(b, `,"topics":`, st.Topics)
	b = optBool(b, `,"small":true`, st.Small)
	b = appendList(b, `,"people":`, st.People, func(b []byte, p *person) []byte {
		n := len(b)
		b = events.AppendJSONString(append(b, `,"name":`...), p.Name)
		return closeObject(appendList(b, `,"facts":`, p.Facts, func(b []byte, f *pfact) []byte {
			n := len(b)
			b = events.AppendJSONString(append(b, `,"id":`...), f.ID)
			b = events.AppendJSONString(append(b, `,"kind":`...), f.Kind)
			b = optString(b, `,"slot":`, f.Slot)
			b = events.AppendJSONString(append(b, `,"text":`...), f.Text)
			return closeObject(optInt(b, `,"at":`, f.At), n)
		}), n)
	})
	return closeObject(optString(b, `,"voc":`, st.Voc), n), nil
}

func appendPeriod(b []byte, p *period) []byte {
	n := len(b)
	b = optInt(b, `,"from":`, p.From)
	b = optInt(b, `,"to":`, p.To)
	b = optStrings(b, `,"names":`, p.Names)
	b = optStrings(b, `,"topics":`, p.Topics)
	return closeObject(appendList(b, `,"stmts":`, p.Stmts, appendStmt), n)
}

func appendStmt(b []byte, x *stmt) []byte {
	n := len(b)
	b = optString(b, `,"sp":`, x.Sp)
	b = optInt(b, `,"at":`, x.At)
	b = events.AppendJSONString(append(b, `,"text":`...), x.Text)
	b = appendJSONFloat(append(b, `,"w":`...), x.W)
	b = optInt(b, `,"k":`, int64(x.K))
	b = optString(b, `,"terms":`, x.Terms)
	b = optString(b, `,"key":`, x.Key)
	b = optString(b, `,"ph":`, x.Ph)
	return closeObject(optBool(b, `,"batch":true`, x.Batch), n)
}

// closeObject ends the object written from n: its first comma opens it.
func closeObject(b []byte, n int) []byte {
	if len(b) == n {
		return append(b, "{}"...)
	}
	b[n] = '{'
	return append(b, '}')
}

// appendList writes xs, when there are any, as the field name.
func appendList[T any](b []byte, name string, xs []T, each func([]byte, *T) []byte) []byte {
	if len(xs) == 0 {
		return b
	}
	b = append(append(b, name...), '[')
	for i := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = each(b, &xs[i])
	}
	return append(b, ']')
}

func optStrings(b []byte, name string, ss []string) []byte {
	return appendList(b, name, ss, func(b []byte, s *string) []byte { return events.AppendJSONString(b, *s) })
}

func optString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return events.AppendJSONString(append(b, name...), s)
}

func optInt(b []byte, name string, v int64) []byte {
	if v == 0 {
		return b
	}
	return strconv.AppendInt(append(b, name...), v, 10)
}

func optBool(b []byte, field string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, field...)
}

// appendJSONFloat writes f as encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-09 → e-9
		b = b[:n-1]
	}
	return b
}

// ---- reading ----

// readState reads the JSON of a state, as encoding/json would into the
// state's struct (fields it does not know are skipped, null leaves a
// field empty); it fails on anything that is not JSON.
func readState(data []byte) (*state, error) {
	r := &jsonReader{b: data, s: string(data)}
	st := &state{}
	r.object(func(k string) {
		switch k {
		case "v":
			st.V = int(r.int())
		case "sum":
			st.Sum = r.uint()
		case "agent":
			st.Agent = r.bool()
		case "names":
			st.Names = r.strings()
		case "others":
			st.Others = int(r.int())
		case "periods":
			st.Periods = st.Periods[:0]
			r.array(func() {
				var p period
				r.object(func(k string) {
					switch k {
					case "from":
						p.From = r.int()
					case "to":
						p.To = r.int()
					case "names":
						p.Names = r.strings()
					case "topics":
						p.Topics = r.strings()
					case "stmts":
						p.Stmts = r.stmts()
					default:
						r.skip()
					}
				})
				st.Periods = append(st.Periods, p)
			})
		case "open":
			st.Open = r.stmts()
		case "facts":
			st.Facts = st.Facts[:0]
			r.array(func() {
				var f fact
				r.object(func(k string) {
					switch k {
					case "id":
						f.ID = r.str()
					case "sp":
						f.Sp = r.str()
					case "key":
						f.Key = r.str()
					case "num":
						f.Num = r.str()
					case "sum":
						f.Sum = r.uint()
					default:
						r.skip()
					}
				})
				st.Facts = append(st.Facts, f)
			})
		case "topics":
			st.Topics = r.strings()
		case "small":
			st.Small = r.bool()
		case "people":
			st.People = st.People[:0]
			r.array(func() {
				var p person
				r.object(func(k string) {
					switch k {
					case "name":
						p.Name = r.str()
					case "facts":
						p.Facts = p.Facts[:0]
						r.array(func() {
							var f pfact
							r.object(func(k string) {
								switch k {
								case "id":
									f.ID = r.str()
								case "kind":
									f.Kind = r.str()
								case "slot":
									f.Slot = r.str()
								case "text":
									f.Text = r.str()
								case "at":
									f.At = r.int()
								default:
									r.skip()
								}
							})
							p.Facts = append(p.Facts, f)
						})
					default:
						r.skip()
					}
				})
				st.People = append(st.People, p)
			})
		case "voc":
			st.Voc = r.str()
		default:
			r.skip()
		}
	})
	if r.ws(); r.err == nil && r.i < len(r.b) {
		r.fail("data after the state")
	}
	if r.err != nil {
		return nil, r.err
	}
	return st, nil
}

func (r *jsonReader) stmts() []stmt {
	var out []stmt
	r.array(func() {
		var x stmt
		r.object(func(k string) {
			switch k {
			case "sp":
				x.Sp = r.str()
			case "at":
				x.At = r.int()
			case "text":
				x.Text = r.str()
			case "w":
				x.W = r.float()
			case "k":
				x.K = int(r.int())
			case "terms":
				x.Terms = r.str()
			case "key":
				x.Key = r.str()
			case "ph":
				x.Ph = r.str()
			case "batch":
				x.Batch = r.bool()
			default:
				r.skip()
			}
		})
		out = append(out, x)
	})
	return out
}

func (r *jsonReader) strings() []string {
	var out []string
	r.array(func() { out = append(out, r.str()) })
	return out
}

// jsonReader reads JSON values from b; the first error stops it. s is b as
// a string: a string without escapes is read as a part of it (no copy).
type jsonReader struct {
	b   []byte
	s   string
	i   int
	err error
}

func (r *jsonReader) fail(want string) {
	if r.err == nil {
		r.err = fmt.Errorf("offline state: %s at byte %d", want, r.i)
	}
}

func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// next is the first byte of the next value (0 at the end or after an
// error).
func (r *jsonReader) next() byte {
	if r.ws(); r.err != nil || r.i >= len(r.b) {
		return 0
	}
	return r.b[r.i]
}

// null reads a null, if that is what comes next.
func (r *jsonReader) null() bool {
	if r.next() != 'n' {
		return false
	}
	r.literal("null")
	return true
}

func (r *jsonReader) literal(lit string) {
	if len(r.b)-r.i < len(lit) || string(r.b[r.i:r.i+len(lit)]) != lit {
		r.fail("want " + lit)
		return
	}
	r.i += len(lit)
}

// object reads an object, calling field with each key; field must read
// the key's value.
func (r *jsonReader) object(field func(key string)) {
	r.seq('{', '}', func() {
		if r.next() != '"' {
			r.fail("want a key")
			return
		}
		k := r.str()
		if r.next() != ':' {
			r.fail("want ':'")
			return
		}
		r.i++
		field(k)
	})
}

// array reads an array, calling elem for each element; elem must read it.
func (r *jsonReader) array(elem func()) { r.seq('[', ']', elem) }

// seq reads an object's fields or an array's elements, calling elem on each.
func (r *jsonReader) seq(open, close byte, elem func()) {
	if r.null() {
		return
	}
	if r.next() != open {
		r.fail("want '" + string(open) + "'")
		return
	}
	r.i++
	if r.next() == close {
		r.i++
		return
	}
	for r.err == nil {
		elem()
		switch r.next() {
		case ',':
			r.i++
		case close:
			r.i++
			return
		default:
			r.fail("want ',' or '" + string(close) + "'")
		}
	}
}

func (r *jsonReader) bool() bool {
	switch r.next() {
	case 't':
		r.literal("true")
		return true
	case 'f':
		r.literal("false")
	case 'n':
		r.literal("null")
	default:
		r.fail("want true or false")
	}
	return false
}

// number is the next number's text.
func (r *jsonReader) number() string {
	if r.null() {
		return "0"
	}
	start := r.i
	for r.i < len(r.b) && (r.b[r.i] >= '0' && r.b[r.i] <= '9' || r.b[r.i] == '-' || r.b[r.i] == '+' || r.b[r.i] == '.' || r.b[r.i] == 'e' || r.b[r.i] == 'E') {
		r.i++
	}
	if r.i == start {
		r.fail("want a number")
	}
	return r.s[start:r.i]
}

func (r *jsonReader) int() int64 {
	n, err := strconv.ParseInt(r.number(), 10, 64)
	if err != nil {
		r.fail("want an integer")
	}
	return n
}

func (r *jsonReader) uint() uint64 {
	n, err := strconv.ParseUint(r.number(), 10, 64)
	if err != nil {
		r.fail("want an unsigned integer")
	}
	return n
}

func (r *jsonReader) float() float64 {
	f, err := strconv.ParseFloat(r.number(), 64)
	if err != nil {
		r.fail("want a number")
	}
	return f
}

// str reads a string (null reads as "").
func (r *jsonReader) str() string {
	if r.null() {
		return ""
	}
	if r.next() != '"' {
		r.fail("want a string")
		return ""
	}
	r.i++
	start, plain := r.i, true
	for r.i < len(r.b) {
		switch c := r.b[r.i]; {
		case c == '"':
			s := r.b[start:r.i]
			r.i++
			if !plain {
				return r.unescape(r.b[start-1 : r.i])
			}
			if !utf8.Valid(s) {
				return string([]rune(string(s))) // invalid bytes as U+FFFD, as encoding/json reads them
			}
			return r.s[start : r.i-1]
		case c == '\\':
			plain = false
			r.i++ // (the byte escaped does not end the string)
		case c < ' ':
			r.fail("control character in a string")
			return ""
		}
		r.i++
	}
	r.fail("unterminated string")
	return ""
}

// unescape reads the quoted string q that has escapes: as strconv.Unquote
// does when its escapes are JSON's and Go's alike (all the writer writes),
// else as encoding/json does ("\/", a surrogate pair, invalid UTF-8).
func (r *jsonReader) unescape(q []byte) string {
	same := true
	for i := 0; i < len(q); i++ {
		if q[i] == '\\' {
			i++
			same = same && strings.IndexByte(`"\\bfnrtu`, q[i]) >= 0
		}
	}
	if s, err := strconv.Unquote(string(q)); err == nil && same && utf8.ValidString(s) {
		return s
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		r.fail("bad escape in a string")
	}
	return s
}

// skip reads a value of any kind.
func (r *jsonReader) skip() {
	switch r.next() {
	case '{':
		r.object(func(string) { r.skip() })
	case '[':
		r.array(r.skip)
	case '"':
		r.str()
	case 't', 'f':
		r.bool()
	case 'n':
		r.null()
	default:
		r.float()
	}
}
