package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// MigrateConfig is a change of the inbound stream's partition count
// (processor migrate).
type MigrateConfig struct {
	// Partitions is the new count; 0 is the single-consumer layout.
	Partitions int
	// Consumer is the processor's durable consumer base name
	// (processor.Config.Consumer, "foldstream" by default): the consumers
	// named after it are the old layout's and are removed.
	Consumer string
}

// MigrateReport says what Migrate found and did; From == To when the
// stream already had the count asked for, and nothing was changed.
type MigrateReport struct {
	From, To int // partition counts
	// StartSeq is where the new layout's consumers start: everything
	// before it was applied under the old layout.
	StartSeq uint64
	Removed  []string // the old layout's consumers, deleted
	Created  []string // the new layout's consumers, created at StartSeq
	Kept     []string // other durable consumers (drained), left as they are
}

// MigrateRefused is a migration Migrate did not do, and why: nothing was
// changed.
type MigrateRefused struct{ Reason string }

func (e *MigrateRefused) Error() string { return "migrate refused: " + e.Reason }

// PartitionsOf is the partition count a stream's subject transform
// encodes: 0 without one. A transform foldstream did not make is an error.
func (l Layout) PartitionsOf(t *jetstream.SubjectTransformConfig) (int, error) {
	if t == nil {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(t.Destination, l.Subjects.Prefix+".part.")
	n, err := strconv.Atoi(strings.SplitN(rest, ".", 2)[0])
	if !ok || err != nil || n < 1 {
		return 0, fmt.Errorf("stream %s has a subject transform %s -> %s that is not a foldstream partitioning", l.In, t.Source, t.Destination)
	}
	if want := l.Partitioned(n).inTransform(); want.Source != t.Source || want.Destination != t.Destination {
		return 0, fmt.Errorf("stream %s has a subject transform %s -> %s, expected %s -> %s for %d partitions", l.In, t.Source, t.Destination, want.Source, want.Destination, n)
	}
	return n, nil
}

// Migrate changes the partition count of the inbound stream of l (whose
// own count is ignored) to cfg.Partitions, with every processor instance
// stopped. It refuses (MigrateRefused, nothing changed) unless every
// durable consumer of the stream is drained (nothing pending, nothing
// waiting for an ack) and read by no one, and no instance is a member of
// the partition bucket. Then it sets the stream's subject transform,
// creates the new layout's consumers at the stream's next sequence (so
// that they never deliver an event the old layout applied) and deletes
// the old layout's. Events published while it runs are stored under the
// old layout and would be read by no consumer: it checks the old
// consumers again after the switch and, if any has something pending,
// puts the old transform back and refuses.
//
// Readers of a session's history read both layouts (SessionEvents), so
// the events stored before the switch stay in contexts, recall, replays
// and rebuilds.
func Migrate(ctx context.Context, js jetstream.JetStream, l Layout, cfg MigrateConfig) (*MigrateReport, error) {
	if cfg.Partitions < 0 || cfg.Partitions > 1024 {
		return nil, fmt.Errorf("--partitions: expected 0 (one consumer, no partitions) to 1024, got %d", cfg.Partitions)
	}
	if cfg.Consumer == "" {
		cfg.Consumer = "foldstream"
	}
	s, err := js.Stream(ctx, l.In)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w (wrong --prefix, or no processor ever ran here?)", l.In, err)
	}
	sc := s.CachedInfo().Config
	from, err := l.PartitionsOf(sc.SubjectTransform)
	if err != nil {
		return nil, err
	}
	rep := &MigrateReport{From: from, To: cfg.Partitions}
	if from == cfg.Partitions {
		return rep, nil // nothing to do
	}
	if err := checkNoMembers(ctx, js, l); err != nil {
		return rep, err
	}
	durables, err := drainedDurables(ctx, s)
	if err != nil {
		return rep, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return rep, fmt.Errorf("stream %s info: %w", l.In, err)
	}
	rep.StartSeq = info.State.LastSeq + 1

	oldTransform := sc.SubjectTransform
	to := l.Partitioned(cfg.Partitions)
	sc.SubjectTransform = to.inTransform()
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		return rep, fmt.Errorf("set the subject transform of stream %s: %w", l.In, err)
	}
	// Anything stored between the check and the switch went under the old
	// layout: only its consumers would read it.
	if _, err := drainedDurables(ctx, s); err != nil {
		sc.SubjectTransform = oldTransform
		if _, rerr := js.UpdateStream(ctx, sc); rerr != nil {
			return rep, fmt.Errorf("%w; and putting the old subject transform back failed: %v (set it by hand: %s)", err, rerr, describePartitions(from))
		}
		return rep, fmt.Errorf("%w (events arrived during the switch: stop the bots' publishing, or run migrate again); the stream keeps %s", err, describePartitions(from))
	}

	for _, name := range durables {
		if !ownConsumer(cfg.Consumer, name) {
			rep.Kept = append(rep.Kept, name)
			continue
		}
		if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return rep, fmt.Errorf("stream %s now has %s, but deleting the old consumer %s failed: %w (delete it by hand; it delivers nothing new)", l.In, describePartitions(cfg.Partitions), name, err)
		}
		rep.Removed = append(rep.Removed, name)
	}
	for _, c := range to.consumers(cfg.Consumer) {
		cc := jetstream.ConsumerConfig{
			Durable:       c.name,
			Description:   "foldstream processor",
			AckPolicy:     jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
			OptStartSeq:   rep.StartSeq,
			MaxDeliver:    -1,
		}
		if len(c.filters) == 1 {
			cc.FilterSubject = c.filters[0]
		} else {
			cc.FilterSubjects = c.filters
		}
		if _, err := s.CreateOrUpdateConsumer(ctx, cc); err != nil {
			return rep, fmt.Errorf("stream %s now has %s, but creating consumer %s failed: %w (the processor creates it at start, from the stream's first event: a redelivery is a no-op, but a long one)", l.In, describePartitions(cfg.Partitions), c.name, err)
		}
		rep.Created = append(rep.Created, c.name)
	}
	return rep, nil
}

type layoutConsumer struct {
	name    string
	filters []string
}

// consumers are the durable consumers the processor attaches to in l:
// base alone, or base-p<k>of<N> per partition with its filters.
func (l Layout) consumers(base string) []layoutConsumer {
	if !l.Subjects.Partitioned() {
		return []layoutConsumer{{base, l.Subjects.InFilters()}}
	}
	out := make([]layoutConsumer, l.Subjects.Partitions)
	for k := range out {
		out[k] = layoutConsumer{l.PartitionConsumer(base, k), l.Subjects.PartitionFilters(k)}
	}
	return out
}

// ownConsumer reports whether name is one of the processor's durable
// consumers under any layout: base, base-p<k>of<N>, and the fresh names
// (-r<id>) an engine moves to when one is stuck.
func ownConsumer(base, name string) bool {
	return name == base || strings.HasPrefix(name, base+"-p") || strings.HasPrefix(name, base+"-r")
}

// drainedDurables lists the stream's durable consumers and refuses unless
// each is drained and read by no one.
func drainedDurables(ctx context.Context, s jetstream.Stream) ([]string, error) {
	var names, busy []string
	infos := s.ListConsumers(ctx)
	for ci := range infos.Info() {
		if ci.Config.Durable == "" {
			continue // the service's and replay's short-lived readers
		}
		names = append(names, ci.Name)
		var why []string
		if ci.NumPending > 0 {
			why = append(why, fmt.Sprintf("%d events not delivered", ci.NumPending))
		}
		if ci.NumAckPending > 0 {
			why = append(why, fmt.Sprintf("%d delivered but not acknowledged", ci.NumAckPending))
		}
		if ci.NumWaiting > 0 {
			why = append(why, fmt.Sprintf("%d pull requests waiting: a processor still reads it", ci.NumWaiting))
		}
		if len(why) > 0 {
			busy = append(busy, ci.Name+" ("+strings.Join(why, ", ")+")")
		}
	}
	if err := infos.Err(); err != nil {
		return nil, fmt.Errorf("list the consumers of stream %s: %w", s.CachedInfo().Config.Name, err)
	}
	if len(busy) > 0 {
		slices.Sort(busy)
		return nil, &MigrateRefused{Reason: "consumers not drained: " + strings.Join(busy, "; ") +
			": let the running processors catch up (processor sessions shows the lag), then stop every instance and run migrate again"}
	}
	slices.Sort(names)
	return names, nil
}

// checkNoMembers refuses while a processor instance is a member of the
// partition bucket (it runs, or stopped less than --partition-ttl ago
// without leaving).
func checkNoMembers(ctx context.Context, js jetstream.JetStream, l Layout) error {
	kv, err := js.KeyValue(ctx, l.Owners)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("partition bucket %s: %w", l.Owners, err)
	}
	keys, err := kv.ListKeysFiltered(ctx, "members.>")
	if err != nil {
		return fmt.Errorf("partition bucket %s: %w", l.Owners, err)
	}
	var members []string
	for k := range keys.Keys() {
		members = append(members, strings.TrimPrefix(k, "members."))
	}
	if len(members) > 0 {
		slices.Sort(members)
		return &MigrateRefused{Reason: fmt.Sprintf("processor instances are running: %s (members of bucket %s): stop every instance first (a crashed one drops out after --partition-ttl)", strings.Join(members, ", "), l.Owners)}
	}
	return nil
}

func describePartitions(n int) string {
	if n == 0 {
		return "no partitions (no subject transform)"
	}
	return fmt.Sprintf("%d partitions", n)
}
