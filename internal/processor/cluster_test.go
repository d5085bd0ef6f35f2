package processor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/crashtest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/fold/openai"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// cluster is a 3-node JetStream cluster (brokertest.Cluster, as
// nats/configs_test.go starts nats/cluster/*.conf) with a probe of its
// JetStream meta layer.
type cluster struct {
	*brokertest.Cluster
	t *testing.T
	// probe, when set, is a JetStream meta operation from a client of the
	// test (a consumer create); metaStale calls it at most once a second.
	probe     func() error
	probedAt  time.Time
	probeFail error
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	return &cluster{t: t, Cluster: brokertest.NewCluster(t, "foldstream-test", func(o *server.Options) {
		o.MaxPayload, o.DisableShortFirstPing = 1<<20, true
	})}
}

// waitMetaCurrent waits until every running node's JetStream meta group is
// current. A node just restarted may still be catching up: shutting down
// another node then leaves no meta quorum, and the cluster refuses every
// consumer create ("JetStream system temporarily unavailable") until it
// recovers, which says nothing about the processor.
func (c *cluster) waitMetaCurrent() {
	c.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		current := true
		for _, s := range c.Servers {
			if s != nil && !s.JetStreamIsCurrent() {
				current = false
			}
		}
		if current {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("the JetStream meta group is not current on every node")
		}
	}
}

// metaStale names a running node whose view of the JetStream meta group
// is not current or that knows no meta leader, "" if none. A node between
// elections passes JetStreamIsCurrent (it has applied all it committed)
// while it answers every consumer create with "JetStream system
// temporarily unavailable", so the leader is checked too. And seen with
// every node passing both: the two nodes left answer every consumer create
// (and every KV write) with that 503 for as long as the test waits, so the
// probe asks the cluster itself.
func (c *cluster) metaStale() string {
	for i, s := range c.Servers {
		if s == nil {
			continue
		}
		if !s.JetStreamIsCurrent() {
			return c.Opts[i].ServerName
		}
		if jsz, err := s.Jsz(&server.JSzOptions{}); err != nil || jsz.Meta == nil || jsz.Meta.Leader == "" {
			return c.Opts[i].ServerName
		}
	}
	if c.probe != nil {
		if time.Since(c.probedAt) >= time.Second {
			c.probedAt, c.probeFail = time.Now(), c.probe()
		}
		if c.probeFail != nil {
			return "the cluster (" + c.probeFail.Error() + ")"
		}
	}
	return ""
}

// refusesConsumers is a probe for metaStale: a consumer create on any of
// streams fails with a 503 (10008, "JetStream system temporarily
// unavailable") or times out. The probe's consumer is its own (idle, no
// acks; the streams keep their history by limits, so it holds nothing
// back), so asking on the stream the processor consumes sees a refusal
// that only that stream's consumers meet.
func refusesConsumers(js jetstream.JetStream, streams ...string) func() error {
	return func() error {
		for _, stream := range streams {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "heal-probe", AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute})
			cancel()
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.Code == 503 || errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%s: %w", stream, err)
			}
		}
		return nil
	}
}

func (c *cluster) index(name string) int {
	for i, o := range c.Opts {
		if o.ServerName == name {
			return i
		}
	}
	return -1
}

// streamCluster waits for stream to have a leader and returns its info.
func streamCluster(t *testing.T, js jetstream.JetStream, stream string, allCurrent bool) *jetstream.ClusterInfo {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := js.Stream(ctx, stream)
		var info *jetstream.StreamInfo
		if err == nil {
			info, err = st.Info(ctx)
		}
		cancel()
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			ok := len(info.Cluster.Replicas) == 2
			for _, r := range info.Cluster.Replicas {
				ok = ok && (!allCurrent || (r.Current && !r.Offline))
			}
			if !allCurrent || ok {
				return info.Cluster
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: no leader (all current: %v) within 30s: %v", stream, allCurrent, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// provisionR3 provisions layout at 3 replicas, retrying while the new
// cluster elects its meta leader, and waits until every stream and the
// bucket have a leader and current replicas.
func provisionR3(t *testing.T, js jetstream.JetStream, layout broker.Layout, log zerolog.Logger) jetstream.KeyValue {
	t.Helper()
	var kv jetstream.KeyValue
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		var err error
		kv, err = broker.Provision(ctx, js, layout, broker.ProvisionConfig{Replicas: 3}, log)
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("provision R3: %v", err)
		}
	}
	for _, name := range []string{layout.In, layout.Out, layout.DLQ, "KV_" + layout.Bucket} {
		streamCluster(t, js, name, true)
	}
	return kv
}

// TestClusterFailover runs the processor against a 3-node cluster with
// every stream and the KV bucket at 3 replicas. Under load, the inbound
// stream's leader is shut down, brought back, and then a follower is shut
// down. Processing continues each time (the clients reconnect, a new
// leader is elected), and at the end every turn whose publish was
// acknowledged is counted exactly once and the summaries are consistent.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	began := time.Now()
	c := newCluster(t)
	// Debug-level processor logs go to a file kept when the test fails.
	var logBuf testlog.Buffer
	log := zerolog.New(&logBuf).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	defer func() {
		if t.Failed() {
			f := filepath.Join(os.TempDir(), fmt.Sprintf("foldstream-cluster-%d.log", time.Now().UnixNano()))
			if os.WriteFile(f, logBuf.Bytes(), 0o644) == nil {
				t.Logf("processor logs: %s", f)
			}
		}
	}()
	url := strings.Join(c.URLs, ",")
	connect := func(name string) (*nats.Conn, jetstream.JetStream) {
		nc, err := broker.Connect(broker.ConnConfig{URL: url, Name: name}, nil, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return nc, js
	}
	nc, js := connect("test")
	subjects, _ := events.NewSubjects("fold")
	layout := broker.NewLayout(subjects)
	kv := provisionR3(t, js, layout, log)
	env := crashtest.Env{JS: js, Layout: layout, Store: state.NewStore(js, kv)}

	// A tap on the consumer's deliveries and acks, for diagnosis.
	var tapMu sync.Mutex
	var tap []string
	tapNC, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer tapNC.Close()
	record := func(m *nats.Msg) {
		tapMu.Lock()
		defer tapMu.Unlock()
		if len(tap) < 200000 {
			tap = append(tap, fmt.Sprintf("%s %s reply=%s %.80s", time.Now().Format("15:04:05.000000"), m.Subject, m.Reply, m.Data))
		}
	}
	for _, subj := range []string{"_INBOX.>", "$JS.ACK.>", "$JS.API.CONSUMER.>"} {
		if _, err := tapNC.Subscribe(subj, record); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		if t.Failed() {
			tapMu.Lock()
			f := filepath.Join(os.TempDir(), fmt.Sprintf("foldstream-cluster-tap-%d.txt", time.Now().UnixNano()))
			_ = os.WriteFile(f, []byte(strings.Join(tap, "\n")), 0o644)
			tapMu.Unlock()
			t.Logf("tap: %s", f)
		}
	}()

	// The processor has its own connection, as in production.
	_, pjs := connect("processor")
	pkv, err := pjs.KeyValue(context.Background(), layout.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	model := crashtest.NewModel(t, 3, 10*time.Millisecond)
	sum, err := openai.New(openai.Config{BaseURL: model.URL, APIKey: "k", Model: "fold-mini", Timeout: 2 * time.Second, Retry: retry.Policy{MaxAttempts: 1}}, log)
	if err != nil {
		t.Fatal(err)
	}
	const recent, batch = 6, 4
	p, err := New(Config{Window: fold.Window{Recent: recent, Batch: batch}, FlushInterval: 5 * time.Millisecond,
		FoldTimeout: 3 * time.Second, LeaseTTL: 4 * time.Second, AckWait: 5 * time.Second, RetryBackoff: 50 * time.Millisecond},
		Deps{JS: pjs, Layout: layout, Store: state.NewStore(pjs, pkv), Summarizer: sum, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("processor did not stop")
		}
	}()
	select {
	case <-p.Ready():
	case err := <-done:
		t.Fatalf("processor exited: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("processor not ready")
	}
	sessions := []string{"c0", "c1", "c2"}
	watcher := crashtest.Poll(context.Background(), kv, sessions, batch, 5*time.Millisecond)
	watch, err := crashtest.Watch(context.Background(), kv, batch)
	if err != nil {
		t.Fatal(err)
	}

	// The bot: each turn is re-published (same Nats-Msg-Id) until the
	// stream acknowledges it; only acknowledged turns are expected.
	var mu sync.Mutex
	acked := map[string]int{}
	retried := 0
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				pubDone <- nil
				return
			case <-time.After(2 * time.Millisecond):
			}
			s := sessions[i%len(sessions)]
			mu.Lock()
			n := acked[s]
			mu.Unlock()
			var err error
			for attempt := range 100 {
				pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err = crashtest.Publish(pctx, js, layout.Subjects, s, n, true)
				pcancel()
				if err == nil {
					break
				}
				mu.Lock()
				retried++
				mu.Unlock()
				if attempt == 99 {
					pubDone <- fmt.Errorf("turn %d of %s never acknowledged: %w", n, s, err)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
			mu.Lock()
			acked[s]++
			mu.Unlock()
		}
	}()
	applied := func() int64 {
		var n int64
		for _, s := range sessions {
			if st, _, err := env.Store.Load(context.Background(), s); err == nil {
				n += st.Total
			}
		}
		return n
	}
	// progress waits for more applied turns. heal, when set, is called
	// once if a running node has had no current view of the cluster's meta
	// group (no leader it follows) for 15 s.
	// healWhenStale returns a check for a wait loop: once a running node
	// has had no current meta view for 15 s, it calls heal (once) and
	// reports true.
	healWhenStale := func(heal func()) func() bool {
		var stale time.Time
		return func() bool {
			if heal == nil {
				return false
			}
			switch {
			case c.metaStale() == "":
				stale = time.Time{}
			case stale.IsZero():
				stale = time.Now()
			case time.Since(stale) > 15*time.Second:
				heal()
				heal = nil
				return true
			}
			return false
		}
	}
	progress := func(what string, more int64, heal func()) {
		t.Helper()
		from, began := applied(), time.Now()
		healed := healWhenStale(heal)
		for deadline := time.Now().Add(30 * time.Second); applied() < from+more; time.Sleep(50 * time.Millisecond) {
			if healed() {
				deadline = time.Now().Add(30 * time.Second)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: processing stalled at %d applied turns", what, applied())
			}
		}
		mu.Lock()
		t.Logf("%s: %d more turns applied in %s (%d acknowledged so far, %d checkpoint revisions checked)", what, more,
			time.Since(began).Round(time.Millisecond), countAll(acked), watcher.Updates())
		mu.Unlock()
	}
	progress("before failures", 60, nil)

	ci := streamCluster(t, js, layout.In, true)
	leader := c.index(ci.Leader)
	t.Logf("%s: shutting down %s, leader of %s", time.Since(began).Round(time.Millisecond), ci.Leader, layout.In)
	c.Stop(leader)
	progress("after the leader was shut down", 150, nil)
	ci = streamCluster(t, js, layout.In, false)
	t.Logf("%s: new leader %s; restarting %s", time.Since(began).Round(time.Millisecond), ci.Leader, c.Opts[leader].ServerName)
	c.Start(leader)
	ci = streamCluster(t, js, layout.In, true)
	c.waitMetaCurrent()
	// A follower to shut down, other than the node just restarted. It is
	// made the leader of the checkpoint bucket and the outbound stream
	// first, so that checkpoint writes and summary publishes fail over too.
	follower := c.index(ci.Replicas[0].Name)
	if follower == leader {
		follower = c.index(ci.Replicas[1].Name)
	}
	leads := map[string][]string{}
	for _, name := range []string{"KV_" + layout.Bucket, layout.Out} {
		l := stepDown(t, nc, js, name, c.Opts[follower].ServerName).Leader
		leads[l] = append(leads[l], name)
	}
	name := c.Opts[follower].ServerName
	t.Logf("%s: all replicas current; shutting down %s, a follower of %s (leader %s), leader of %v", time.Since(began).Round(time.Millisecond),
		name, layout.In, ci.Leader, leads[name])
	// The processor's own consumer is not probed: a consumer that
	// refuses every read and re-create while the cluster creates others
	// (seen twice in 15 runs) is the processor's to get past, by
	// attaching under a fresh name (renameConsumer), and the test fails
	// if it does not.
	c.probe = refusesConsumers(js, layout.DLQ, layout.In)
	c.Stop(follower)
	// Seen in about one run in eight to twelve on the shared 2-core
	// machine, with this code and with the code of earlier sessions: one
	// of the two nodes left (the processor's) keeps no current meta view
	// and refuses every consumer create ("JetStream system temporarily
	// unavailable") for as long as we waited (90 s). No client can do
	// anything then; bring the stopped node back, after which the
	// processor must catch up with nothing lost. Seen once in 27 runs with
	// the processor's fix (stall watch and attach retried with backoff):
	// both nodes left pass every meta check while the cluster answers
	// every consumer create and KV write with that 503 for 20 s and more,
	// the processor retrying all along (attach_failed, attempt 1..8); the
	// probe (refusesConsumers) sees it. This is a nats-server condition,
	// not a processor one: the remedy stays a test's, and says so.
	remedy := "none"
	restartFollower := func() {
		if c.Servers[follower] != nil {
			return // restarted already
		}
		remedy = fmt.Sprintf("%s restarted (%s)", name, c.metaStale())
		t.Logf("%s: %s has had no current meta view, or the cluster has refused consumer creates, for 15 s; restarting %s", time.Since(began).Round(time.Millisecond), c.metaStale(), name)
		c.Start(follower)
	}
	progress("after a follower was shut down", 150, restartFollower)
	close(stop)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}

	expects := make([]crashtest.Expect, len(sessions))
	for i, s := range sessions {
		expects[i] = crashtest.Expect{Session: s, Turns: acked[s], Recent: recent, Batch: batch, MaxSummaryChars: 1200}
	}
	// A raft group left stuck by the second shutdown (see above) can hold
	// the consumer's pull for a heartbeat period (30 s) before the client
	// notices: the last turns may need longer than that to settle.
	// The stuck meta view can also come after the progress above: the
	// same remedy then.
	healed := healWhenStale(restartFollower)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if healed() {
			deadline = time.Now().Add(60 * time.Second)
		}
		pending := 0
		for _, e := range expects {
			st, _, err := env.Store.Load(context.Background(), e.Session)
			if err != nil || crashtest.Settled(st, e) {
				continue
			}
			pending++
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			for _, e := range expects {
				st, _, err := env.Store.Load(context.Background(), e.Session)
				if err == nil {
					t.Logf("%s: total %d/%d cursor %d/%d lease %v", e.Session, st.Total, e.Turns, st.Cursor,
						crashtest.FinalCursor(e.Turns, recent, batch), st.Lease)
				}
			}
			diagnose(t, js, layout, env, p.ConsumerName())
			for _, e := range expects {
				f := filepath.Join(os.TempDir(), fmt.Sprintf("foldstream-cluster-%s-%d.txt", e.Session, time.Now().UnixNano()))
				var b strings.Builder
				fmt.Fprintln(&b, "polled:")
				for _, h := range watcher.History(e.Session) {
					fmt.Fprintln(&b, h)
				}
				fmt.Fprintln(&b, "watched:")
				for _, h := range watch.History(e.Session) {
					fmt.Fprintln(&b, h)
				}
				msgs, _ := testenv.ReadSubject(context.Background(), js, layout.In, layout.Subjects.InSession(e.Session))
				fmt.Fprintln(&b, "inbound:")
				for _, m := range msgs {
					fmt.Fprintf(&b, "%d %s %s\n", m.Sequence, m.Subject, m.Data)
				}
				if os.WriteFile(f, []byte(b.String()), 0o644) == nil {
					t.Logf("%s: %s", e.Session, f)
				}
			}
			t.Fatal("not settled within 60 s after the failures")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, e := range expects {
		for _, prob := range crashtest.Verify(context.Background(), env, model, e) {
			t.Error(prob)
		}
	}
	problems, updates := watcher.Stop()
	watched, _ := watch.Stop()
	for _, prob := range append(problems, watched...) {
		t.Error("checkpoint write: " + prob)
	}
	total := 0
	for _, e := range expects {
		total += e.Turns
	}
	t.Logf("%d acknowledged turns (%d publish attempts retried), %d model calls, %d checkpoint revisions checked; %s",
		total, retried, len(model.Calls()), updates, time.Since(began).Round(time.Millisecond))
	logs := logBuf.String()
	t.Logf("remedies: test: %s; processor: %d consumer renames (now %s), %d forced reconnects, %d rewinds",
		remedy, strings.Count(logs, `"event":"consumer_renamed"`), p.ConsumerName(),
		strings.Count(logs, `"event":"nats_reconnect_forced"`), strings.Count(logs, `"event":"consumer_rewound"`))
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, `"event":"consumer_renamed"`) || strings.Contains(line, `"event":"attach_failed"`) || strings.Contains(line, `"event":"consumer_dropped"`) {
			t.Log(line) // what the attaches were refused with, and when the old consumer went
		}
	}
}

func countAll(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// diagnose logs where the inbound stream, the consumer and each session's
// checkpoint stand.
func diagnose(t *testing.T, js jetstream.JetStream, layout broker.Layout, env crashtest.Env, consumer string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := js.Stream(ctx, layout.In); err == nil {
		if info, err := st.Info(ctx); err == nil {
			t.Logf("stream %s: %+v leader %s", layout.In, info.State, info.Cluster.Leader)
		}
		for _, s := range []string{"c0", "c1", "c2"} {
			if m, err := st.GetLastMsgForSubject(ctx, layout.Subjects.In(s, events.KindTurn)); err == nil {
				cp, _, _ := env.Store.Load(ctx, s)
				t.Logf("%s: last turn at %d: %s; checkpoint last seq %d total %d", s, m.Sequence, m.Data, cp.LastSeq, cp.Total)
			}
		}
	}
	if c, err := js.Consumer(ctx, layout.In, consumer); err == nil {
		if ci, err := c.Info(ctx); err == nil {
			t.Logf("consumer %s: delivered %+v ack floor %+v pending %d ack pending %d redelivered %d waiting %d leader %s",
				consumer, ci.Delivered, ci.AckFloor, ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Cluster.Leader)
		}
	} else {
		t.Logf("consumer %s: %v", consumer, err)
	}
}

// stepDown moves the leadership of stream to the server named preferred.
func stepDown(t *testing.T, nc *nats.Conn, js jetstream.JetStream, stream, preferred string) *jetstream.ClusterInfo {
	t.Helper()
	body := []byte(`{"placement":{"preferred":"` + preferred + `"}}`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if ci := streamCluster(t, js, stream, true); ci.Leader == preferred {
			return ci
		}
		if _, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, body, 2*time.Second); err != nil {
			t.Logf("step down %s: %v", stream, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s: leadership did not move to %s", stream, preferred)
		}
	}
}

// A delivery that never reaches the processor (lost in flight when a
// consumer leader or a route goes away; here taken by another pull on the
// same durable consumer, which is the same thing from the processor's
// side) is redelivered by JetStream after AckWait, behind the session's
// later events. It must still be applied, in order.
func TestLostDeliveryIsRedeliveredInOrder(t *testing.T) {
	r, m := newModelRig(t, retry.Policy{MaxAttempts: 1})
	r.start(Config{Window: fold.Window{Recent: 6, Batch: 4}, AckWait: time.Second})
	r.publishTurns("s1", 0, 3)
	r.Settled("s1", 3, 0)
	ctx := context.Background()
	lost := r.competingPull(10 * time.Second)
	r.publishTurns("s1", 3, 10)
	if seq, ok := <-lost; ok {
		t.Logf("the delivery of stream sequence %d did not reach the processor", seq)
	}
	r.Settled("s1", 10, 0)
	for _, p := range crashtest.Verify(ctx, r.env(), m, crashtest.Expect{Session: "s1", Turns: 10, Recent: 6, Batch: 4, MaxSummaryChars: 1200}) {
		t.Error(p)
	}
}

// The failover test's third nats-server condition, made on purpose: the
// processor's consumer is still on the stream, but it cannot be read (its
// only peer is down; in the failover runs, a consumer whose raft group had
// lost its leader answered every read with a 503), while the cluster
// creates other consumers. Re-attaching at that name fails for good. The
// engine attaches under a fresh name after the highest ack floor it knows,
// catches up with nothing lost or applied out of order, and deletes the
// stuck consumer once the cluster lets it.
func TestStuckConsumerIsReplaced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := newCluster(t)
	// The test's client and the processor stay on n1, which stays up.
	r := clusterRig(t, c, c.URLs[0], 0)
	var gate atomic.Bool // closed: every attach fails as a partition guard's KV read timing out would
	p, err := New(Config{Window: fold.Window{Recent: 6, Batch: 3}, FlushInterval: 5 * time.Millisecond, RetryBackoff: 50 * time.Millisecond},
		Deps{JS: r.JS, Layout: r.Layout, Store: r.Store, Summarizer: r.sum, Log: r.Log,
			BeforeAttach: func(context.Context) error {
				if gate.Load() {
					return fmt.Errorf("test gate: %w", nats.ErrTimeout)
				}
				return nil
			}})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.RunEngine(t, p)
	r.Turns("s1", 12)
	r.Settled("s1", 12, 3)

	// Put a consumer of the processor's name at one replica in place of
	// its own, on a node that is neither n1 nor the meta leader, with
	// the processor's re-attach held back meanwhile; then stop that node.
	gate.Store(true)
	ctx := context.Background()
	node := -1
	for try := 0; node < 0; try++ {
		if try == 30 {
			t.Fatal("the one-replica consumer never landed on a node that may be stopped")
		}
		if err := r.JS.DeleteConsumer(ctx, r.Layout.In, "foldstream"); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		cons, err := r.JS.CreateOrUpdateConsumer(ctx, r.Layout.In, jetstream.ConsumerConfig{
			Durable: "foldstream", Description: consumerDescription, AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverNewPolicy, Replicas: 1, FilterSubjects: r.Layout.Subjects.InFilters(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if i := c.index(cons.CachedInfo().Cluster.Leader); i > 0 && !c.Servers[i].JetStreamIsLeader() {
			node = i
		}
	}
	t.Logf("the consumer foldstream is on %s alone; stopping it", c.Opts[node].ServerName)
	c.Stop(node)
	// The node may have led a stream: publishes and checkpoint reads
	// wait for the new leaders.
	for _, name := range []string{r.Layout.In, r.Layout.Out, "KV_" + r.Layout.Bucket} {
		streamCluster(t, r.JS, name, false)
	}
	if _, err := r.JS.Consumer(ctx, r.Layout.In, "foldstream"); err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the consumer on the stopped node: %v, want it unreadable", err)
	}
	gate.Store(false)

	r.Turns("s1", 12)
	var s *state.Session
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s = r.Checkpoint("s1"); s.Total == 24 && s.Cursor == 15 && s.Lease == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not caught up within 90 s: total %d/24, cursor %d/15, consumer %s", s.Total, s.Cursor, p.ConsumerName())
		}
	}
	r.checkSession(s)
	if name := p.ConsumerName(); name == "foldstream" || !p.cons.isOwnConsumer(name) {
		t.Errorf("the engine reads from %q, want a fresh name of its own", name)
	}
	r.Eventually("the stuck consumer deleted", func() bool {
		_, err := r.JS.Consumer(ctx, r.Layout.In, "foldstream")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
}

// Connected to a cluster, every lifecycle event asks for an ack, whatever
// the outbound stream's replicas: it may be scaled up while the processor
// runs, and on a replicated stream a plain publish sent while its leader
// changes is dropped without an error.
func TestLifecycleEventsAskForAnAckEachInACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := newCluster(t)
	nc, err := nats.Connect(strings.Join(c.URLs, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	subjects, _ := events.NewSubjects("fold")
	layout := broker.NewLayout(subjects)
	provisionR3(t, js, layout, zerolog.Nop())
	p := &Processor{js: js, subj: layout.Subjects, log: zerolog.Nop(), clock: &fakeClock{now: t0}} // (a frozen clock: without the cluster, one event a confirmEvery asks for an ack)
	rec := p.newRecorder()
	for _, typ := range []string{events.EventCompactionStarted, events.EventCompactionCompleted, events.EventCompactionStarted} {
		rec.event("s1", events.Lifecycle{Type: typ})
	}
	if n := len(rec.sent.waiting); n != 3 {
		t.Fatalf("%d of 3 events asked for an ack on a cluster, want every one", n)
	}
}
