package service

import "context"

// indexHandle is a session's replay, current as of the request, held for
// the request's use until release.
type indexHandle struct {
	r      *replay
	unlock func()
}

func (h *indexHandle) release() {
	if h.unlock != nil {
		h.unlock()
	}
}

// recallIndex returns the session's replay, current with the inbound
// stream as of the call.
func (s *server) recallIndex(ctx context.Context, session string) (*indexHandle, error) {
	rp, err := s.scanReplay(ctx, session)
	if err != nil {
		return nil, err
	}
	return &indexHandle{r: rp}, nil
}
