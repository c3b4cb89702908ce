// Package llm is the chat client of berth's LLM agents: one call, one
// assistant reply from any OpenAI-compatible endpoint (an inference engine,
// a session server's session, a hosted API), through OpenAI's official Go
// SDK.
//
// It adds what an agent loop needs on top of the SDK: the endpoint and key
// come only from Options (the SDK's OPENAI_* environment defaults are not
// read, so a rollout never sends a user's key to a session server);
// throttles (429) and server errors (5xx) are retried with backoff, counted
// per call; failures are classed (ResourceExhausted, Unavailable,
// Unauthenticated, InvalidArgument) and never carry the key, the request's
// headers or more than a bounded piece of the endpoint's reply; a prompt
// the endpoint refuses as longer than the model's context is
// ErrContextLength, apart from every other refusal.
//
// Who imports it: LLM agents (harbor/agent/terminus).
package llm
