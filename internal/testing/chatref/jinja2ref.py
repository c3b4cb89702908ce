#!/usr/bin/env python3
"""The trainer's chat-template renderer, as berth's fidelity tests run it.

    python3 jinja2ref.py < request.json > answer.json

request: [{"template": "...", "vars": {...}}, ...]
answer:  [{"ok": "rendered text"} | {"err": "message"}, ...]

The environment is the one transformers' apply_chat_template renders with:
huggingface/transformers src/transformers/utils/chat_template_utils.py,
_compile_jinja_template (read at commit 5e43e2e892453b405ce6d2cb94387b3a3213f30a):

- ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
  extensions=[AssistantTracker, jinja2.ext.loopcontrols]);
- filters["tojson"] replaced by json.dumps(x, ensure_ascii=ensure_ascii,
  indent=indent, separators=separators, sort_keys=sort_keys) with the
  defaults ensure_ascii=False, indent=None, separators=None, sort_keys=False
  (jinja2's own tojson would HTML-escape);
- globals["raise_exception"] raises jinja2.exceptions.TemplateError(message);
- globals["strftime_now"](format) is datetime.now().strftime(format);
- AssistantTracker: the {% generation %}...{% endgeneration %} tag, parsed
  into a CallBlock whose body renders unchanged (it only records offsets
  when return_assistant_tokens_mask asks, which never changes the text);
- templates are compiled once per source (lru_cache).

The variables are rendered as render_jinja_template passes them
(compiled_template.render(messages=..., tools=..., documents=...,
add_generation_prompt=..., **template_kwargs), with template_kwargs =
{**tokenizer.special_tokens_map, **kwargs} in tokenization_utils_base.py);
the Go side builds that mapping and sends it whole as "vars". JSON is
decoded by json.loads, as a trainer reading a JSONL dataset gets it: 1 is
an int, 1.0 a float, keys in document order.
"""

import json
import sys
from datetime import datetime
from functools import lru_cache

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """transformers' {% generation %} tag, tracker inactive."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


@lru_cache
def compile_template(source):
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def render(case):
    try:
        return {"ok": compile_template(case["template"]).render(**case["vars"])}
    except Exception as e:  # every failure is an answer: the Go side compares failing with failing
        return {"err": "%s: %s" % (type(e).__name__, e)}


def main():
    request = json.loads(sys.stdin.buffer.read())  # bytes: independent of the locale
    json.dump([render(c) for c in request], sys.stdout)


if __name__ == "__main__":
    main()
