package offline

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/foldstream/foldstream/internal/events"
)

// The state's JSON is written and read here without reflection: every fold reads and writes the whole state,
// and encoding/json spent more on it than the fold spends reading its turns. The bytes are those encoding/json
// writes for the state's struct tags (the codec test checks it), so that replay and the inspector show the
// state as JSON; strings are quoted by the outbound events' writer, so the two cannot drift. One walk over the
// fields (fields methods) both writes and reads them.

// codec walks a state's fields in the order encoding/json writes them,
// writing each to w or, with r set, reading the value of the key met.
type codec struct {
	w     []byte
	r     *jsonReader
	st    *state // (writing)
	first bool   // reading: no field of the object read yet
	lossy bool   // writing: as appendJSON's
	err   error
	mark  [4][2]int // writing a cached value: where in w its strings are (str's: from and to, quotes not)
	marks int       // (how many strings it wrote, the first 4)
}

// appendJSON appends st's JSON to b; lossy: a string not UTF-8 was written as U+FFFD (cached copies none: it was kept).
func (st *state) appendJSON(b []byte) (_ []byte, lossy bool, err error) {
	c := &st.scratch().out // (a codec of its own would be an allocation: one goes to the functions it calls)
	*c, st.seq = codec{w: b, st: st}, st.seq+1
	c.object(st.fields)
	c.st = nil // (the scratch outlives the fold)
	return c.w, c.lossy, c.err
}

// decodeState reads a state written by encode as encoding/json would read it into the state's struct (what the codec
// does not write, such as spaces, nulls and other keys, by encoding/json: so a state of version 1, whose facts have a
// "sum"). It fails on anything that is not JSON (a number too: "01", "+1"), and on a state of a version after this one.
func decodeState(data []byte) (*state, error) {
	st, c := new(state), &codec{r: &jsonReader{s: string(data)}}
	if c.object(st.fields); c.r.err != nil || c.r.i < len(data) {
		*st = state{} // (not as the codec writes it: as encoding/json reads it)
		if err := json.Unmarshal(data, st); err != nil {
			return nil, fmt.Errorf("offline state: %w", err)
		}
	}
	if st.V < 1 || st.V > stateVersion {
		return nil, fmt.Errorf("offline state: version %d, want 1 to %d", st.V, stateVersion)
	}
	return st, nil
}

func (st *state) fields(c *codec) {
	num(c, `,"v":`, &st.V, false)
	num(c, `,"sum":`, &st.Sum, false)
	c.bool(`,"agent":`, &st.Agent)
	c.strs(`,"names":`, &st.Names)
	num(c, `,"others":`, &st.Others, true)
	list(c, `,"periods":`, &st.Periods, func(c *codec, p *period) { c.object(p.fields) })
	list(c, `,"open":`, &st.Open, func(c *codec, x *stmt) { c.object(x.fields) })
	list(c, `,"facts":`, &st.Facts, func(c *codec, f *fact) {
		cached(c, &f.js, [4]string{f.ID, f.Sp, f.Key, f.Num}, [3]uint64{}, func() {
			c.object(func(c *codec) {
				c.str(`,"id":`, &f.ID, false)
				c.str(`,"sp":`, &f.Sp, true)
				c.str(`,"key":`, &f.Key, true)
				c.str(`,"num":`, &f.Num, true)
			})
		})
	})
	c.strs(`,"topics":`, &st.Topics)
	c.bool(`,"small":`, &st.Small)
	list(c, `,"people":`, &st.People, func(c *codec, p *person) {
		c.object(func(c *codec) {
			c.str(`,"name":`, &p.Name, false)
			list(c, `,"facts":`, &p.Facts, func(c *codec, f *pfact) {
				cached(c, &f.js, [4]string{f.ID, f.Kind, f.Slot, f.Text}, [3]uint64{uint64(f.At)}, func() {
					c.object(func(c *codec) {
						c.str(`,"id":`, &f.ID, false)
						c.str(`,"kind":`, &f.Kind, false)
						c.str(`,"slot":`, &f.Slot, true)
						c.str(`,"text":`, &f.Text, false)
						num(c, `,"at":`, &f.At, true)
					})
				})
			})
		})
	})
	c.str(`,"voc":`, &st.Voc, true)
}

func (p *period) fields(c *codec) {
	num(c, `,"from":`, &p.From, true)
	num(c, `,"to":`, &p.To, true)
	c.strs(`,"names":`, &p.Names)
	c.strs(`,"topics":`, &p.Topics)
	list(c, `,"stmts":`, &p.Stmts, func(c *codec, x *stmt) { c.object(x.fields) })
}

// written is where a state's encoding (seq) wrote a value's JSON (off to end), and what from: its numbers (n, then
// k: a third under 256) and its strings, in the JSON from str[i] to str[i]+size[i] (from off, quotes not), escaped where esc has the bit 1<<i.
// The next fold's encoding copies those bytes from the state it read (state.src) while the value's strings and
// numbers are those.
type written struct {
	seq, off, end int32
	str, size     [4]uint16
	esc, k        uint8
	n             [2]uint64
}

// cached writes with write what at last wrote, copying it from the state read when it was written from the same
// fields (the strings s, which write writes with str in this order, and the numbers n), and notes in at where it
// wrote it.
func cached(c *codec, at *written, s [4]string, n [3]uint64, write func()) {
	start, j := len(c.w), *at
	if c.marks = 0; c.r == nil && j.seq > 0 && int(j.seq) == c.st.srcSeq && int(j.end) <= len(c.st.src) && c.same(&j, &s, &n) {
		c.w, j.seq = append(c.w, c.st.src[j.off:j.end]...), int32(c.st.seq) // (from the object's first byte '{', as object writes it)
	} else if write(); c.r != nil || c.err != nil {
		return
	} else if j = (written{seq: int32(c.st.seq), n: [2]uint64(n[:2]), k: uint8(n[2])}); len(c.w)-start > math.MaxUint16 ||
		c.marks != len(s) || n[2] > math.MaxUint8 {
		j.seq = 0 // (past what a place here tells, not the strings s, or a third number past k: written anew next time)
	} else {
		for i, m := range c.mark {
			j.str[i], j.size[i], j.esc = uint16(m[0]-start), uint16(m[1]-m[0]), j.esc|uint8(b2i(m[1]-m[0] != len(s[i])))<<i
		}
	}
	j.off, j.end = int32(start), int32(len(c.w))
	*at = j
}

// same reports whether the strings s and numbers n are those j was written from (in the state read): a string written
// as it is, by its bytes; one escaped, by its JSON (written past w's end).
func (c *codec) same(j *written, s *[4]string, n *[3]uint64) bool {
	src, ok := c.st.src[j.off:j.end], j.n == [2]uint64(n[:2]) && uint64(j.k) == n[2]
	for i := 0; ok && i < len(s); i++ {
		if js := src[j.str[i] : int(j.str[i])+int(j.size[i])]; j.esc&(1<<i) == 0 {
			ok = len(js) == len(s[i]) && (len(js) == 0 || string(js) == s[i])
		} else {
			t, valid := events.AppendJSONStringUTF8(c.w, s[i])
			c.w, ok = t[:len(c.w)], valid && string(t[len(c.w)+1:len(t)-1]) == string(js)
		}
	}
	return ok
}

func (x *stmt) fields(c *codec) {
	// (written up to its phrases)
	cached(c, &x.js, [4]string{x.Sp, x.Text, x.Terms, x.Key}, [3]uint64{uint64(x.At), math.Float64bits(x.W), uint64(x.K)}, func() {
		c.str(`,"sp":`, &x.Sp, true)
		num(c, `,"at":`, &x.At, true)
		c.str(`,"text":`, &x.Text, false)
		switch {
		case !c.field(`,"w":`, false):
		case c.r != nil:
			x.W = parse(c.r, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }, "want a number")
		case math.IsNaN(x.W) || math.IsInf(x.W, 0):
			c.err = fmt.Errorf("offline state: weight %v of %q is not a number", x.W, x.Text)
		default: // (a statement's weight takes few values, weigh's and salient's sums: each is written once a scratch)
			sc, bits := c.st.scratch(), math.Float64bits(x.W)
			i := bits * 0x9e3779b97f4a7c15 >> 56
			if f := &sc.floatText[i]; f[31] == 0 || sc.floatBits[i] != bits {
				sc.floatBits[i], f[31] = bits, byte(len(appendJSONFloat(f[:0:31], x.W))) // (25 bytes at most: written in f)
			}
			c.w = append(c.w, sc.floatText[i][:sc.floatText[i][31]]...)
		}
		num(c, `,"k":`, &x.K, true)
		c.str(`,"terms":`, &x.Terms, true)
		c.str(`,"key":`, &x.Key, true)
	})
	c.str(`,"ph":`, &x.Ph, true)
	c.bool(`,"batch":`, &x.Batch)
}

// field reports whether the field named in name (`,"key":`) is written now (then name is: it is not empty where omit)
// or its value read (the next key is name's: the fields are read in the order they are written).
func (c *codec) field(name string, omit bool) bool {
	if r := c.r; r != nil {
		if name = name[b2i(c.first):]; r.err != nil || len(r.s)-r.i < len(name) || r.s[r.i:r.i+len(name)] != name { // (HasPrefix, written out: field is then small enough to be inlined)
			return false
		}
		r.i, c.first = r.i+len(name), false
		return true
	}
	if !omit {
		c.w = append(c.w, name...)
	}
	return !omit
}

// object writes or reads an object of fields; its first comma opens it.
func (c *codec) object(fields func(*codec)) {
	if r := c.r; r != nil {
		// '{', then each field's key and value with a ',' before the next
		if c.first = true; r.expect('{') {
			fields(c)
			r.expect('}') // (else a field out of the order written)
		}
		c.first = false
		return
	}
	n := len(c.w)
	if fields(c); len(c.w) == n {
		c.w = append(c.w, '{') // (no field: "{}")
	}
	c.w[n] = '{'
	c.w = append(c.w, '}')
}

// list writes xs, when there are any, or reads them.
func list[T any](c *codec, name string, xs *[]T, each func(*codec, *T)) {
	switch {
	case !c.field(name, len(*xs) == 0):
	case c.r != nil:
		*xs = (*xs)[:0]
		c.r.array(func() {
			*xs = append(*xs, *new(T))
			each(c, &(*xs)[len(*xs)-1])
		})
	default:
		for i := range *xs { // (one at least: an empty list is not written)
			c.w = append(c.w, ",["[b2i(i == 0)])
			each(c, &(*xs)[i])
		}
		c.w = append(c.w, ']')
	}
}

func (c *codec) strs(name string, ss *[]string) { list(c, name, ss, (*codec).text) }

func (c *codec) str(name string, s *string, omit bool) {
	m := [2]int{len(c.w), len(c.w)}
	if c.field(name, omit && *s == "") {
		m[0] = len(c.w) + 1
		c.text(s)
		m[1] = len(c.w) - 1
	}
	c.mark[c.marks&3], c.marks = m, c.marks+1
}

// text writes or reads a string.
func (c *codec) text(s *string) {
	if valid := true; c.r != nil {
		*s = c.r.str()
	} else if c.w, valid = events.AppendJSONStringUTF8(c.w, *s); !valid {
		c.lossy = true
	}
}

func num[T int | int64 | uint64](c *codec, name string, v *T, omit bool) {
	switch u, ok := any(v).(*uint64); {
	case !c.field(name, omit && *v == 0): // (its key first, written or read)
	case ok && c.r != nil:
		*u = parse(c.r, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, 64) }, "want an unsigned integer")
	case ok:
		c.w = strconv.AppendUint(c.w, *u, 10)
	case c.r != nil:
		*v = T(parse(c.r, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) }, "want an integer"))
	default:
		c.w = strconv.AppendInt(c.w, int64(*v), 10)
	}
}

func (c *codec) bool(name string, v *bool) {
	switch {
	case !c.field(name, !*v):
	case c.r == nil:
		c.w = append(c.w, "true"...)
	case strings.HasPrefix(c.r.s[c.r.i:], "true"):
		*v, c.r.i = true, c.r.i+4
	default:
		c.r.fail("want true")
	}
}

// appendJSONFloat writes f as encoding/json does.
func appendJSONFloat(b []byte, f float64) []byte {
	a := math.Abs(f)
	format := "fe"[b2i(a != 0 && (a < 1e-6 || a >= 1e21))]
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2], b = b[n-1], b[:n-1] // e-09 → e-9
	}
	return b
}

// ---- reading ----

// jsonReader reads the JSON the codec writes, from s; anything else (spaces, nulls, other keys or orders) stops it with
// an error, as its first error does. A string of plain ASCII is read as a part of s (no copy).
type jsonReader struct {
	s   string
	i   int
	err error
}

func (r *jsonReader) fail(want string) {
	if r.err == nil {
		r.err = fmt.Errorf("offline state: %s at byte %d", want, r.i)
	}
}

// next is the next byte (0 at the end or after an error).
func (r *jsonReader) next() byte {
	if r.err != nil || r.i >= len(r.s) {
		return 0
	}
	return r.s[r.i]
}

// expect reads the byte c (false, failing, when the next is another).
func (r *jsonReader) expect(c byte) bool {
	ok := r.next() == c
	if r.i += b2i(ok); !ok {
		r.fail("want '" + string(c) + "'")
	}
	return ok
}

// array reads an array, calling elem for each element; elem must read it.
func (r *jsonReader) array(elem func()) {
	if !r.expect('[') || r.next() == ']' && r.expect(']') {
		return
	}
	for elem(); r.next() == ','; elem() {
		r.i++
	}
	r.expect(']')
}

// parse reads the next number with p (want: what it fails with).
func parse[T any](r *jsonReader, p func(string) (T, error), want string) T {
	start := r.i
	for r.i < len(r.s) && (r.s[r.i] >= '0' && r.s[r.i] <= '9' || r.s[r.i] == '-' || r.s[r.i] == '+' || r.s[r.i] == '.' || r.s[r.i] == 'e' || r.s[r.i] == 'E') {
		r.i++
	}
	v, err := p(r.s[start:r.i])
	if err != nil || !jsonNumber(r.s[start:r.i]) {
		r.fail(want)
	}
	return v
}

// jsonNumber reports whether n is a number as JSON writes it (strconv also reads "+1", "01", ".5" and "1.").
func jsonNumber(n string) bool {
	digits := func(s string) bool { return s != "" && strings.Trim(s, "0123456789") == "" }
	m, e, exp := strings.Cut(strings.ToLower(strings.TrimPrefix(n, "-")), "e")
	i, f, dot := strings.Cut(m, ".")
	if exp && e != "" && (e[0] == '+' || e[0] == '-') {
		e = e[1:] // (the exponent's sign)
	}
	return digits(i) && (i == "0" || i[0] != '0') && (!dot || digits(f)) && (!exp || digits(e))
}

// str reads a string.
func (r *jsonReader) str() string {
	if !r.expect('"') {
		return ""
	}
	start, plain := r.i, true
	if j := strings.IndexByte(r.s[start:], '"'); j >= 0 && strings.IndexByte(r.s[start:start+j], '\\') < 0 {
		r.i += j // (a string as the writer writes most: no escapes, so the first quote ends it)
	}
	for ; r.i < len(r.s); r.i++ {
		switch c := r.s[r.i]; {
		case c == '"':
			r.i++
			if s := r.s[start : r.i-1]; plain && events.JSONPlain(s) {
				return s // (the most: eight bytes at a time, and no copy)
			}
			var s string // (escapes, other than ASCII, <, > and &: as encoding/json reads them)
			if err := json.Unmarshal([]byte(r.s[start-1:r.i]), &s); err != nil {
				r.fail("a string: " + err.Error())
			}
			return s
		case c == '\\':
			plain, r.i = false, r.i+1 // (the byte escaped does not end the string)
		case c < ' ':
			r.fail("control character in a string")
			return ""
		}
	}
	r.fail("unterminated string")
	return ""
}
