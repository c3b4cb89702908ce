// Package tito keeps a conversation's token ids the way a trainer needs
// them ("token in, token out"): the ids the policy saw and produced, never
// a re-tokenization of the messages after the fact.
//
// A Codec joins a model's tokenizer, chat template and family rules. A
// Trajectory is one session's state: its messages, the accumulated ids at
// each assistant checkpoint, and the records of the turns. Prepare computes
// the next prompt: the stored ids plus the ids of the appended messages,
// rendered as an increment (the template applied to a fixed synthetic
// prefix with and without them, the text difference tokenized, generation
// prompt included), joined at the family's boundary (Qwen3 adds the "\n"
// its template writes after <|im_end|>, and closes with <|im_end|>\n a
// turn cut at max_tokens; GLM-4.7 drops a trailing <|observation|> or
// <|user|>). A request that diverges inside the stored
// history rolls back to the last checkpoint in the matched prefix, at most
// one assistant turn. Commit checks the prefix invariant
//
//	prev[:len(prev)-max_trim] == (prompt+completion)[:same]
//
// and records the turn. Compare measures how the accumulated ids (a cut
// last turn closed as the next turn would close it) differ from a fresh
// rendering of the final transcript (special_token_count,
// special_token_type, non_assistant_text must be 0; assistant_text is
// expected drift).
//
// A Trajectory is not safe for concurrent use: the session server holds
// its lock around Prepare and Commit and nowhere else.
//
// Who imports it: the session server (package session), and rollouts that
// drive a model without HTTP.
package tito
