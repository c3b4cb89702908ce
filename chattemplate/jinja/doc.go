// Package jinja renders Jinja templates with the semantics of the
// @huggingface/jinja JavaScript engine (version 0.5.11), the engine that
// transformers.js and the Hugging Face Hub use for chat templates.
//
// It exists because chat templates must render byte for byte as the
// reference renders them: a session server that re-renders a conversation
// differently from the reference would hand the trainer different tokens.
// The general Go Jinja engines follow Python's jinja2 instead (they print
// True, 'quoted' reprs and Go-formatted floats), and the one built for chat
// templates offers no way to replace a filter, so this package follows the
// JavaScript engine rule by rule: its lexer (with lstrip_blocks and
// trim_blocks on, as Template does), its parser and operator precedence, and
// its runtime (JavaScript numbers, loose ==, UTF-16 string length, the JSON
// printing of lists and mappings, the filters and methods it has and no
// others).
//
// Known differences from the reference, all outside chat templates: a
// function value cannot be printed (JavaScript prints its source), string
// literals with lone UTF-16 surrogates become U+FFFD, and strftime_now uses
// English month names.
//
// Who imports it: chattemplate, which feeds it messages and tools.
package jinja
