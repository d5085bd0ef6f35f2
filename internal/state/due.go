package state

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// duePrefix marks sessions with fold work to resume. '=' is a valid KV key
// character that no session id can contain, so these keys never collide
// with a session's checkpoint or its chunks.
const duePrefix = "=due."

// MarkDue records, before a fold starts, that the session has fold work:
// if the process dies or the fold fails, a starting processor finds it
// here and resumes it even if the session never sends another event.
//
// The write is pipelined: it is published before the fold's lease
// checkpoint on the same connection and stream, which JetStream stores in
// order, and a lease found on load schedules a check of its own anyway.
func (st *Store) MarkDue(id string) error {
	if _, err := st.js.PublishAsync(st.putPrefix+duePrefix+id, nil); err != nil {
		return fmt.Errorf("mark session %s due: %w", id, err)
	}
	return nil
}

// ClearDue removes the mark, without waiting, once the session has left
// memory with nothing to resume. A mark left behind costs one check at
// the next start.
func (st *Store) ClearDue(id string) error {
	m := nats.NewMsg(st.putPrefix + duePrefix + id)
	m.Header.Set("KV-Operation", "PURGE")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	if _, err := st.js.PublishMsgAsync(m); err != nil {
		return fmt.Errorf("clear due mark of session %s: %w", id, err)
	}
	return nil
}

// ListDue returns the sessions marked due.
func (st *Store) ListDue(ctx context.Context) ([]string, error) {
	lister, err := st.kv.ListKeysFiltered(ctx, duePrefix+">")
	if err != nil {
		return nil, fmt.Errorf("list due sessions: %w", err)
	}
	var ids []string
	for k := range lister.Keys() {
		if id, ok := strings.CutPrefix(k, duePrefix); ok && id != "" {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
