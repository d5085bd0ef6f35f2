package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/crashtest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/nats-io/nats.go"
)

// TestAttacksOnTheScaledOutCluster replays poison pills (rejected turns
// carrying JetStream control headers, one just under max_payload) and a
// sample of the hostile inputs against three instances sharing the
// partitions of a 3-node cluster (streams and buckets at 3 replicas),
// and crashes the instance that owns the poisoned session's partition in
// the middle of it: the rest comes while its partitions move. Good turns
// of the poisoned session and of others go on throughout. At the end no
// partition is stalled (every partition's consumer drained), every good
// session folded exactly once per batch (crashtest.Verify), and every
// rejected event is on the dead-letter stream exactly once, with its code
// and field, even those delivered to the crashed instance and not acked.
func TestAttacksOnTheScaledOutCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	r := newClusterPartitionedRig(t, scalePartitions)
	m := crashtest.NewModel(t, 1, 0)
	sum, err := openai.New(openai.Config{BaseURL: m.URL, APIKey: "k", Model: "fold-mini", Timeout: 5 * time.Second,
		Retry: retry.Policy{MaxAttempts: 1}}, r.Log)
	if err != nil {
		t.Fatal(err)
	}
	r.sum = sum
	const ttl = 6 * time.Second // as TestScaleOutPartitionsOnCluster
	instances := []*instance{r.startInstance("a", ttl), r.startInstance("b", ttl), r.startInstance("c", ttl)}
	own := r.ownership(instances...)
	const poisoned = "s1"
	k := events.PartitionOf(poisoned, scalePartitions)
	var victim *instance
	var survivors []*instance
	for _, in := range instances {
		if slices.Contains(own[in.name], k) {
			victim = in
		} else {
			survivors = append(survivors, in)
		}
	}
	if victim == nil {
		t.Fatalf("partition %d of %s owned by nobody: %v", k, poisoned, own)
	}
	t.Logf("ownership %v; %s owns partition %d (%s)", own, victim.name, k, poisoned)

	good := map[string]int{poisoned: 0}
	for i := range 6 {
		good[fmt.Sprintf("g%d", i)] = 0
	}
	// Publishes wait up to 30 s for the stream's ack: on a cluster at 3
	// replicas, a machine busy with other work can exceed the client's 5 s
	// while partitions move.
	publish := func(msg *nats.Msg) uint64 {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ack, err := r.JS.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatalf("publish %s %v: %v", msg.Subject, msg.Header, err)
		}
		return ack.Sequence
	}
	more := func(n int) {
		for s := range good {
			for i := good[s]; i < good[s]+n; i++ {
				msg := nats.NewMsg(r.Layout.Subjects.In(s, events.KindTurn))
				msg.Data, _ = json.Marshal(crashtest.Turn(s, i))
				msg.Header.Set(jetstreamMsgID, crashtest.TurnID(s, i))
				publish(msg)
			}
			good[s] += n
		}
	}

	type attack struct {
		subject     string
		payload     []byte
		hdr         map[string]string
		code, field string
	}
	subj := r.Layout.Subjects.In(poisoned, events.KindTurn)
	huge := withField("text", `"`+strings.Repeat("x", int(r.NC.MaxPayload())-len(goodTurnJSON)-128)+`"`)
	deep := strings.Repeat(`{"a":`, 20000) + `"x"` + strings.Repeat(`}`, 20000)
	attacks := []attack{
		// Poison pills: no copy with these headers, nor with ours added,
		// could be stored; the huge one is kept as a reference.
		{subject: subj, payload: badTurn, hdr: map[string]string{"Nats-Expected-Stream": r.Layout.In}, code: events.CodeInvalidField, field: "role"},
		{subject: subj, payload: badTurn, hdr: map[string]string{"Nats-Expected-Last-Sequence": "last"}, code: events.CodeInvalidField, field: "role"},
		{subject: subj, payload: badTurn, hdr: map[string]string{jetstreamMsgID: "poison-msg-id"}, code: events.CodeInvalidField, field: "role"},
		{subject: subj, payload: huge, hdr: map[string]string{"Nats-Expected-Stream": r.Layout.In}, code: events.CodeOversized, field: "payload"},
		// A sample of the hostile inputs (TestHostileInputIsDeadLettered).
		{subject: subj, payload: withField("text", `"`+strings.Repeat("x", 300<<10)+`"`), code: events.CodeOversized, field: "payload"},
		{subject: subj, payload: withField("meta", deep), code: events.CodeBadJSON, field: "payload"},
		{subject: subj, payload: withField("text", "\"caf\xc3\x28 \xff\xfe\""), code: events.CodeInvalidField, field: "payload"},
		{subject: subj, payload: withField("v", `2`), code: events.CodeVersion, field: "v"},
		{subject: subj, payload: withField("tokens", `1e400`), code: events.CodeInvalidField, field: "tokens"},
		{subject: subj, payload: withField("session", `"s2"`), code: events.CodeSessionMismatch, field: "session"},
		{subject: subj, payload: []byte(`null`), code: events.CodeBadJSON, field: "payload"},
		{subject: r.Layout.Subjects.In(poisoned, events.KindControl), payload: []byte(`{"v":1,"session":"s1","op":"configure","config":{"batch_size":-5}}`),
			code: events.CodeInvalidField, field: "config.batch_size"},
		{subject: r.Layout.Subjects.In(poisoned, "exec"), payload: []byte(goodTurnJSON), code: events.CodeUnknownType, field: "subject"},
		{subject: "fold.in.s1.turn.x", payload: []byte(goodTurnJSON), code: events.CodeBadSubject, field: "subject"},
	}
	rejected := map[uint64]attack{}
	send := func(as []attack) {
		for _, a := range as {
			msg := nats.NewMsg(a.subject)
			msg.Data = a.payload
			for h, v := range a.hdr {
				if v == "last" {
					last, _ := r.inboundLast(subj)
					v = strconv.FormatUint(last, 10)
				}
				msg.Header.Set(h, v)
			}
			rejected[publish(msg)] = a
			more(1)
		}
	}
	more(3)
	half := len(attacks) / 2
	send(attacks[:half])
	// In the middle: the owner of the poisoned partition dies with the
	// attacks delivered to it, some acked, some not.
	victim.crash()
	send(attacks[half:])
	own = r.ownership(survivors...)
	t.Logf("%s crashed: %v", victim.name, own)
	send(attacks[:half]) // again, on the partition's new owner
	more(5)

	var expects []crashtest.Expect
	for s, n := range good {
		expects = append(expects, crashtest.Expect{Session: s, Turns: n, Recent: 6, Batch: 3, MaxSummaryChars: 1200})
	}
	r.settleExactly(m, expects...)

	r.Eventually("every attack dead-lettered", func() bool { return len(r.DeadLetters()) >= len(rejected) })
	for seq, a := range rejected {
		if n := r.deadLetteredTimes(seq); n != 1 {
			t.Errorf("attack at sequence %d (%s): dead-lettered %d times", seq, a.subject, n)
		}
	}
	for _, dl := range r.DeadLetters() {
		seq, _ := strconv.ParseUint(dl.Header.Get(events.HeaderOriginalSeq), 10, 64)
		a, ok := rejected[seq]
		switch {
		case !ok:
			t.Errorf("dead letter of sequence %d, which was not an attack: %v", seq, dl.Header)
		case dl.Header.Get(events.HeaderErrorCode) != a.code || dl.Header.Get(events.HeaderErrorField) != a.field ||
			dl.Header.Get(events.HeaderOriginalSubject) != a.subject:
			t.Errorf("attack at sequence %d: dead letter %v, want code %s field %s subject %s", seq, dl.Header, a.code, a.field, a.subject)
		}
	}
	if n := len(r.DeadLetters()); n != len(rejected) {
		t.Errorf("%d dead letters for %d attacks", n, len(rejected))
	}

	// No partition stalls: each has a consumer (its configured name, or
	// the fresh one an engine moved to) with nothing left to deliver or
	// to acknowledge.
	r.Eventually("every partition consumer drained", r.partitionsDrained)
}
