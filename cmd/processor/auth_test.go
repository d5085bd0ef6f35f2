package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/internal/broker"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// TestMain lets a test run this binary's main as a child process, to see
// its exit status: FOLDSTREAM_TEST_MAIN=1 runs main with the arguments
// after "--".
func TestMain(m *testing.M) {
	if os.Getenv("FOLDSTREAM_TEST_MAIN") == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"processor"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runMain runs main in a child process and returns its exit status and
// stderr.
func runMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "FOLDSTREAM_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return 0, stderr.String()
}

// startAuthConf starts one of the shipped nats/auth configs as it is
// (users, permissions, JetStream) but for the processor user's secret,
// made cheap to check: in nkey.conf a fresh key pair in place of the
// file's placeholder, whose seed file it returns; in userpass.conf the
// plain dev password in place of its bcrypt hash (seconds per login under
// -race on a busy machine).
func startAuthConf(t *testing.T, name string) (*server.Server, string) {
	t.Helper()
	conf, _ := filepath.Abs(filepath.Join("..", "..", "nats", "auth", name))
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var seedFile string
	found := false
	for _, u := range opts.Users {
		if u.Username == "processor" {
			u.Password, found = "dev-processor-password", true
		}
	}
	const placeholder = "UD3DE3DLOWHOQGWDUU6BVUHQGSTZEMZSQA6A75UT6QQQUZ7JC2FOPZMY" // nkey.conf's processor
	for _, u := range opts.Nkeys {
		if u.Nkey != placeholder {
			continue
		}
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		seedFile = filepath.Join(t.TempDir(), "processor.nk")
		if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
			t.Fatal(err)
		}
		u.Nkey, _ = kp.PublicKey()
		found = true
	}
	if !found {
		t.Fatalf("%s has no processor user", conf)
	}
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", -1, 0
	opts.StoreDir, opts.NoSigs, opts.NoLog = t.TempDir(), true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return ns, seedFile
}

// With the shipped auth configs and no --inbox-prefix, the processor and
// every subcommand that connects stop at their connection with an error
// that names the flag and the prefix the config expects (the server refused
// the default _INBOX), instead of timing out on their first request; the
// process exits with status 2. nkey.conf for every subcommand,
// userpass.conf for the exit status and the user's own prefix in the
// message.
func TestMissingInboxPrefixIsNamedAtOnce(t *testing.T) {
	ns, seed := startAuthConf(t, "nkey.conf")
	login := []string{"--nats-url", ns.ClientURL(), "--nats-nkey-seed", seed}
	commands := [][]string{
		{"run", "--metrics-addr", ""},
		{"pub", "--session", "s1", "--turn", "hello", "--speaker", "Ann"},
		{"tail", "--session", "s1"},
		{"sessions"},
		{"context", "--session", "s1"},
		{"dlq"},
		{"dlq", "redrive"},
		{"replay", "--session", "s1"},
		{"ui", "--ui-addr", "127.0.0.1:0"},
	}
	for _, c := range commands {
		words := 1
		if c[0] == "dlq" && len(c) > 1 && c[1] == "redrive" {
			words = 2
		}
		args := append(append(append([]string{}, c[:words]...), login...), c[words:]...)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var out, errOut bytes.Buffer
		err := run(ctx, args, &out, &errOut)
		cancel()
		var denied *broker.InboxDeniedError
		if !errors.As(err, &denied) {
			t.Errorf("%v: %v, want the inbox refusal", c[:words], err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "--inbox-prefix _INBOX_<user>") || !strings.Contains(msg, `"_INBOX.`) {
			t.Errorf("%v: %q does not name --inbox-prefix _INBOX_<user> and the refused inbox", c[:words], msg)
		}
		if strings.Contains(errOut.String(), "Permissions Violation") {
			t.Errorf("%v logged the refusal it returns:\n%s", c[:words], errOut.String())
		}
	}
	// With the prefix the config expects, the same login works.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, append(append([]string{"replay"}, login...), "--inbox-prefix", "_INBOX_processor", "s1"), &out, &errOut); err == nil ||
		!strings.Contains(err.Error(), "stream FOLD_IN not found") {
		t.Errorf("replay with the right prefix: %v, want only the missing stream", err)
	}

	up, _ := startAuthConf(t, "userpass.conf")
	login = []string{"--nats-url", up.ClientURL(), "--nats-user", "processor", "--nats-password", "dev-processor-password"}
	// A prefix the user may not read is refused the same way.
	err := run(ctx, append(append([]string{"sessions"}, login...), "--inbox-prefix", "_INBOX_bot"), &out, &errOut)
	if denied := (*broker.InboxDeniedError)(nil); !errors.As(err, &denied) || denied.Prefix != "_INBOX_bot" {
		t.Errorf("sessions with another user's prefix: %v", err)
	}
	for _, c := range [][]string{{"run", "--metrics-addr", ""}, {"context", "s1"}} {
		status, stderr := runMain(t, append(append([]string{c[0]}, login...), c[1:]...)...)
		if status != 2 || !strings.Contains(stderr, "--inbox-prefix _INBOX_processor") {
			t.Errorf("%s: exit status %d, stderr:\n%s", c[0], status, stderr)
		}
	}
}
