package retry

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestBreaker(t *testing.T) {
	var logs bytes.Buffer
	b := NewBreaker(BreakerConfig{Endpoint: "openai", OpenFor: time.Minute, MaxOpenFor: 3 * time.Minute, BadRequests: 2}, zerolog.New(&logs))
	t0 := time.Unix(1763840000, 0)
	begin := func(at time.Duration, force bool) (bool, bool) {
		ok, probe, _ := b.Begin(t0.Add(at), force)
		return ok, probe
	}
	auth := &Error{Class: Auth, StatusCode: 401, Err: errors.New("invalid api key")}

	// Retryable failures and a single bad request leave it closed.
	b.Record(t0, New(Server, errors.New("502")), false)
	b.Record(t0, New(BadRequest, errors.New("content rejected")), false)
	if b.State() != BreakerClosed {
		t.Fatalf("state %s after a 5xx and one bad request", b.State())
	}
	b.Record(t0, nil, false) // an answer ends the run of bad requests
	b.Record(t0, New(BadRequest, errors.New("content rejected")), false)
	if b.State() != BreakerClosed {
		t.Fatal("bad requests with an answer between them opened the breaker")
	}

	// An auth failure opens it: calls are refused, then one probe.
	b.Record(t0, auth, false)
	b.Record(t0, auth, false) // calls that were in flight: no second opening
	if ok, _ := begin(30*time.Second, false); ok || b.State() != BreakerOpen || b.Opens() != 1 {
		t.Fatalf("open breaker let a call through (state %s, opens %d)", b.State(), b.Opens())
	}
	if ok, reason := b.Health(); ok || !strings.Contains(reason, "auth (status 401)") || !strings.Contains(reason, "compact") {
		t.Fatalf("health %v %q", ok, reason)
	}
	ok, probe := begin(time.Minute, false)
	if !ok || !probe || b.State() != BreakerHalfOpen {
		t.Fatalf("probe due: ok %v probe %v state %s", ok, probe, b.State())
	}
	if ok, _ := begin(time.Minute, false); ok {
		t.Fatal("a second call went through while the probe is in flight")
	}
	b.Record(t0.Add(61*time.Second), auth, false) // a late non-probe call does not decide
	b.Record(t0.Add(61*time.Second), auth, true)  // the probe fails: twice as long
	if ok, _ := begin(2*time.Minute+30*time.Second, false); ok {
		t.Fatal("reopened breaker let a call through before twice OpenFor")
	}
	if ok, probe := begin(3*time.Minute+2*time.Second, false); !ok || !probe {
		t.Fatal("no probe after twice OpenFor")
	}
	b.Release() // the fold ended before its call: the next one probes
	if ok, probe := begin(3*time.Minute+3*time.Second, false); !ok || !probe {
		t.Fatal("a released probe was not handed on")
	}
	b.Record(t0.Add(4*time.Minute), auth, true)
	// A compact control probes at once; an answer closes it.
	if ok, probe := begin(4*time.Minute+time.Second, true); !ok || !probe {
		t.Fatal("compact did not probe at once")
	}
	b.Record(t0.Add(4*time.Minute+2*time.Second), nil, true)
	if ok, _ := b.Health(); !ok || b.State() != BreakerClosed {
		t.Fatalf("an answer left the breaker %s", b.State())
	}
	if ok, probe := begin(4*time.Minute+3*time.Second, false); !ok || probe {
		t.Fatal("closed breaker refused or probed")
	}
	// Two bad requests in a row open it.
	b.Record(t0, New(BadRequest, errors.New("unsupported parameter")), false)
	b.Record(t0, New(BadRequest, errors.New("unsupported parameter")), false)
	if b.State() != BreakerOpen {
		t.Fatal("a run of bad requests did not open the breaker")
	}
	// One error log per opening, not per failed call.
	if n := strings.Count(logs.String(), `"level":"error"`); n != int(b.Opens()) || n != 4 {
		t.Fatalf("%d error logs for %d openings:\n%s", n, b.Opens(), logs.String())
	}
}

// A probe whose outcome never came is given up after ProbeTimeout.
func TestBreakerLostProbe(t *testing.T) {
	b := NewBreaker(BreakerConfig{OpenFor: time.Minute, ProbeTimeout: time.Minute}, zerolog.Nop())
	t0 := time.Unix(1763840000, 0)
	b.Record(t0, &Error{Class: NotFound, StatusCode: 404, Err: errors.New("model not found")}, false)
	if ok, probe, _ := b.Begin(t0.Add(time.Minute), false); !ok || !probe {
		t.Fatal("no probe")
	}
	if ok, _, _ := b.Begin(t0.Add(90*time.Second), false); ok {
		t.Fatal("second probe while the first is in flight")
	}
	if ok, probe, _ := b.Begin(t0.Add(2*time.Minute+time.Second), false); !ok || !probe {
		t.Fatal("a lost probe blocked the breaker")
	}
}

func TestPersistent(t *testing.T) {
	for c, want := range map[Class]bool{Auth: true, BadRequest: true, NotFound: true, InvalidOutput: false, ContextLength: false, Server: false, Timeout: false} {
		if Persistent(c) != want {
			t.Errorf("Persistent(%s) = %v, want %v", c, !want, want)
		}
	}
}
