package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/fold"
	"github.com/foldstream/foldstream/internal/service"
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

	// policy holds the modes' per-session settings: their flags
	// (events.Settings) set its fields.
	policy           fold.Policy
	trigger, profile string

	mode                                 string
	contextSources                       string
	keepEnded                            bool
	shards, maxFolds                     int
	foldTimeout, leaseTTL, flushInterval time.Duration
	idleCompact                          time.Duration
	maxClockSkew                         time.Duration

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
	// recallIndexBytes is the context service's recall index budget.
	recallIndexBytes int64
	// recallStoreBytes bounds the KV bucket of persisted recall indexes.
	recallStoreBytes int64
	// recallStoreMemory keeps that bucket in the server's memory.
	recallStoreMemory bool
	// embeddings*: the optional embeddings endpoint for hybrid recall.
	embeddingsURL, embeddingsModel, embeddingsKey string
	logLevel                                      string
	logPretty                                     bool

	prompts map[string]string // from the config file only

	ui uiOptions // the session inspector (ui.go)

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

	o.policy = fold.DefaultPolicy()
	for _, s := range events.Settings {
		if s.Flag != "" {
			fs.Var(&settingFlag{s: s, p: &o.policy}, s.Flag, s.Usage())
		}
	}
	fs.StringVar(&o.trigger, "trigger", "turn", "when to check for a fold: turn (every turn) or generate (on generate control events)")
	fs.StringVar(&o.profile, "profile", "voice", "default prompt profile: voice or agent")
	fs.StringVar(&o.mode, "mode", string(fold.DefaultMode), "default mode: "+modesUsage()+"; sessions may override it with a configure control")
	fs.StringVar(&o.contextSources, "context-sources", "", "mode interval: context sources asked at each fold, a JSON array [{label, subject, prompt, timeout}] or a path to a file holding it (docs/context-sources.md)")
	fs.BoolVar(&o.keepEnded, "keep-ended", false, "keep an ended session's checkpoint as it is instead of the final fold, archive and clear")
	fs.IntVar(&o.shards, "shards", 8, "session owners (goroutines)")
	fs.IntVar(&o.maxFolds, "max-concurrent-folds", 0, "folds running at once (0 = auto: half the CPUs for the offline summarizer, 32 for a remote model)")
	fs.DurationVar(&o.foldTimeout, "fold-timeout", 60*time.Second, "bound on one fold, including the summarizer's retries")
	fs.DurationVar(&o.leaseTTL, "lease-ttl", 0, "fold lease; default fold-timeout + 15s")
	fs.DurationVar(&o.flushInterval, "flush-interval", time.Second, "under load, how long a session's change may wait for its checkpoint (and its ack); a quiet shard writes at once when nothing more waits on the stream")
	fs.DurationVar(&o.maxClockSkew, "max-clock-skew", events.DefaultMaxClockSkew, "an event whose at is further than this ahead of the time the stream stored it is rejected (invalid_field, at): reset policies measure time by at (0 = accept any time)")
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
	fs.StringVar(&o.embeddingsURL, "embeddings-url", "", "OpenAI-compatible embeddings API base URL (e.g. https://api.openai.com/v1) for hybrid ranking (BM25 + vectors) of question-aware contexts; empty: BM25 only, no network")
	fs.StringVar(&o.embeddingsModel, "embeddings-model", "text-embedding-3-small", "with --embeddings-url: the embeddings model")
	fs.StringVar(&o.embeddingsKey, "embeddings-api-key", "", "with --embeddings-url: its API key")
	fs.Int64Var(&o.recallIndexBytes, "recall-index-bytes", service.DefaultIndexBytes, "memory budget of the service's recall index (question-aware contexts and recall), least recently used sessions evicted first; 0 keeps no index (every request scans the session's stream)")
	fs.BoolVar(&o.recallStoreMemory, "recall-index-store-memory", false, "keep the persisted recall indexes in the server's memory (KV bucket <BASE>_RECALL_MEM, up to --recall-index-store-bytes of it) instead of its files: a load reads no file-store block, the entries are lost when the server restarts (those sessions' indexes are then rebuilt from the stream)")
	fs.Int64Var(&o.recallStoreBytes, "recall-index-store-bytes", service.DefaultIndexStoreBytes, "size bound of the KV bucket <BASE>_RECALL (<BASE>_RECALL_MEM with --recall-index-store-memory, where it must fit the server's and the account's max_mem) in which the service persists each session's recall index, so that the first question after a restart, an eviction or on another instance loads it instead of scanning the session's stream; 0 persists nothing")
	addUIFlags(fs, &o.ui)
	addLogFlags(fs, o, "info")
	return fs
}

// settingFlag is the flag of a mode's per-session setting, derived from
// its declaration (events.Settings): name, usage, and the default of
// fold.DefaultPolicy, which it sets in the policy it writes. The config
// file key is the flag's name, the environment variable
// FOLDSTREAM_<FLAG>. A setting in seconds is a duration flag.
type settingFlag struct {
	s events.Setting
	p *fold.Policy
}

func (f *settingFlag) String() string {
	if f == nil || f.p == nil {
		return "" // the flag package's zero value, for its usage
	}
	switch v := f.p.Field(f.s.Key).(type) {
	case *int:
		return strconv.Itoa(*v)
	case *float64:
		return strconv.FormatFloat(*v, 'g', -1, 64)
	case *time.Duration:
		return v.String()
	}
	return ""
}

// Set parses text in the setting's unit (a duration for seconds) and
// checks it against the declared range (events.Setting.Check) before it
// writes the policy.
func (f *settingFlag) Set(text string) error {
	var v float64
	switch f.p.Field(f.s.Key).(type) {
	case *int:
		n, err := strconv.ParseInt(text, 0, strconv.IntSize)
		if err != nil {
			return errors.New("expected an integer")
		}
		v = float64(n)
	case *float64:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return errors.New("expected a number")
		}
		v = x
	case *time.Duration:
		d, err := time.ParseDuration(text)
		if err != nil {
			return errors.New("expected a duration such as 90s or 5m")
		}
		v = d.Seconds()
	default:
		return fmt.Errorf("setting %s has no field in the fold policy", f.s.Key) // a programming error
	}
	if err := f.s.Check(v); err != nil {
		return err
	}
	// 0 in a configure keeps the deployment's value; the deployment's own
	// value has none to keep, so where 0 is not a value of the setting (nor
	// a rule, as the default 0 of reserve_tokens is, nor a duration, whose 0
	// turns the feature off for the deployment: --idle-after 0) it is out
	// of range.
	if v == 0 && !f.s.ZeroIsValue && f.s.Default() != 0 && f.s.Unit != events.Seconds {
		want := fmt.Sprintf("%g..%g %s", f.s.Min, f.s.Max, f.s.Unit)
		if f.s.Exclusive {
			want = fmt.Sprintf("a %s between %g and %g, exclusive", f.s.Unit, f.s.Min, f.s.Max)
		}
		return &events.ValidationError{Code: events.CodeInvalidField, Field: f.s.Key,
			Reason: fmt.Sprintf("expected %s (the default is %g), got 0", want, f.s.Default())}
	}
	f.p.Apply(f.s.Key, v)
	return nil
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
	return parseArgs(fs, o, args, env, nil)
}

// parseSessionOptions is parseOptions for a subcommand that takes a
// session: the session may be given as its one positional argument, before
// or after the flags (processor context my-session --query q), or with
// --session.
func parseSessionOptions(fs *flag.FlagSet, o *options, args []string, session *string) error {
	return parseArgs(fs, o, args, nil, session)
}

// parseArgs parses flags and positional arguments in any order ("--" ends
// the flags); the one positional argument allowed is the session, when
// session is not nil.
func parseArgs(fs *flag.FlagSet, o *options, args []string, env func(string) string, session *string) error {
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return err
		}
		left := fs.Args()
		if len(left) == 0 {
			break
		}
		if n := len(rest) - len(left); n > 0 && rest[n-1] == "--" {
			positional = append(positional, left...)
			break
		}
		positional, rest = append(positional, left[0]), left[1:]
	}
	if session != nil && len(positional) == 1 {
		if *session != "" && *session != positional[0] {
			return fmt.Errorf("session: given twice, as %q and as --session %q: expected one", positional[0], *session)
		}
		if err := fs.Set("session", positional[0]); err != nil {
			return err
		}
		positional = nil
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
	if len(positional) > 0 {
		return fmt.Errorf("unexpected arguments: %v", positional)
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

// modesUsage lists the registered modes (fold.Engines).
func modesUsage() string { return strings.Join(fold.ModeNames(), ", ") }
