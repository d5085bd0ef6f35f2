// Package partition shares the inbound partitions among processor
// instances: membership and ownership live in a JetStream KV bucket whose
// keys expire after a TTL unless renewed, every partition is owned by at
// most one instance at a time (compare-and-set on its owner key), and the
// owner runs the partition's engine (its own durable consumer).
//
// Keys of the bucket (<BASE>_PARTITIONS):
//
//	members.<instance>  heartbeat, rewritten every interval
//	owner.<k>           the instance owning partition k; created only when
//	                    absent, renewed with compare-and-set, deleted on
//	                    release, or removed by the bucket's TTL when its
//	                    owner died
//
// Every instance computes the same target assignment from the live members
// (Assign: rendezvous hashing bounded to a balanced load). An instance
// releases a partition targeted elsewhere only after its engine stopped
// gracefully (checkpoints flushed, folds finished or abandoned), and
// claims a partition targeted to it once its owner key is gone. An owner
// that cannot renew for half the TTL stops its engine at once (Abort:
// folds land nothing), before the server can expire its key and let
// another instance claim: the two never run one partition together.
package partition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Engine runs one partition. Run returns after its context ends (a
// graceful stop: flush, finish or abandon folds). Abort makes it land
// nothing more, at once; Run's context is cancelled as well.
type Engine interface {
	Run(ctx context.Context) error
	Abort()
}

// StartFunc builds the engine of partition k. guard returns nil while this
// instance still owns k; the engine calls it before it (re)creates its
// consumer.
type StartFunc func(k int, guard func(context.Context) error) (Engine, error)

// Clock is the time source.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Config tunes a Manager.
type Config struct {
	// Instance names this process among the members: [A-Za-z0-9_-]{1,64}.
	Instance string
	// Partitions is the number of partitions (the stream's).
	Partitions int
	// TTL is the bucket's: a member or owner key not renewed for TTL is
	// removed by the server. Use the value OpenBucket returns.
	TTL time.Duration
	// Interval is how often keys are renewed and the assignment is
	// checked; default TTL/5. An owner that could not renew for TTL/2
	// stops its engines.
	Interval time.Duration
}

// ErrNotOwner is returned by a guard once the partition is not ours.
var ErrNotOwner = errors.New("partition is owned by another instance")

func validInstance(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Validate names the setting that cannot work.
func (c Config) Validate() error {
	switch {
	case !validInstance(c.Instance):
		return fmt.Errorf("--instance-id: expected 1-64 characters from [A-Za-z0-9_-], got %q", c.Instance)
	case c.Partitions < 1 || c.Partitions > 1024:
		return fmt.Errorf("--partitions: expected 1 to 1024 for a partitioned deployment, got %d", c.Partitions)
	case c.TTL < 100*time.Millisecond:
		return fmt.Errorf("--partition-ttl: expected at least 100ms, got %s", c.TTL)
	case c.Interval > 0 && c.Interval*2 >= c.TTL:
		return fmt.Errorf("partition renewal interval %s must be well below half the TTL %s", c.Interval, c.TTL)
	}
	return nil
}

// OpenBucket binds the ownership bucket, creating it with ttl when
// missing. An existing bucket keeps its TTL, which is returned: all
// instances then agree on it whatever they were started with.
func OpenBucket(ctx context.Context, js jetstream.JetStream, name string, ttl time.Duration, replicas int, storage jetstream.StorageType, log zerolog.Logger) (jetstream.KeyValue, time.Duration, error) {
	if replicas <= 0 {
		replicas = 1
	}
	kv, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: name, Description: "foldstream partition members and owners", History: 1,
			TTL: ttl, Replicas: replicas, Storage: storage,
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = js.KeyValue(ctx, name) // another instance created it first
		} else if err == nil {
			log.Info().Str("event", "kv_bucket_created").Str("bucket", name).Dur("ttl", ttl).Int("replicas", replicas).Msg("created partition ownership bucket")
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("partition bucket %s: %w", name, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("partition bucket %s: %w", name, err)
	}
	have := st.TTL()
	if have <= 0 {
		return nil, 0, fmt.Errorf("partition bucket %s has no TTL: dead owners would never be replaced; delete it so it is created again", name)
	}
	if have != ttl {
		log.Warn().Str("event", "provision_mismatch").Str("bucket", name).Dur("existing_ttl", have).Dur("wanted_ttl", ttl).
			Msg("partition bucket exists with another TTL; using the bucket's")
	}
	return kv, have, nil
}

type slot struct {
	k         int
	rev       uint64    // owner key revision
	renewed   time.Time // last successful renewal
	eng       Engine
	cancel    context.CancelFunc
	done      chan struct{}
	err       error
	releasing bool
	lost      atomic.Bool
}

func (s *slot) stopped() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Manager joins the members and runs the engines of the partitions this
// instance owns.
type Manager struct {
	cfg   Config
	kv    jetstream.KeyValue
	start StartFunc
	log   zerolog.Logger
	clock Clock

	mu      sync.Mutex
	slots   map[int]*slot
	members []string
	leaving bool
	ready   chan struct{}

	owned   prometheus.Gauge
	changes *prometheus.CounterVec
}

// New validates cfg and builds a Manager; reg may be nil.
func New(cfg Config, kv jetstream.KeyValue, start StartFunc, log zerolog.Logger, clock Clock, reg prometheus.Registerer) (*Manager, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Interval <= 0 {
		cfg.Interval = cfg.TTL / 5
	}
	if clock == nil {
		clock = SystemClock{}
	}
	m := &Manager{
		cfg: cfg, kv: kv, start: start, log: log.With().Str("instance", cfg.Instance).Logger(), clock: clock,
		slots: map[int]*slot{}, ready: make(chan struct{}),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "partitions_owned", Help: "Inbound partitions this instance owns and runs."}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "partition_changes_total",
			Help: "Partition ownership changes of this instance: claimed, released, lost, failed."}, []string{"change"}),
	}
	if reg != nil {
		reg.MustRegister(m.owned, m.changes)
	}
	return m, nil
}

func memberKey(instance string) string { return "members." + instance }
func ownerKey(k int) string            { return "owner." + strconv.Itoa(k) }

// Ready is closed after the first membership round.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// Owned returns the partitions whose engines run here now (not being
// released or stopped), in order.
func (m *Manager) Owned() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for k, s := range m.slots {
		if !s.releasing && !s.lost.Load() && !s.stopped() {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Members returns the live members seen in the last round.
func (m *Manager) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// Run takes part in the assignment until ctx ends, then leaves gracefully:
// the member key goes first, so the others target the partitions
// elsewhere, then every engine stops gracefully and its partition is
// released. Ownership keeps being renewed meanwhile.
func (m *Manager) Run(ctx context.Context) error {
	m.log.Info().Str("event", "partition_member_joined").Int("partitions", m.cfg.Partitions).Dur("ttl", m.cfg.TTL).
		Dur("interval", m.cfg.Interval).Msg("joined the partition members")
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	m.round()
	close(m.ready)
	for {
		select {
		case <-ctx.Done():
			return m.leave()
		case <-t.C:
			m.round()
		}
	}
}

func (m *Manager) leave() error {
	m.mu.Lock()
	m.leaving = true
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Interval)
	if err := m.kv.Delete(ctx, memberKey(m.cfg.Instance)); err != nil {
		m.log.Warn().Err(err).Str("event", "partition_leave_failed").Msg("could not remove the member key; it expires after the TTL")
	}
	cancel()
	t := time.NewTicker(m.cfg.Interval / 4)
	defer t.Stop()
	for {
		m.round()
		m.mu.Lock()
		n := len(m.slots)
		m.mu.Unlock()
		if n == 0 {
			m.log.Info().Str("event", "partition_member_left").Msg("released every partition and left")
			return nil
		}
		<-t.C
	}
}

// round renews, fences, settles stopped engines, then moves towards the
// target assignment.
func (m *Manager) round() {
	// Renewals first, with a time bound of their own: an owner that cannot
	// renew for TTL/2 stops its engines, so they must not wait behind the
	// heartbeat and the claims of a round on a slow server.
	rctx, rcancel := context.WithTimeout(context.Background(), m.cfg.Interval)
	m.renew(rctx)
	rcancel()
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Interval)
	defer cancel()
	m.mu.Lock()
	leaving := m.leaving
	m.mu.Unlock()
	if !leaving {
		hb, _ := json.Marshal(map[string]any{"instance": m.cfg.Instance, "partitions": m.cfg.Partitions, "at": m.clock.Now().UTC()})
		if _, err := m.kv.Put(ctx, memberKey(m.cfg.Instance), hb); err != nil {
			m.log.Warn().Err(err).Str("event", "partition_heartbeat_failed").Msg("could not renew the member key")
		}
	}
	m.settle(ctx)
	if leaving {
		m.mu.Lock()
		for _, s := range m.slots {
			m.release(s, "leaving")
		}
		m.mu.Unlock()
		return
	}
	members, err := m.listMembers(ctx)
	if err != nil {
		m.log.Warn().Err(err).Str("event", "partition_members_failed").Msg("could not list members; assignment unchanged this round")
		return
	}
	target := Assign(members, m.cfg.Partitions)
	m.mu.Lock()
	m.members = members
	var claim []int
	for k, owner := range target {
		s, ok := m.slots[k]
		switch {
		case ok && owner != m.cfg.Instance:
			m.release(s, "rebalance")
		case !ok && owner == m.cfg.Instance:
			claim = append(claim, k)
		}
	}
	m.mu.Unlock()
	for _, k := range claim {
		m.claim(ctx, k)
	}
}

// renew extends every owner key held, and fences the engines whose keys
// could not be renewed in time or were taken.
func (m *Manager) renew(ctx context.Context) {
	m.mu.Lock()
	held := make([]*slot, 0, len(m.slots))
	for _, s := range m.slots {
		if !s.lost.Load() {
			held = append(held, s)
		}
	}
	m.mu.Unlock()
	for _, s := range held {
		rev, err := m.kv.Update(ctx, ownerKey(s.k), []byte(m.cfg.Instance), s.rev)
		switch {
		case err == nil:
			m.mu.Lock()
			s.rev, s.renewed = rev, m.clock.Now()
			m.mu.Unlock()
		case isWrongRevision(err) || errors.Is(err, jetstream.ErrKeyNotFound):
			if rev, ok := m.confirmOurs(ctx, s.k); ok {
				m.mu.Lock()
				s.rev, s.renewed = rev, m.clock.Now()
				m.mu.Unlock()
				continue
			}
			m.lose(s, "owner key expired or taken", err)
		default:
			m.log.Warn().Err(err).Str("event", "partition_renew_failed").Int("partition", s.k).Msg("could not renew partition ownership")
		}
	}
	now := m.clock.Now()
	for _, s := range held {
		m.mu.Lock()
		overdue := now.Sub(s.renewed) > m.cfg.TTL/2
		m.mu.Unlock()
		if overdue && !s.lost.Load() {
			m.lose(s, "renewal overdue", fmt.Errorf("not renewed for %s (ttl %s)", now.Sub(s.renewed).Round(time.Millisecond), m.cfg.TTL))
		}
	}
}

// confirmOurs is for a write whose answer was lost (a timeout on a slow
// or failing-over server) although the server applied it: the owner key
// then holds this instance's name at a revision the manager never saw, and
// a compare-and-set against the revision it knows fails as if another
// instance had taken the key; a create finds the key present. Only this
// instance writes its name (an instance id names one process at a time;
// the default adds a random suffix), so a key holding it is ours, and one
// compare-and-set at the revision found proves that nobody wrote since,
// and renews it. It returns the new revision and true, or false if the
// key is not ours or could not be renewed.
func (m *Manager) confirmOurs(ctx context.Context, k int) (uint64, bool) {
	e, err := m.kv.Get(ctx, ownerKey(k))
	if err != nil || string(e.Value()) != m.cfg.Instance {
		return 0, false
	}
	rev, err := m.kv.Update(ctx, ownerKey(k), []byte(m.cfg.Instance), e.Revision())
	if err != nil {
		return 0, false
	}
	m.log.Info().Str("event", "partition_write_confirmed").Int("partition", k).Uint64("revision", rev).
		Msg("an owner-key write whose answer was lost had landed; the key is ours")
	return rev, true
}

// lose stops an engine at once: its partition may be claimed by another
// instance as soon as the server expires the key.
func (m *Manager) lose(s *slot, why string, err error) {
	if s.lost.Swap(true) {
		return
	}
	s.eng.Abort()
	s.cancel()
	m.changes.WithLabelValues("lost").Inc()
	m.log.Error().Err(err).Str("event", "partition_lost").Int("partition", s.k).Str("reason", why).
		Msg("partition ownership lost; its engine was stopped without landing anything more")
}

// release starts a graceful stop; settle deletes the owner key once the
// engine has stopped. Called with mu held.
func (m *Manager) release(s *slot, why string) {
	if s.releasing || s.lost.Load() {
		return
	}
	s.releasing = true
	s.cancel()
	m.log.Info().Str("event", "partition_releasing").Int("partition", s.k).Str("reason", why).
		Msg("stopping the partition's engine before releasing it")
}

// settle removes the slots whose engines stopped: a released or failed
// partition's owner key is deleted (compare-and-set: only if still ours),
// a lost one is only forgotten.
func (m *Manager) settle(ctx context.Context) {
	m.mu.Lock()
	var done []*slot
	for _, s := range m.slots {
		if s.stopped() {
			done = append(done, s)
		}
	}
	m.mu.Unlock()
	for _, s := range done {
		if !s.lost.Load() {
			if err := m.kv.Delete(ctx, ownerKey(s.k), jetstream.LastRevision(s.rev)); err != nil {
				// It expires after the TTL; until then nobody claims it.
				m.log.Warn().Err(err).Str("event", "partition_release_failed").Int("partition", s.k).Msg("could not delete the owner key; it expires after the TTL")
			}
			switch {
			case s.releasing:
				m.changes.WithLabelValues("released").Inc()
				m.log.Info().Str("event", "partition_released").Int("partition", s.k).Msg("partition released")
			default:
				m.changes.WithLabelValues("failed").Inc()
				m.log.Error().Err(s.err).Str("event", "partition_engine_failed").Int("partition", s.k).Msg("partition engine stopped on its own; released to be claimed again")
			}
		}
		m.mu.Lock()
		delete(m.slots, s.k)
		m.owned.Set(float64(len(m.slots)))
		m.mu.Unlock()
	}
}

// claim creates the owner key of k (only if absent) and starts its engine.
func (m *Manager) claim(ctx context.Context, k int) {
	rev, err := m.kv.Create(ctx, ownerKey(k), []byte(m.cfg.Instance))
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Ours if an earlier create landed and its answer was lost.
		if r, ok := m.confirmOurs(ctx, k); ok {
			rev, err = r, nil
		}
	}
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			m.log.Warn().Err(err).Str("event", "partition_claim_failed").Int("partition", k).Msg("could not claim partition")
		}
		return // its owner has not released it yet, or it expires later
	}
	s := &slot{k: k, rev: rev, renewed: m.clock.Now(), done: make(chan struct{})}
	guard := func(ctx context.Context) error {
		if s.lost.Load() {
			return fmt.Errorf("partition %d: %w", k, ErrNotOwner)
		}
		e, err := m.kv.Get(ctx, ownerKey(k))
		if err != nil {
			return fmt.Errorf("partition %d: ownership unknown: %w", k, err)
		}
		if string(e.Value()) != m.cfg.Instance {
			return fmt.Errorf("partition %d: %w (%s)", k, ErrNotOwner, e.Value())
		}
		return nil
	}
	eng, err := m.start(k, guard)
	if err != nil {
		m.log.Error().Err(err).Str("event", "partition_engine_failed").Int("partition", k).Msg("could not build the partition's engine")
		_ = m.kv.Delete(ctx, ownerKey(k), jetstream.LastRevision(rev))
		return
	}
	ectx, cancel := context.WithCancel(context.Background())
	s.eng, s.cancel = eng, cancel
	m.mu.Lock()
	m.slots[k] = s
	m.owned.Set(float64(len(m.slots)))
	m.mu.Unlock()
	m.changes.WithLabelValues("claimed").Inc()
	m.log.Info().Str("event", "partition_claimed").Int("partition", k).Uint64("revision", rev).Msg("partition claimed; starting its engine")
	go func() {
		defer close(s.done)
		s.err = eng.Run(ectx)
	}()
}

func (m *Manager) listMembers(ctx context.Context) ([]string, error) {
	lister, err := m.kv.ListKeysFiltered(ctx, "members.>")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return []string{m.cfg.Instance}, nil
		}
		return nil, err
	}
	var out []string
	for key := range lister.Keys() {
		if id, ok := strings.CutPrefix(key, "members."); ok && validInstance(id) {
			out = append(out, id)
		}
	}
	if !slices.Contains(out, m.cfg.Instance) {
		out = append(out, m.cfg.Instance) // our heartbeat failed this round: still a member
	}
	slices.Sort(out)
	return out, nil
}

func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyExists) || errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// Assign is the target owner of each of n partitions among members:
// rendezvous hashing (each partition goes to the member that scores
// highest for it, so a member joining or leaving moves few partitions)
// bounded to ceil(n/len(members)) partitions per member, so the load stays
// balanced. Every instance computes the same answer from the same members.
func Assign(members []string, n int) []string {
	out := make([]string, n)
	ms := slices.Compact(slices.Sorted(slices.Values(members)))
	if len(ms) == 0 {
		return out
	}
	limit := (n + len(ms) - 1) / len(ms)
	count := make(map[string]int, len(ms))
	for k := range n {
		best, bestScore := "", uint64(0)
		for _, m := range ms {
			if count[m] >= limit {
				continue
			}
			if sc := score(m, k); best == "" || sc > bestScore {
				best, bestScore = m, sc
			}
		}
		out[k] = best
		count[best]++
	}
	return out
}

func score(member string, k int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(k)))
	// splitmix64 finaliser: FNV alone scores similar names alike.
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
