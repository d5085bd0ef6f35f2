package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/partition"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

const scalePartitions = 6

// instance is one processor process of a scale-out test: its own NATS
// connection (closing it is a crash), its partition manager and engines.
type instance struct {
	name   string
	nc     *nats.Conn
	mgr    *partition.Manager
	cancel context.CancelFunc
	done   chan error
}

func newPartitionedRig(t *testing.T, n int) *rig {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(testLogLevel)
	return rigOn(t, testenv.New(t, testenv.Options{Log: &log, Partitions: n}))
}

// newClusterPartitionedRig is newPartitionedRig on a 3-node cluster,
// streams and buckets at 3 replicas.
func newClusterPartitionedRig(t *testing.T, n int) *rig {
	t.Helper()
	c := newCluster(t)
	return clusterRig(t, c, strings.Join(c.URLs, ","), n)
}

// clusterRig is a rig whose client connects to url (some or all of c's
// nodes), over the layout provisioned on c at 3 replicas: partitioned
// into n when n > 0.
func clusterRig(t *testing.T, c *cluster, url string, n int) *rig {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(testLogLevel)
	nc, err := broker.Connect(broker.ConnConfig{URL: url, Name: "test"}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subjects, _ := events.NewSubjects("fold")
	layout := broker.NewLayout(subjects)
	if n > 0 {
		layout = layout.Partitioned(n)
	}
	kv := provisionR3(t, js, layout, log)
	env := testenv.Attach(t, nc, js, layout, kv, log)
	env.URL = url
	r := rigOn(t, env)
	r.replicas = 3
	return r
}

// startInstance runs a partitioned processor named name until stopped.
func (r *rig) startInstance(name string, ttl time.Duration) *instance {
	r.t.Helper()
	nc, err := broker.Connect(broker.ConnConfig{Name: name, URL: r.URL}, r.NS, r.Log)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx := context.Background()
	kv, err := js.KeyValue(ctx, r.Layout.Bucket)
	if err != nil {
		r.t.Fatal(err)
	}
	owners, ttl, err := partition.OpenBucket(ctx, js, r.Layout.Owners, ttl, r.replicas, jetstream.FileStorage, r.Log)
	if err != nil {
		r.t.Fatal(err)
	}
	log := r.Log.With().Str("instance", name).Logger()
	cfg := Config{
		InstanceID: name, Window: fold.Window{Recent: 6, Batch: 3}, FlushInterval: 5 * time.Millisecond,
		RetryBackoff: 50 * time.Millisecond, FoldTimeout: 3 * time.Second, LeaseTTL: 4 * time.Second, ShutdownGrace: 3 * time.Second,
	}
	start, err := PartitionStarter(cfg, Deps{
		JS: js, Layout: r.Layout, Store: state.NewStore(js, kv), Summarizer: r.sum, Log: log, Clock: SystemClock{},
		Shared: NewShared(nil, 4),
	})
	if err != nil {
		r.t.Fatal(err)
	}
	mgr, err := partition.New(partition.Config{Instance: name, Partitions: r.Layout.Subjects.Partitions, TTL: ttl}, owners, start, r.Log, partition.SystemClock{}, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	in := &instance{name: name, nc: nc, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { in.done <- mgr.Run(rctx) }()
	r.t.Cleanup(func() { in.stop(r.t) })
	return in
}

// stop leaves gracefully: every partition released after its engine
// flushed.
func (in *instance) stop(t *testing.T) {
	t.Helper()
	if in.cancel == nil {
		return
	}
	in.cancel()
	in.cancel = nil
	select {
	case err := <-in.done:
		if err != nil {
			t.Errorf("%s: %v", in.name, err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop", in.name)
	}
}

// crash cuts the instance off NATS without releasing anything, as a
// killed process would; its partitions move once the TTL expires them.
// The goroutines left are stopped at cleanup.
func (in *instance) crash() { in.nc.Close() }

// ownership waits until the live instances own every partition exactly
// once, both by their own account and in the ownership bucket, and
// returns who owns what.
func (r *rig) ownership(live ...*instance) map[string][]int {
	r.t.Helper()
	var got map[string][]int
	names := make([]string, len(live))
	for i, in := range live {
		names[i] = in.name
	}
	kv, err := r.JS.KeyValue(context.Background(), r.Layout.Owners)
	if err != nil {
		r.t.Fatal(err)
	}
	r.Eventually(fmt.Sprintf("every partition owned exactly once by %v", names), func() bool {
		got = map[string][]int{}
		var all []int
		for _, in := range live {
			got[in.name] = in.mgr.Owned()
			all = append(all, got[in.name]...)
			if len(got[in.name]) == 0 {
				return false // balanced: everyone owns some
			}
		}
		slices.Sort(all)
		for k := range scalePartitions {
			if k >= len(all) || all[k] != k {
				return false
			}
		}
		if len(all) != scalePartitions {
			return false
		}
		for name, ks := range got {
			for _, k := range ks {
				e, err := kv.Get(context.Background(), fmt.Sprintf("owner.%d", k))
				if err != nil || string(e.Value()) != name {
					return false
				}
			}
		}
		return true
	})
	return got
}

// TestScaleOutPartitions: three instances share the partitions; one
// leaves gracefully, one crashes, one joins, while turns for many sessions
// keep arriving. At the end every turn is applied exactly once, in order,
// every batch became exactly one summary version, versions go 1, 2, 3...
// and nothing is left unacknowledged.
func TestScaleOutPartitions(t *testing.T) {
	scaleOut(t, newPartitionedRig(t, scalePartitions), 1500*time.Millisecond)
}

// The same on a 3-node cluster, streams and buckets at 3 replicas, each
// instance connected to the nodes in its own random order.
func TestScaleOutPartitionsOnCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	// A TTL of 6 s: an owner fences itself when it cannot renew for half
	// of it, and on a 3-replica bucket under the race detector on a
	// shared 2-core machine a renewal was seen to take over 1.5 s. The
	// fencing is right then; it is just not what this test is about.
	scaleOut(t, newClusterPartitionedRig(t, scalePartitions), 6*time.Second)
}

func scaleOut(t *testing.T, r *rig, ttl time.Duration) {
	a, b, c := r.startInstance("a", ttl), r.startInstance("b", ttl), r.startInstance("c", ttl)
	own := r.ownership(a, b, c)
	t.Logf("3 instances: %v", own)

	const sessions = 24
	var (
		mu        sync.Mutex
		published = map[string]int{}
		stopPub   = make(chan struct{})
		pubDone   = make(chan struct{})
	)
	// The publisher keeps sending turns, round-robin over the sessions,
	// through every ownership change.
	go func() {
		defer close(pubDone)
		for i := 0; ; i++ {
			select {
			case <-stopPub:
				return
			default:
			}
			session := fmt.Sprintf("sess-%02d", i%sessions)
			mu.Lock()
			n := published[session]
			mu.Unlock()
			id := fmt.Sprintf("%s-t%03d", session, n)
			data, _ := json.Marshal(events.Turn{V: 1, Session: session, TurnID: id, At: t0.Add(time.Duration(n) * time.Second),
				Speaker: "Alice", Role: "user", Text: fmt.Sprintf("message number %03d from Alice", n)})
			if _, err := r.JS.Publish(context.Background(), r.Layout.Subjects.In(session, events.KindTurn), data, jetstream.WithMsgID(id)); err != nil {
				t.Errorf("publish %s: %v", id, err)
				return
			}
			mu.Lock()
			published[session]++
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	// The publisher waits for each turn's acknowledgement from the
	// stream's replicas: its pace is the machine's (on a loaded 2-core
	// host 300 replicated publishes can take over 20 s).
	waitTurns := func(n int) {
		brokertest.EventuallyWithin(t, 90*time.Second, fmt.Sprintf("%d turns published", n), func() bool {
			mu.Lock()
			defer mu.Unlock()
			total := 0
			for _, v := range published {
				total += v
			}
			return total >= n
		})
	}
	waitTurns(300)
	// Malformed subjects are still dead-lettered (partition 0 reads the
	// ones the transform leaves alone), a bad kind by its session's
	// partition, with the subject as the bot sent it.
	r.Publish("fold.in.nosession", events.Turn{V: 1}, "")
	r.Publish(r.Layout.Subjects.In("sess-03", "bogus"), events.Turn{V: 1, Session: "sess-03"}, "")

	b.stop(t) // graceful: its partitions are released after a flush
	own = r.ownership(a, c)
	t.Logf("b left: %v", own)
	waitTurns(600)

	c.crash() // abrupt: its keys expire after the TTL
	own = r.ownership(a)
	t.Logf("c crashed: %v", own)
	waitTurns(900)

	d := r.startInstance("d", ttl)
	own = r.ownership(a, d)
	t.Logf("d joined: %v", own)
	waitTurns(1200)
	close(stopPub)
	<-pubDone

	for i := range sessions {
		session := fmt.Sprintf("sess-%02d", i)
		mu.Lock()
		total := int64(published[session])
		mu.Unlock()
		// Folds catch up to where window mode puts the cursor.
		cursor := int64(0)
		for total-cursor > 6+3 {
			cursor += 3
		}
		s := r.Settled(session, total, cursor)
		r.checkSession(s)
	}
	dead := map[string]string{}
	for _, m := range r.DeadLetters() {
		dead[m.Header.Get(events.HeaderOriginalSubject)] = m.Header.Get(events.HeaderErrorCode)
	}
	if dead["fold.in.nosession"] != events.CodeBadSubject || dead["fold.in.sess-03.bogus"] != events.CodeUnknownType || len(dead) != 2 {
		t.Fatalf("dead letters by original subject: %v", dead)
	}
	// Nothing is left unacknowledged on any partition's consumer (its
	// configured name, or the fresh one an engine moved to when that one
	// could not be re-created).
	r.Eventually("every partition consumer drained", r.partitionsDrained)
}

// checkSession verifies one settled session: the unfolded turns are the
// session's last ones in publish order, and the summaries are versions
// 1..n, each folding exactly the next batch in order.
func (r *rig) checkSession(s *state.Session) {
	r.t.Helper()
	ctx := context.Background()
	in, err := r.JS.Stream(ctx, r.Layout.In)
	if err != nil {
		r.t.Fatal(err)
	}
	if int64(len(s.Turns)) != s.Total-s.Cursor {
		r.t.Fatalf("%s: %d unfolded turns held, want %d", s.ID, len(s.Turns), s.Total-s.Cursor)
	}
	for i, ref := range s.Turns {
		m, err := in.GetMsg(ctx, ref.Seq)
		if err != nil {
			r.t.Fatal(err)
		}
		if want := r.Layout.Subjects.InStored(s.ID, events.KindTurn); m.Subject != want {
			r.t.Fatalf("%s: turn stored under %q, want %q", s.ID, m.Subject, want)
		}
		var turn events.Turn
		if err := json.Unmarshal(m.Data, &turn); err != nil {
			r.t.Fatal(err)
		}
		if want := fmt.Sprintf("message number %03d ", s.Cursor+int64(i)); !strings.HasPrefix(turn.Text, want) {
			r.t.Fatalf("%s: unfolded turn %d is %q: applied out of order", s.ID, s.Cursor+int64(i), turn.Text)
		}
	}
	// Summaries are read with direct gets, which any replica of a
	// cluster's stream answers: a follower that has not stored the last
	// ones yet shows fewer (seen once in 30 runs: 49 for version 55).
	// Read until the stream shows as many as the checkpoint's version; a
	// summary that was never published never shows, and fails below.
	var sums []events.SummaryUpdated
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if sums = r.Summaries(s.ID); uint64(len(sums)) >= s.Version || time.Now().After(deadline) {
			break
		}
	}
	if uint64(len(sums)) != s.Version {
		r.t.Fatalf("%s: %d summaries published, checkpoint at version %d", s.ID, len(sums), s.Version)
	}
	prev := int64(0)
	for i, sum := range sums {
		if sum.Version != uint64(i+1) {
			r.t.Fatalf("%s: summary %d has version %d: versions must go 1, 2, 3... without repeats", s.ID, i, sum.Version)
		}
		if sum.Cursor != prev+3 {
			r.t.Fatalf("%s: version %d moved the cursor from %d to %d, want one batch of 3", s.ID, sum.Version, prev, sum.Cursor)
		}
		if want := fmt.Sprintf("Alice and Bob discussed messages %03d to %03d.", prev, sum.Cursor-1); sum.Summary != want {
			r.t.Fatalf("%s: version %d is %q, want %q (the batch in order)", s.ID, sum.Version, sum.Summary, want)
		}
		prev = sum.Cursor
	}
	if prev != s.Cursor {
		r.t.Fatalf("%s: last summary ends at %d, checkpoint cursor %d", s.ID, prev, s.Cursor)
	}
}

// partitionsDrained reports whether every partition has a consumer (its
// configured name, or the fresh one an engine moved to when that one could
// not be re-created) with nothing left to deliver or to acknowledge.
func (r *rig) partitionsDrained() bool {
	ctx := context.Background()
	in, err := r.JS.Stream(ctx, r.Layout.In)
	if err != nil {
		return false
	}
	drained := 0
	for k := range scalePartitions {
		base := r.Layout.PartitionConsumer("foldstream", k)
		found := false
		for info := range in.ListConsumers(ctx).Info() {
			if !ownConsumerName(base, info.Name) {
				continue
			}
			if info.NumPending != 0 || info.NumAckPending != 0 {
				return false
			}
			found = true
		}
		if found {
			drained++
		}
	}
	return drained == scalePartitions
}
