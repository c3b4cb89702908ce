// Package engine talks to inference engines for the session server: one
// HTTP adapter with three dialects.
//
//   - SGLang: the session's prompt goes as input_ids (replacing the
//     engine's own rendering), with logprobs, return_meta_info and
//     no_stop_trim=false; the output ids and logprobs come back in
//     choices[0].meta_info.output_token_logprobs.
//   - vLLM: return_token_ids and logprobs; the engine renders the messages
//     itself and reports prompt_token_ids, choices[0].token_ids and
//     choices[0].logprobs.content[].logprob.
//   - OpenAI: any other OpenAI-compatible server, which returns text only;
//     the session server tokenizes the reply itself and counts the turn as
//     re-tokenized.
//
// A reply other than 200 comes back as it was (status, content type,
// body) for the server to pass through unrecorded; a transport failure or
// a 200 reply without what the dialect promises is an error (502).
//
// Forward relays a client's path below the engine's base URL (which may
// have a path prefix, an engine router's route): it takes the path as
// escaped on the wire and refuses one that could leave the base once
// decoded and cleaned (ErrBadPath, 400): dot segments, empty segments,
// encoded slashes and backslashes.
//
// Who imports it: the session server, and its tests.
package engine
