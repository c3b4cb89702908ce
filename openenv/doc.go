// Package openenv speaks the OpenEnv environment protocol
// (huggingface/OpenEnv, openenv.core.env_server and env_client), both
// sides, in the wire shapes of its Python server and client.
//
// The server side is generic over Env, one environment session: each
// WebSocket connection to /ws gets its own Env from a Factory and drives it
// with reset, step, state and close messages; the HTTP routes /health,
// /metadata, /schema, /state, /reset and /step answer as OpenEnv's do (the
// HTTP reset and step are stateless: a fresh Env per request). Actions are
// validated against the environment's declared Model before the Env sees
// them, with pydantic's error shapes. Sessions are limited to
// MaxConcurrentEnvs (OpenEnv's MAX_CONCURRENT_ENVS): one more is answered
// CAPACITY_REACHED with active_sessions and max_sessions, and its connection
// closed. A session idle for longer than the idle timeout is closed; frames
// and request bodies are bounded. When a session ends, by a close message, a
// disconnect or the idle timeout, its Env is closed before the connection
// is, so a client that saw the close knows the session's resources are gone.
//
// The client side, Client, is a Go EnvClient: it connects lazily to
// <base>/ws, bounds each answer by a message timeout, turns error frames
// into *ServerError, and, as Miles' OpenEnv agent does around OpenEnv's
// client, retries the first message of a session with jitter while the
// server reports CAPACITY_REACHED or closes the connection cleanly. A lost
// connection is dropped, and the next call opens a fresh session.
//
// The server holds nothing of the environment's own: the tbench2
// environment (package openenv/tbench2) is one Env. The same server runs
// hosted (`berth openenv serve`, one sandbox per session) and inside the
// task's sandbox (`berth-agent openenv`, package openenv/insandbox),
// reached through the sandbox's Endpoint; Options.KeyHeader lets its key
// pass the providers' port proxies, which drop the usual headers.
//
// Import it from the CLI, the smoke runner and environments.
package openenv
