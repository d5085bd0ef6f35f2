package processor

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/partition"
)

// PartitionStarter builds the engine of one owned partition: a Processor
// on its own durable consumer (<consumer>-p<k>of<N>, or a fresh name made
// from it when that one is stuck: Processor.ConsumerName) filtered to the
// partition's stored subjects, resuming only the partition's due
// sessions, sharing d.Shared's metrics and fold slots with the process's
// other engines. The layout in d must be partitioned.
//
// Each engine gets its own instance id (<instance>-p<k>-<generation>) in
// fold leases: a partition that comes back to this process runs a new
// engine, which must not take the old engine's lease for its own fold.
func PartitionStarter(cfg Config, d Deps) (partition.StartFunc, error) {
	n := d.Layout.Subjects.Partitions
	if n < 1 {
		return nil, fmt.Errorf("partitioned engines need a partitioned layout (--partitions > 0)")
	}
	if d.Shared == nil {
		d.Shared = NewShared(d.Registry, cfg.MaxConcurrentFolds)
	}
	cfg = cfg.withDefaults()
	base, instance := cfg.Consumer, cfg.InstanceID
	var gen atomic.Uint64
	return func(k int, guard func(context.Context) error) (partition.Engine, error) {
		c := cfg
		c.Consumer = d.Layout.PartitionConsumer(base, k)
		c.FilterSubjects = d.Layout.Subjects.PartitionFilters(k)
		c.Owns = func(session string) bool { return events.PartitionOf(session, n) == k }
		if instance != "" {
			c.InstanceID = fmt.Sprintf("%s-p%d-%d", instance, k, gen.Add(1))
		}
		dd := d
		dd.BeforeAttach = guard
		dd.Log = d.Log.With().Int("partition", k).Logger()
		return New(c, dd)
	}, nil
}
