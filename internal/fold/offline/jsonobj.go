package offline

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// member is a member of a JSON object: its name and its value as it is
// written (raw JSON).
type member struct{ key, raw string }

// objectMembers returns the members of the JSON object t, in the order of
// their names, one per name (the last, as json.Unmarshal into a map keeps
// it). ok is false when t is no valid JSON object. Names are read as
// written when they are plain (printable ASCII without escapes); otherwise
// t is decoded by encoding/json.
func objectMembers(t string) (ms []member, ok bool) {
	b := []byte(t)
	if !json.Valid(b) || !strings.HasPrefix(t, "{") {
		return nil, false
	}
	if ms, plain := plainMembers(t); plain {
		return ms, true
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil, false
	}
	ms = make([]member, 0, len(m))
	for k, v := range m {
		ms = append(ms, member{k, string(v)})
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	return ms, true
}

// plainMembers reads the members of t, a valid JSON object, when every
// name is plain; plain is false otherwise.
func plainMembers(t string) (ms []member, plain bool) {
	i := skipJSONSpace(t, 1)
	for i < len(t) && t[i] != '}' {
		// a name: t[i] is '"'
		end := i + 1
		for t[end] != '"' {
			if c := t[end]; c == '\\' || c >= utf8.RuneSelf {
				return nil, false
			}
			end++
		}
		key := t[i+1 : end]
		i = skipJSONSpace(t, end+1) + 1 // (past ':')
		i = skipJSONSpace(t, i)
		vend := jsonValueEnd(t, i)
		ms = append(ms, member{key, t[i:vend]})
		i = skipJSONSpace(t, vend)
		if t[i] == ',' {
			i = skipJSONSpace(t, i+1)
		}
	}
	// one member per name, the last; in the order of the names
	slices.SortStableFunc(ms, func(a, b member) int { return strings.Compare(a.key, b.key) })
	out := ms[:0]
	for k, m := range ms {
		if k+1 < len(ms) && ms[k+1].key == m.key {
			continue // (a later one of the same name follows)
		}
		out = append(out, m)
	}
	return out, true
}

func skipJSONSpace(t string, i int) int {
	for i < len(t) && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r') {
		i++
	}
	return i
}

// jsonValueEnd returns the end of the JSON value that starts at t[i] (t is
// valid JSON).
func jsonValueEnd(t string, i int) int {
	depth := 0
	for ; i < len(t); i++ {
		switch t[i] {
		case '"':
			for i++; t[i] != '"'; i++ {
				if t[i] == '\\' {
					i++ // (the escaped byte)
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // (the end of the enclosing object)
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		case ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// memberValue returns the value of the member named key of ms (sorted by
// name).
func memberValue(ms []member, key string) (string, bool) {
	i, found := slices.BinarySearchFunc(ms, key, func(m member, k string) int { return strings.Compare(m.key, k) })
	if !found {
		return "", false
	}
	return ms[i].raw, true
}
