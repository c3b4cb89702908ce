// Package chattemplate renders a model's Hugging Face chat template: the
// Jinja template in tokenizer_config.json (or chat_template.jinja) applied
// to messages, tools and add_generation_prompt, with the special-token
// variables (bos_token, eos_token, ...) and any chat_template_kwargs, as
// apply_chat_template does. Rendering follows @huggingface/jinja exactly
// (see package jinja); the fidelity test renders a corpus of conversations
// with and without tools through both.
//
// Messages and tools are jinja values decoded from their JSON once
// (ParseJSON); values are immutable, so a caller may keep them and render
// them again from many goroutines.
//
// Who imports it: the session server's TITO layer (session/tito), and
// anything that turns chat messages into a model's prompt text.
package chattemplate
