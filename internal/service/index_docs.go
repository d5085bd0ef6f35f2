package service

import "sort"

// docTable is a turn index's docs (indexDoc), a column each: a doc's
// stream sequence as its offset from the first doc's, its length, and
// its raw index as the doc's position plus the repeats before it, kept
// only where that count changes. A doc then costs 8 bytes where an
// indexDoc and its cumulated length took 32: a session of 5,000 turns
// loaded from the store holds its docs in 40 KB instead of 160 KB, and
// the memory budget more sessions. Lengths are summed over a range
// (lenSum) from a running sum kept every sumEvery docs.
//
// Invariants: raws and seqs increase with the doc (add's contract); a
// step's doc is the first with its gap, steps in increasing doc order.
type docTable struct {
	seqBase uint64
	// seqOff[d] is doc d's sequence minus seqBase while every one fits
	// 32 bits; seqWide holds them whole once one does not (seqOff nil).
	seqOff  []uint32
	seqWide []uint64
	lens    []int32
	// steps are where raw - doc changes (a repeated turn_id counted
	// between two docs); none while raw is the doc's position.
	steps []rawStep
	// sums[k] is the sum of lens[:k*sumEvery]; total the sum of all.
	sums  []int64
	total int64
}

// rawStep: from doc on, a doc's raw index is its position plus gap.
type rawStep struct {
	doc int32
	gap int64
}

// sumEvery is how many docs apart the running sums of lengths are kept.
const sumEvery = 64

// docTableBytes estimates a doc's cost in the table (its sequence and
// length, and its share of the sums).
const docTableBytes = 4 + 4 + 1

// n is how many docs the table holds.
func (t *docTable) n() int { return len(t.lens) }

// reserve makes room for n more docs.
func (t *docTable) reserve(n int) {
	t.lens = append(make([]int32, 0, len(t.lens)+n), t.lens...)
	if t.seqWide != nil {
		t.seqWide = append(make([]uint64, 0, len(t.seqWide)+n), t.seqWide...)
	} else {
		t.seqOff = append(make([]uint32, 0, len(t.seqOff)+n), t.seqOff...)
	}
}

// add appends a doc; raw and seq must exceed the last doc's.
func (t *docTable) add(raw int64, seq uint64, n int32) {
	d := len(t.lens)
	if d == 0 {
		t.seqBase = seq
	}
	switch off := seq - t.seqBase; {
	case t.seqWide != nil:
		t.seqWide = append(t.seqWide, seq)
	case off < 1<<32:
		t.seqOff = append(t.seqOff, uint32(off))
	default:
		t.seqWide = make([]uint64, d, max(2*d, 16))
		for i := range d {
			t.seqWide[i] = t.seqBase + uint64(t.seqOff[i])
		}
		t.seqWide = append(t.seqWide, seq)
		t.seqOff = nil
	}
	if gap := raw - int64(d); gap != t.gap(d) {
		t.steps = append(t.steps, rawStep{doc: int32(d), gap: gap})
	}
	if d%sumEvery == 0 {
		t.sums = append(t.sums, t.total)
	}
	t.lens = append(t.lens, n)
	t.total += int64(n)
}

// gap is raw - d for doc d (and for a doc added at d).
func (t *docTable) gap(d int) int64 {
	i := sort.Search(len(t.steps), func(i int) bool { return int(t.steps[i].doc) > d })
	if i == 0 {
		return 0
	}
	return t.steps[i-1].gap
}

// seq is doc d's stream sequence.
func (t *docTable) seq(d int) uint64 {
	if t.seqWide != nil {
		return t.seqWide[d]
	}
	return t.seqBase + uint64(t.seqOff[d])
}

// raw is doc d's raw index.
func (t *docTable) raw(d int) int64 { return int64(d) + t.gap(d) }

// at is doc d.
func (t *docTable) at(d int) indexDoc {
	return indexDoc{raw: t.raw(d), seq: t.seq(d), len: t.lens[d]}
}

// prefix is the sum of the lengths of docs [0, i).
func (t *docTable) prefix(i int) int64 {
	if i == len(t.lens) {
		return t.total
	}
	k := i / sumEvery
	s := t.sums[k]
	for _, n := range t.lens[k*sumEvery : i] {
		s += int64(n)
	}
	return s
}

// lenSum is the sum of the lengths of docs [lo, n).
func (t *docTable) lenSum(lo, n int) int64 { return t.prefix(n) - t.prefix(lo) }
