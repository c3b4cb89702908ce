// Package testengine is a test double of an inference engine, for tests
// and demos of the session server. Nothing in the product depends on it.
//
// It serves POST /v1/chat/completions in SGLang's dialect (input_ids in,
// meta_info.output_token_logprobs out) or, for adapter tests, vLLM's or a
// plain OpenAI server's. What the model "says" is a script the test sets:
// a function from the call (its routing key, the how-many-th call of that
// key, its prompt ids and body) to the raw text of the turn, tool calls
// written as Qwen writes them:
//
//	Let me look.
//	<tool_call>
//	{"name": "bash", "arguments": {"command": "ls"}}
//	</tool_call>
//
// The text is tokenized with the real tokenizer the test gives it, the
// end-of-turn token is appended for stop and tool_calls, tool calls are
// parsed into message.tool_calls (arguments kept verbatim as a JSON
// string), and every output token gets a deterministic logprob. A script
// can also answer with an HTTP error, a length cut (max_tokens is
// honoured) or an abort, and block on the call's context to see the caller
// cancel it. The engine refuses what SGLang refuses for a
// session server's calls: stream with return_meta_info, and a request
// without input_ids. Any other path is answered 404, and every request's
// target is kept (Targets), for tests of what reaches an engine.
package testengine
