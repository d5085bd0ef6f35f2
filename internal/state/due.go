package state

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// duePrefix marks sessions with fold work to resume. '=' is a valid KV key
// character that no session id can contain, so these keys never collide
// with a session's checkpoint or its chunks.
const duePrefix = "=due."

// MarkDue records, before a fold starts, that the session has fold work:
// if the process dies or the fold fails, a starting processor finds it
// here and resumes it even if the session never sends another event.
func (st *Store) MarkDue(ctx context.Context, id string) error {
	if _, err := st.kv.Put(ctx, duePrefix+id, nil); err != nil {
		return fmt.Errorf("mark session %s due: %w", id, err)
	}
	return nil
}

// ClearDue removes the mark once the session has nothing left to resume.
func (st *Store) ClearDue(ctx context.Context, id string) error {
	if err := st.kv.Purge(ctx, duePrefix+id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
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
