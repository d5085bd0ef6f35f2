package natsconf

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
)

// tested lists every .conf under this directory together with the test that
// starts a server from it. TestEveryConfigIsTested fails when a .conf is
// added without a test.
var tested = map[string]string{
	"single.conf":        "TestSingle",
	"cluster/n1.conf":    "TestCluster",
	"cluster/n2.conf":    "TestCluster",
	"cluster/n3.conf":    "TestCluster",
	"auth/userpass.conf": "TestUserPass",
	"auth/token.conf":    "TestToken",
	"auth/nkey.conf":     "TestNkey",
	"auth/tls.conf":      "TestTLS",
	"auth/accounts.conf": "TestAccounts",
}

// The cluster files are also parsed with docker-compose.yml's command-line
// overrides by TestComposeCommands (no Docker here to start them).

func TestEveryConfigIsTested(t *testing.T) {
	var found []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".conf") {
			found = append(found, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		if _, ok := tested[f]; !ok {
			t.Errorf("%s has no test that starts a server with it: add one and list it in tested", f)
		}
	}
	for f := range tested {
		if !slices.Contains(found, f) {
			t.Errorf("tested lists %s, which does not exist", f)
		}
	}
}

// load parses a config file with the nats-server's own parser.
func load(t *testing.T, rel string) *server.Options {
	t.Helper()
	path, err := filepath.Abs(filepath.FromSlash(rel))
	if err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return opts
}

// localize keeps everything a config says except where it listens and
// stores: free loopback ports and a fresh temporary store directory.
func localize(t *testing.T, opts *server.Options) {
	t.Helper()
	opts.Host = "127.0.0.1"
	opts.Port = -1
	if opts.HTTPPort != 0 {
		opts.HTTPHost = "127.0.0.1"
		opts.HTTPPort = -1
	}
	if opts.JetStream {
		opts.StoreDir = t.TempDir()
	}
	opts.NoSigs = true
	// Under -race a bcrypt check can take longer than the server's short
	// first PING, which the client then reads instead of its CONNECT PONG.
	opts.DisableShortFirstPing = true
	// NATSCONF_LOG=1 go test -v ./nats/ shows the servers' logs.
	opts.NoLog = os.Getenv("NATSCONF_LOG") == ""
}

func start(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	s.ConfigureLogger()
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("server %s not ready", opts.ServerName)
	}
	return s
}

// connect dials url. The timeout is generous: under -race every bcrypt
// check of a login takes long, and the auth tests log in many clients at
// once.
func connect(t *testing.T, url string, o ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.Timeout(20 * time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, o...)...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ctx bounds a whole role check, which opens several connections: each
// is a bcrypt check, seconds apiece under -race on a busy machine.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return c
}

// checkJetStream creates a file stream and a KV bucket with the given
// replicas, publishes, consumes and acks: the operations the processor
// performs. It retries while a cluster is still electing its leaders.
func checkJetStream(t *testing.T, nc *nats.Conn, replicas int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	var stream jetstream.Stream
	deadline := time.Now().Add(15 * time.Second)
	for {
		// Per-attempt timeout: while a cluster has no meta leader yet the
		// API request gets no answer at all.
		ac, cancel := context.WithTimeout(c, 2*time.Second)
		stream, err = js.CreateStream(ac, jetstream.StreamConfig{
			Name:     "FOLD_IN",
			Subjects: []string{"fold.in.>"},
			Storage:  jetstream.FileStorage,
			Replicas: replicas,
		})
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create stream R%d: %v", replicas, err)
	}
	info, err := stream.Info(c)
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.Replicas != replicas {
		t.Fatalf("stream replicas = %d, want %d", info.Config.Replicas, replicas)
	}
	if replicas > 1 && (info.Cluster == nil || len(info.Cluster.Replicas) != replicas-1) {
		t.Fatalf("stream cluster info = %+v, want a leader and %d followers", info.Cluster, replicas-1)
	}
	if _, err := js.Publish(c, "fold.in.s1.turn", []byte(`{"v":1}`)); err != nil {
		t.Fatalf("publish: %v", err)
	}
	kv, err := js.CreateKeyValue(c, jetstream.KeyValueConfig{Bucket: "fold_sessions", Replicas: replicas})
	if err != nil {
		t.Fatalf("create KV R%d: %v", replicas, err)
	}
	rev, err := kv.Put(c, "s1", []byte("checkpoint"))
	if err != nil {
		t.Fatalf("kv put: %v", err)
	}
	if _, err := kv.Update(c, "s1", []byte("checkpoint 2"), rev); err != nil {
		t.Fatalf("kv compare-and-set: %v", err)
	}
	cons, err := stream.CreateOrUpdateConsumer(c, jetstream.ConsumerConfig{Durable: "processor", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("create consumer: %v", err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	n := 0
	for m := range batch.Messages() {
		if err := m.DoubleAck(c); err != nil {
			t.Fatalf("ack: %v", err)
		}
		n++
	}
	if n != 1 {
		t.Fatalf("fetched %d messages, want 1 (err %v)", n, batch.Error())
	}
}

func TestSingle(t *testing.T) {
	t.Parallel()
	opts := load(t, "single.conf")
	if !opts.JetStream || opts.StoreDir == "" || opts.JetStreamMaxMemory <= 0 || opts.JetStreamMaxStore <= 0 {
		t.Fatalf("jetstream=%v store_dir=%q max_mem=%d max_file=%d: want JetStream with a store dir and limits",
			opts.JetStream, opts.StoreDir, opts.JetStreamMaxMemory, opts.JetStreamMaxStore)
	}
	if opts.MaxPayload != 1<<20 || opts.HTTPPort != 8222 || opts.Port != 4222 {
		t.Fatalf("max_payload=%d http_port=%d port=%d", opts.MaxPayload, opts.HTTPPort, opts.Port)
	}
	if !opts.SyncAlways {
		t.Fatal("single.conf should fsync every write (sync_interval: always): it has no replica")
	}
	localize(t, opts)
	s := start(t, opts)
	if !s.JetStreamEnabled() {
		t.Fatal("JetStream not enabled")
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/healthz?js-enabled-only=true", s.MonitorAddr()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %s", resp.Status)
	}
	checkJetStream(t, connect(t, s.ClientURL()), 1)
}

func TestCluster(t *testing.T) {
	t.Parallel()
	files := []string{"cluster/n1.conf", "cluster/n2.conf", "cluster/n3.conf"}
	var all []*server.Options
	clusterPorts := map[int]bool{}
	seen := map[string]string{}
	for i, f := range files {
		o := load(t, f)
		if !o.JetStream {
			t.Fatalf("%s: JetStream not enabled", f)
		}
		if o.Cluster.Name != "foldstream" {
			t.Errorf("%s: cluster name %q, want foldstream", f, o.Cluster.Name)
		}
		if want := fmt.Sprintf("n%d", i+1); o.ServerName != want {
			t.Errorf("%s: server_name %q, want %q", f, o.ServerName, want)
		}
		for _, p := range []string{"client " + strconv.Itoa(o.Port), "cluster " + strconv.Itoa(o.Cluster.Port), "monitor " + strconv.Itoa(o.HTTPPort), "store " + o.StoreDir} {
			if prev, dup := seen[p]; dup {
				t.Errorf("%s and %s both use %s", prev, f, p)
			}
			seen[p] = f
		}
		clusterPorts[o.Cluster.Port] = true
		all = append(all, o)
	}
	// Every node's routes must name the cluster ports of all three nodes.
	for i, o := range all {
		var got []int
		for _, r := range o.Routes {
			p, _ := strconv.Atoi(r.Port())
			got = append(got, p)
		}
		if len(got) != 3 {
			t.Fatalf("%s: %d routes, want 3", files[i], len(got))
		}
		for _, p := range got {
			if !clusterPorts[p] {
				t.Errorf("%s: route to port %d, which no node listens on", files[i], p)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Move the cluster to free loopback ports, keeping the route topology.
	remap := map[int]int{}
	for p := range clusterPorts {
		remap[p] = brokertest.LoopbackPort(t)
	}
	for _, o := range all {
		localize(t, o)
		o.Cluster.Host = "127.0.0.1"
		o.Cluster.Port = remap[o.Cluster.Port]
		var routes []*url.URL
		for _, r := range o.Routes {
			p, _ := strconv.Atoi(r.Port())
			routes = append(routes, &url.URL{Scheme: r.Scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(remap[p]))})
		}
		o.Routes = routes
	}
	servers := make([]*server.Server, len(all))
	var wg sync.WaitGroup
	for i, o := range all {
		s, err := server.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		s.ConfigureLogger()
		servers[i] = s
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		wg.Go(s.Start)
	}
	wg.Wait()
	for i, s := range servers {
		// Generous, as in brokertest: a machine busy with other tests can
		// take seconds to bring JetStream up.
		if !s.ReadyForConnections(60 * time.Second) {
			t.Fatalf("n%d not ready", i+1)
		}
		if !s.JetStreamEnabled() {
			t.Fatalf("n%d: JetStream not enabled", i+1)
		}
	}
	urls := []string{servers[0].ClientURL(), servers[1].ClientURL(), servers[2].ClientURL()}
	nc := connect(t, strings.Join(urls, ","))
	checkJetStream(t, nc, 3)

	// R3 keeps accepting writes with one node down.
	var victim *server.Server
	for _, s := range servers {
		if s.ClientURL() != nc.ConnectedUrl() {
			victim = s
			break
		}
	}
	victim.Shutdown()
	js, _ := jetstream.New(nc)
	c := ctx(t)
	var err error
	deadline := time.Now().Add(15 * time.Second)
	for {
		pc, cancel := context.WithTimeout(c, time.Second)
		_, err = js.Publish(pc, "fold.in.s1.turn", []byte(`{"v":1}`))
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("publish with one of three nodes down: %v", err)
	}
}

// role connection options for one kind of client, and the inbox prefix
// each must use (_INBOX_<user>: the configs let a user subscribe to replies
// only under its own prefix).
type roles struct {
	bot, builder, processor                []nats.Option
	botInbox, builderInbox, processorInbox string
}

// withInboxes adds each role's inbox prefix to its connection options.
func (r roles) withInboxes() roles {
	r.bot = append(slices.Clone(r.bot), nats.CustomInboxPrefix(r.botInbox))
	r.builder = append(slices.Clone(r.builder), nats.CustomInboxPrefix(r.builderInbox))
	r.processor = append(slices.Clone(r.processor), nats.CustomInboxPrefix(r.processorInbox))
	return r
}

// errCollector records asynchronous errors (permission violations).
type errCollector struct{ ch chan error }

func newErrCollector() *errCollector { return &errCollector{ch: make(chan error, 16)} }

func (e *errCollector) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case e.ch <- err:
		default:
		}
	})
}

func (e *errCollector) expectDenied(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-e.ch:
		if !errors.Is(err, nats.ErrPermissionViolation) && !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
			t.Errorf("%s: got %v, want a permissions violation", what, err)
		}
	case <-time.After(10 * time.Second): // generous: the machine may be loaded
		t.Errorf("%s: allowed, want a permissions violation", what)
	}
}

// checkRoles exercises the bot, builder and processor permissions of
// userpass.conf, nkey.conf and accounts.conf against a running server. It
// returns the processor and builder connections for further checks.
func checkRoles(t *testing.T, url string, r roles) (proc, builder *nats.Conn) {
	t.Helper()
	c := ctx(t)
	r = r.withInboxes()

	proc = connect(t, url, r.processor...)
	pjs, _ := jetstream.New(proc)
	// In a fresh account nothing exists yet (for accounts.conf this shows
	// that tenant-b does not see tenant-a's streams).
	names := pjs.StreamNames(c)
	for n := range names.Name() {
		t.Fatalf("unexpected existing stream %q", n)
	}
	checkJetStream(t, proc, 1)
	if _, err := proc.Subscribe("fold.svc.>", func(m *nats.Msg) { _ = m.Respond([]byte("context for " + m.Subject)) }); err != nil {
		t.Fatal(err)
	}
	if err := proc.Flush(); err != nil {
		t.Fatal(err)
	}

	botErrs := newErrCollector()
	bot := connect(t, url, append(r.bot, botErrs.option())...)
	bjs, _ := jetstream.New(bot)
	if ack, err := bjs.Publish(c, "fold.in.s1.turn", []byte(`{"v":1}`)); err != nil {
		t.Fatalf("bot publish turn: %v", err)
	} else if ack.Stream != "FOLD_IN" {
		t.Fatalf("bot publish acked by %q", ack.Stream)
	}
	_ = bot.Publish("fold.out.s1.summary", []byte("forged"))
	_ = bot.Flush()
	botErrs.expectDenied(t, "bot publish fold.out")
	_, _ = bot.Subscribe("fold.out.>", func(*nats.Msg) {})
	_ = bot.Flush()
	botErrs.expectDenied(t, "bot subscribe fold.out.>")
	_ = bot.Publish("$JS.API.STREAM.DELETE.FOLD_IN", nil)
	_ = bot.Flush()
	botErrs.expectDenied(t, "bot JetStream API")

	bErrs := newErrCollector()
	builder = connect(t, url, append(r.builder, bErrs.option())...)
	sub, err := builder.SubscribeSync("fold.out.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := builder.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := proc.Publish("fold.out.s1.summary", []byte(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("builder did not receive the summary: %v", err)
	} else if m.Subject != "fold.out.s1.summary" {
		t.Fatalf("builder got %s", m.Subject)
	}
	reply, err := builder.Request("fold.svc.context", []byte(`{}`), 5*time.Second)
	if err != nil {
		t.Fatalf("builder request context: %v", err)
	}
	if string(reply.Data) != "context for fold.svc.context" {
		t.Fatalf("context reply %q", reply.Data)
	}
	_ = builder.Publish("fold.in.s1.turn", []byte("forged"))
	_ = builder.Flush()
	bErrs.expectDenied(t, "builder publish fold.in")
	checkPrivateInboxes(t, url, r, proc, builder)
	return proc, builder
}

// checkPrivateInboxes plays a hostile bot (with a shared _INBOX.> permission a bot
// read another session's turns as the processor fetched them, and another
// builder's context replies). Every subscription that would reach someone
// else's replies is refused, and while the processor fetches a turn, reads
// a checkpoint and answers the builder's request, with a second, honest bot
// publishing, the snooping bot receives nothing; each of them still works
// with its own prefix. r has the inbox options applied.
func checkPrivateInboxes(t *testing.T, url string, r roles, proc, builder *nats.Conn) {
	t.Helper()
	c := ctx(t)
	snoopErrs := newErrCollector()
	snoop := connect(t, url, append(slices.Clone(r.bot), snoopErrs.option())...)
	var mu sync.Mutex
	var leaked []string
	steal := func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		leaked = append(leaked, m.Subject+" "+string(m.Data))
	}
	for _, subj := range []string{
		"_INBOX.>", r.processorInbox + ".>", r.builderInbox + ".>", "_INBOX_*.>", "*.>", ">",
	} {
		if _, err := snoop.Subscribe(subj, steal); err != nil {
			t.Fatal(err)
		}
		_ = snoop.Flush()
		snoopErrs.expectDenied(t, "bot subscribe "+subj)
	}
	// The builder cannot read the processor's replies either.
	bErrs := newErrCollector()
	nosy := connect(t, url, append(slices.Clone(r.builder), bErrs.option())...)
	_, _ = nosy.Subscribe(r.processorInbox+".>", steal)
	_ = nosy.Flush()
	bErrs.expectDenied(t, "builder subscribe "+r.processorInbox+".>")

	// Normal operations, each on its user's own inbox.
	honest := connect(t, url, r.bot...)
	hjs, _ := jetstream.New(honest)
	const secret = "turn text of another session"
	if _, err := hjs.Publish(c, "fold.in.s2.turn", []byte(secret)); err != nil {
		t.Fatalf("bot publish with inbox prefix %s: %v", r.botInbox, err)
	}
	pjs, _ := jetstream.New(proc)
	cons, err := pjs.Consumer(c, "FOLD_IN", "processor")
	if err != nil {
		t.Fatal(err)
	}
	// The bot's turn of checkRoles comes first, then the secret one.
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(20*time.Second))
	if err != nil {
		t.Fatalf("processor fetch with inbox prefix %s: %v", r.processorInbox, err)
	}
	var fetched []string
	for m := range batch.Messages() {
		if err := m.Ack(); err != nil {
			t.Fatalf("processor ack: %v", err)
		}
		fetched = append(fetched, string(m.Data()))
	}
	if len(fetched) != 2 || fetched[1] != secret {
		t.Fatalf("processor fetched %q (%v), want the bot's two turns", fetched, batch.Error())
	}
	kv, err := pjs.KeyValue(c, "fold_sessions")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Get(c, "s1"); err != nil {
		t.Fatalf("processor KV get with inbox prefix %s: %v", r.processorInbox, err)
	}
	reply, err := builder.Request("fold.svc.context", []byte(`{"session":"s2"}`), 20*time.Second)
	if err != nil || !strings.HasPrefix(reply.Subject, r.builderInbox+".") {
		t.Fatalf("builder request: reply %v on %v, want one on %s", err, reply, r.builderInbox)
	}
	_ = snoop.Flush()
	_ = nosy.Flush()
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) > 0 {
		t.Fatalf("a snooping client read other users' replies: %q", leaked)
	}
}

func TestUserPass(t *testing.T) {
	t.Parallel() // bcrypt checks are slow under -race; TestTLS (t.Chdir) runs first
	opts := load(t, "auth/userpass.conf")
	if len(opts.Users) != 3 {
		t.Fatalf("%d users, want 3", len(opts.Users))
	}
	localize(t, opts)
	s := start(t, opts)
	checkRoles(t, s.ClientURL(), roles{
		bot:       []nats.Option{nats.UserInfo("bot", "dev-bot-password")},
		builder:   []nats.Option{nats.UserInfo("builder", "dev-builder-password")},
		processor: []nats.Option{nats.UserInfo("processor", "dev-processor-password")},
		botInbox:  "_INBOX_bot", builderInbox: "_INBOX_builder", processorInbox: "_INBOX_processor",
	})
	if nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("processor", "wrong")); err == nil {
		nc.Close()
		t.Fatal("wrong password accepted")
	}
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("anonymous client accepted")
	}
}

func TestToken(t *testing.T) {
	t.Parallel() // bcrypt checks are slow under -race; TestTLS (t.Chdir) runs first
	opts := load(t, "auth/token.conf")
	if !strings.HasPrefix(opts.Authorization, "$2a$") {
		t.Fatalf("token is not a bcrypt hash: %q", opts.Authorization)
	}
	localize(t, opts)
	s := start(t, opts)
	checkJetStream(t, connect(t, s.ClientURL(), nats.Token("dev-foldstream-token")), 1)
	if nc, err := nats.Connect(s.ClientURL(), nats.Token("wrong")); err == nil {
		nc.Close()
		t.Fatal("wrong token accepted")
	}
}

func TestNkey(t *testing.T) {
	t.Parallel()
	opts := load(t, "auth/nkey.conf")
	placeholders := map[string]string{
		"UCJDLECOA2FRZX5KZ54SPOZYSWFQFQV7U3JJ6M7V65WIH5Q6RFOQM4DC": "bot",
		"UDDUBXP562N2J2KSYRYDJS6T65GWBROTDWZC2EHD4DPVXDJC4N3LKWLG": "builder",
		"UD3DE3DLOWHOQGWDUU6BVUHQGSTZEMZSQA6A75UT6QQQUZ7JC2FOPZMY": "processor",
	}
	if len(opts.Nkeys) != len(placeholders) {
		t.Fatalf("%d nkey users, want %d", len(opts.Nkeys), len(placeholders))
	}
	// The file's public keys are placeholders whose seeds were discarded:
	// give each role a fresh key pair, keeping the file's permissions.
	opt := map[string]nats.Option{}
	for _, u := range opts.Nkeys {
		role, ok := placeholders[u.Nkey]
		if !ok {
			t.Fatalf("unexpected nkey %s", u.Nkey)
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		u.Nkey = pub
		opt[role] = nats.Nkey(pub, kp.Sign)
	}
	localize(t, opts)
	s := start(t, opts)
	checkRoles(t, s.ClientURL(), roles{
		bot:       []nats.Option{opt["bot"]},
		builder:   []nats.Option{opt["builder"]},
		processor: []nats.Option{opt["processor"]},
		botInbox:  "_INBOX_bot", builderInbox: "_INBOX_builder", processorInbox: "_INBOX_processor",
	})
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Fatal("anonymous client accepted")
	}
}

func TestAccounts(t *testing.T) {
	t.Parallel() // bcrypt checks are slow under -race; TestTLS (t.Chdir) runs first
	opts := load(t, "auth/accounts.conf")
	var accNames []string
	for _, a := range opts.Accounts {
		accNames = append(accNames, a.Name)
	}
	for _, want := range []string{"tenant-a", "tenant-b"} {
		if !slices.Contains(accNames, want) {
			t.Fatalf("accounts %v: missing %s", accNames, want)
		}
	}
	localize(t, opts)
	s := start(t, opts)
	for _, acc := range []string{"tenant-a", "tenant-b"} {
		a, err := s.LookupAccount(acc)
		if err != nil {
			t.Fatal(err)
		}
		if !a.JetStreamEnabled() {
			t.Fatalf("%s: JetStream not enabled for the account", acc)
		}
	}
	url := s.ClientURL()
	procs := map[string]*nats.Conn{}
	builders := map[string]*nats.Conn{}
	for _, p := range []string{"a", "b"} {
		user := func(role string) []nats.Option {
			return []nats.Option{nats.UserInfo(p+"-"+role, "dev-"+p+"-"+role+"-password")}
		}
		// Sequential on purpose: tenant-b must not see tenant-a's streams.
		procs[p], builders[p] = checkRoles(t, url, roles{bot: user("bot"), builder: user("builder"), processor: user("processor"),
			botInbox: "_INBOX_" + p + "-bot", builderInbox: "_INBOX_" + p + "-builder", processorInbox: "_INBOX_" + p + "-processor"})
	}
	// Accounts isolate subjects: tenant-b's builder never sees tenant-a's output.
	sub, err := builders["b"].SubscribeSync("fold.out.>")
	if err != nil {
		t.Fatal(err)
	}
	_ = builders["b"].Flush()
	ap := procs["a"]
	_ = ap.Publish("fold.out.s1.summary", []byte("tenant-a only"))
	_ = ap.Flush()
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("tenant-b received tenant-a's %s", m.Subject)
	}
}

// writeCerts creates a CA, a server certificate for 127.0.0.1/localhost and
// a client certificate under dir/certs, the names tls.conf expects.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	certs := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) {
		b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
		if err := os.WriteFile(filepath.Join(certs, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := key()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "foldstream test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) {
		k := key()
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: name},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
			DNSNames:     []string{"localhost"},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		write(name+"-cert.pem", "CERTIFICATE", der)
		write(name+"-key.pem", "EC PRIVATE KEY", kb)
	}
	leaf("server", 2, x509.ExtKeyUsageServerAuth)
	leaf("client", 3, x509.ExtKeyUsageClientAuth)
}

func TestTLS(t *testing.T) {
	conf, err := filepath.Abs("auth/tls.conf")
	if err != nil {
		t.Fatal(err)
	}
	// tls.conf names certs/... relative to the server's working directory,
	// and the parser loads them: run from a directory that has them.
	dir := t.TempDir()
	writeCerts(t, dir)
	t.Chdir(dir)
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if opts.TLSConfig == nil || opts.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatal("tls.conf should require TLS and verify client certificates")
	}
	localize(t, opts)
	s := start(t, opts)
	url := strings.Replace(s.ClientURL(), "nats://", "tls://", 1)
	nc := connect(t, url,
		nats.RootCAs("certs/ca.pem"),
		nats.ClientCert("certs/client-cert.pem", "certs/client-key.pem"))
	if !nc.TLSRequired() {
		t.Fatal("connection is not TLS")
	}
	checkJetStream(t, nc, 1)
	if nc2, err := nats.Connect(url, nats.RootCAs("certs/ca.pem")); err == nil {
		nc2.Close()
		t.Fatal("client without a certificate accepted")
	}
}

// TestComposeCommands checks ../docker-compose.yml, which CI cannot run: the
// nats services' command lines are parsed with the nats-server's own flag
// parser against the mounted config files, and the routes, client ports and
// the processor's --nats-url must agree with them.
func TestComposeCommands(t *testing.T) {
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	commands := map[string][]string{}
	workdir := map[string]string{}
	var volumes, ports []string
	service := ""
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":") {
			service = strings.TrimSuffix(strings.TrimSpace(line), ":")
		}
		trimmed := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(trimmed, "command: "); ok {
			var args []string
			if err := json.Unmarshal([]byte(rest), &args); err != nil {
				t.Fatalf("%s: command is not a JSON-style list: %v", service, err)
			}
			commands[service] = args
		}
		if rest, ok := strings.CutPrefix(trimmed, "working_dir: "); ok {
			workdir[service] = rest
		}
		if strings.HasPrefix(trimmed, "- ./nats/") || strings.HasPrefix(trimmed, "- "+service+"-data:") {
			volumes = append(volumes, service+" "+strings.TrimPrefix(trimmed, "- "))
		}
		if strings.HasPrefix(trimmed, `- "127.0.0.1:`) {
			ports = append(ports, service+" "+strings.Trim(strings.TrimPrefix(trimmed, "- "), `"`))
		}
	}
	clientPort := map[string]int{}
	for _, name := range []string{"n1", "n2", "n3"} {
		args := commands[name]
		if args == nil {
			t.Fatalf("service %s has no command", name)
		}
		mounted := "/etc/nats/" + name + ".conf"
		if !slices.Contains(volumes, name+" ./nats/cluster/"+name+".conf:"+mounted+":ro") {
			t.Errorf("%s: does not mount nats/cluster/%s.conf at %s", name, name, mounted)
		}
		args = slices.Clone(args)
		for i, a := range args {
			if a == mounted {
				args[i] = filepath.Join("cluster", name+".conf")
			}
		}
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		noop := func() {}
		opts, err := server.ConfigureOptions(fs, args, noop, noop, noop)
		if err != nil {
			t.Fatalf("%s: nats-server %v: %v", name, args, err)
		}
		if opts.ServerName != name || !opts.JetStream {
			t.Errorf("%s: server_name=%q jetstream=%v", name, opts.ServerName, opts.JetStream)
		}
		store := path.Join(workdir[name], opts.StoreDir)
		if !slices.Contains(volumes, name+" "+name+"-data:"+store) {
			t.Errorf("%s: store_dir resolves to %s (working_dir %q), which is not the %s-data volume", name, store, workdir[name], name)
		}
		routes := map[string]int{}
		for _, r := range opts.Routes {
			p, _ := strconv.Atoi(r.Port())
			routes[r.Hostname()] = p
		}
		if len(routes) != 3 || routes[name] != opts.Cluster.Port {
			t.Errorf("%s: routes %v do not reach its cluster port %d under its service name", name, routes, opts.Cluster.Port)
		}
		for _, p := range []int{opts.Port, opts.HTTPPort} {
			if !slices.Contains(ports, fmt.Sprintf("%s 127.0.0.1:%d:%d", name, p, p)) {
				t.Errorf("%s: port %d is not published", name, p)
			}
		}
		clientPort[name] = opts.Port
	}
	proc := commands["processor"]
	i := slices.Index(proc, "--nats-url")
	if i < 0 || i+1 >= len(proc) || !slices.Contains(proc, "--replicas") || proc[slices.Index(proc, "--replicas")+1] != "3" {
		t.Fatalf("processor command %v: want --nats-url and --replicas 3", proc)
	}
	var want []string
	for _, n := range []string{"n1", "n2", "n3"} {
		want = append(want, fmt.Sprintf("nats://%s:%d", n, clientPort[n]))
	}
	if got := proc[i+1]; got != strings.Join(want, ",") {
		t.Errorf("processor --nats-url %s, want %s", got, strings.Join(want, ","))
	}
}

// BenchmarkPublish measures what fsync costs: JetStream publishes to a file
// stream on single.conf with the default sync_interval (2m) and with
// sync_interval: always, synchronously (one at a time, waiting for each ack)
// and asynchronously (up to 256 acks outstanding).
//
//	go test -run xxx -bench Publish -benchtime 2000x ./nats/
func BenchmarkPublish(b *testing.B) {
	for _, fsync := range []string{"2m", "always"} {
		for _, mode := range []string{"sync", "async"} {
			b.Run("fsync="+fsync+"/"+mode, func(b *testing.B) {
				opts, err := server.ProcessConfigFile("single.conf")
				if err != nil {
					b.Fatal(err)
				}
				opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
				opts.StoreDir = b.TempDir()
				opts.NoLog, opts.NoSigs = true, true
				opts.SyncAlways = fsync == "always"
				s, err := server.NewServer(opts)
				if err != nil {
					b.Fatal(err)
				}
				go s.Start()
				defer func() { s.Shutdown(); s.WaitForShutdown() }()
				if !s.ReadyForConnections(10 * time.Second) {
					b.Fatal("not ready")
				}
				nc, err := nats.Connect(s.ClientURL())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				js, _ := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256))
				c := context.Background()
				if _, err := js.CreateStream(c, jetstream.StreamConfig{Name: "FOLD_IN", Subjects: []string{"fold.in.>"}, Storage: jetstream.FileStorage}); err != nil {
					b.Fatal(err)
				}
				payload := []byte(strings.Repeat("x", 300)) // about one turn
				b.SetBytes(int64(len(payload)))
				b.ResetTimer()
				for range b.N {
					if mode == "sync" {
						if _, err := js.Publish(c, "fold.in.s1.turn", payload); err != nil {
							b.Fatal(err)
						}
					} else if _, err := js.PublishAsync("fold.in.s1.turn", payload, jetstream.WithStallWait(30*time.Second)); err != nil {
						b.Fatal(err)
					}
				}
				<-js.PublishAsyncComplete()
			})
		}
	}
}
