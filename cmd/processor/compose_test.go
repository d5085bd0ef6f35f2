package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// composeService is what the line scan of docker-compose.yml finds for a
// service (the file is plain enough that no YAML parser is needed, and
// none is in the module graph).
type composeService struct {
	image       string
	command     []string
	healthcheck []string
	ports       []string
}

func readCompose(t *testing.T) map[string]*composeService {
	t.Helper()
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]*composeService{}
	var cur *composeService
	inServices, inPorts := false, false
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimRight(line, "\n")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			inServices = line == "services:"
			cur = nil
			continue
		}
		if inServices && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":") {
			cur = &composeService{}
			services[strings.TrimSuffix(trimmed, ":")] = cur
			continue
		}
		if cur == nil {
			continue
		}
		if strings.HasPrefix(line, "    ") && !strings.HasPrefix(line, "     ") {
			inPorts = trimmed == "ports:"
		}
		list := func(rest string) []string {
			var out []string
			if err := json.Unmarshal([]byte(rest), &out); err != nil {
				t.Fatalf("docker-compose.yml: %q is not a JSON-style list: %v", rest, err)
			}
			return out
		}
		switch {
		case strings.HasPrefix(trimmed, "image: "):
			cur.image = strings.TrimPrefix(trimmed, "image: ")
		case strings.HasPrefix(trimmed, "command: "):
			cur.command = list(strings.TrimPrefix(trimmed, "command: "))
		case strings.HasPrefix(trimmed, "test: "):
			cur.healthcheck = list(strings.TrimPrefix(trimmed, "test: "))
		case inPorts && strings.HasPrefix(trimmed, "- "):
			cur.ports = append(cur.ports, strings.Trim(strings.TrimPrefix(trimmed, "- "), `"`))
		}
	}
	return services
}

// goModVersion returns the version go.mod requires of module.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	raw, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+v(\S+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("go.mod does not require %s", module)
	}
	return string(m[1])
}

// docker-compose.yml, the Dockerfile and .dockerignore match what the
// tests run: the nats image is go.mod's nats-server, the Go image go.mod's
// Go, the processor's command parses with its own flag set and serves
// /metrics on the published port, every service has a healthcheck (the
// processor's its own healthcheck subcommand), and the build context
// leaves out stores, binaries, Node dependencies and git.
func TestDockerMatchesWhatIsTested(t *testing.T) {
	services := readCompose(t)
	nats := goModVersion(t, "github.com/nats-io/nats-server/v2")
	for _, name := range []string{"n1", "n2", "n3"} {
		s := services[name]
		if s == nil {
			t.Fatalf("no service %s in docker-compose.yml", name)
		}
		if s.image != "nats:"+nats && s.image != "nats:"+nats+"-alpine" {
			t.Errorf("%s: image %q, want nats:%s (go.mod's nats-server, which every test runs)", name, s.image, nats)
		}
		if len(s.healthcheck) == 0 || !strings.Contains(strings.Join(s.healthcheck, " "), "/healthz") {
			t.Errorf("%s: healthcheck %v, want one on the monitoring port's /healthz", name, s.healthcheck)
		}
		if s.healthcheck[0] == "CMD" && s.healthcheck[1] == "wget" && !strings.HasSuffix(s.image, "-alpine") {
			t.Errorf("%s: the healthcheck runs wget, which only the alpine variant of the nats image has", name)
		}
	}

	p := services["processor"]
	if p == nil {
		t.Fatal("no service processor in docker-compose.yml")
	}
	var o options
	fs := newFlagSet("processor run", &o)
	if err := parseOptions(fs, &o, p.command, func(string) string { return "" }); err != nil {
		t.Fatalf("processor command %v: %v", p.command, err)
	}
	host, port, err := net.SplitHostPort(o.metricsAddr)
	if err != nil || host != "0.0.0.0" {
		t.Errorf("processor --metrics-addr %q: want 0.0.0.0:<port>, reachable from outside the container", o.metricsAddr)
	}
	if !slices.ContainsFunc(p.ports, func(s string) bool { return strings.HasSuffix(s, ":"+port+":"+port) }) {
		t.Errorf("processor: the metrics port %s is not published (ports %v)", port, p.ports)
	}
	hc := p.healthcheck
	if len(hc) < 3 || hc[0] != "CMD" || hc[1] != "/processor" || hc[2] != "healthcheck" {
		t.Fatalf("processor healthcheck %v: want [CMD /processor healthcheck --url http://127.0.0.1:<metrics port>/healthz]", hc)
	}
	if !slices.ContainsFunc(commands, func(c command) bool { return c.name == "healthcheck" }) {
		t.Error("the processor has no healthcheck subcommand")
	}
	var ho struct{ url string }
	hfs := newHealthcheckURL(&ho.url)
	if err := hfs.Parse(hc[3:]); err != nil || ho.url != "http://127.0.0.1:"+port+"/healthz" {
		t.Errorf("processor healthcheck %v: %v, want --url http://127.0.0.1:%s/healthz", hc, err, port)
	}

	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mustRead(t, "../../go.mod"))
	if goVersion == nil || !regexp.MustCompile(`(?m)^FROM golang:`+regexp.QuoteMeta(string(goVersion[1]))+`\b`).Match(docker) {
		t.Errorf("Dockerfile's golang image is not go.mod's Go %s", goVersion[1])
	}
	if !strings.Contains(string(docker), "HEALTHCHECK") || !strings.Contains(string(docker), "FOLDSTREAM_METRICS_ADDR=0.0.0.0:"+port) {
		t.Errorf("Dockerfile: want a HEALTHCHECK and FOLDSTREAM_METRICS_ADDR=0.0.0.0:%s", port)
	}
	ignore := strings.Fields(string(mustRead(t, "../../.dockerignore")))
	for _, want := range []string{".git", "data", "bin", "node_modules", "**/node_modules"} {
		if !slices.Contains(ignore, want) {
			t.Errorf(".dockerignore does not leave out %s", want)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// healthcheck answers for a running processor's /healthz and fails for an
// address where none listens.
func TestHealthcheckAsksTheProcessor(t *testing.T) {
	var o options
	fs := newFlagSet("run", &o)
	if err := parseOptions(fs, &o, []string{"--store-dir", t.TempDir(), "--embedded-port", "-1", "--metrics-addr", "127.0.0.1:0"}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, &o, zerolog.Nop(), func(e *env) { addr <- e.metricsAddr })
	}()
	var a string
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("processor did not start")
	}
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"healthcheck", "--url", "http://" + a + "/healthz"}, &out, &errOut); err != nil || strings.TrimSpace(out.String()) != "ok" {
		t.Errorf("healthcheck of a live processor: %v, %q", err, out.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), []string{"healthcheck", "--url", "http://" + a + "/healthz"}, &out, &errOut); err == nil {
		t.Error("healthcheck of a stopped processor succeeded")
	}
}
