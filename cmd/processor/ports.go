package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// defaultMetricsAddr is --metrics-addr's default.
const defaultMetricsAddr = "127.0.0.1:9464"

// portBusy reports whether host:port cannot be listened on now.
func portBusy(host string, port int) bool {
	return addrBusy(net.JoinHostPort(host, strconv.Itoa(port)))
}

// addrBusy reports whether addr cannot be listened on now. A port that is
// free here may still be taken before the real listener opens; the real
// listener's error covers that race.
func addrBusy(addr string) bool {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return true
	}
	_ = ln.Close()
	return false
}

// checkPorts fails before anything starts when the embedded nats-server's
// port or the metrics address is taken, naming the flags that fix it: one
// message for both, so that following its advice works the first time.
func checkPorts(o *options) error {
	var busy, fix []string
	if o.natsURL == "" && o.embeddedPort > 0 && portBusy("127.0.0.1", o.embeddedPort) {
		busy = append(busy, fmt.Sprintf("port %d of the embedded nats-server (another processor or nats-server?)", o.embeddedPort))
		fix = append(fix, "--embedded-port -1")
	}
	if o.metricsAddr != "" && !strings.HasSuffix(o.metricsAddr, ":0") && addrBusy(o.metricsAddr) {
		busy = append(busy, fmt.Sprintf("%s of /metrics", o.metricsAddr))
		fix = append(fix, "--metrics-addr 127.0.0.1:0")
	}
	if len(busy) == 0 {
		return nil
	}
	return errors.New("in use: " + strings.Join(busy, " and ") + ": run with " + strings.Join(fix, " ") +
		" to take free ports (the embedded server's URL is logged as embedded_server_started, the metrics address as metrics_listening)")
}
