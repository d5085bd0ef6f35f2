package testlog

import (
	"sync"
	"testing"

	"github.com/rs/zerolog"
)

// Writers on many goroutines, lines read back whole and decoded.
func TestBufferTakesConcurrentWriters(t *testing.T) {
	var b Buffer
	log := zerolog.New(&b)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				log.Info().Int("writer", i).Int("n", j).Msg("line")
			}
		})
	}
	wg.Wait()
	lines := b.Lines(t)
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, l := range lines {
		if l["message"] != "line" {
			t.Fatalf("line %v lost its message", l)
		}
	}
	if got := b.Bytes(); string(got) != b.String() {
		t.Fatal("Bytes and String disagree")
	}
}
