// Package rollouttest holds what the rollout tests share: Qwen3's real
// tokenizer (the npm reference package), a session server in front of the
// scripted test engine that remembers what the model said, the golden
// policy over a tasks directory, the TB2-style test tasks, readers of what a
// rollout writes, the sample checks (the loss mask is 1 exactly on the
// model's tokens; the tokens decode to the trajectory's conversation) and
// the golden rollout itself (RunGolden), which the golden test runs on every
// registry entry.
//
// Import it only from tests.
package rollouttest
