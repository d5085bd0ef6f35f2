package events

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// Partitioned layout (scale-out, --partitions N > 0).
//
// Bots keep publishing <prefix>.in.<session>.<kind>. The inbound stream
// captures <prefix>.in.> and has a subject transform that stores every
// four-token inbound subject as
//
//	<prefix>.part.<N>.<k>.<session>.<kind>    k = partition(N, session)
//
// The stored form is outside the stream's subjects, so a bot cannot
// publish a pre-partitioned subject: nothing captures <prefix>.part.> and
// the publish gets no stream ack. N is in the stored subject so that a
// change of N (a migration) starts a fresh subject space instead of mixing
// two partitionings under one consumer filter. Subjects that are not four
// tokens (<prefix>.in.x, <prefix>.in.a.b.c) are stored unchanged and read
// by partition 0, which dead-letters them as before.

// PartitionOf is the partition of session among n, computed exactly as the
// nats-server's {{partition(n,1)}} transform does (FNV-1a 32 of the token,
// modulo n).
func PartitionOf(session string, n int) int {
	if n <= 0 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(session))
	return int(h.Sum32() % uint32(n))
}

// Partitioned reports whether the inbound stream is partitioned.
func (s Subjects) Partitioned() bool { return s.Partitions > 0 }

// PartitionTransform is the inbound stream's subject transform (source,
// destination) for s.Partitions partitions.
func (s Subjects) PartitionTransform() (source, destination string) {
	n := strconv.Itoa(s.Partitions)
	return s.Prefix + ".in.*.*", s.Prefix + ".part." + n + ".{{partition(" + n + ",1)}}.{{wildcard(1)}}.{{wildcard(2)}}"
}

// InStored is the subject an inbound event is stored under: the published
// subject, or its partitioned form.
func (s Subjects) InStored(session, kind string) string {
	if !s.Partitioned() {
		return s.In(session, kind)
	}
	return s.Prefix + ".part." + strconv.Itoa(s.Partitions) + "." + strconv.Itoa(PartitionOf(session, s.Partitions)) + "." + session + "." + kind
}

// PartitionFilters are the consumer filters of partition k: its stored
// subjects, and for partition 0 also the malformed inbound subjects the
// transform leaves unchanged, so they are still dead-lettered.
func (s Subjects) PartitionFilters(k int) []string {
	f := []string{s.Prefix + ".part." + strconv.Itoa(s.Partitions) + "." + strconv.Itoa(k) + ".>"}
	if k == 0 {
		f = append(f, s.Prefix+".in.*", s.Prefix+".in.*.*.>")
	}
	return f
}

// InFilters are the consumer filters of the whole inbound layout.
func (s Subjects) InFilters() []string {
	if !s.Partitioned() {
		return []string{s.InAll()}
	}
	f := make([]string, 0, s.Partitions+2)
	for k := range s.Partitions {
		f = append(f, s.PartitionFilters(k)[0])
	}
	return append(f, s.Prefix+".in.*", s.Prefix+".in.*.*.>")
}

// InSessionAll filters one session's inbound events stored under any
// layout, unpartitioned and partitioned with any count, before and after a
// migration (processor migrate): what every reader of a session's history
// reads (the context service's tail, the recall index, the processor's
// rebuild, replay, the inspector), in stream order. A stored message
// matches one filter only.
func (s Subjects) InSessionAll(session string) []string {
	return []string{s.Prefix + ".in." + session + ".>", s.Prefix + ".part.*.*." + session + ".>"}
}

// Published maps a stored inbound subject back to the subject the bot
// published; other subjects are returned unchanged.
func (s Subjects) Published(stored string) string {
	rest, ok := strings.CutPrefix(stored, s.Prefix+".part.")
	if !ok {
		return stored
	}
	toks := strings.SplitN(rest, ".", 3)
	if len(toks) != 3 {
		return stored
	}
	return s.Prefix + ".in." + toks[2]
}

// parsePartitioned parses rest = <N>.<k>.<session>.<kind> of a stored
// partitioned subject.
func (s Subjects) parsePartitioned(subject, rest string) (session, kind string, err error) {
	bad := func(reason string) error {
		return &ValidationError{Code: CodeBadSubject, Field: "subject", Reason: fmt.Sprintf("%s, got %q", reason, subject)}
	}
	toks := strings.Split(rest, ".")
	if len(toks) != 4 {
		return "", "", bad(fmt.Sprintf("expected %s.part.<partitions>.<partition>.<session>.<turn|note|control>", s.Prefix))
	}
	session, kind = toks[2], toks[3]
	n, nerr := strconv.Atoi(toks[0])
	k, kerr := strconv.Atoi(toks[1])
	if nerr != nil || kerr != nil || n < 1 || k < 0 || k >= n || strconv.Itoa(n) != toks[0] || strconv.Itoa(k) != toks[1] {
		return session, "", bad("expected a partition count and a partition below it")
	}
	if err := CheckSession("subject session token", session); err != nil {
		return session, kind, err
	}
	if PartitionOf(session, n) != k {
		return session, "", bad(fmt.Sprintf("session %q belongs to partition %d of %d, not %d", session, PartitionOf(session, n), n, k))
	}
	switch kind {
	case KindTurn, KindNote, KindControl:
	default:
		return session, kind, &ValidationError{Code: CodeUnknownType, Field: "subject", Reason: fmt.Sprintf("unknown event type %q, expected turn, note or control", kind)}
	}
	return session, kind, nil
}
