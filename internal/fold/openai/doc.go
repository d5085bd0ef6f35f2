// Package openai is the "openai" summarizer backend: any OpenAI-compatible
// chat-completions endpoint, through github.com/sashabaranov/go-openai.
//
// # Pointing it at a provider
//
// The backend only needs a base URL that serves POST {base}/chat/completions
// (or Azure's deployment path), a model name, and a key when the server
// checks one.
//
// OpenAI:
//
//	BaseURL: "" (defaults to https://api.openai.com/v1)
//	APIKey:  "sk-…" (required), Org optional
//	Model:   "gpt-4o-mini" (a small, cheap model is enough for summaries)
//
// Azure OpenAI:
//
//	APIType:         "azure"
//	BaseURL:         "https://<resource>.openai.azure.com"
//	APIKey:          the resource key (sent as the api-key header)
//	Model:           the deployment name, not the model name
//	AzureAPIVersion: "" (defaults to 2024-10-21)
//
// Requests go to {BaseURL}/openai/deployments/{Model}/chat/completions?api-version=….
//
// Ollama (OpenAI compatibility layer):
//
//	BaseURL: "http://localhost:11434/v1"
//	APIKey:  "" (ignored by Ollama; any value works)
//	Model:   a pulled tag, e.g. "llama3.2:3b" or "qwen2.5:7b"
//
// Ollama silently truncates prompts beyond the model's num_ctx (2048–4096
// by default) instead of failing; raise num_ctx in a Modelfile for large
// fold batches.
//
// vLLM (vllm serve <model>):
//
//	BaseURL: "http://localhost:8000/v1"
//	APIKey:  the --api-key value if the server was started with one, else ""
//	Model:   the served model name, e.g. "Qwen/Qwen2.5-7B-Instruct"
//	         (or the --served-model-name alias)
//
// llama.cpp server (llama-server -m model.gguf):
//
//	BaseURL: "http://localhost:8080/v1"
//	APIKey:  the --api-key value if set, else ""
//	Model:   any string; the server answers with the loaded model
//
// # Budget, retries and failures
//
// max_tokens is derived from the fold's char budget (MaxTokens: ≈ chars/4
// × 0.9, at least 32) unless Config.MaxOutputTokens is set; the engine owns
// what happens when a summary is still too long (fold.Summarize). Model
// families that reject max_tokens (o1/o3/o4/gpt-5/gpt-6) get
// max_completion_tokens and no temperature instead; that cap also covers
// their hidden reasoning tokens, so set MaxOutputTokens generously for them
// (an answer cut to nothing fails as invalid_output). On Azure the model
// field is a deployment name, so this detection only works when the
// deployment is named after its model.
//
// Each HTTP call is bounded by Config.Timeout; the whole Summarize call is
// bounded by the caller's ctx (the fold lease). Timeouts, 429 (honouring
// Retry-After / retry-after-ms), 5xx and connection errors are retried per
// Config.Retry; other 4xx are not. go-openai does not expose response
// headers on errors, so the HTTP client is wrapped to copy each response's
// headers into a per-call slot in the request context.
//
// Answers that are empty, filtered (finish_reason content_filter), echo the
// prompt or read like an error/refusal fail with class invalid_output,
// without a retry (see Summarizer.Summarize). An optional <memories> block
// after the summary is parsed into Result.Memories and stripped; each
// memory is also a Result.MemoryItems entry, attributed to the batch's
// speaker whose name it opens with and to their turn that shares the most
// words with it (memories.go).
//
// Logs: each retry is logged at warn with model, error_class, retryable,
// attempt and wait_ms. Prompt and answer text appear only at debug level.
package openai
