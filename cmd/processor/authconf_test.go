package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/testlog"
	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// runWithLogin runs the processor with the login flags, publishes a turn
// and asks for the session's context with the same flags, as an operator
// following nats/README.md would.
func runWithLogin(t *testing.T, url string, login ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	logs := &testlog.Buffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"run", "--nats-url", url, "--metrics-addr", "", "--summarizer", "offline", "--tokenizer", "heuristic"}, login...), io.Discard, logs)
	}()
	for !strings.Contains(logs.String(), `"event":"processor_started"`) {
		select {
		case err := <-done:
			t.Fatalf("run: %v\n%s", err, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	tool := func(args ...string) string {
		var out, errOut bytes.Buffer
		if err := run(ctx, append(append(args[:1:1], append([]string{"--nats-url", url}, login...)...), args[1:]...), &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	tool("pub", "s1", "--turn", "hello over the login", "--speaker", "Ann")
	for {
		var c client.Context
		if err := json.Unmarshal([]byte(tool("context", "s1", "--json")), &c); err == nil && len(c.Turns) == 1 && c.Turns[0].Text == "hello over the login" {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the context never had the turn")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

// The processor and its tools with the shipped nkey.conf: the processor
// user's seed file and its inbox prefix.
func TestProcessorWithNkeyConf(t *testing.T) {
	ns, seed := startAuthConf(t, "nkey.conf")
	runWithLogin(t, ns.ClientURL(), "--nats-nkey-seed", seed, "--inbox-prefix", "_INBOX_processor")
}

// The processor and its tools with the shipped tls.conf (mutual TLS), on
// certificates of a CA made here.
func TestProcessorWithTLSConf(t *testing.T) {
	conf, _ := filepath.Abs(filepath.Join("..", "..", "nats", "auth", "tls.conf"))
	dir := t.TempDir()
	writeTestCerts(t, filepath.Join(dir, "certs"))
	// tls.conf names certs/... relative to the server's working directory,
	// and the parser loads them.
	t.Chdir(dir)
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
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
	url := strings.Replace(ns.ClientURL(), "nats://", "tls://", 1)
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"sessions", "--nats-url", url, "--nats-tls-ca", "certs/ca.pem"}, &out, &errOut); err == nil {
		t.Error("a tool without a client certificate was let in")
	}
	runWithLogin(t, url, "--nats-tls-ca", "certs/ca.pem", "--nats-tls-cert", "certs/client-cert.pem", "--nats-tls-key", "certs/client-key.pem")
}

// writeTestCerts writes a CA (ca.pem), a server certificate for
// 127.0.0.1 and localhost (server-cert.pem, server-key.pem) and a client
// certificate (client-cert.pem, client-key.pem) into dir, valid for an
// hour: the files tls.conf names.
func writeTestCerts(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "foldstream test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	write("ca.pem", "CERTIFICATE", caDER)
	for serial, leaf := range map[int64]struct {
		name  string
		usage x509.ExtKeyUsage
	}{2: {"server", x509.ExtKeyUsageServerAuth}, 3: {"client", x509.ExtKeyUsageClientAuth}} {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: leaf.name},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{leaf.usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		write(leaf.name+"-cert.pem", "CERTIFICATE", der)
		write(leaf.name+"-key.pem", "EC PRIVATE KEY", kb)
	}
}

// The processor and its tools with a .creds file in operator mode
// (nats/auth/creds.md): an operator, a system account and a tenant account
// with JetStream, and the tenant's processor user with the permissions
// creds.md gives it, all signed here.
func TestProcessorWithCreds(t *testing.T) {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	ojwt, err := jwt.NewOperatorClaims(opub).Encode(okp)
	if err != nil {
		t.Fatal(err)
	}
	op, err := jwt.DecodeOperatorClaims(ojwt)
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	account := func(name string, js bool) (nkeys.KeyPair, string) {
		kp, _ := nkeys.CreateAccount()
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		token, err := ac.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		if err := resolver.Store(pub, token); err != nil {
			t.Fatal(err)
		}
		return kp, pub
	}
	_, sys := account("SYS", false)
	akp, _ := account("tenant-a", true)
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	uc := jwt.NewUserClaims(upub)
	uc.Name = "a-processor"
	uc.Pub.Allow.Add("$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$KV.>", "fold.>")
	uc.Sub.Allow.Add("$JS.API.>", "$KV.>", "fold.>", "_INBOX_a-processor.>", "$SRV.>")
	uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1}
	ujwt, err := uc.Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := ukp.Seed()
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(t.TempDir(), "a-processor.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	opts := &server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
		TrustedOperators: []*jwt.OperatorClaims{op}, SystemAccount: sys, AccountResolver: resolver}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	runWithLogin(t, ns.ClientURL(), "--nats-creds", credsFile, "--inbox-prefix", "_INBOX_a-processor")
}
