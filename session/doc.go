// Package session is the session server: it sits between agent harnesses
// and an inference engine and records, per conversation, the token ids the
// policy saw and produced (TITO), so that a trainer gets exactly those
// tokens back as samples with loss masks and logprobs.
//
// Server is an http.Handler. Its routes follow Miles's session server, so
// that a Miles-style trainer can point at it:
//
//	GET    /health                              {"status":"ok","session_server_instance_id":...}
//	POST   /sessions                            {"session_id": "<32 hex>", "base_url"?: external URL/sessions/<id>/v1}
//	GET    /sessions/{id}                       records and metadata (accumulated ids, mismatches)
//	DELETE /sessions/{id}                       204, after any in-flight turn's commit
//	POST   /sessions/{id}/v1/chat/completions   a TITO-recorded turn
//	POST   /sessions/{id}/v1/messages           the same, in Anthropic's Messages API
//	POST   /sessions/{id}/samples               {"max_seq_len"?} -> safetensors, or JSON lines
//	ANY    /sessions/{id}/{path...}             relayed to the engine
//	GET    /metrics                             Prometheus
//
// A turn: the session's prompt ids are prepared under the session's lock
// (tito.Trajectory.Prepare: rollback, increment, family boundary), the
// engine is called without the lock (the prompt goes as input_ids, with
// the routing header X-SMG-Routing-Key: <session id>), and the reply is
// committed under the lock again after the prefix invariant holds; a
// session that changed or is closing meanwhile is left as it is. A client
// that asks to stream gets the whole reply as one SSE chunk. Errors are
// {"error": msg}: 404 unknown session, 400 invalid request, a history
// rewritten more than one turn back, a prompt over the session's tokens or
// a relayed path that could leave the engine's base path, 500 tokenization
// (a broken prefix names the first differing position), 502 engine
// failure, 413 a body over the limit, 429 too many sessions, 401 without a
// valid key when keys are configured. A reply other than 200 from the
// engine passes through and is not recorded.
//
// Memory is bounded per request and in all (bounds.go): a body declared
// over MaxBodyBytes is refused before it is read; bodies are counted as
// they arrive, at most MaxBufferedBytes in all and twice MaxBodyBytes per
// session (past either, 503 or 429 with Retry-After); at most
// MaxTokenizingBytes of bodies are parsed and tokenized at once (a turn
// waits for room while its client waits), and tokenizing stops at the
// session's token limit.
//
// Client is the Go client of the control routes (create, get, samples,
// delete) for drivers and rollouts.
//
// Who imports it: cmd/berth (berth session-server), rollouts.
package session
