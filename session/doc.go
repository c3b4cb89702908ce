// Package session is the session server: it sits between agent harnesses
// and an inference engine and records, per conversation, the token ids the
// policy saw and produced (TITO), so that a trainer gets exactly those
// tokens back as samples with loss masks and logprobs.
//
// Server is an http.Handler. Its routes follow Miles's session server, so
// that a Miles-style trainer can point at it:
//
//	GET    /health                              {"status":"ok","session_server_instance_id":...}
//	POST   /sessions                            {"version"?: "v1"|"v2"} -> {"session_id": "<32 hex>", "base_url"?: external URL/sessions/<id>/v1}
//	GET    /sessions/{id}                       records and metadata (accumulated ids, mismatches; a tree's tables)
//	DELETE /sessions/{id}                       204, after any in-flight turn's commit
//	POST   /sessions/{id}/v1/chat/completions   a TITO-recorded turn
//	POST   /sessions/{id}/v1/messages           the same, in Anthropic's Messages API
//	POST   /sessions/{id}/samples               {"max_seq_len"?, "metadata"?, "branches"?} -> safetensors, or JSON lines
//	POST   /sessions/{id}/fork                  {"turn": k} -> a branch of a tree session: {"session_id", ...}
//	POST   /sessions/{id}/abort                 {"reason"?}: abort one session
//	GET    /sessions/{id}/abort?wait=S          {"aborted", "reason"?}, waiting up to S seconds for an abort
//	POST   /abort, POST /flush                  {"reason"?, "session_server_instance_id"?}: abort every session
//	ANY    /sessions/{id}/{path...}             relayed to the engine
//	GET    /metrics                             Prometheus
//
// A session is linear (Miles's v1: each request extends the last, a retry
// rolls back one turn) or a tree (v2, tree.go: requests attach at the
// deepest matching turn and branch there; one sample per leaf; berth's
// forks). Options.Tree picks the default. An aborted session (abort.go,
// after Miles's agent abort hook) has its in-flight turns cancelled,
// refuses later ones (410), and its samples are ABORTED with the reason.
//
// A turn: the session's prompt ids are prepared under the session's lock
// (tito.Trajectory.Prepare: rollback, increment, family boundary), the
// engine is called without the lock (the prompt goes as input_ids, with
// the routing header X-SMG-Routing-Key: <session id>), and the reply is
// committed under the lock again after the prefix invariant holds; a
// session that changed or is closing meanwhile is left as it is. A client
// that asks to stream gets the whole reply as one SSE chunk. Errors are
// {"error": msg}: 404 unknown session, 400 invalid request, a linear
// history rewritten more than one turn back, a prompt over the session's
// tokens or a relayed path that could leave the engine's base path, 500 tokenization
// (a broken prefix names the first differing position), 502 engine
// failure, 409 a turn that extends a generation cut short (a tree path cut
// at max_tokens; an engine-aborted turn: no partial rollouts), 410 an
// aborted session, 413 a body over the limit, 429 too many sessions, 401
// without a valid key when keys are configured. A reply other than 200 from the
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
// delete; tree sessions, forks and their leaves' samples; abort and the
// wait for it) for drivers and rollouts.
//
// Who imports it: cmd/berth (berth session-server), rollouts.
package session
