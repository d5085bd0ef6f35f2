package service

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// packer keeps sessions' indexes packed: their encoding (index_codec.go)
// compressed with zstd, its texts apart (textPlanes), about 0.59 of the
// encoding and 0.53 of the memory a loaded index holds. Once the memory
// budget is full, the cache drops the decoded replay of the least
// recently used sessions that have a packed form (indexCache.demote)
// before it evicts any session, so that the budget holds about twice as
// many sessions; a request to a packed session decodes it again (unpack,
// then decodeOwn: about 1.3 ms for 5,000 turns, against the store's get
// of the entry and the server's read of the file-store block that holds
// it) and extends it with the events stored since it was packed, as a
// load does. The load's checks are not made again: every packed form
// held was made by this process from its own encoding, or read from the
// store and checked then (restored). Unless the session was asked again
// soon (promoteAfter) or the events since extend it, the request keeps
// the decoded replay for itself alone, outside the budget, and leaves the
// session packed: requests spread over many packed sessions do not make
// the cache drop another's decoded replay for each.
//
// A packed form is made by the index store's writer, off the request
// path: from the encoding it writes, or, for an index loaded as stored,
// from an encoding of the index as loaded. It is the replay at some
// position of its session's history as this entry applied it: decoded
// and extended, it is the replay as it is now (the events since are
// applied with the processor's rules, as the warm path applies them).
// It is dropped with the entry, and when the index is rebuilt.
type packer struct {
	// enc packs what is left of an encoding without its texts' word
	// numbers, planes those numbers (textPlanes), which take a slower
	// level well.
	enc, planes *zstd.Encoder
	dec         *zstd.Decoder
}

// maxPacked bounds a packed form's decoded length (an index's encoding
// is far below it: about 90 bytes a turn).
const maxPacked = 1 << 30

// A packed form starts with packedMagic, then uv(the encoding's length)
// and the zstd frame of the encoding; or with planesMagic, then uv(the
// encoding's length) and three zstd frames, each after uv(its length):
// the encoding's textPlanes rest, first and more. An encoding starts with
// indexMagic: a version that does not know packed forms reads a stored
// one as corrupt and rebuilds the index, never serves it.
const (
	packedMagic = "FSRZ"
	planesMagic = "FSR2"
)

func newPacker() (*packer, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(2))
	if err != nil {
		return nil, err
	}
	planes, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(2))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxPacked))
	if err != nil {
		return nil, err
	}
	return &packer{enc: enc, planes: planes, dec: dec}, nil
}

// isPacked reports whether a stored value is a packed form (else it is
// an encoding, as versions before packing wrote it).
func isPacked(b []byte) bool {
	m := string(b[:min(len(b), len(packedMagic))])
	return m == packedMagic || m == planesMagic
}

// pack is the packed form of an encoded replay (encodeReplay's output),
// in memory of its size: its planes (textPlanes), if they split and
// unpack into it again, else the encoding whole.
func (p *packer) pack(blob []byte) []byte {
	if planes, err := splitTexts(blob); err == nil {
		out := append([]byte(planesMagic), binary.AppendUvarint(nil, uint64(len(blob)))...)
		for i, b := range [][]byte{planes.rest, planes.first, planes.more} {
			enc := p.planes
			if i == 0 {
				enc = p.enc
			}
			z := enc.EncodeAll(b, nil)
			out = append(binary.AppendUvarint(out, uint64(len(z))), z...)
		}
		if back, err := p.unpack(out); err == nil && string(back) == string(blob) {
			return append(make([]byte, 0, len(out)), out...)
		}
	}
	z := p.enc.EncodeAll(blob, nil)
	out := make([]byte, 0, len(packedMagic)+binary.MaxVarintLen64+len(z))
	out = append(out, packedMagic...)
	out = binary.AppendUvarint(out, uint64(len(blob)))
	return append(out, z...)
}

// unpack is the encoding a packed form holds, in memory of its own (the
// replay decoded from it keeps it: decodeReplayOwned); errIndexCorrupt if
// it is not one.
func (p *packer) unpack(packed []byte) ([]byte, error) {
	b, _, err := p.unpackTurns(packed)
	return b, err
}

// planeBuffers hold the planes an unpack decompresses before it joins
// them (joinTexts), for the next unpack: only the joined encoding is
// kept.
var planeBuffers = sync.Pool{New: func() any { return new([3][]byte) }}

// unpackTurns is unpack, and where each of the encoding's turns starts
// in it, then where the last one ends (joinTexts; nil for a packed form
// without planes).
func (p *packer) unpackTurns(packed []byte) ([]byte, []uint32, error) {
	if !isPacked(packed) {
		return nil, nil, fmt.Errorf("%w: not a packed index", errIndexCorrupt)
	}
	planes := string(packed[:len(planesMagic)]) == planesMagic
	r := indexReader{b: packed, off: len(packedMagic)}
	n := r.uv()
	if r.err != nil || n == 0 || n > maxPacked {
		return nil, nil, fmt.Errorf("%w: packed index length", errIndexCorrupt)
	}
	if !planes {
		b, err := p.dec.DecodeAll(packed[r.off:], make([]byte, 0, n))
		if err != nil || uint64(len(b)) != n {
			return nil, nil, fmt.Errorf("%w: packed index: %d bytes of %d (%v)", errIndexCorrupt, len(b), n, err)
		}
		return b, nil, nil
	}
	bufs := planeBuffers.Get().(*[3][]byte)
	defer func() {
		for i, b := range bufs {
			if cap(b) > maxReadBuffer {
				bufs[i] = nil
			}
		}
		planeBuffers.Put(bufs)
	}()
	var parts [3][]byte
	for i := range parts {
		z := r.uv()
		if r.err != nil || z > uint64(len(packed)-r.off) {
			return nil, nil, fmt.Errorf("%w: packed index: plane %d", errIndexCorrupt, i)
		}
		b, err := p.dec.DecodeAll(packed[r.off:r.off+int(z)], bufs[i][:0])
		if cap(b) > cap(bufs[i]) {
			bufs[i] = b[:0]
		}
		if err != nil || uint64(len(b)) > n {
			return nil, nil, fmt.Errorf("%w: packed index: plane %d (%v)", errIndexCorrupt, i, err)
		}
		parts[i] = b
		r.off += int(z)
	}
	if r.off != len(packed) {
		return nil, nil, fmt.Errorf("%w: packed index: trailing bytes", errIndexCorrupt)
	}
	return joinTexts(textPlanes{rest: parts[0], first: parts[1], more: parts[2]}, int(n))
}

// earlyUnpack is a session's packed form decompressed and its texts
// joined (unpackTurns) on another goroutine, started when a request
// arrives, before it reads the session's checkpoint and tail: the work
// overlaps those round trips. The request uses it if the session still
// holds that packed form when it decodes the index (unpacked).
type earlyUnpack struct {
	packed []byte
	blob   []byte
	turnAt []uint32
	err    error
	done   chan struct{}
}

// unpackEarly starts unpacking the session's packed form if it holds
// only that and no request is using it; nil otherwise (the request
// unpacks it as it gets to it, if it has to).
func (s *server) unpackEarly(session string) *earlyUnpack {
	c := s.index
	if c == nil || c.budget <= 0 {
		return nil
	}
	c.mu.Lock()
	e := c.entries[session]
	c.mu.Unlock()
	if e == nil || !e.mu.TryLock() {
		return nil
	}
	packed := e.packed
	if e.r != nil {
		packed = nil
	}
	e.mu.Unlock()
	if packed == nil {
		return nil
	}
	u := &earlyUnpack{packed: packed, done: make(chan struct{})}
	go func() {
		defer close(u.done)
		u.blob, u.turnAt, u.err = s.pack.unpackTurns(packed)
	}()
	return u
}

// unpackedTurns is unpackTurns of packed, done early by u if u is of
// it.
func (s *server) unpackedTurns(packed []byte, u *earlyUnpack) ([]byte, []uint32, error) {
	if u != nil && len(u.packed) == len(packed) && len(packed) > 0 && &u.packed[0] == &packed[0] {
		<-u.done
		return u.blob, u.turnAt, u.err
	}
	return s.pack.unpackTurns(packed)
}

// unpacked is e's replay decoded from its packed form, with the catch-up's
// first get and the memories' first get started while it was decoded;
// nil (and the packed form dropped) if it cannot be decoded: the caller
// loads or builds it. early, if not nil, is the unpacking of a packed
// form started when the request arrived. Must be called with e.mu held,
// e.r nil.
func (s *server) unpacked(ctx context.Context, e *cacheEntry, early *earlyUnpack) (*replay, *nextEvent, *nextMemory) {
	packed := e.packed
	e.packed = nil
	blob, turnAt, err := s.unpackedTurns(packed, early)
	var key string
	var body []byte
	if err == nil {
		key, body, err = indexHeader(blob)
	}
	if err == nil {
		// The turns' offsets in body, not in blob.
		for i := range turnAt {
			turnAt[i] -= uint32(len(blob) - len(body))
		}
	}
	if err == nil && key != e.key {
		err = fmt.Errorf("%w: packed under another key", errIndexCorrupt)
	}
	var (
		next *nextEvent
		mems *nextMemory
	)
	if err == nil {
		if at, memAt, ok := replayNext(body); ok {
			next = s.prefetchEvent(ctx, e.session, at)
			mems = s.prefetchMemory(ctx, e.session, memAt)
		}
	}
	var rp *replay
	if err == nil {
		rp, err = decodeOwn(body, cap(blob), turnAt, s.an, s.adm, e.session)
	}
	if err != nil {
		// Never expected: it was encoded by this process. Loaded or
		// built again, as a store entry that cannot be decoded is.
		s.log.Warn().Str("event", "recall_index_unpack_failed").Str("session", e.session).Err(err).
			Msg("packed recall index undecodable; loading or building it again")
		e.vecs, e.vecBytes = nil, 0 // the replay loaded or built instead brings its own
		return nil, nil, nil
	}
	rp.vecs, rp.vecBytes = e.vecs, e.vecBytes
	e.vecs, e.vecBytes = nil, 0
	e.packed = packed
	return rp, next, mems
}
