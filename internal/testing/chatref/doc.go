// Package chatref is the test harness that measures a Go Jinja engine
// against the two chat-template references: Python jinja2 configured as
// transformers' apply_chat_template configures it (the renderer whose text
// the trainer tokenizes; jinja2ref.py beside this package's files) and
// @huggingface/jinja (internal/testing/hfref). It holds the fidelity
// corpus of conversations with tool calls and the mismatch count.
//
// Who imports it: the tests of chattemplate and chattemplate/jinja, the
// session server's conversation test (its transcript against the Python
// reference), and the separate comparison module
// chattemplate/testdata/ardancmp. Nothing outside tests.
package chatref
