package partition

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

func TestAssignIsBalancedAndDeterministic(t *testing.T) {
	for _, tc := range []struct {
		members []string
		n       int
	}{
		{[]string{"a"}, 8}, {[]string{"a", "b", "c"}, 8}, {[]string{"c", "a", "b"}, 6},
		{[]string{"x1", "x2", "x3", "x4", "x5"}, 64}, {[]string{"a", "b", "c", "d"}, 3},
	} {
		got := Assign(tc.members, tc.n)
		shuffled := slices.Clone(tc.members)
		slices.Reverse(shuffled)
		if again := Assign(shuffled, tc.n); !slices.Equal(got, again) {
			t.Fatalf("%v: depends on member order: %v vs %v", tc.members, got, again)
		}
		count := map[string]int{}
		for k, m := range got {
			if !slices.Contains(tc.members, m) {
				t.Fatalf("%v: partition %d assigned to %q", tc.members, k, m)
			}
			count[m]++
		}
		limit := (tc.n + len(tc.members) - 1) / len(tc.members)
		for m, c := range count {
			if c > limit {
				t.Fatalf("%v: %s got %d of %d partitions (limit %d): %v", tc.members, m, c, tc.n, limit, got)
			}
		}
	}
	if got := Assign(nil, 3); !slices.Equal(got, []string{"", "", ""}) {
		t.Fatalf("no members: %v", got)
	}
}

func TestConfigValidateNamesTheSetting(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		flag string
	}{
		{Config{Instance: "a.b", Partitions: 4, TTL: time.Second}, "--instance-id"},
		{Config{Instance: "a", Partitions: 0, TTL: time.Second}, "--partitions"},
		{Config{Instance: "a", Partitions: 4, TTL: time.Millisecond}, "--partition-ttl"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.flag)
		}
	}
}

// journal records every engine's run, to check that no two engines ever
// ran one partition at the same time.
type journal struct {
	mu   sync.Mutex
	runs map[int][]run
}

type run struct {
	owner      string
	start, end time.Time
	aborted    bool
}

type fakeEngine struct {
	j     *journal
	k     int
	owner string
	idx   int
	once  sync.Once
}

func (e *fakeEngine) Run(ctx context.Context) error {
	<-ctx.Done()
	time.Sleep(20 * time.Millisecond) // a graceful stop takes a moment
	e.j.mu.Lock()
	e.j.runs[e.k][e.idx].end = time.Now()
	e.j.mu.Unlock()
	return nil
}

func (e *fakeEngine) Abort() {
	e.once.Do(func() {
		e.j.mu.Lock()
		e.j.runs[e.k][e.idx].aborted = true
		e.j.mu.Unlock()
	})
}

type member struct {
	name   string
	nc     *nats.Conn
	m      *Manager
	cancel context.CancelFunc
	done   chan error
}

func startMember(t *testing.T, env *brokertest.Env, j *journal, name string, n int, ttl time.Duration) *member {
	t.Helper()
	nc, err := broker.Connect(broker.ConnConfig{Name: name}, env.NS, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	kv, ttl, err := OpenBucket(context.Background(), js, env.Layout.Owners, ttl, 1, jetstream.FileStorage, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	start := func(k int, guard func(context.Context) error) (Engine, error) {
		if err := guard(context.Background()); err != nil {
			t.Errorf("%s: guard of a partition just claimed: %v", name, err)
		}
		j.mu.Lock()
		defer j.mu.Unlock()
		j.runs[k] = append(j.runs[k], run{owner: name, start: time.Now()})
		return &fakeEngine{j: j, k: k, owner: name, idx: len(j.runs[k]) - 1}, nil
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	m, err := New(Config{Instance: name, Partitions: n, TTL: ttl}, kv, start, log, SystemClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mb := &member{name: name, nc: nc, m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { mb.done <- m.Run(ctx) }()
	t.Cleanup(func() { mb.stop(t) })
	return mb
}

func (mb *member) stop(t *testing.T) {
	if mb.cancel == nil {
		return
	}
	mb.cancel()
	mb.cancel = nil
	select {
	case err := <-mb.done:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("%s did not leave", mb.name)
	}
}

func waitOwnership(t *testing.T, n int, live ...*member) map[string][]int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		got := map[string][]int{}
		var all []int
		balanced := true
		for _, mb := range live {
			got[mb.name] = mb.m.Owned()
			all = append(all, got[mb.name]...)
			balanced = balanced && len(got[mb.name]) > 0
		}
		slices.Sort(all)
		if balanced && len(all) == n && all[0] == 0 && all[n-1] == n-1 && len(slices.Compact(all)) == n {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("partitions not owned exactly once by the live members")
	return nil
}

// TestOwnershipMovesWithoutOverlap: members join, leave gracefully and
// crash; every partition ends up owned exactly once by the live members,
// and no two engines ever ran one partition at the same time (the new
// owner starts only after the old engine stopped, or after its owner
// fenced itself).
func TestOwnershipMovesWithoutOverlap(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{Partitions: 8})
	const n, ttl = 8, 1500 * time.Millisecond
	j := &journal{runs: map[int][]run{}}
	a := startMember(t, env, j, "a", n, ttl)
	b := startMember(t, env, j, "b", n, ttl)
	c := startMember(t, env, j, "c", n, ttl)
	t.Logf("a, b, c: %v", waitOwnership(t, n, a, b, c))

	b.stop(t)
	t.Logf("b left: %v", waitOwnership(t, n, a, c))

	c.nc.Close() // crash: nothing released, keys expire
	t.Logf("c crashed: %v", waitOwnership(t, n, a))

	d := startMember(t, env, j, "d", n, ttl)
	t.Logf("d joined: %v", waitOwnership(t, n, a, d))
	a.stop(t)
	t.Logf("a left: %v", waitOwnership(t, n, d))
	d.stop(t)

	j.mu.Lock()
	defer j.mu.Unlock()
	moved := 0
	for k := range n {
		runs := j.runs[k]
		for i := 1; i < len(runs); i++ {
			prev, next := runs[i-1], runs[i]
			if prev.end.IsZero() || next.start.Before(prev.end) {
				t.Errorf("partition %d: %s started at %s while %s's engine ran until %s", k, next.owner,
					next.start.Format("15:04:05.000"), prev.owner, prev.end.Format("15:04:05.000"))
			}
			if prev.owner == "c" && !prev.aborted {
				t.Errorf("partition %d: the crashed member's engine was not aborted", k)
			}
			moved++
		}
	}
	if moved < n {
		t.Errorf("only %d hand-overs recorded", moved)
	}
}

// A write whose answer is lost (a timeout on a slow or failing-over
// server) although the server applied it leaves the owner key holding
// this instance's name at a revision the manager never saw. The claim
// then finds the key present, the renewal a revision it does not expect;
// neither means another instance has it. The member takes its own key
// at once (the TTL here is far longer than the test: without that, it
// would wait for the key to expire) and keeps its partition through a
// renewal it did not see, without restarting or aborting the engine.
func TestOwnerKeyWritesWithLostAnswersStayOurs(t *testing.T) {
	env := brokertest.Start(t, brokertest.Options{Partitions: 2})
	ctx := context.Background()
	owners, ttl, err := OpenBucket(ctx, env.JS, env.Layout.Owners, time.Minute, 1, jetstream.FileStorage, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	// The create of owner.1 landed; its answer never came back.
	if _, err := owners.Create(ctx, ownerKey(1), []byte("a")); err != nil {
		t.Fatal(err)
	}
	j := &journal{runs: map[int][]run{}}
	start := func(k int, guard func(context.Context) error) (Engine, error) {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.runs[k] = append(j.runs[k], run{owner: "a", start: time.Now()})
		return &fakeEngine{j: j, k: k, owner: "a", idx: len(j.runs[k]) - 1}, nil
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	m, err := New(Config{Instance: "a", Partitions: 2, TTL: ttl, Interval: 100 * time.Millisecond}, owners, start, log, SystemClock{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(rctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	mb := &member{name: "a", m: m}
	waitOwnership(t, 2, mb)

	// A renewal of owner.0 landed; its answer never came back.
	if _, err := owners.Put(ctx, ownerKey(0), []byte("a")); err != nil {
		t.Fatal(err)
	}
	moved, err := owners.Get(ctx, ownerKey(0))
	if err != nil {
		t.Fatal(err)
	}
	// Rounds go on; the next renewals must be made past the moved revision.
	deadline := time.Now().Add(15 * time.Second)
	for {
		e, err := owners.Get(ctx, ownerKey(0))
		if err == nil && e.Revision() > moved.Revision()+1 && string(e.Value()) == "a" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("owner.0 not renewed past the revision the member did not see: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := m.Owned(); len(got) != 2 {
		t.Fatalf("owned %v after a renewal whose answer was lost, want both partitions", got)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for k := range 2 {
		if runs := j.runs[k]; len(runs) != 1 || runs[0].aborted || !runs[0].end.IsZero() {
			t.Errorf("partition %d: engine runs %+v, want one, never stopped", k, runs)
		}
	}
}
