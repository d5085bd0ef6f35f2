package events

import (
	"slices"
	"testing"
)

// The partition the processor computes must be the one nats-server's
// {{partition(n,1)}} transform computes: the broker test checks it against
// a real server; these are the values it stored.
func TestPartitionOfMatchesServerHash(t *testing.T) {
	if got := PartitionOf("s1", 4); got != 1 {
		t.Fatalf("PartitionOf(s1, 4) = %d, want 1 (what nats-server stores)", got)
	}
	if got := PartitionOf("s2", 4); got != 0 {
		t.Fatalf("PartitionOf(s2, 4) = %d, want 0 (what nats-server stores)", got)
	}
}

func TestPartitionedSubjects(t *testing.T) {
	s := Subjects{Prefix: "fold", Partitions: 4}
	stored := s.InStored("s1", KindTurn)
	if stored != "fold.part.4.1.s1.turn" {
		t.Fatalf("stored subject %q", stored)
	}
	session, kind, err := s.ParseIn(stored)
	if err != nil || session != "s1" || kind != KindTurn {
		t.Fatalf("ParseIn(%q) = %q %q %v", stored, session, kind, err)
	}
	if got := s.Published(stored); got != "fold.in.s1.turn" {
		t.Fatalf("Published(%q) = %q", stored, got)
	}
	if got := s.Published("fold.in.x"); got != "fold.in.x" {
		t.Fatalf("Published of a malformed subject changed it: %q", got)
	}
	// A partition token that is not the session's is refused.
	for _, bad := range []string{"fold.part.4.0.s1.turn", "fold.part.4.4.s1.turn", "fold.part.04.1.s1.turn", "fold.part.4.1.s1", "fold.part.x.1.s1.turn"} {
		if _, _, err := s.ParseIn(bad); err == nil {
			t.Errorf("ParseIn(%q) accepted", bad)
		} else if ve, ok := AsValidation(err); !ok || ve.Code != CodeBadSubject {
			t.Errorf("ParseIn(%q): %v, want bad_subject", bad, err)
		}
	}
	if _, _, err := s.ParseIn("fold.part.4.1.s1.exec"); err == nil {
		t.Error("unknown kind accepted")
	}
	if got := s.InSession("s1"); got != "fold.part.*.*.s1.>" {
		t.Errorf("InSession = %q", got)
	}
	if got := (Subjects{Prefix: "fold"}).InSession("s1"); got != "fold.in.s1.>" {
		t.Errorf("unpartitioned InSession = %q", got)
	}
	if got := s.PartitionFilters(0); !slices.Equal(got, []string{"fold.part.4.0.>", "fold.in.*", "fold.in.*.*.>"}) {
		t.Errorf("filters of partition 0: %v", got)
	}
	if got := s.PartitionFilters(3); !slices.Equal(got, []string{"fold.part.4.3.>"}) {
		t.Errorf("filters of partition 3: %v", got)
	}
	src, dst := s.PartitionTransform()
	if src != "fold.in.*.*" || dst != "fold.part.4.{{partition(4,1)}}.{{wildcard(1)}}.{{wildcard(2)}}" {
		t.Errorf("transform %q -> %q", src, dst)
	}
}
