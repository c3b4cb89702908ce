package chatref

// ExpressionVars is the data every expression case renders with, as JSON.
const ExpressionVars = `{
  "x": 1.5, "i": 7, "neg": -3, "big": 1e21, "small": 1.5e-7, "whole": 2.0, "zero": 0,
  "s": "Hello wORLD\u2028 é ß", "ws": "  \n\t a b\u00a0 c \n", "u": "a😀b", "empty": "",
  "l": [3, 1, 2], "names": ["b", "A", "c"], "nested": [[1, 2], ["x", null]],
  "d": {"b": 1, "a": 2, "10": "ten", "2": "two"},
  "msgs": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"},
           {"role": "assistant", "content": "<think>\nr\n</think>\n\nok", "tool_calls": [{"function": {"name": "f", "arguments": {"q": 1}}}]},
           {"role": "tool", "content": "out"}],
  "t": true, "f": false, "n": null,
  "args": {"f": 1.0, "i": 9007199254740993, "e": 1e-05, "b": true, "n": null, "o": {"x": [1.0, "ü", false], "10": 2, "9": 1}, "s": "ü\u2028"}
}`

// Expressions are single-template cases over ExpressionVars: printing,
// numbers, strings, filters, tests, statements and errors.
var Expressions = []string{
	// printing and JavaScript numbers
	`{{ x }}|{{ i }}|{{ neg }}|{{ big }}|{{ small }}|{{ whole }}|{{ 2.0 }}|{{ -0.0 }}|{{ 1/3 }}|{{ 10/2 }}|{{ 7//2 }}|{{ -7//2 }}|{{ 7%3 }}|{{ -7%3 }}|{{ 2**10 }}|{{ 2**-1 }}|{{ 2.5*2 }}`,
	`{{ t }}|{{ f }}|{{ n }}|{{ undefined_thing }}|{{ l }}|{{ d }}|{{ nested }}|{{ msgs[2] }}`,
	`{{ x ~ i ~ t ~ l ~ whole }}|{{ "a" + 1 }}|{{ 1 + "a" }}|{{ l + [4] }}|{{ "ab" * 1 if false else "no" }}`,
	// strings
	`{{ s.upper() }}|{{ s.lower() }}|{{ s|title }}|{{ s|capitalize }}|{{ s|length }}|{{ u|length }}|{{ u[1] }}|{{ u[1:] }}|{{ u[::-1] }}`,
	`[{{ ws.strip() }}]|[{{ ws.lstrip("\n") }}]|[{{ ws.rstrip() }}]|[{{ ws|trim }}]|{{ ws.split() }}|{{ "a,b,,c".split(",") }}|{{ "a b c".split(" ", 1) }}|{{ " a  b ".split(none, 1) }}`,
	`{{ s.startswith("He") }}|{{ s.endswith(("x", "ß")) }}|{{ "aXbXc".replace("X", "-") }}|{{ "aXbXc".replace("X", "-", 1) }}|{{ "ab".replace("", "-") }}|{{ "aXb"|replace("X", "y") }}`,
	`{{ "line1\nline2\n\nline4"|indent }}|{{ "a\nb"|indent(2, true) }}|{{ "12abc"|int }}|{{ "x"|int }}|{{ "3.5e1z"|float }}|{{ "x"|float(7) }}`,
	`{{ 'single' "concat" }}|{{ "esc\t\x41\u00e9\\" }}|{{ 'it\'s' }}`,
	// collections and filters
	`{{ l|sort }}|{{ names|sort }}|{{ names|sort(true, true) }}|{{ l|reverse|list }}|{{ l|first }}|{{ l|last }}|{{ l|length }}|{{ l|join(", ") }}|{{ l|join }}|{{ [1, 1, "1", 2]|unique|list }}`,
	`{{ d|items|list }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d|dictsort }}|{{ d.get("a") }}|{{ d.get("zz", 5) }}|{{ d.get("zz") }}|{{ d|length }}`,
	`{{ msgs|map(attribute="role")|join(",") }}|{{ msgs|selectattr("role", "equalto", "user")|list }}|{{ msgs|rejectattr("tool_calls")|list|length }}|{{ msgs|selectattr("tool_calls")|list|length }}`,
	`{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ l|tojson(separators=(",", ":")) }}|{{ s|tojson(ensure_ascii=true) }}|{{ u|tojson(ensure_ascii=true) }}|{{ d|tojson(sort_keys=true) }}|{{ msgs[2]|tojson }}`,
	`{{ small|tojson }}|{{ big|tojson }}|{{ [x, i, whole, 0.0000001, 123456789012345680000, 0.1 + 0.2]|tojson }}|{{ "\u2028"|tojson }}`,
	`{{ l|string }}|{{ x|string }}|{{ t|string }}|{{ x|abs }}|{{ neg|abs }}|{{ x|int }}|{{ t|int }}|{{ n|default("dflt") }}|{{ undefined_thing|default("dflt") }}|{{ empty|default("dflt", true) }}`,
	// tests and operators
	`{{ x is number }}|{{ i is integer }}|{{ x is integer }}|{{ s is string }}|{{ l is iterable }}|{{ d is mapping }}|{{ n is none }}|{{ n is not none }}|{{ i is odd }}|{{ i is even }}|{{ undefined_thing is defined }}|{{ "abc" is lower }}|{{ t is true }}|{{ t is boolean }}`,
	`{{ 1 == 1.0 }}|{{ "1" == 1 }}|{{ t == 1 }}|{{ n == undefined_thing }}|{{ l == l }}|{{ [1] == [1] }}|{{ "a" in "cat" }}|{{ 3 in l }}|{{ "a" in d }}|{{ "z" not in d }}|{{ x in undefined_thing }}|{{ 1 < 2 and 2 >= 2 }}`,
	`{{ not t }}|{{ t and "yes" }}|{{ f or "fallback" }}|{{ [] or "empty" }}|{{ d and 1 }}|{{ -i }}|{{ +x }}|{{ -t }}|{{ "x" if t else "y" }}|{{ "x" if f }}`,
	// statements
	`{% for a in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ a }};{% endfor %}`,
	`{% for k, v in d.items() %}{{ k }}={{ v }},{% endfor %}|{% for k in d %}{{ k }}{% endfor %}|{% for a in [] %}x{% else %}none{% endfor %}`,
	`{% for m in msgs if m.role != "tool" %}{{ m.role }}{{ loop.length }},{% endfor %}|{% for m in msgs[::-1] %}{{ m.role[0] }}{% endfor %}`,
	`{% for a in l %}{% if a == 1 %}{% continue %}{% endif %}{% if a == 2 %}{% break %}{% endif %}{{ a }}{% endfor %}|{% for a in [1] %}{% continue %}{% else %}E{% endfor %}`,
	`{% set ns = namespace(found=false, n=0) %}{% for m in msgs %}{% if m.role == "user" %}{% set ns.found = true %}{% set ns.n = loop.index0 %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.n }}{{ ns }}`,
	`{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c %}block {{ a }}{% endset %}[{{ c }}]{% for q in [1] %}{% set inner = 5 %}{% endfor %}{{ inner }}`,
	`{% macro greet(name, punct="!") %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet("a") }}{{ greet("b", punct="?") }}{{ greet(name="c") }}`,
	`{% macro all() %}{{ varargs }}{{ kwargs }}{% endmacro %}{{ all(1, 2, k=3) }}`,
	`{% macro wrap() %}<{{ caller() }}>{% endmacro %}{% call wrap() %}inside{% endcall %}|{% filter upper %}shout {{ s }}{% endfilter %}`,
	// whitespace control, comments, generation markers
	"a  {%- if t -%}  b  {%- endif -%}  c\n  {% if t %}\n  x\n  {% endif %}\n{# comment #}  y  {#- trimmed -#}  z\n",
	"{% generation %}gen{% endgeneration %} and {%- generation -%} x {%- endgeneration %}\n\n",
	"{{- ' lead' -}}   {{ 'trail ' -}}\n  done",
	// tool-call arguments: how a template prints a client's numbers, booleans,
	// nested objects and unicode
	"{% for k, v in args.items() %}<arg_key>{{ k }}</arg_key><arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>{% endfor %}",
	`{{ args }}|{{ args.f }}|{{ args.i }}|{{ args.e }}|{{ args.b }}|{{ args.n }}|{{ args.o }}|{{ args.o.x }}`,
	`{{ args|tojson }}|{{ args|tojson(indent=2) }}|{{ args|tojson(separators=(",", ":")) }}|{{ args|tojson(sort_keys=true) }}|{{ args|tojson(ensure_ascii=true) }}`,
	`{{ args.f == 1 }}|{{ args.f is integer }}|{{ args.f is float }}|{{ args.i is integer }}|{{ args.i + 1 }}|{{ args.f * 2 }}|{{ 3 / 2 }}|{{ 4 / 2 }}|{{ 7 // 2.0 }}|{{ 2 ** 0.5 }}|{{ 1.0 }}|{{ 100.0 }}|{{ 1e16 }}|{{ 12345678.9 }}`,
	`{{ ["it's", 'say "hi"', "both ' \"", "tab\t", "\u00e9", "\u2028", "nl\n", "back\\"] }}|{{ (1, "a") }}|{{ [none, true, 1.0] }}`,
	`{{ args.o|dictsort }}|{% for k in args.o %}{{ k }},{% endfor %}|{{ args.o.keys()|list }}|{{ args|length }}`,
	`{% for m in msgs %}{% if m.role == "user" %}{% set r = m.content %}{% endif %}{{ r is defined }},{% endfor %}|{{ "\n x \n".strip("\n") }}|{{ "xxaxx".lstrip("x") }}|{{ -3.7|int }}|{{ "3.9"|int }}|{{ " 42 "|int }}|{{ "1e3"|float }}|{{ 5 % -3 }}|{{ 2 * "ab" if false else "ab" * 2 }}`,
	// errors must match too
	`{{ raise_exception("boom") }}`,
	`{{ l.nope() }}`,
	`{{ 1 + n }}`,
	`{% for a in 5 %}{% endfor %}`,
	`{{ x is unknowntest }}`,
	`{{ names|map("upper")|list }}`,
}
