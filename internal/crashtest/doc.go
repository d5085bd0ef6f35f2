// Package crashtest is foldstream's reliability harness.
//
// Its tests (crash_test.go) build the processor binary, run it as a child
// process against an in-process nats-server and an in-process
// chat-completions server, kill it with SIGKILL at random points during
// ingest and folds, restart it, and then check that nothing was lost and
// nothing was folded twice. `make test` runs a bounded version; `make soak`
// a long one (see docs/reliability.md).
//
// The non-test part is shared with the processor's cluster and fault tests:
// a fake model that answers with a summary naming the message numbers it
// was asked to fold (Model), the turns the harnesses publish (Turn,
// Publish), a watcher that checks every checkpoint write as it happens
// (Watcher) and the end-of-run invariants (Verify).
package crashtest
