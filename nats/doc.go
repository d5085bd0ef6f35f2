// Package natsconf holds the nats-server configuration files foldstream is
// deployed with (single.conf, cluster/n1..n3.conf, auth/*.conf) and, in its
// tests, the proof that each of them parses and runs: every file is loaded
// with the nats-server's own parser and started in-process on loopback
// ports. It has no Go API; see README.md beside this file.
package natsconf
