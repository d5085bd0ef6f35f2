package brokertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Cluster is a 3-node JetStream cluster on loopback ports, in process, as
// nats/cluster/*.conf deploys it. A node can be stopped and restarted on
// the same ports and store directory. Every node stops when the test ends.
type Cluster struct {
	t       testing.TB
	Opts    []*server.Options // each node's options, kept for restarts
	Servers []*server.Server  // a stopped node's entry is nil
	URLs    []string          // each node's client URL
}

// NewCluster starts the three nodes of a cluster called name; tune, when
// not nil, adjusts each node's options before it starts.
func NewCluster(t testing.TB, name string, tune func(*server.Options)) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Servers: make([]*server.Server, 3)}
	var routes []string
	client, route := make([]int, 3), make([]int, 3)
	for i := range 3 {
		client[i], route[i] = LoopbackPort(t), LoopbackPort(t)
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", route[i]))
	}
	for i := range 3 {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: client[i],
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: name, Host: "127.0.0.1", Port: route[i]},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		if tune != nil {
			tune(o)
		}
		c.Opts = append(c.Opts, o)
		c.URLs = append(c.URLs, fmt.Sprintf("nats://127.0.0.1:%d", client[i]))
	}
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { c.Start(i) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for i := range c.Servers {
			c.Stop(i)
		}
	})
	return c
}

// Start starts node i (again) on its ports and store directory.
func (c *Cluster) Start(i int) {
	s, err := server.NewServer(c.Opts[i].Clone())
	if err != nil {
		c.t.Error(err)
		return
	}
	go s.Start()
	// Generous: a node that replays its JetStream store on a machine
	// shared with other work can take seconds to listen.
	if !s.ReadyForConnections(60 * time.Second) {
		c.t.Errorf("n%d not ready", i+1)
	}
	c.Servers[i] = s
}

// Stop shuts node i down and waits until it has; a stopped node is left
// as it is.
func (c *Cluster) Stop(i int) {
	if c.Servers[i] != nil {
		c.Servers[i].Shutdown()
		c.Servers[i].WaitForShutdown()
		c.Servers[i] = nil
	}
}

// LoopbackPort is a TCP port on 127.0.0.1 that was free a moment ago.
//
// It is picked below the kernel's ephemeral range, where the kernel never
// hands out a port by itself: a listener on port 0 (a server started with
// Port -1) or an outgoing connection, in this test binary or in another
// one running beside it, cannot take the port between this call and the
// caller's bind, nor while a node that uses it is stopped for a restart.
func LoopbackPort(t testing.TB) int {
	t.Helper()
	lo := ephemeralLow()
	for range 200 {
		p := 10000 + rand.IntN(lo-10000)
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			l.Close()
			return p
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ephemeralLow is the lowest port of the kernel's ephemeral range
// (Linux's ip_local_port_range), or 32768 where that cannot be read or
// leaves too little room below it.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo < 20000 {
		return 32768
	}
	return lo
}
