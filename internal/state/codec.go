package state

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
)

// TurnRefs encode as one base64 string of varint deltas instead of a JSON
// array of objects: a session whose folds lag behind ingest can hold
// thousands of unfolded turns, and the checkpoint is rewritten on every
// flush, so its size and encoding cost matter on the hot path.
type TurnRefs []TurnRef

// MarshalJSON implements json.Marshaler.
func (r TurnRefs) MarshalJSON() ([]byte, error) {
	return json.Marshal(base64.RawStdEncoding.EncodeToString(r.appendBinary(make([]byte, 0, len(r)*6))))
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *TurnRefs) UnmarshalJSON(data []byte) error {
	buf, err := decodeB64(data)
	if err != nil {
		return fmt.Errorf("turn refs: %w", err)
	}
	out := TurnRefs{}
	var seq uint64
	var at int64
	for len(buf) > 0 {
		ds, n1 := binary.Uvarint(buf)
		if n1 <= 0 {
			return fmt.Errorf("turn refs: corrupt sequence at byte %d", len(buf))
		}
		buf = buf[n1:]
		da, n2 := binary.Varint(buf)
		if n2 <= 0 {
			return fmt.Errorf("turn refs: corrupt timestamp")
		}
		buf = buf[n2:]
		// Any count an int holds: validation bounds new turns far lower
		// (events.MaxTokens), but a checkpoint written before that bound
		// must still load.
		tk, n3 := binary.Uvarint(buf)
		if n3 <= 0 || tk > math.MaxInt {
			return fmt.Errorf("turn refs: corrupt token count")
		}
		buf = buf[n3:]
		seq += ds
		at += da
		out = append(out, TurnRef{Seq: seq, At: at, Tokens: int(tk)})
	}
	*r = out
	return nil
}

// IDHashes encode as base64 of fixed 8-byte values.
type IDHashes []uint64

// MarshalJSON implements json.Marshaler.
func (h IDHashes) MarshalJSON() ([]byte, error) {
	return json.Marshal(base64.RawStdEncoding.EncodeToString(h.appendBinary(make([]byte, 0, len(h)*8))))
}

// UnmarshalJSON implements json.Unmarshaler.
func (h *IDHashes) UnmarshalJSON(data []byte) error {
	buf, err := decodeB64(data)
	if err != nil {
		return fmt.Errorf("turn id hashes: %w", err)
	}
	if len(buf)%8 != 0 {
		return fmt.Errorf("turn id hashes: %d bytes is not a multiple of 8", len(buf))
	}
	out := make(IDHashes, 0, len(buf)/8)
	for i := 0; i < len(buf); i += 8 {
		out = append(out, binary.LittleEndian.Uint64(buf[i:]))
	}
	*h = out
	return nil
}

func decodeB64(data []byte) ([]byte, error) {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return base64.RawStdEncoding.DecodeString(s)
}
