// Package tokenizer encodes and decodes text with a Hugging Face
// tokenizer.json: byte-level BPE (GPT-2 style, as Qwen, Llama 3, GLM and
// DeepSeek ship it) with its added and special tokens, normalizer and
// pre-tokenizer.
//
// Its reference is transformers.js (the @lenml/tokenizers fork), which the
// fidelity tests run on a corpus of thousands of strings: the ids must be
// equal, all of them. The pipeline is the reference's: split out added
// tokens (leftmost longest, honouring lstrip and rstrip), normalize each
// remaining section, split it with the pre-tokenizer (the Split regular
// expression runs on regexp2 in its ECMAScript mode, so \s, \p{L} and
// lookahead mean what they mean in JavaScript), map bytes to the byte-level
// alphabet and apply the merges by rank, leftmost first.
//
// Encode adds no special tokens: chat templates write them as text, and
// the added-token split turns them into their ids (add_special_tokens=False
// in transformers).
//
// Known differences from Hugging Face's Rust tokenizers (not from the
// reference): JavaScript's \s includes U+FEFF and excludes U+0085, its
// (?i:'s|...) is ASCII-only, and the Unicode tables are newer; strings
// that contain those code points can tokenize differently.
//
// Who imports it: chattemplate and the session server (session/tito), and
// anything that needs token ids for a model directory.
package tokenizer
