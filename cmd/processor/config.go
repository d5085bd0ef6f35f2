package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

// options are every setting of the processor. Precedence: command-line
// flag, then FOLDSTREAM_<FLAG> environment variable, then the --config
// file, then the default.
type options struct {
	configFile string

	natsURL, natsUser, natsPassword, natsToken, natsNKey, natsCreds string
	natsTLSCA, natsTLSCert, natsTLSKey, inboxPrefix                 string
	storeDir                                                        string
	embeddedPort                                                    int
	prefix                                                          string
	replicas                                                        int
	maxAge                                                          time.Duration

	recentWindow, batchSize, maxSummaryChars, maxNoteChars int
	minFoldTokens                                          int
	trigger, profile                                       string

	mode                                    string
	contextWindow, reserveTokens            int
	idleAfter                               time.Duration
	idleThreshold, emergencyThreshold       float64
	keepRecentTokens, keepRecentMessages    int
	targetUtilization                       float64
	minKeepMessages, intervalEx, keepRecent int
	maskToolOutputsAfter                    time.Duration
	contextSources                          string
	keepEnded                               bool
	shards, maxFolds                        int
	foldTimeout, leaseTTL, flushInterval    time.Duration
	idleCompact                             time.Duration

	summarizer                                string
	openaiBaseURL, openaiModel, openaiKey     string
	openaiOrg, openaiAPIType, azureAPIVersion string
	openaiTimeout                             time.Duration
	openaiTemperature                         float64
	openaiMaxTokens                           int
	tokenizer                                 string

	partitions   int
	partitionTTL time.Duration
	instanceID   string

	metricsAddr string
	service     bool
	logLevel    string
	logPretty   bool

	prompts map[string]string // from the config file only

	logLevelSet bool // --log-level given on the command line or environment

	// settings, when set, declares the processor's settings behind a
	// subcommand whose -h shows only its own flags (demo): the config file
	// and FOLDSTREAM_* variables may still set them.
	settings *flag.FlagSet
}

// newFlagSet declares every flag of the processor (run and demo).
func newFlagSet(name string, o *options) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&o.configFile, "config", "", "JSON config file: keys are flag names, plus \"prompts\": {voice|agent|recompact|system: template}")
	addConnFlags(fs, o, "", "NATS server or cluster URL(s), comma-separated; empty starts an embedded nats-server")
	addStoreFlag(fs, o)
	fs.IntVar(&o.embeddedPort, "embedded-port", 4222, "client port of the embedded nats-server (-1 picks a free one)")
	fs.IntVar(&o.replicas, "replicas", 1, "replicas for the streams and KV bucket (3 on a cluster)")
	fs.DurationVar(&o.maxAge, "max-age", 0, "retention of the inbound/outbound streams (0 = unlimited; replay needs the history)")

	fs.IntVar(&o.recentWindow, "recent-window", 50, "turns kept verbatim (seed 000)")
	fs.IntVar(&o.batchSize, "batch-size", 10, "turns folded per run")
	fs.IntVar(&o.maxSummaryChars, "max-summary-chars", 1200, "summary budget in characters")
	fs.IntVar(&o.maxNoteChars, "max-note-chars", 400, "cap per screen-watch note when folded")
	fs.IntVar(&o.minFoldTokens, "min-fold-tokens", 0, "mode window: a due fold waits until the turns behind the recent window hold this many tokens, then folds them in one call (fewer, larger summarizer calls; 0 = seed 000's fixed batches)")
	fs.StringVar(&o.trigger, "trigger", "turn", "when to check for a fold: turn (every turn) or generate (on generate control events)")
	fs.StringVar(&o.profile, "profile", "voice", "default prompt profile: voice (seed 000) or agent (seed 003)")
	fs.StringVar(&o.mode, "mode", "window", "default mode: window (seed 000), evict (seed 001), interval (seed 002) or tokens (seeds 003/004); sessions may override it with a configure control")
	fs.IntVar(&o.contextWindow, "context-window", 128000, "modes tokens and evict: the bot model's context window in tokens")
	fs.IntVar(&o.reserveTokens, "reserve-tokens", 16384, "modes tokens and evict: headroom for the answer; the context must shrink above context-window − reserve-tokens")
	fs.DurationVar(&o.idleAfter, "idle-after", 5*time.Minute, "mode tokens: a session quiet this long is folded above idle-threshold (0 disables)")
	fs.Float64Var(&o.idleThreshold, "idle-threshold", 0.6, "mode tokens: idle fold threshold, a fraction of the context window")
	fs.Float64Var(&o.emergencyThreshold, "emergency-threshold", 0.8, "mode tokens: fold at once above this fraction of the context window")
	fs.IntVar(&o.keepRecentTokens, "keep-recent-tokens", 0, "mode tokens: verbatim tail budget in tokens (0 = 20% of the context window)")
	fs.IntVar(&o.keepRecentMessages, "keep-recent-messages", 10, "mode tokens: never keep fewer turns verbatim than this")
	fs.Float64Var(&o.targetUtilization, "target-utilization", 0.8, "mode evict: evict down to this fraction of the context window")
	fs.IntVar(&o.minKeepMessages, "min-keep-messages", 10, "mode evict: always keep at least this many turns")
	fs.IntVar(&o.intervalEx, "interval-exchanges", 5, "mode interval: fold every this many exchanges (a bot answer completes one)")
	fs.IntVar(&o.keepRecent, "keep-recent", 6, "mode interval: turns kept verbatim after each fold")
	fs.DurationVar(&o.maskToolOutputsAfter, "mask-tool-outputs-after", 0, "mask tool results older than this before summarizing (0 = off)")
	fs.StringVar(&o.contextSources, "context-sources", "", "mode interval: context sources asked at each fold, a JSON array [{label, subject, prompt, timeout}] or a path to a file holding it (docs/context-sources.md)")
	fs.BoolVar(&o.keepEnded, "keep-ended", false, "keep an ended session's checkpoint as it is instead of the final fold, archive and clear")
	fs.IntVar(&o.shards, "shards", 8, "session owners (goroutines)")
	fs.IntVar(&o.maxFolds, "max-concurrent-folds", 0, "folds running at once (0 = auto: half the CPUs for the offline summarizer, 32 for a remote model)")
	fs.DurationVar(&o.foldTimeout, "fold-timeout", 60*time.Second, "bound on one fold, including the summarizer's retries")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 0, "fold lease; default fold-timeout + 15s")
	fs.DurationVar(&o.flushInterval, "flush-interval", time.Second, "under load, how long a session's change may wait for its checkpoint (and its ack); a quiet shard writes at once")
	fs.DurationVar(&o.idleCompact, "idle-compact", time.Second, "a session with no event for this long and nothing pending is kept in memory in a compact form, without its cached turn payloads (0 = off)")

	fs.StringVar(&o.summarizer, "summarizer", "auto", "auto (openai when an API key or base URL is set, else offline), offline or openai")
	fs.StringVar(&o.openaiBaseURL, "openai-base-url", "", "OpenAI-compatible base URL, e.g. http://localhost:11434/v1 for Ollama")
	fs.StringVar(&o.openaiModel, "openai-model", "gpt-4o-mini", "model (Azure: deployment name); a small, cheap one is normal")
	fs.StringVar(&o.openaiKey, "openai-api-key", "", "API key (or OPENAI_API_KEY)")
	fs.StringVar(&o.openaiOrg, "openai-org", "", "OpenAI organization")
	fs.StringVar(&o.openaiAPIType, "openai-api-type", "openai", "openai or azure")
	fs.StringVar(&o.azureAPIVersion, "azure-api-version", "", "Azure OpenAI API version")
	fs.DurationVar(&o.openaiTimeout, "openai-timeout", 30*time.Second, "per-call timeout")
	fs.Float64Var(&o.openaiTemperature, "openai-temperature", 0.2, "sampling temperature")
	fs.IntVar(&o.openaiMaxTokens, "openai-max-tokens", 0, "max output tokens (0 = derived from max-summary-chars)")
	fs.StringVar(&o.tokenizer, "tokenizer", "cl100k_base", "token counting: cl100k_base, o200k_base or heuristic (chars/4×1.2)")

	fs.IntVar(&o.partitions, "partitions", 0, "inbound partitions shared by several processor instances (0 = one consumer, a single instance); every instance must use the stream's value, and changing it is a migration (docs/deployment.md)")
	fs.DurationVar(&o.partitionTTL, "partition-ttl", 10*time.Second, "with --partitions: a dead instance's partitions move after this long (the ownership bucket's TTL, set when the bucket is created)")
	fs.StringVar(&o.instanceID, "instance-id", "", "with --partitions: this instance's name among the members, [A-Za-z0-9_-]{1,64} (default: host name and a random suffix)")

	fs.StringVar(&o.metricsAddr, "metrics-addr", defaultMetricsAddr, "Prometheus /metrics and /healthz listen address (empty disables; host:0 picks a free port; 0.0.0.0:9464 in a container)")
	fs.BoolVar(&o.service, "service", true, "serve the context and session request-reply service (NATS micro \"foldstream\") on <prefix>.svc.>")
	addLogFlags(fs, o, "info")
	return fs
}

// addConnFlags declares how to reach NATS and the subject prefix: what
// every subcommand needs. url is the --nats-url default.
func addConnFlags(fs *flag.FlagSet, o *options, url, urlUsage string) {
	fs.StringVar(&o.natsURL, "nats-url", url, urlUsage)
	fs.StringVar(&o.natsUser, "nats-user", "", "NATS user")
	fs.StringVar(&o.natsPassword, "nats-password", "", "NATS password")
	fs.StringVar(&o.natsToken, "nats-token", "", "NATS token")
	fs.StringVar(&o.natsNKey, "nats-nkey-seed", "", "path to an nkey seed file")
	fs.StringVar(&o.natsCreds, "nats-creds", "", "path to a NATS .creds file")
	fs.StringVar(&o.natsTLSCA, "nats-tls-ca", "", "CA certificate for the NATS server's TLS")
	fs.StringVar(&o.natsTLSCert, "nats-tls-cert", "", "client certificate for NATS mTLS")
	fs.StringVar(&o.natsTLSKey, "nats-tls-key", "", "client key for NATS mTLS")
	fs.StringVar(&o.inboxPrefix, "inbox-prefix", "", "subject prefix of this client's reply inboxes instead of _INBOX, e.g. _INBOX_processor: the shipped auth configs let each user read replies only under _INBOX_<user> (nats/README.md)")
	fs.StringVar(&o.prefix, "prefix", "fold", "subject prefix")
}

// addStoreFlag declares the embedded nats-server's store directory.
func addStoreFlag(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.storeDir, "store-dir", "./data", "JetStream store directory of the embedded nats-server")
}

func addLogFlags(fs *flag.FlagSet, o *options, level string) {
	fs.StringVar(&o.logLevel, "log-level", level, "debug, info, warn or error (transcript text is logged only at debug)")
	fs.BoolVar(&o.logPretty, "log-pretty", false, "human-readable console logs instead of JSON")
}

// defaultClientURL is where the tools (pub, tail, sessions, context, dlq)
// look for NATS by default: the embedded server of a processor started
// with the defaults.
const defaultClientURL = "nats://127.0.0.1:4222"

// newClientFlagSet declares the flags of a tool that talks to a running
// processor's NATS: connection, prefix and logging, nothing of the
// processor's own settings.
func newClientFlagSet(name string, o *options) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	addConnFlags(fs, o, defaultClientURL, "NATS server URL(s), comma-separated: the processor's (its embedded server listens on "+defaultClientURL+" by default)")
	addLogFlags(fs, o, "warn")
	return fs
}

// parseOptions applies flags, environment and config file in that order of
// precedence.
func parseOptions(fs *flag.FlagSet, o *options, args []string, env func(string) string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if env == nil {
		env = os.Getenv
	}
	var fileErr error
	if o.configFile != "" {
		fileErr = applyConfigFile(fs, o, set)
	}
	if fileErr != nil {
		return fileErr
	}
	var envErr error
	for _, flags := range []*flag.FlagSet{fs, o.settings} {
		if flags == nil {
			continue
		}
		flags.VisitAll(func(f *flag.Flag) {
			if set[f.Name] || envErr != nil {
				return
			}
			name := "FOLDSTREAM_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
			if v := env(name); v != "" {
				if err := f.Value.Set(v); err != nil {
					envErr = fmt.Errorf("environment %s=%q: %w", name, v, err)
				}
			}
		})
	}
	if envErr != nil {
		return envErr
	}
	o.logLevelSet = set["log-level"] || env("FOLDSTREAM_LOG_LEVEL") != ""
	if o.openaiKey == "" {
		o.openaiKey = env("OPENAI_API_KEY")
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return nil
}

func applyConfigFile(fs *flag.FlagSet, o *options, set map[string]bool) error {
	data, err := os.ReadFile(o.configFile)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("config file %s: expected a JSON object: %w", o.configFile, err)
	}
	for key, val := range raw {
		if key == "prompts" {
			if err := json.Unmarshal(val, &o.prompts); err != nil {
				return fmt.Errorf("config file %s: \"prompts\": expected an object of template name to template text: %w", o.configFile, err)
			}
			continue
		}
		f := fs.Lookup(key)
		if f == nil && o.settings != nil {
			f = o.settings.Lookup(key)
		}
		if f == nil || key == "config" {
			return fmt.Errorf("config file %s: unknown setting %q (settings are the flag names, e.g. \"recent-window\")", o.configFile, key)
		}
		if set[key] {
			continue // the command line wins
		}
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			s = strings.TrimSpace(string(val)) // numbers and booleans
		}
		if err := f.Value.Set(s); err != nil {
			return fmt.Errorf("config file %s: %q: %w", o.configFile, key, err)
		}
	}
	return nil
}
