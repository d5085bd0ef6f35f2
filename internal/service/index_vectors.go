package service

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	goopenai "github.com/sashabaranov/go-openai"
)

// Hybrid ranking (optional): with an OpenAI-compatible embeddings endpoint
// configured (Embeddings), the question-aware context ranks earlier turns
// by BM25 and by cosine similarity of embeddings, fused by reciprocal rank
// (rrfK). Turns are embedded as they are indexed (at most
// maxEmbedPerRequest per request, the rest at the next ones) and their
// vectors kept in the KV bucket <BASE>_VECTORS, keyed by session and
// stream sequence, so that a restart or an eviction reloads them instead
// of embedding everything again. Any failure of the endpoint (or of the
// bucket) degrades to BM25 alone, with a warning and a metric, never to
// an error for the builder. Without an endpoint the service stays offline:
// BM25, no network.

// EmbeddingsConfig configures the embeddings endpoint.
type EmbeddingsConfig struct {
	// BaseURL of the OpenAI-compatible API (e.g. https://api.openai.com/v1).
	BaseURL string
	APIKey  string
	Model   string
	// Timeout bounds one call (5 s when 0).
	Timeout time.Duration
	// HTTPClient, if set, makes the calls.
	HTTPClient *http.Client
}

// Embeddings enables hybrid ranking with the endpoint cfg describes.
func Embeddings(cfg EmbeddingsConfig) Option { return func(s *server) { s.embedCfg = &cfg } }

const (
	// rrfK is reciprocal rank fusion's constant (the usual 60).
	rrfK = 60
	// vectorHits is how many nearest turns the vector ranking adds.
	vectorHits = 50
	// maxEmbedPerRequest bounds the turns embedded in one request;
	// embedBatch the inputs of one call.
	maxEmbedPerRequest = 512
	embedBatch         = 128
)

type vectors struct {
	client *goopenai.Client
	model  string
	// modelTag prefixes every stored vector: a vector of another model is
	// not used.
	modelTag string
	timeout  time.Duration
	bucket   string

	mu sync.Mutex
	kv jetstream.KeyValue // opened on first use

	failures, embedded prometheus.Counter
}

func newVectors(cfg EmbeddingsConfig, bucket string, reg prometheus.Registerer) (*vectors, error) {
	if cfg.BaseURL == "" || cfg.Model == "" {
		return nil, errors.New("service: embeddings: a base URL and a model are required")
	}
	cc := goopenai.DefaultConfig(cfg.APIKey)
	cc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.HTTPClient != nil {
		cc.HTTPClient = cfg.HTTPClient
	}
	v := &vectors{client: goopenai.NewClientWithConfig(cc), model: cfg.Model, modelTag: cfg.Model + "\n",
		timeout: cmp.Or(cfg.Timeout, 5*time.Second), bucket: bucket,
		failures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_embeddings_failures_total",
			Help: "Calls to the embeddings endpoint (or vector bucket operations) that failed; the context was ranked by BM25 alone."}),
		embedded: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "foldstream", Name: "recall_embedded_total",
			Help: "Texts embedded (turns and queries)."}),
	}
	if reg != nil {
		reg.MustRegister(v.failures, v.embedded)
	}
	return v, nil
}

// embed returns the embeddings of texts, in order.
func (v *vectors) embed(ctx context.Context, texts []string) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, v.timeout)
	defer cancel()
	res, err := v.client.CreateEmbeddings(ctx, goopenai.EmbeddingRequestStrings{Input: texts, Model: goopenai.EmbeddingModel(v.model)})
	if err != nil {
		return nil, err
	}
	out := make([][]float32, len(texts))
	for _, d := range res.Data {
		if d.Index < 0 || d.Index >= len(out) || len(d.Embedding) == 0 {
			return nil, fmt.Errorf("embeddings: bad item %d of %d", d.Index, len(out))
		}
		out[d.Index] = normalize(d.Embedding)
	}
	for i, e := range out {
		if e == nil {
			return nil, fmt.Errorf("embeddings: no vector for input %d", i)
		}
	}
	v.embedded.Add(float64(len(texts)))
	return out, nil
}

func normalize(e []float32) []float32 {
	var n float64
	for _, x := range e {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return e
	}
	inv := float32(1 / math.Sqrt(n))
	out := make([]float32, len(e))
	for i, x := range e {
		out[i] = x * inv
	}
	return out
}

func (v *vectors) store(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.kv != nil {
		return v.kv, nil
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: v.bucket, History: 1,
		Description: "foldstream: embeddings of session turns for hybrid recall (keyed <session>.<inbound seq>)"})
	if err != nil {
		return nil, fmt.Errorf("vector bucket %s: %w", v.bucket, err)
	}
	v.kv = kv
	return kv, nil
}

func vectorKey(session string, seq uint64) string { return session + "." + strconv.FormatUint(seq, 10) }

// A stored vector is "<model>\n<turn_id>\n" then the float32s, little
// endian: a vector of another model, or of another turn at the same
// sequence (a stream created again), is not used.
func (v *vectors) encode(turnID string, e []float32) []byte {
	b := make([]byte, 0, len(v.modelTag)+len(turnID)+1+4*len(e))
	b = append(b, v.modelTag...)
	b = append(b, turnID...)
	b = append(b, '\n')
	for _, x := range e {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func (v *vectors) decode(b []byte) (turnVector, bool) {
	if !strings.HasPrefix(string(b[:min(len(b), len(v.modelTag))]), v.modelTag) {
		return turnVector{}, false // another model's
	}
	b = b[len(v.modelTag):]
	nl := slices.Index(b, '\n')
	if nl < 0 || (len(b)-nl-1)%4 != 0 {
		return turnVector{}, false // damaged
	}
	tv := turnVector{turnID: string(b[:nl])}
	b = b[nl+1:]
	tv.v = make([]float32, len(b)/4)
	for i := range tv.v {
		tv.v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return tv, true
}

// turnVector is a turn's embedding and the turn id it was made for.
type turnVector struct {
	turnID string
	v      []float32
}

// vectorOf is doc d's vector, if it has one of its own.
func (rp *replay) vectorOf(d int) []float32 {
	doc := rp.idx.doc(d)
	if tv, ok := rp.vecs[doc.seq]; ok && tv.turnID == rp.idx.turn(d).TurnID {
		return tv.v
	}
	return nil
}

// sync gives the replay's live turns their vectors: loaded from the
// bucket once per replay, embedded (and stored) for the turns that have
// none, at most maxEmbedPerRequest a call. A failure is returned for the
// caller to warn about; what was done stays.
func (v *vectors) sync(ctx context.Context, js jetstream.JetStream, rp *replay) error {
	kv, err := v.store(ctx, js)
	if err != nil {
		return err
	}
	if rp.vecs == nil {
		rp.vecs = map[uint64]turnVector{}
		w, err := kv.WatchFiltered(ctx, []string{rp.session + ".>"}, jetstream.IgnoreDeletes())
		if err != nil {
			return fmt.Errorf("loading vectors of session %s: %w", rp.session, err)
		}
		for e := range w.Updates() {
			if e == nil {
				break // every stored value delivered
			}
			seq, err := strconv.ParseUint(strings.TrimPrefix(e.Key(), rp.session+"."), 10, 64)
			if tv, ok := v.decode(e.Value()); err == nil && ok {
				rp.vecs[seq] = tv
				rp.vecBytes += int64(4*len(tv.v) + len(tv.turnID) + 64)
			}
		}
		_ = w.Stop()
	}
	var missing []int
	for d := rp.live(); d < rp.idx.ndocs() && len(missing) < maxEmbedPerRequest; d++ {
		if rp.vectorOf(d) == nil {
			missing = append(missing, d)
		}
	}
	for len(missing) > 0 {
		batch := missing[:min(embedBatch, len(missing))]
		missing = missing[len(batch):]
		texts := make([]string, len(batch))
		for i, d := range batch {
			t := rp.idx.turn(d)
			texts[i] = t.Speaker + ": " + t.Text
		}
		vecs, err := v.embed(ctx, texts)
		if err != nil {
			return err
		}
		for i, d := range batch {
			doc, id := rp.idx.doc(d), rp.idx.turn(d).TurnID
			rp.vecs[doc.seq] = turnVector{turnID: id, v: vecs[i]}
			rp.vecBytes += int64(4*len(vecs[i]) + len(id) + 64)
			if _, err := kv.Put(ctx, vectorKey(rp.session, doc.seq), v.encode(id, vecs[i])); err != nil {
				return fmt.Errorf("storing a vector in %s: %w", v.bucket, err)
			}
		}
	}
	return nil
}

// fuse ranks docs [lo, n) by reciprocal rank fusion of the BM25 hits and
// the vectorHits nearest turns to the query's embedding q.
func fuse(rp *replay, bm25 []hit, q []float32, lo, n int) []hit {
	type sim struct {
		doc int
		cos float64
	}
	var sims []sim
	for d := lo; d < n; d++ {
		e := rp.vectorOf(d)
		if len(e) != len(q) {
			continue
		}
		var dot float64
		for i := range e {
			dot += float64(e[i]) * float64(q[i])
		}
		sims = append(sims, sim{d, dot})
	}
	slices.SortFunc(sims, func(a, b sim) int { return cmp.Or(cmp.Compare(b.cos, a.cos), cmp.Compare(b.doc, a.doc)) })
	score := map[int]float64{}
	for r, h := range bm25 {
		score[h.doc] += 1 / float64(rrfK+r+1)
	}
	for r, s := range sims[:min(len(sims), vectorHits)] {
		score[s.doc] += 1 / float64(rrfK+r+1)
	}
	out := make([]hit, 0, len(score))
	for d, s := range score {
		out = append(out, hit{doc: d, score: s})
	}
	slices.SortFunc(out, func(a, b hit) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.doc, a.doc)) })
	return out
}
