package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// runHealthcheck asks a processor's /healthz and exits non-zero unless it
// answers 200: the container healthcheck of the distroless image, which
// has no shell and no curl.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var url string
	fs := newHealthcheckURL(&url)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 2*time.Second, "how long to wait for the answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	_, err = fmt.Fprintf(stdout, "%s", body)
	return err
}

// newHealthcheckURL declares healthcheck's --url.
func newHealthcheckURL(url *string) *flag.FlagSet {
	fs := flag.NewFlagSet("processor healthcheck", flag.ContinueOnError)
	fs.StringVar(url, "url", "http://"+defaultMetricsAddr+"/healthz", "the processor's /healthz (its --metrics-addr)")
	return fs
}
