package service_test

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/foldstream/foldstream/client"
	"github.com/foldstream/foldstream/internal/processor"
	"github.com/foldstream/foldstream/internal/service"
	"github.com/foldstream/foldstream/internal/service/servicetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// embeddingsServer is an OpenAI-compatible /embeddings endpoint in
// process: a word's concept (synonyms share one) is one of 16 dimensions,
// so "automobile" and "car" are near while their words differ. It counts
// the inputs it embedded and fails with a 500 while failing is set.
type embeddingsServer struct {
	*httptest.Server
	mu      sync.Mutex
	inputs  int
	failing bool
}

var concepts = map[string]int{"car": 0, "automobile": 0, "vehicle": 0, "parked": 1, "parking": 1}

func newEmbeddingsServer(t *testing.T) *embeddingsServer {
	es := &embeddingsServer{}
	es.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		es.mu.Lock()
		failing := es.failing
		es.mu.Unlock()
		if failing || r.URL.Path != "/v1/embeddings" {
			http.Error(w, `{"error":{"message":"down","type":"server_error"}}`, http.StatusInternalServerError)
			return
		}
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "embed-test" {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		type item struct {
			Object    string    `json:"object"`
			Embedding []float32 `json:"embedding"`
			Index     int       `json:"index"`
		}
		var data []item
		for i, text := range req.Input {
			v := make([]float32, 16)
			for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return r < 'a' || r > 'z' }) {
				if c, ok := concepts[w]; ok {
					v[c] += 3
					continue
				}
				h := fnv.New32a()
				h.Write([]byte(w))
				v[2+h.Sum32()%14] += 0.2
			}
			data = append(data, item{"embedding", v, i})
		}
		es.mu.Lock()
		es.inputs += len(req.Input)
		es.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
	}))
	t.Cleanup(es.Close)
	return es
}

func (es *embeddingsServer) embedded() int {
	es.mu.Lock()
	defer es.mu.Unlock()
	return es.inputs
}

func (es *embeddingsServer) fail(on bool) {
	es.mu.Lock()
	defer es.mu.Unlock()
	es.failing = on
}

// With an embeddings endpoint, a question finds an earlier turn that
// says the same with other words (hybrid ranking); the vectors are kept,
// so a restarted service embeds only the question; an endpoint that
// fails leaves BM25 to rank, with a metric, never an error.
func TestHybridRankingWithAnEmbeddingsEndpoint(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.StartProcessor(processor.Config{}, nil)
	// Turns not folded yet: the summary does not say them.
	publishWith(t, e, "s1", 0, 64, map[int]string{41: "I left the car behind the station.", 55: "Where is the automobile museum?"})
	e.Settled("s1", 64, 10)
	es := newEmbeddingsServer(t)
	cfg := service.EmbeddingsConfig{BaseURL: es.URL + "/v1", APIKey: "test", Model: "embed-test"}
	ctx := context.Background()
	req := client.ContextRequest{Session: "s1", Query: "Where did she leave the automobile?", BudgetChars: 3000}

	plain, err := direct(t, e).Context(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := matchedTurns(plain); slices.Contains(got, "t041") {
		t.Fatalf("BM25 alone matched %v: turn 41 shares no word with the question", got)
	}
	reg := prometheus.NewRegistry()
	hybrid := direct(t, e, service.Embeddings(cfg), service.Registerer(reg))
	c, err := hybrid.Context(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	checkQueryContext(t, c, 3000)
	if got := matchedTurns(c); !slices.Contains(got, "t041") || !slices.Contains(shownTurns(c), "t055") {
		t.Fatalf("hybrid matched %v, want t041 (the car, by meaning) and t055 (automobile, by word) shown", got)
	}
	first := es.embedded()
	if first < 64+1 {
		t.Fatalf("%d texts embedded, want every turn and the question", first)
	}

	// A restart: the vectors come from the bucket; only the question is
	// embedded.
	again, err := direct(t, e, service.Embeddings(cfg)).Context(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := es.embedded() - first; n != 1 {
		t.Fatalf("after a restart %d texts embedded, want 1 (the question)", n)
	}
	if !slices.Equal(recalledIndices(again), recalledIndices(c)) {
		t.Fatalf("after a restart recalled %v, before %v", recalledIndices(again), recalledIndices(c))
	}

	// The endpoint fails: BM25 ranks, the builder gets its context.
	es.fail(true)
	c, err = hybrid.Context(ctx, req)
	if err != nil {
		t.Fatalf("a failing endpoint must not fail the context: %v", err)
	}
	if !slices.Equal(recalledIndices(c), recalledIndices(plain)) {
		t.Fatalf("endpoint down: recalled %v, want BM25's %v", recalledIndices(c), recalledIndices(plain))
	}
	if n := testutil.ToFloat64(mustCounter(t, reg, "foldstream_recall_embeddings_failures_total")); n < 1 {
		t.Fatalf("failures metric %v", n)
	}
}

func mustCounter(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: name})
			c.Add(mf.GetMetric()[0].GetCounter().GetValue())
			return c
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// Memories that cannot be read leave the context to the excerpts, with a
// warning and a metric, never an error for the builder.
func TestUnreadableMemoriesFallBackToExcerpts(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	_, stop := e.StartProcessor(processor.Config{}, nil)
	publishWith(t, e, "s1", 0, 64, queryTexts)
	e.Settled("s1", 64, 10)
	stop()
	if err := e.JS.DeleteStream(context.Background(), e.Layout.Out); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	c, err := direct(t, e, service.Registerer(reg)).Context(context.Background(),
		client.ContextRequest{Session: "s1", Query: "When is the tournament form due?", BudgetChars: 3000})
	if err != nil {
		t.Fatal(err)
	}
	checkQueryContext(t, c, 3000)
	// The question (3) as an excerpt with its answer (4), and 6 as an
	// excerpt, each unless the summary says it already (no memory to
	// show it).
	got := recalledIndices(c)
	inSummary := func(s string) bool { return c.Summary != nil && strings.Contains(c.Summary.Summary, s) }
	if !(slices.Contains(got, 3) && slices.Contains(got, 4)) && !inSummary("tournament form") ||
		!slices.Contains(got, 6) && !inSummary("Saturday in Lisbon") {
		t.Fatalf("recalled %v, want the excerpts 3, 4 and 6 (each or in the summary)\n%s", got, c.Prompt())
	}
	if n := testutil.ToFloat64(mustCounter(t, reg, "foldstream_recall_memories_failures_total")); n != 1 {
		t.Fatalf("memory failures metric %v, want 1", n)
	}
}
