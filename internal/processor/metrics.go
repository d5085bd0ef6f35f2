package processor

import (
	"sync/atomic"

	"github.com/foldstream/foldstream/internal/events"
	"github.com/foldstream/foldstream/internal/retry"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are registered on the registry passed in (never the global one).
type metrics struct {
	events      *prometheus.CounterVec        // by kind
	applied     map[string]prometheus.Counter // events' children, resolved once: this runs per event
	rejected    *prometheus.CounterVec        // by code
	deadLetters *prometheus.CounterVec        // by what was kept: copy, reference, log
	duplicates  prometheus.Counter
	redelivered prometheus.Counter
	folds       *prometheus.CounterVec // by outcome: started, completed, failed, discarded, superseded
	recovered   prometheus.Counter     // summaries found on the outbound stream and adopted
	skips       *prometheus.CounterVec // by reason
	foldLatency prometheus.Histogram
	checkpoints *prometheus.CounterVec // by outcome: ok, conflict, error
	liveSess    prometheus.Gauge
	packedSess  prometheus.Gauge   // of liveSess, those in their compact idle form
	unpacked    prometheus.Counter // packed sessions unpacked by an event or a wake
	memReleases prometheus.Counter
	inFlight    prometheus.Gauge
	rewinds     prometheus.Counter
	loadRetries prometheus.Counter     // checkpoint reads tried again (load.go)
	quarantined prometheus.Counter     // checkpoints that could not be decoded (load.go)
	panics      prometheus.Counter     // summarizer calls that panicked, each a failed fold (folding.go)
	sumTokens   *prometheus.CounterVec // by kind: input, output (provider-reported)
	foldedToks  prometheus.Counter
	memories    prometheus.Counter
	// breaker is the summarizer's breaker, read by the breaker gauges (one
	// per process: the engines of one process share it).
	breaker      atomic.Pointer[retry.Breaker]
	breakerState prometheus.GaugeFunc
	breakerOpens prometheus.CounterFunc
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		events:      prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "events_applied_total", Help: "Inbound events applied, by kind."}, []string{"kind"}),
		rejected:    prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "events_rejected_total", Help: "Inbound events dead-lettered, by code."}, []string{"code"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "dead_letters_total", Help: "Rejected events by what the dead-letter stream kept: copy (the payload unchanged), reference (the copy could not be stored: provenance and a preview), log (nothing could be stored: the error log line is the reference)."}, []string{"kept"}),
		duplicates:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "turns_duplicate_total", Help: "Turns ignored because their turn_id was already applied."}),
		redelivered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "events_redelivered_total", Help: "Redelivered events skipped because their sequence was already applied."}),
		folds:       prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "folds_total", Help: "Folds by outcome."}, []string{"outcome"}),
		skips:       prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "compaction_skipped_total", Help: "Trigger checks that did not fold, by reason."}, []string{"reason"}),
		foldLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "foldstream", Name: "fold_duration_seconds", Help: "Fold duration from start to summary published.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		checkpoints: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "checkpoints_total", Help: "Checkpoint writes by outcome."}, []string{"outcome"}),
		liveSess:    prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "sessions_in_memory", Help: "Sessions held in memory."}),
		packedSess:  prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "sessions_packed", Help: "Sessions in memory that are idle and held in their compact form (part of sessions_in_memory)."}),
		unpacked:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "sessions_unpacked_total", Help: "Idle sessions unpacked again by an event or a wake."}),
		memReleases: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "memory_releases_total", Help: "Times the heap freed by packing idle sessions was returned to the OS."}),
		inFlight:    prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "foldstream", Name: "folds_in_flight", Help: "Folds running now."}),
		sumTokens:   prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "foldstream", Name: "summarizer_tokens_total", Help: "Tokens the summarizer provider reported, by kind (input, output); 0 for the offline summarizer."}, []string{"kind"}),
		foldedToks:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "folded_tokens_total", Help: "Tokens of the turns and notes folded (the model-cost baseline: input tokens per folded token)."}),
		recovered:   prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "summaries_recovered_total", Help: "Summaries found on the outbound stream that no checkpoint had recorded (their owner stopped first), adopted instead of folding the batch again."}),
		memories:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "memories_published_total", Help: "Memories published (after deduplication against the session's earlier ones)."}),
		quarantined: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "checkpoints_quarantined_total", Help: "Session checkpoints that could not be decoded: kept on the dead-letter stream and rebuilt from the streams."}),
		rewinds:     prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "consumer_rewinds_total", Help: "Times the consumer was re-attached at the ack floor after a state error."}),
		panics:      prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "summarizer_panics_total", Help: "Summarizer calls that panicked: each is a failed fold of its session (folds_total{outcome=\"failed\"}), retried after its backoff; the process goes on."}),
		loadRetries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "session_load_retries_total", Help: "Session checkpoint reads that failed for a reason another try may fix and were tried again for that session alone (its events waiting, other sessions going on)."}),
	}
	m.breakerState = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "foldstream", Name: "summarizer_breaker_state",
		Help: "The summarizer's circuit breaker: 0 closed (calls go through), 1 open (the endpoint refused with an error no retry fixes: auth, model not found, repeated bad requests; no calls), 2 half-open (one probe call)."},
		func() float64 {
			if b := m.breaker.Load(); b != nil {
				return float64(b.State())
			}
			return 0
		})
	m.breakerOpens = prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "foldstream", Name: "summarizer_breaker_opened_total",
		Help: "Times the summarizer's circuit breaker opened."},
		func() float64 {
			if b := m.breaker.Load(); b != nil {
				return float64(b.Opens())
			}
			return 0
		})
	m.applied = map[string]prometheus.Counter{}
	for _, kind := range []string{events.KindTurn, events.KindNote, events.KindControl} {
		m.applied[kind] = m.events.WithLabelValues(kind)
	}
	if reg != nil {
		reg.MustRegister(m.events, m.rejected, m.deadLetters, m.duplicates, m.redelivered, m.folds, m.skips, m.foldLatency, m.checkpoints, m.liveSess, m.packedSess, m.unpacked, m.memReleases, m.inFlight, m.rewinds, m.loadRetries, m.sumTokens, m.foldedToks, m.memories, m.recovered, m.quarantined, m.panics,
			m.breakerState, m.breakerOpens)
	}
	return m
}
