#!/usr/bin/env python3
"""Generates tests/unit/test_template_cases.c: one Jinja feature per case, with the output (or the
error) that Python Jinja2 gives in the environment transformers renders chat templates in
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, a {% generation %} tag,
transformers' tojson, raise_exception, strftime_now on the clock 2026-01-15 12:34:56).

Run with the reference installed (jinja2 3.1.6, in the project's .venv):
    .venv/bin/python tests/unit/test_template_cases_gen.py
The C test then needs no Python."""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))


class Generation(Extension):
    """transformers' AssistantTracker without the mask bookkeeping: renders the body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime(2026, 1, 15, 12, 34, 56).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


MSGS = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Hi é 👋"}, {"type": "image"}]},
    {"role": "assistant", "content": "",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "f", "arguments": {"x": 1, "y": [1.5, None, True]}}}]},
    {"role": "tool", "content": "{\"ok\": 1}"},
]
VARS = {"messages": MSGS, "n": 3, "f": 0.5, "s": "a,b,,c", "u": "  Hello World  ", "k": "Straße",
        "items": [3, 1, 2], "words": ["b", "A", "c", "a"], "d": {"b": 2, "a": 1, "C": 3},
        "people": [{"name": "Ann", "age": 30}, {"name": "bob", "age": 25}, {"name": "Cy", "age": 30}],
        "nested": {"x": {"y": [10, 20]}}, "big": 9007199254740993, "nul": None, "t": True}

# (name, template). Every case renders with VARS.
CASES = [
    # output of values
    ("print_float", "{{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 2.5e-7 }}"),
    ("print_values", "{{ none }}|{{ true }}|{{ False }}|{{ [1, 'a', none, 1.5] }}|{{ {'a': 1, 'b': [true]} }}|{{ (1,) }}|{{ (1, 2) }}|{{ nul }}"),
    ("print_str_repr", "{{ [\"it's\", 'say \"hi\"', 'both \\'\"', 'tab\\tnl\\n', 'é'] }}"),
    ("int_division", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 // 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 0.5 }}"),
    ("arith_mixed", "{{ 1 + 2 * 3 - 4 }} {{ (1 + 2) * 3 }} {{ 1 + 1.5 }} {{ true + 1 }} {{ 3 * 'ab' }} {{ [1] * 2 }} {{ [1] + [2] }} {{ -2 ** 2 }} {{ 10 - -1 }}"),
    ("concat_tilde", "{{ 'a' ~ 1 ~ none ~ undefined_thing ~ 1.5 ~ true }}"),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\x41\\u00e9\\U0001F600' }}|{{ \"q'\" }}|{{ 'adj' 'acent' }}"),
    ("big_int", "{{ big }} {{ big + 1 }} {{ 2 ** 62 }}"),
    # comparisons and logic
    ("compare", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ none == none }} {{ [1,2] == [1,2] }} {{ {'a':1} == {'a':1} }}"),
    ("in_not_in", "{{ 'b' in 'abc' }} {{ 2 in items }} {{ 'a' in d }} {{ 'z' not in d }} {{ 'x' not in 'xyz' }} {{ '' in 'abc' }}"),
    ("and_or_values", "{{ 0 or 'x' }}|{{ 1 and 'y' }}|{{ '' and 'z' }}|{{ none or none }}|{{ not 0 }}|{{ not [1] }}"),
    ("condexpr", "{{ 'y' if t else 'n' }}|{{ 'y' if nul else 'n' }}|{{ 'only' if false }}|{{ ('a' if false else 'b') ~ 'c' }}"),
    ("is_tests", "{{ n is defined }} {{ zz is undefined }} {{ nul is none }} {{ t is boolean }} {{ n is integer }} {{ f is float }} {{ n is number }} {{ t is number }} {{ s is string }} {{ d is mapping }} {{ items is iterable }} {{ s is iterable }} {{ d is sequence }} {{ range is callable }} {{ n is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }} {{ 'ab' is lower }} {{ 'AB' is upper }} {{ 1 is equalto 1 }} {{ 2 is in items }} {{ t is true }} {{ false is false }} {{ n is not none }} {{ 3 is eq 3 }} {{ 3 is gt 2 }}"),
    ("undefined_semantics", "[{{ zz }}]{{ zz | length }}{{ zz | default('dflt') }}{% for x in zz %}never{% else %}empty{% endfor %}{{ zz is defined }}{% if not zz %}falsy{% endif %}{{ zz | string }}{{ zz == zz }}"),
    ("undefined_attr_error", "{{ zz.attr }}"),
    ("undefined_name_error", "{{ zz + 1 }}"),
    ("missing_key_is_undefined", "{{ d.missing is defined }}|{{ d['missing'] is defined }}|{{ nul.x is defined }}|{{ 'str'.nope is defined }}"),
    ("missing_key_then_attr", "{{ d.missing.deeper }}"),
    # attribute / subscript / slicing
    ("subscript", "{{ nested.x.y[1] }} {{ nested['x']['y'][-1] }} {{ items[0] }} {{ s[0] }} {{ s[-1] }} {{ messages[1].content[0].text }} {{ nested.x.y.0 }}"),
    ("slicing", "{{ s[1:4] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ items[1:] }}|{{ items[:-1] }}|{{ items[::-1] }}|{{ k[1:3] }}|{{ s[10:] }}|{{ items[-2:] }}|{{ 'héllo'[1:] }}"),
    ("dict_methods", "{{ d.keys() | list }} {{ d.values() | list }} {% for k2, v in d.items() %}{{ k2 }}={{ v }};{% endfor %} {{ d.get('a') }} {{ d.get('zz') }} {{ d.get('zz', 5) }}"),
    ("dict_items_attr_precedence", "{{ {'items': 1}['items'] }} {{ {'get': 2}.get('get') }}"),
    ("list_methods", "{{ items.index(2) }} {{ items.count(3) }} {{ [1, 1, 2].count(1) }}"),
    ("list_append_refused", "{% set l = [] %}{{ l.append(1) }}"),
    ("dict_update_refused", "{% set dd = {} %}{{ dd.update({'a': 1}) }}"),
    ("str_methods", "{{ u.strip() }}|{{ u.lstrip() }}|{{ u.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ s.split(',') }}|{{ s.split(',', 1) }}|{{ ' a  b '.split() }}|{{ s.rsplit(',', 1) }}|{{ 'a\\nb\\r\\nc'.splitlines() }}|{{ s.startswith('a,') }}|{{ s.endswith(('x', 'c')) }}|{{ s.replace(',', ';', 2) }}|{{ k.upper() }}|{{ 'ÉCOLE'.lower() }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ s.find('b') }}|{{ s.find('z') }}|{{ s.count(',') }}|{{ '-'.join(['a', 'b']) }}|{{ '12'.isdigit() }}|{{ 'ab'.isalpha() }}|{{ ' '.isspace() }}"),
    ("str_format_method", "{{ '{} and {}'.format(1, 'x') }}|{{ '{0}{1}{0}'.format('a', 'b') }}|{{ '{name}!'.format(name='N') }}|{{ '{:>5}|{:<4}|{:^7}'.format('r', 'l', 'c') }}|{{ '{:.2f} {:05d} {:,}'.format(3.14159, 42, 1234567) }}|{{ '{{literal}}'.format() }}|{{ '{!r}'.format('q') }}"),
    ("percent_format", "{{ '%s is %d' % ('x', 3) }}|{{ '%.2f' % 2.5 }}|{{ '%5s|%-5s|' % ('a', 'b') }}|{{ '%03d' % 7 }}|{{ '%s' % none }}|{{ '%r' % 'q' }}|{{ '100%%' % () }}|{{ '%(a)s-%(b)s' % {'a': 1, 'b': 2} }}|{{ '%x %o %e' % (255, 8, 12345.678) }}"),
    # statements
    ("if_elif_else", "{% for i in [1, 2, 3] %}{% if i == 1 %}one{% elif i == 2 %}two{% else %}other{% endif %} {% endfor %}"),
    ("for_loop_vars", "{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}[{{ loop.previtem }}|{{ loop.nextitem }}]{{ loop.cycle('a', 'b') }} {% endfor %}"),
    ("for_else_filter", "{% for x in items if x > 1 %}{{ x }}:{{ loop.length }} {% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in items if x > 5 %}x{% else %}filtered-empty{% endfor %}"),
    ("for_unpack_dict", "{% for k2, v in d | dictsort %}{{ k2 }}{{ v }} {% endfor %}|{% for a, b in [(1, 2), (3, 4)] %}{{ a + b }} {% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}|{% for key in d %}{{ key }}{% endfor %}"),
    ("break_continue", "{% for i in range(10) %}{% if i == 5 %}{% break %}{% endif %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
    ("nested_loops", "{% for a in [1, 2] %}{% for b in [3, 4] %}{{ a }}{{ b }}{{ loop.depth }}{{ loop.index }} {% endfor %}{{ loop.index }}|{% endfor %}"),
    ("set_scoping", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %}|{{ x }}{% if true %}{% set y = 5 %}{% endif %}|{{ y }}"),
    ("namespace", "{% set ns = namespace(total=0, names='') %}{% for p in people %}{% set ns.total = ns.total + p.age %}{% set ns.names = ns.names ~ p.name %}{% endfor %}{{ ns.total }} {{ ns.names }} {{ ns.missing is defined }}"),
    ("set_tuple_and_block", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set blk %}  text {{ n }}  {% endset %}[{{ blk }}]{% set up | upper %}shout{% endset %}{{ up }}"),
    ("macro_defaults_kwargs", "{% macro m(a, b='B', c=none) %}<{{ a }},{{ b }},{{ c }}>{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(1, c=3) }}{{ m(a=4, b=5) }}{{ m() }}"),
    ("macro_caller", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inner {{ n }}{% endcall %}{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1, 2]) %}[{{ v }}]{% endcall %}"),
    ("macro_recursion", "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}"),
    ("filter_block", "{% filter upper %}hello {{ n }}{% endfilter %}|{% filter trim | replace('a', 'o') %}  banana  {% endfilter %}"),
    ("raw_block", "{% raw %}{{ not rendered }} {% if %}{% endraw %}|{%- raw -%}   x   {%- endraw -%}|"),
    ("generation_block", "A{% generation %}gen {{ n }}{% endgeneration %}B"),
    ("whitespace_control", "a  {{- ' b ' -}}  c\n  {%- if true %}\n  d\n  {%- endif %}\ne {#- c -#} f\n{%+ if true %}g{% endif %}\n  {% if true +%}\nh{% endif %}"),
    ("trim_lstrip_blocks", "<ul>\n  {% for i in [1, 2] %}\n    <li>{{ i }}</li>\n  {% endfor %}\n</ul>\n  {# comment line #}\nend  {% if true %}x{% endif %}  {{ 'v' }}\n"),
    ("trailing_newline_kept_once", "line\n\n"),
    ("crlf_source", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc"),
    # filters
    ("tojson_basic", "{{ messages | tojson }}|{{ 'é\"\\n\\u0001' | tojson }}|{{ 1.0 | tojson }}|{{ none | tojson }}|{{ [] | tojson(indent=2) }}|{{ {} | tojson }}"),
    ("tojson_options", "{{ d | tojson(indent=2) }}|{{ d | tojson(sort_keys=true) }}|{{ d | tojson(separators=(',', ':')) }}|{{ nested | tojson(indent=4, sort_keys=true) }}|{{ 'é' | tojson(ensure_ascii=true) }}|{{ {1: 'int key', none: 'n', true: 't'} | tojson }}"),
    ("tojson_undefined", "{{ zz | tojson }}"),
    ("string_filters", "[{{ u | trim }}]{{ 'x' | upper }}{{ 'ÀB' | lower }}{{ 'hello wORLD-foo(bar' | title }}{{ 'hELLO' | capitalize }}{{ s | replace(',', '') }}{{ 'abc' | center(9) }}|{{ 'a b  c' | wordcount }}{{ '<a href=\"x\">link</a>  <b>bold</b>' | striptags }}|{{ '<&\\'\">' | e }}|{{ '<x>' | safe }}"),
    ("length_count", "{{ s | length }} {{ k | length }} {{ items | count }} {{ d | length }} {{ 'é👋' | length }}"),
    ("join_list_string", "{{ items | join(', ') }}|{{ people | join('/', attribute='name') }}|{{ 'abc' | list }}|{{ items | string }}|{{ 12 | string }}"),
    ("default_filter", "{{ zz | default('a') }}|{{ '' | default('b') }}|{{ '' | default('c', true) }}|{{ 0 | d('e', boolean=true) }}|{{ nul | default('f') }}"),
    ("first_last", "{{ items | first }} {{ items | last }} {{ 'xyz' | first }} {{ [] | first is defined }}"),
    ("int_float_abs_round", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ '1.5' | float }} {{ 'y' | float }} {{ -3 | abs }} {{ -2.5 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 2.9 | round(method='floor') }} {{ 7 | round }}"),
    ("map_select_reject", "{{ people | map(attribute='name') | list }} {{ words | map('upper') | list }} {{ items | select('odd') | list }} {{ items | reject('odd') | list }} {{ [0, 1, '', 'a'] | select | list }} {{ people | selectattr('age', 'equalto', 30) | map(attribute='name') | join(',') }} {{ people | rejectattr('age', 'gt', 26) | map(attribute='name') | list }} {{ messages | selectattr('tool_calls', 'defined') | list | length }}"),
    ("items_dictsort", "{{ d | items | list }} {{ d | dictsort }} {{ d | dictsort(true) }} {{ d | dictsort(by='value', reverse=true) }}"),
    ("sort_unique_reverse", "{{ words | sort }} {{ words | sort(case_sensitive=true) }} {{ words | sort(reverse=true) }} {{ people | sort(attribute='age') | map(attribute='name') | list }} {{ ['a', 'A', 'b', 'a'] | unique | list }} {{ items | reverse | list }} {{ 'abc' | reverse }}"),
    ("sum_min_max_batch", "{{ items | sum }} {{ people | sum(attribute='age') }} {{ items | min }} {{ items | max }} {{ words | max }} {{ people | max(attribute='age') }} {{ items | batch(2) | list }} {{ items | batch(2, 'x') | list }}"),
    ("indent_filter", "{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb' | indent(width='> ', blank=true) }}"),
    ("markup_concat", "{{ '<b>' | safe + '<i>' }}|{{ '<p>' + ('&' | safe) }}|{{ ('x' | safe) ~ '<y>' }}"),
    # globals
    ("range_global", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}"),
    ("dict_global", "{{ dict(a=1, b='x') }} {{ dict(a=1).a }}"),
    ("raise_exception_msg", "{% if true %}{{ raise_exception('Conversation roles must alternate!') }}{% endif %}"),
    ("strftime_now", "{{ strftime_now('%Y-%m-%d %H:%M:%S') }}|{{ strftime_now('%d %b %Y') }}|{{ strftime_now('%A, %B %-d') }}"),
    ("range_too_big", "{{ range(1000000) | length }}"),
    # chat-template idioms
    ("chat_list_content", "{% for m in messages %}{% if m.content is string %}{{ m.role }}: {{ m.content }}\n{% else %}{{ m.role }}: {% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% else %}<{{ p.type }}>{% endif %}{% endfor %}\n{% endif %}{% endfor %}"),
    ("chat_tool_calls", "{% for m in messages if m.tool_calls %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments | tojson }}){% endfor %}{% endfor %}"),
    ("loop_messages_idiom", "{%- set loop_messages = messages[1:] if messages[0]['role'] == 'system' else messages -%}{%- for message in loop_messages -%}{{- message['role'] + (', ' if not loop.last else '') -}}{%- endfor -%}"),
    # more edge cases
    ("misc_printing", "{{ namespace(a=1) }}|{{ none | string }}|{{ [1, 2, 3] | map('string') | join }}|{{ 1e300 * 1e10 }}|{{ -1e300 * 1e10 }}|{{ (1.5, 'a') | tojson }}|{{ {'k': ['it\\'s']} }}"),
    ("misc_format_specs", "{{ '%-6s|' % 'x' }}{{ '%.3s' % 'abcdef' }}|{{ '{:10.3f}|{:<6d}|{:+d}|{:x}|{:>8.2%}'.format(3.14159, 42, 5, 255, 0.25) }}|{{ '%+d %5.1f %-5d|' % (3, 2.25, 7) }}|{{ '%i%%' % 50 }}"),
    ("misc_tests_more", "{{ 'x' | safe is string }} {{ loop is defined }} {{ none is mapping }} {{ 'ab' is sequence }} {{ 3 is iterable }} {{ 0.0 is number }} {{ none is number }} {{ [] is sequence }} {{ 1 is ne 2 }} {{ 2 is le 2 }} {{ 'a' is lt 'b' }} {{ 10 is ge 11 }}"),
    ("misc_subscript_missing", "[{{ items[5] }}][{{ d['zz'] }}][{{ nul['x'] }}]{{ items[5] is defined }}{{ s[100] is undefined }}"),
    ("misc_none_compare", "{{ none < 1 }}"),
    ("misc_in_none", "{{ 'a' in none }}"),
    ("misc_macro_too_many_args", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
    ("misc_selectattr_truthy", "{{ messages | selectattr('tool_calls') | map(attribute='role') | list }} {{ people | map(attribute='missing', default='?') | list }} {{ messages | map(attribute='role') | unique | list }}"),
    ("misc_whitespace", "{%- if true -%}  x  {%- endif -%}|{% if true -%}\n  y\n{%- endif %}|  {{- 'z' }}|{{ 'w' -}}  \n|\n  {%- for i in [1] %} {{ i }} {% endfor -%}  |"),
    ("misc_lstrip_only_blocks", "a\n    {{ 'var not stripped' }}\n    {% if true %}block stripped{% endif %}\n\t{# comment stripped #}x"),
    ("misc_unicode_len_slice", "{{ 'é👋x' | length }} {{ 'é👋x'[1] }} {{ 'é👋x'[-1] }} {{ 'é👋x' | reverse }} {{ 'é👋x' | upper }} {{ 'ß' | title }} {{ 'ǆ'.title() }}"),
    ("misc_float_ops", "{{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ -7.5 % 2 }} {{ 1 / 3 }} {{ 2 ** 0.5 * 2 ** 0.5 }} {{ 10 / 4 }} {{ 3 * 0.1 }} {{ 1e-7 }} {{ 123456789.0 * 1000 }} {{ 0.1 | round(3) }} {{ 1.23456789e-5 }}"),
    ("misc_string_mult", "[{{ 'ab' * 0 }}][{{ 'ab' * -1 }}][{{ 2 * 'c' }}]"),
    ("misc_int_filter_variants", "{{ ' 12 ' | int }} {{ '1_000' | int }} {{ '0x1A' | int(0, 16) }} {{ '-3' | int }} {{ true | int }} {{ none | int }} {{ '1e3' | int }} {{ '3.7' | float | int }} {{ 'inf' | float }} {{ ' 2.5 ' | float }}"),
    ("misc_join_mixed", "{{ [1, none, 'a', 1.5, true] | join('-') }} {{ d | join(',') }} {{ '' | join('x') }}"),
    ("misc_dict_literal_order", "{{ {'z': 1, 'a': 2, 'm': 3} | tojson }} {{ {'a': 1, 'a': 2} }} {{ {1: 'x', 1.0: 'y'} }}"),
    ("misc_nested_macro_scope", "{% set g = 'global' %}{% macro outer() %}{% set g = 'local' %}{{ inner() }}{{ g }}{% endmacro %}{% macro inner() %}[{{ g }}]{% endmacro %}{{ outer() }}{{ g }}"),
    ("misc_loop_in_macro", "{% macro lst(xs) %}{% for x in xs %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}{% endmacro %}{{ lst(['a', 'b']) }} {{ lst([]) }}"),
    ("misc_tojson_floats_ints", "{{ [1, 1.0, -0.0, 1e100, 123456789012345678, 0.1, 2.5e-8, 100.0] | tojson }} {{ {'a': {'b': []}, 'c': {}} | tojson(indent=1) }}"),
    ("misc_tojson_control_chars", "{{ '\\x00\\x1f\\x7f\\u2028\\b\\f' | tojson }}"),
    ("misc_split_variants", "{{ 'a b  c'.split(' ') }} {{ '  lead trail  '.split() }} {{ 'a--b--c'.split('--', 1) }} {{ 'a b c d'.rsplit(None, 2) }} {{ ''.split() }} {{ ''.split(',') }} {{ 'x\\ny'.split('\\n') }}"),
    ("misc_strip_chars", "[{{ '--a--'.lstrip('-') }}][{{ '--a--'.rstrip('-') }}][{{ 'abcXcba'.strip('abc') }}][{{ '\\t\\n x \\r\\n'.strip() }}][{{ '..x..' | trim('.') }}]"),
    ("misc_replace_edge", "{{ 'aaa'.replace('a', 'b', 2) }} {{ 'abc'.replace('', '-') }} {{ 'abc' | replace('b', '') }} {{ 'a.b'.replace('.', '\\n') | length }}"),
    ("misc_startswith_tuple", "{{ 'hello'.startswith(('x', 'he')) }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith('') }} {{ '<tool_call>x'.startswith('<tool_call>') }}"),
    ("misc_if_is_not", "{% if nul is not none %}a{% elif t is not false %}b{% endif %}{% if s is not string %}c{% else %}d{% endif %}"),
    ("misc_set_in_if_in_loop", "{% set ns = namespace(found=false) %}{% for m in messages %}{% if m.role == 'tool' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }}"),
    ("misc_reverse_loop_messages", "{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %} {% for m in messages | reverse %}{{ loop.index }}{% endfor %}"),
    ("misc_chained_filters", "{{ '  A,B , c ' | trim | lower | replace(' ', '') | length }} {{ messages | length > 2 }} {{ (messages | last).role }}"),
    ("misc_capitalize_title", "{{ 'élan vital' | capitalize }} {{ \"o'neil mc-d\" | title }} {{ \"o'neil\".title() }} {{ 'ABC def'.swapcase() }}"),
    ("with_statement", "{% set a = 'outer' %}{% with a = 'inner', b = a %}{{ a }} {{ b }}{% endwith %} {{ a }}{% with %}[{{ a }}]{% endwith %}"),
    ("slice_huge_steps", "{{ 'abcdef'[1::9223372036854775807] }}|{{ items[::-9223372036854775807] }}|{{ 'abc'[-9223372036854775807:9223372036854775807] }}|{{ items[5:-100:-1] }}"),
    # type errors
    ("type_error_concat", "{{ 'a' + 1 }}"),
    ("type_error_iter_int", "{% for x in 5 %}{% endfor %}"),
    ("zero_division", "{{ 1 // 0 }}"),
    # syntax errors
    ("syntax_unclosed_if", "{% if true %}never closed"),
    ("syntax_bad_expr", "{{ 1 + }}"),
    ("syntax_unknown_tag", "{% frobnicate %}"),
]


def render(env, src):
    try:
        return {"output": env.from_string(src).render(**VARS)}
    except Exception as e:  # noqa: BLE001 - record whatever Jinja2 raised
        return {"error": f"{type(e).__name__}: {e}"}


def c_str(s):
    out = []
    for ch in s.encode("utf-8"):
        if ch == ord('"'):
            out.append('\\"')
        elif ch == ord("\\"):
            out.append("\\\\")
        elif ch == ord("\n"):
            out.append("\\n")
        elif ch == ord("?"):
            out.append("\\?")  # no trigraphs
        elif 0x20 <= ch < 0x7F:
            out.append(chr(ch))
        else:
            out.append(f'\\{ch:03o}')
    return '"' + "".join(out) + '"'


# Real GGUF files (../shared/testdata/llama-cpp-vocab) whose metadata carries chat templates:
# (file, named template or None, conversation id from ../shared/testdata/templates/conversations.json)
GGUF_CASES = [
    ("ggml-vocab-qwen2.gguf", None, "system_multi_turn"),
    ("ggml-vocab-phi-3.gguf", None, "system_multi_turn"),
    ("ggml-vocab-gemma-4.gguf", None, "tools_call_roundtrip"),
    ("ggml-vocab-command-r.gguf", None, "unicode_and_quotes"),
    ("ggml-vocab-command-r.gguf", "tool_use", "tools_call_roundtrip"),
    ("ggml-vocab-command-r.gguf", "rag", "single_user_gen"),
]


# More conversations for every real template in ../shared/testdata/templates/templates (list
# content parts, enable_thinking, reasoning_content, string tool arguments, several tool calls,
# whitespace in content): written to test_template_extra_conversations.json and
# test_template_extra_golden.jsonl, rendered by test_template_golden.c.
EXTRA_BASE_VARS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>"}
EXTRA_CONVERSATIONS = [
 ("parts", {"add_generation_prompt": True}, [{"role": "system", "content": [{"type": "text", "text": "Sys part"}]}, {"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image"}, {"type": "text", "text": " here"}]}], None),
 ("think", {"add_generation_prompt": True, "enable_thinking": False}, [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "<think>\nhmm\n</think>\n\na1", "reasoning_content": "because"}, {"role": "user", "content": "q2"}], None),
 ("think_on", {"add_generation_prompt": False, "enable_thinking": True}, [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1", "reasoning_content": "rc"}], None),
 ("strargs", {"add_generation_prompt": True}, [{"role": "user", "content": "call it"}, {"role": "assistant", "content": None, "tool_calls": [{"id": "abcdefghi", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]}, {"role": "tool", "tool_call_id": "abcdefghi", "content": "42"}, {"role": "assistant", "content": "done"}, {"role": "user", "content": "thanks"}], [{"type": "function", "function": {"name": "f", "description": "does f", "parameters": {"type": "object", "properties": {"a": {"type": "integer", "description": "an int"}}, "required": ["a"]}}}]),
 ("multi_tools", {"add_generation_prompt": True}, [{"role": "system", "content": "sys"}, {"role": "user", "content": "two calls"}, {"role": "assistant", "content": "sure", "tool_calls": [{"id": "123456789", "type": "function", "function": {"name": "g", "arguments": {"x": [1, 2.5, None], "y": "é"}}}, {"id": "987654321", "type": "function", "function": {"name": "h", "arguments": {}}}]}, {"role": "tool", "tool_call_id": "123456789", "name": "g", "content": "r1"}, {"role": "tool", "tool_call_id": "987654321", "name": "h", "content": "r2"}], [{"type": "function", "function": {"name": "g", "description": "G", "parameters": {"type": "object", "properties": {"x": {"type": "array", "items": {"type": "number"}}, "y": {"type": "string", "enum": ["é", "b"]}}}}}, {"type": "function", "function": {"name": "h", "description": "H", "parameters": {"type": "object", "properties": {}}}}]),
 ("long_user_only", {"add_generation_prompt": False}, [{"role": "user", "content": "a\n\n  b\t c  "}, {"role": "assistant", "content": "  spaced  "}, {"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}], None),
]


def write_extra_golden(env):
    testdata = os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "shared", "testdata", "templates")
    conversations = []
    for cid, v, msgs, tools in EXTRA_CONVERSATIONS:
        c = {"id": cid, "vars": dict(EXTRA_BASE_VARS, **v), "messages": msgs}
        if tools:
            c["tools"] = tools
        conversations.append(c)
    with open(os.path.join(HERE, "test_template_extra_conversations.json"), "w", encoding="utf-8") as f:
        json.dump(conversations, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n = 0
    with open(os.path.join(HERE, "test_template_extra_golden.jsonl"), "w", encoding="utf-8") as f:
        for name in sorted(os.listdir(os.path.join(testdata, "templates"))):
            if not name.endswith(".jinja"):
                continue
            with open(os.path.join(testdata, "templates", name), encoding="utf-8") as tf:
                src = tf.read()
            for c in conversations:
                kwargs = dict(c["vars"])
                kwargs["messages"] = c["messages"]
                if "tools" in c:
                    kwargs["tools"] = c["tools"]
                rec = {"template": name[:-6], "conversation": c["id"]}
                try:
                    rec["output"] = env.from_string(src).render(**kwargs)
                except Exception as e:  # noqa: BLE001
                    rec["error"] = f"{type(e).__name__}: {e}"
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                n += 1
    print(f"wrote {n} extra golden records", file=sys.stderr)


def gguf_rows(env):
    import gguf  # the reference reader, only needed to regenerate

    testdata = os.path.join(os.path.dirname(os.path.dirname(HERE)), "..", "shared", "testdata")
    with open(os.path.join(testdata, "templates", "conversations.json"), encoding="utf-8") as f:
        convs = {c["id"]: c for c in json.load(f)}
    rows = []
    for fname, variant, conv_id in GGUF_CASES:
        reader = gguf.GGUFReader(os.path.join(testdata, "llama-cpp-vocab", fname))
        key = "tokenizer.chat_template" + (f".{variant}" if variant else "")
        field = reader.fields[key]
        src = bytes(field.parts[field.data[0]]).decode("utf-8")
        conv = convs[conv_id]
        kwargs = dict(conv["vars"])
        kwargs["messages"] = conv["messages"]
        if "tools" in conv:
            kwargs["tools"] = conv["tools"]
        try:
            r = {"output": env.from_string(src).render(**kwargs)}
        except Exception as e:  # noqa: BLE001
            r = {"error": f"{type(e).__name__}: {e}"}
        rows.append((fname, variant, conv_id, r.get("output"), r.get("error")))
    return rows


def main():
    env = make_env()
    rows = []
    for name, src in CASES:
        r = render(env, src)
        rows.append((name, src, r.get("output"), r.get("error")))
    path = os.path.join(HERE, "test_template_cases.c")
    with open(path, "w") as f:
        f.write("/* test_template_cases.c - GENERATED by test_template_cases_gen.py from Python Jinja2 "
                f"{jinja2.__version__}\n * in transformers' environment; do not edit. One Jinja feature per "
                "case: the expected\n * output, or the exception Python raised. The checks live in "
                "test_template_features.c. */\n")
        f.write('#include "test_template_cases.h"\n\n')
        f.write("const char TPL_CASE_VARS[] = " + c_str(json.dumps(VARS, ensure_ascii=False)) + ";\n\n")
        f.write("const tpl_case TPL_CASES[] = {\n")
        for name, src, out, err in rows:
            f.write(f"    {{{c_str(name)},\n     {c_str(src)},\n     "
                    f"{c_str(out) if out is not None else 'NULL'},\n     "
                    f"{c_str(err) if err is not None else 'NULL'}}},\n")
        f.write("    {NULL, NULL, NULL, NULL},\n};\n\n")
        f.write("const tpl_gguf_case TPL_GGUF_CASES[] = {\n")
        for fname, variant, conv_id, out, err in gguf_rows(env):
            f.write(f"    {{{c_str(fname)}, {c_str(variant) if variant else 'NULL'}, {c_str(conv_id)},\n     "
                    f"{c_str(out) if out is not None else 'NULL'},\n     "
                    f"{c_str(err) if err is not None else 'NULL'}}},\n")
        f.write("    {NULL, NULL, NULL, NULL, NULL},\n};\n")
    print(f"wrote {len(rows)} cases to {path}", file=sys.stderr)
    write_extra_golden(env)


if __name__ == "__main__":
    main()
