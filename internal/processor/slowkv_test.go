package processor

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker/brokertest"
	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/state"
	"github.com/foldstream/foldstream/internal/testenv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// delayProxy is a TCP proxy in front of a nats-server that, once slow is
// called, holds every byte the server sends for the delay before passing
// it on: a client behind it gets every answer that late.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // nanoseconds
	wg     sync.WaitGroup
}

func newDelayProxy(t *testing.T, target string) *delayProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dp := &delayProxy{ln: ln, target: target}
	dp.wg.Add(1)
	go dp.accept()
	t.Cleanup(func() {
		ln.Close()
		dp.wg.Wait()
	})
	return dp
}

func (dp *delayProxy) URL() string { return "nats://" + dp.ln.Addr().String() }

// slow delays every answer from now on by d.
func (dp *delayProxy) slow(d time.Duration) { dp.delay.Store(int64(d)) }

func (dp *delayProxy) accept() {
	defer dp.wg.Done()
	for {
		c, err := dp.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", dp.target)
		if err != nil {
			c.Close()
			continue
		}
		dp.wg.Add(2)
		go func() { defer dp.wg.Done(); _, _ = io.Copy(s, c); s.Close() }()
		go func() { defer dp.wg.Done(); dp.delayed(c, s); c.Close() }()
	}
}

// delayed copies from src to dst, each read held until its due time.
func (dp *delayProxy) delayed(dst, src net.Conn) {
	type chunk struct {
		due  time.Time
		data []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				q <- chunk{due: time.Now().Add(time.Duration(dp.delay.Load())), data: buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range q {
		time.Sleep(time.Until(c.due))
		if _, err := dst.Write(c.data); err != nil && !errors.Is(err, net.ErrClosed) {
			return
		}
	}
}

// TestSlowKVHoldsOnlyItsSession: with every answer of the checkpoint
// bucket 5 s late, a session whose end needs KV writes (the final fold's
// checkpoint, the archive) waits for them, while another session of the
// same shard goes on: its turns are applied and folded, its summaries
// published, before the first session's archive is written.
func TestSlowKVHoldsOnlyItsSession(t *testing.T) {
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(testLogLevel)
	r := rigOn(t, testenv.New(t, testenv.Options{Listen: true, Log: &log}))
	proxy := newDelayProxy(t, strings.TrimPrefix(r.URL, "nats://"))
	nc, err := nats.Connect(proxy.URL(), nats.Name("slow-kv"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	slowJS, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := slowJS.KeyValue(context.Background(), r.Layout.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Window: fold.Window{Recent: 4, Batch: 2}, Shards: 1, RetryBackoff: 50 * time.Millisecond,
		FlushInterval: 5 * time.Millisecond, FoldTimeout: 30 * time.Second}
	p, err := New(cfg, Deps{JS: r.JS, Layout: r.Layout, Store: state.NewStore(slowJS, kv), Summarizer: r.sum, Log: r.Log, Clock: SystemClock{}})
	if err != nil {
		t.Fatal(err)
	}
	brokertest.RunEngine(t, p)

	r.Turns("a", 2)
	r.Turns("b", 2)
	r.Settled("a", 2, 0)
	r.Settled("b", 2, 0)

	proxy.slow(5 * time.Second)
	r.Control("a", events.OpEnd, nil) // final fold, its checkpoint, then the archive: all wait for KV
	r.Eventually("a's final fold published", func() bool { return len(r.Summaries("a")) == 1 })
	r.Turns("b", 8)
	r.Eventually("b's turns folded and published", func() bool { return len(r.Summaries("b")) == 2 })
	if hasType(r.Lifecycle("a"), events.EventSessionArchived, "") {
		t.Fatal("b was folded only after a's archive was written: the shard waited for a's KV calls")
	}
	r.Eventually("a archived once its KV writes are answered", func() bool {
		return hasType(r.Lifecycle("a"), events.EventSessionArchived, "end")
	})
	proxy.slow(0)
	r.Settled("b", 10, 4)
}
