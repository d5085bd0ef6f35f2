package replay

import (
	"testing"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
)

// A session's history reads whole across a migration to partitions: turns
// stored before it under fold.in.<s>.turn and after it under
// fold.part.<N>.<k>.<s>.turn, in order, and no other session's.
func TestReplayAcrossPartitionMigration(t *testing.T) {
	h := newHarness(t)
	h.turn("s1", "s1-t0", "Alice", "before partitioning")
	h.turn("s2", "s2-t0", "Bob", "another session")
	// The migration: the inbound stream gets the partition transform.
	in, err := h.js.Stream(h.ctx, h.l.In)
	if err != nil {
		t.Fatal(err)
	}
	cfg := in.CachedInfo().Config
	part := h.l.Partitioned(4)
	src, dst := part.Subjects.PartitionTransform()
	cfg.SubjectTransform = &jetstream.SubjectTransformConfig{Source: src, Destination: dst}
	if _, err := h.js.UpdateStream(h.ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h.turn("s1", "s1-t1", "Bob", "after partitioning")
	h.turn("s2", "s2-t1", "Bob", "another session again")

	for _, l := range []broker.Layout{h.l, part} {
		tl, err := Load(h.ctx, h.js, l, "s1")
		if err != nil {
			t.Fatal(err)
		}
		var texts, subjects []string
		for _, e := range tl.Entries {
			if e.Kind == events.KindTurn && e.Turn != nil {
				texts = append(texts, e.Turn.Text)
				subjects = append(subjects, e.Subject)
			}
		}
		if len(texts) != 2 || texts[0] != "before partitioning" || texts[1] != "after partitioning" {
			t.Fatalf("%d partitions: turns %q", l.Subjects.Partitions, texts)
		}
		if subjects[0] != "fold.in.s1.turn" || subjects[1] != part.Subjects.InStored("s1", events.KindTurn) {
			t.Fatalf("%d partitions: subjects %q", l.Subjects.Partitions, subjects)
		}
	}
}
