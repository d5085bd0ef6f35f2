package service

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/jetstream"
)

// failingMetaReads is a bucket whose gets of entries' metas (m.<session>)
// fail while on is set.
type failingMetaReads struct {
	jetstream.KeyValue
	on *atomic.Bool
}

func (f failingMetaReads) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if f.on.Load() && strings.HasPrefix(key, "m.") {
		return nil, errors.New("test: reading the meta failed")
	}
	return f.KeyValue.Get(ctx, key)
}

// FailMetaReads has the instance's reads of stored entries' metas fail
// until the returned function is called.
func (d *Direct) FailMetaReads(ctx context.Context) (func(), error) {
	st := d.s.istore
	kv, err := st.open(ctx)
	if err != nil {
		return nil, err
	}
	on := new(atomic.Bool)
	on.Store(true)
	st.mu.Lock()
	st.kv = failingMetaReads{KeyValue: kv, on: on}
	st.mu.Unlock()
	return func() { on.Store(false) }, nil
}
