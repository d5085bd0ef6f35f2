package held

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

func TestTakeFindsWhatPutHeld(t *testing.T) {
	var h Map[string]
	b := bytes.Repeat([]byte("state "), 10)
	h.Put(b, "decoded")
	if v, ok := h.Take(b); !ok || v != "decoded" {
		t.Fatalf("Take = %q, %v; want the value put", v, ok)
	}
	if _, ok := h.Take(b); ok {
		t.Fatal("a second Take found the value again; want it forgotten by the first")
	}
	runtime.KeepAlive(b)
}

func TestTakeRefusesOtherBytes(t *testing.T) {
	var h Map[int]
	b := bytes.Repeat([]byte("state "), 10)
	for name, other := range map[string][]byte{
		"a copy":               bytes.Clone(b),
		"a shorter slice":      b[:len(b)-1],
		"a slice further on":   b[1:],
		"nothing":              nil,
		"shorter than MinLen ": b[:MinLen-1],
	} {
		h.Put(b, 1)
		if _, ok := h.Take(other); ok {
			t.Errorf("%s: Take found the value put for other bytes", name)
		}
		h.Take(b)
	}
	h.Put(b, 1)
	b[3] = 'X' // changed in place since
	if _, ok := h.Take(b); ok {
		t.Error("Take found the value put for bytes changed since")
	}
	short := make([]byte, MinLen-1)
	if h.Put(short, 1); h.Len() != 0 {
		t.Errorf("Put held a value for %d bytes; want none under MinLen", len(short))
	}
}

func TestAValueGoesWithItsBytes(t *testing.T) {
	var h Map[*[1 << 10]byte]
	func() {
		for range 10 {
			h.Put(bytes.Repeat([]byte("state "), 10), new([1 << 10]byte))
		}
	}()
	kept := bytes.Repeat([]byte("kept "), 10)
	h.Put(kept, new([1 << 10]byte))
	if h.Len() != 11 {
		t.Fatalf("Len = %d after 11 puts; want 11", h.Len())
	}
	for deadline := time.Now().Add(10 * time.Second); h.Len() > 1; {
		if time.Now().After(deadline) {
			t.Fatalf("Len = %d after the bytes of 10 were garbage; want 1", h.Len())
		}
		runtime.GC()
		time.Sleep(time.Millisecond) // (cleanups run on their own goroutine)
	}
	if _, ok := h.Take(kept); !ok {
		t.Fatal("the value of bytes still live went with the others")
	}
}

func TestPutHoldsAtMostMax(t *testing.T) {
	h := Map[int]{Max: 2}
	bs := [][]byte{bytes.Repeat([]byte("a"), 20), bytes.Repeat([]byte("b"), 20), bytes.Repeat([]byte("c"), 20)}
	for i, b := range bs {
		h.Put(b, i)
	}
	if _, ok := h.Take(bs[2]); ok || h.Len() != 2 {
		t.Fatalf("held %d values, the third among them (%v); want the first two only", h.Len(), ok)
	}
	h.Take(bs[0])
	if h.Put(bs[2], 2); h.Len() != 2 {
		t.Fatalf("held %d values after one was taken and another put; want 2", h.Len())
	}
	runtime.KeepAlive(bs)
}
