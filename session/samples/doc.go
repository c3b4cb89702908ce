// Package samples turns a session's recorded turns into what a trainer
// consumes, and puts it on the wire.
//
// FromTurns builds one sample per turn (tokens = prompt + output, a loss
// mask of 1 and the engine's logprob on each output token), aligning each
// turn's output with the session's accumulated ids so that a stop token
// the next turn's template re-renders is trimmed (at most max_trim_tokens,
// never on the last turn). Truncate cuts the list to max_seq_len at a turn
// boundary; Merge then joins the turns into one sample whose observation
// spans (the tokens between one turn's output and the next one's: tool
// results, user messages, template glue) carry loss mask 0 and logprob 0.
// A turn's status comes from its finish_reason: stop and tool_calls are
// "completed", length "truncated", abort "aborted"; merging stops at the
// first turn that is not completed.
//
// The wire format is Miles's: a safetensors file with tokens.{i} (I64),
// loss_mask.{i} (U8), rollout_log_probs.{i} (F64) and _samples_meta (U8,
// the JSON {"samples": [...], "session_metadata": ..., "empty_reason": ...};
// statuses as Miles's values, "completed" ...), and for people and tools
// JSON lines (one sample a line, with token texts, turn starts, the
// session's mismatch counters, statuses as COMPLETED, TRUNCATED, ABORTED):
// the samples.jsonl that berth view reads.
//
// Who imports it: the session server, its Go client, and trainers and
// rollouts written in Go.
package samples
