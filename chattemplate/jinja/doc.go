// Package jinja renders Jinja templates with the semantics of Python
// jinja2 as transformers' apply_chat_template configures it
// (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
// loopcontrols; tojson as json.dumps with ensure_ascii=False;
// raise_exception, strftime_now, the generation tag): the renderer whose
// text the trainer tokenizes.
//
// It exists because chat templates must render byte for byte as the
// trainer renders them: a session server that re-renders a conversation
// differently would hand the trainer different tokens. Values are Python's:
// ints and floats apart (a JSON 1.0 is a float and prints 1.0), str() and
// repr() printing (True, None, {'a': 1}), json.dumps for tojson, == by
// value, mappings in insertion order, strings indexed by code point, and
// Python's string methods (strip with characters, title, capitalize,
// split). The syntax accepted is the subset that @huggingface/jinja
// parses, plus exponent float literals; the fidelity corpus in
// internal/testing/chatref measures both (chattemplate's doc has the
// counts).
//
// Known differences from Python jinja2, none of them reached by the
// corpus: filters that return a generator in Python (reverse, unique, map,
// select, reject, items) return a list here, so printing one raw (Python
// prints "<generator object ...>") or taking its length (Python fails)
// differs; string methods other than upper, lower, strip, lstrip, rstrip,
// title, capitalize, startswith, endswith, split and replace (find, join,
// format, ...) are undefined here; integers past int64 print their digits
// but compute as floats;
// error messages are this package's own; string literals with lone
// UTF-16 surrogates become U+FFFD; strftime_now uses English month names.
//
// Who imports it: chattemplate, which feeds it messages and tools.
package jinja
