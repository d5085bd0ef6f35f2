package inspect

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/replay"
)

// A what-if sends the session's events to its scratch stream again, which
// stores them at the time of the refold: a turn the live processor
// rejected for being dated ahead of when the stream stored it is left out,
// or once its time had passed the refold would apply it.
func TestWhatIfLeavesOutTurnsRejectedForTheirTime(t *testing.T) {
	subj, err := events.NewSubjects(events.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	stored := time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)
	msg := func(seq uint64, id string, at time.Time) replay.Message {
		data, _ := json.Marshal(events.Turn{V: 1, Session: "s1", TurnID: id, At: at, Speaker: "Alice", Role: "user", Text: "hi"})
		return replay.Message{Seq: seq, Time: stored, Subject: subj.In("s1", events.KindTurn), Data: data}
	}
	msgs := []replay.Message{
		msg(1, "t0", stored.Add(-time.Hour)),
		msg(2, "ahead", stored.Add(time.Hour)),                                                  // beyond the default 5 minutes
		msg(3, "t1", stored.Add(time.Minute)),                                                   // within them
		{Seq: 4, Time: stored, Subject: subj.In("s1", events.KindTurn), Data: []byte(`{"v":1`)}, // rejected anyway: kept, rejected again
	}
	kept, n := dropClockRejected(msgs, subj, processor.Config{}.Admission())
	var seqs []uint64
	for _, m := range kept {
		seqs = append(seqs, m.Seq)
	}
	if n != 1 || len(seqs) != 3 || seqs[0] != 1 || seqs[1] != 3 || seqs[2] != 4 {
		t.Fatalf("kept %v, left out %d; want 1, 3, 4 and 1", seqs, n)
	}
	// With the check off (--max-clock-skew 0) nothing is left out.
	if kept, n := dropClockRejected(msgs, subj, processor.Config{MaxClockSkew: -1}.Admission()); n != 0 || len(kept) != 4 {
		t.Fatalf("with the check off: kept %d, left out %d", len(kept), n)
	}
}
