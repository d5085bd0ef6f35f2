package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Layout names foldstream's streams and bucket for one subject prefix.
type Layout struct {
	Subjects events.Subjects
	In       string // inbound stream
	Out      string // outbound stream
	DLQ      string // dead-letter stream
	Bucket   string // session checkpoints
	// Owners is the partition ownership bucket (members and owners), used
	// only when Subjects.Partitions > 0.
	Owners string
}

// NewLayout derives names from the prefix: "fold" gives FOLD_IN, FOLD_OUT,
// FOLD_DLQ and bucket FOLD_SESSIONS.
func NewLayout(subjects events.Subjects) Layout {
	base := strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(subjects.Prefix))
	return Layout{Subjects: subjects, In: base + "_IN", Out: base + "_OUT", DLQ: base + "_DLQ", Bucket: base + "_SESSIONS", Owners: base + "_PARTITIONS"}
}

// Partitioned returns the layout with n inbound partitions (0 = none).
func (l Layout) Partitioned(n int) Layout {
	l.Subjects.Partitions = n
	return l
}

// PartitionConsumer names partition k's durable consumer: the base name,
// the partition and the partition count, so a change of --partitions
// never reuses an ack floor from another partitioning.
func (l Layout) PartitionConsumer(base string, k int) string {
	return fmt.Sprintf("%s-p%dof%d", base, k, l.Subjects.Partitions)
}

// inTransform is the inbound stream's subject transform for the layout.
func (l Layout) inTransform() *jetstream.SubjectTransformConfig {
	if !l.Subjects.Partitioned() {
		return nil
	}
	src, dst := l.Subjects.PartitionTransform()
	return &jetstream.SubjectTransformConfig{Source: src, Destination: dst}
}

// ProvisionConfig sets what Provision creates.
type ProvisionConfig struct {
	Replicas   int
	MaxAge     time.Duration // inbound/outbound retention; 0 = unlimited
	Duplicates time.Duration // Nats-Msg-Id dedup window
	Storage    jetstream.StorageType
}

// Provision creates the streams and KV bucket if missing. Existing ones are
// left as they are; any difference from what foldstream would create is
// logged, and a missing subject is an error because nothing would work.
func Provision(ctx context.Context, js jetstream.JetStream, l Layout, pc ProvisionConfig, log zerolog.Logger) (jetstream.KeyValue, error) {
	if pc.Replicas <= 0 {
		pc.Replicas = 1
	}
	if pc.Duplicates <= 0 {
		pc.Duplicates = 10 * time.Minute
	}
	streams := []jetstream.StreamConfig{
		{Name: l.In, Subjects: []string{l.Subjects.InAll()}, Description: "foldstream inbound: turns, notes, control", SubjectTransform: l.inTransform()},
		{Name: l.Out, Subjects: []string{l.Subjects.OutAll()}, Description: "foldstream outbound: summaries, lifecycle, memories, evictions"},
		{Name: l.DLQ, Subjects: []string{l.Subjects.DeadLetterAll()}, Description: "foldstream rejected inbound messages, with the reason in headers"},
	}
	for _, sc := range streams {
		sc.Storage = pc.Storage
		sc.Replicas = pc.Replicas
		sc.Retention = jetstream.LimitsPolicy
		sc.Duplicates = pc.Duplicates
		sc.AllowDirect = true // folds read turns by sequence with direct get
		if sc.Name != l.DLQ {
			sc.MaxAge = pc.MaxAge
		}
		if err := ensureStream(ctx, js, sc, log); err != nil {
			return nil, err
		}
	}
	kv, err := js.KeyValue(ctx, l.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      l.Bucket,
			Description: "foldstream session checkpoints",
			History:     1,
			Replicas:    pc.Replicas,
			Storage:     pc.Storage,
		})
		if err == nil {
			log.Info().Str("event", "kv_bucket_created").Str("bucket", l.Bucket).Int("replicas", pc.Replicas).Msg("created session bucket")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("session bucket %s: %w", l.Bucket, err)
	}
	if st, err := kv.Status(ctx); err == nil {
		if info, ok := st.(*jetstream.KeyValueBucketStatus); ok && info.StreamInfo().Config.Replicas != pc.Replicas {
			log.Warn().Str("event", "provision_mismatch").Str("bucket", l.Bucket).
				Int("existing_replicas", info.StreamInfo().Config.Replicas).Int("wanted_replicas", pc.Replicas).
				Msg("session bucket exists with a different replica count; left unchanged")
		}
	}
	return kv, nil
}

func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, log zerolog.Logger) error {
	s, err := js.Stream(ctx, want.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err := js.CreateStream(ctx, want); err != nil {
			return fmt.Errorf("create stream %s on %v: %w", want.Name, want.Subjects, err)
		}
		log.Info().Str("event", "stream_created").Str("stream", want.Name).Strs("subjects", want.Subjects).Int("replicas", want.Replicas).Msg("created stream")
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up stream %s: %w", want.Name, err)
	}
	have := s.CachedInfo().Config
	for _, subj := range want.Subjects {
		if !slices.Contains(have.Subjects, subj) {
			return fmt.Errorf("stream %s exists but does not capture %q (it has %v): fix the stream or choose another --prefix", want.Name, subj, have.Subjects)
		}
	}
	if err := checkTransform(want.Name, have.SubjectTransform, want.SubjectTransform); err != nil {
		return err
	}
	var diffs []string
	if have.Replicas != want.Replicas {
		diffs = append(diffs, fmt.Sprintf("replicas %d (wanted %d)", have.Replicas, want.Replicas))
	}
	if have.Storage != want.Storage {
		diffs = append(diffs, fmt.Sprintf("storage %s (wanted %s)", have.Storage, want.Storage))
	}
	if have.MaxAge != want.MaxAge {
		diffs = append(diffs, fmt.Sprintf("max_age %s (wanted %s)", have.MaxAge, want.MaxAge))
	}
	if have.Duplicates < want.Duplicates {
		diffs = append(diffs, fmt.Sprintf("duplicate window %s (wanted %s)", have.Duplicates, want.Duplicates))
	}
	if !have.AllowDirect {
		diffs = append(diffs, "allow_direct false (folds will read turns through the API, slower)")
	}
	if have.Retention != jetstream.LimitsPolicy {
		diffs = append(diffs, fmt.Sprintf("retention %s (wanted limits: replay needs the history)", have.Retention))
	}
	if len(diffs) > 0 {
		log.Warn().Str("event", "provision_mismatch").Str("stream", want.Name).Strs("differences", diffs).
			Msg("stream exists with a different configuration; left unchanged")
	}
	return nil
}

// checkTransform refuses a stream whose partitioning differs from the one
// asked for: consumers would filter subjects nothing is stored under, and
// sessions would be read by two partitionings at once. Changing it is a
// migration (processor migrate, docs/deployment.md), never done on the fly.
func checkTransform(stream string, have, want *jetstream.SubjectTransformConfig) error {
	describe := func(t *jetstream.SubjectTransformConfig) string {
		if t == nil {
			return "no partitions (no subject transform)"
		}
		return fmt.Sprintf("subject transform %s -> %s", t.Source, t.Destination)
	}
	same := (have == nil && want == nil) || (have != nil && want != nil && have.Source == want.Source && have.Destination == want.Destination)
	if same {
		return nil
	}
	return fmt.Errorf("--partitions: stream %s has %s, but this processor wants %s; every instance must run with the stream's partition count, and changing it is a migration: stop every instance, then processor migrate --partitions N (docs/deployment.md, \"Changing the partition count\")",
		stream, describe(have), describe(want))
}
