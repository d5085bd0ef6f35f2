package service

import (
	"encoding/binary"
	"fmt"
)

// textPlanes is an encoded replay (index_codec.go) split for packing
// (index_pack.go): the texts' word numbers, a third of an encoding and
// left as they are by zstd (a number of one or two bytes, the bytes of
// both kinds mixed), taken out into two planes, the first byte of each
// number and the bytes after it; the rest of the encoding as it is, less
// those numbers. Each compresses well on its own (a 5,000-turn
// encoding packs into ~0.25 MiB instead of ~0.28: the memory budget
// holds about an eighth more sessions packed).
type textPlanes struct {
	rest, first, more []byte
}

// splitTexts splits an encoding (indexHeader's input) into its planes.
func splitTexts(blob []byte) (textPlanes, error) {
	var p textPlanes
	r := indexReader{b: blob}
	ndocs := skipToTurns(&r)
	last := 0
	for range ndocs {
		n := skipTurnFixed(&r)
		if r.err != nil {
			return p, r.err
		}
		p.rest = append(p.rest, blob[last:r.off]...)
		for range n {
			start := r.off
			r.uv()
			if r.err != nil {
				return p, r.err
			}
			p.first = append(p.first, blob[start])
			p.more = append(p.more, blob[start+1:r.off]...)
		}
		last = r.off
	}
	if r.err != nil {
		return p, r.err
	}
	p.rest = append(p.rest, blob[last:]...)
	return p, nil
}

// joinTexts is the encoding of n bytes p was split from, and where each
// of its turns starts in it (then where the last one ends): the offsets
// a decode finds by reading every turn (decodeOwn); errIndexCorrupt if p
// is not the planes of one. A tight loop: an unpack joins every word of
// the session.
func joinTexts(p textPlanes, n int) ([]byte, []uint32, error) {
	out := make([]byte, n)
	r := indexReader{b: p.rest}
	ndocs := skipToTurns(&r)
	if r.err != nil || n >= 1<<32 {
		return nil, nil, fmt.Errorf("%w: packed texts: %v", errIndexCorrupt, r.err)
	}
	turnAt := make([]uint32, ndocs+1)
	last, o, fi, mi := 0, 0, 0, 0
	first, more := p.first, p.more
	short := fmt.Errorf("%w: packed texts: more bytes than the encoding's %d", errIndexCorrupt, n)
	for d := range ndocs {
		turnAt[d] = uint32(o + r.off - last)
		words := skipTurnFixed(&r)
		if r.err != nil {
			return nil, nil, r.err
		}
		if o+r.off-last > n {
			return nil, nil, short
		}
		o += copy(out[o:], p.rest[last:r.off])
		last = r.off
		if words > len(first)-fi || words > n-o {
			return nil, nil, fmt.Errorf("%w: packed texts: fewer words than counted", errIndexCorrupt)
		}
		for _, c := range first[fi : fi+words] {
			if o+1 < n && mi < len(more) {
				// A number of one or two bytes without a branch on which:
				// the next continuation byte is written after it either
				// way, and kept if it is one.
				m := more[mi]
				out[o], out[o+1] = c, m
				two := int(c >> 7)
				if two&int(m>>7) == 0 {
					o += 1 + two
					mi += two
					continue
				}
			}
			if o == n {
				return nil, nil, short
			}
			out[o] = c
			o++
			for k := 1; c >= 0x80; k++ {
				if mi == len(more) || k == binary.MaxVarintLen64 || o == n {
					return nil, nil, fmt.Errorf("%w: packed texts: a word's number cut short", errIndexCorrupt)
				}
				c = more[mi]
				mi++
				out[o] = c
				o++
			}
		}
		fi += words
	}
	if r.err != nil {
		return nil, nil, r.err
	}
	turnAt[ndocs] = uint32(o)
	if o+len(p.rest)-last != n || fi != len(first) || mi != len(more) {
		return nil, nil, fmt.Errorf("%w: packed texts: %d bytes of %d, %d+%d left", errIndexCorrupt, o+len(p.rest)-last, n, len(first)-fi, len(more)-mi)
	}
	copy(out[o:], p.rest[last:])
	return out, turnAt, nil
}

// skipToTurns reads an encoding from its start to its first turn (what
// indexHeader and decodeReplayIn read before it) and returns how many
// docs it has; r.err if it cannot.
func skipToTurns(r *indexReader) int {
	if len(r.b) < len(indexMagic) || string(r.b[:len(indexMagic)]) != indexMagic {
		r.fail("not an index")
		return 0
	}
	r.off = len(indexMagic)
	r.uv()  // format
	r.u64() // fingerprint
	r.skip()
	r.uv() // from
	r.uv() // next
	r.uv() // lastReset
	skipTime(r)
	r.uv() // applied
	r.uv() // read
	r.uv() // memNext
	r.uv() // memBytes
	r.skip()
	r.uv() // raws
	for range r.count(1) {
		r.uv()
	}
	ndocs := r.count(3 + minTurnBytes)
	for range ndocs {
		r.uv()
		r.uv()
		r.uv()
	}
	for range r.count(1) {
		r.skip()
	}
	return ndocs
}

// skipTurnFixed reads a turn up to its text's word numbers (see
// indexReader.turn) and returns how many there are.
func skipTurnFixed(r *indexReader) int {
	r.uv() // V
	r.skip()
	skipTime(r)
	r.skipVarints(6) // speaker, role, kind, tool, tokens, context tokens
	for range r.count(2) {
		r.skip()
		r.skip()
	}
	return r.count(1)
}

// skipTime reads a time (indexReader.time) without making it.
func skipTime(r *indexReader) {
	switch r.uv() {
	case 0:
	case 1:
		r.skipVarints(2) // seconds, nanoseconds
	case 2:
		r.skipVarints(3) // offset, seconds, nanoseconds
	default:
		r.fail("bad time")
	}
}
