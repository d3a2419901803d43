"""Small templates, one or a few constructs each, rendered by plume's Jinja
engine (jinja_render --cases) and by jinja2 as transformers sets it up; the
outputs must be byte-identical, and where jinja2 raises plume must raise
with one line that names the line and column.

usage: cases.py RENDERER     (exits 77 when jinja2/transformers are missing)"""
import json
import subprocess
import sys

M = [{"role": "system", "content": "S"}, {"role": "user", "content": " Hi\n"},
     {"role": "assistant", "content": "Yo", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}]
CTX = {"messages": M, "n": 3, "f": 2.5, "s": "Hello, World", "u": "héllo 東京", "l": [3, 1, 2],
       "d": {"b": 1, "a": [1, 2], "c": {"x": None}}, "t": True, "none": None, "e": "", "z": 0}

CASES = [
    # whitespace control, trim_blocks, lstrip_blocks, comments, trailing newline
    "a\n  {% if t %}\n  x\n  {% endif %}\nb\n",
    "a  {%- if t -%}  x  {%- endif -%}  b",
    "a\n  {%+ if t %}x{% endif +%}\nb",
    "  {# c #}\nx\n{#- c -#}  y",
    "{{ 1 }}\n{{- 2 }}  {{ 3 -}}  \n 4\n\n",
    "x\r\ny\rz\n",
    "  {{ 'v' }}\n  {% set q = 1 %}\n  w",
    # expressions and operators
    "{{ 1 + 2 * 3 - 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}",
    "{{ 'a' ~ 1 ~ none ~ t }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ (1, 2) + (3,) }}",
    "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' in 'cat' }} {{ 2 not in l }} {{ 'b' in d }} {{ not e }}",
    "{{ t and 'y' or 'n' }} {{ e or 'dflt' }} {{ z or none }} {{ 1 if z else 2 }} {{ 'x' if t }}",
    "{{ 1 == 1.0 }} {{ t == 1 }} {{ none == none }} {{ [1, 2] == [1, 2] }} {{ d == d }}",
    "{{ f }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-05 }} {{ 123456789.0 }} {{ 3 / 1 }} {{ -0.0 }}",
    "{{ l }} {{ d }} {{ (1,) }} {{ () }} {{ none }} {{ t }} {{ {'k': 'it\\'s'} }} {{ ['a\"b', \"c'd\"] }}",
    "{{ s[0] }} {{ s[-1] }} {{ s[1:4] }} {{ s[::-1] }} {{ s[:100] }} {{ l[1:] }} {{ l[::2] }} {{ u[1:3] }} {{ u[-2:] }}",
    "{{ d.b }} {{ d['a'][1] }} {{ d.c.x }} {{ d.missing }}|{{ l[10] }}|{{ none.x }}|{{ d.a.0 }}",
    "{{ 'a\\tb\\n\\\\ \\x41 \\u00e9' }}",
    "{{ 'x' 'y' }} {{ \"it's\" }}",
    # statements
    "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
    "{% for x in l if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% else %}none{% endfor %}",
    "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
    "{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for x in l %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }} {% endfor %}",
    "{% set x = 1 %}{% for i in l %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
    "{% set ns = namespace(c=0, items=[]) %}{% for i in l %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t2 = 1, 2 %}{{ t2 }}",
    "{% set blk %}  inner {{ n }} {% endset %}[{{ blk }}]{% set b2 | upper | trim %} q {% endset %}[{{ b2 }}]",
    "{% macro m(a, b='B', c=none) %}<{{ a }}{{ b }}{{ c }}{{ varargs }}{{ kwargs }}>{% endmacro %}{{ m(1) }}{{ m(1, 2, 3, 4, k=5) }}{{ m(a='x', c='y') }}",
    "{% macro outer() %}[{{ caller() }}]{% endmacro %}{% call outer() %}body {{ n }}{% endcall %}",
    "{% macro li(x) %}<{{ caller(x * 2) }}>{% endmacro %}{% call(v) li(4) %}v={{ v }}{% endcall %}",
    "{% filter upper %}hello {{ s }}{% endfilter %}",
    "{% if z %}a{% elif e %}b{% elif n > 2 %}c{% else %}d{% endif %}",
    "{% macro r(k) %}{% if k > 0 %}{{ k }}{{ r(k - 1) }}{% endif %}{% endmacro %}{{ r(5) }}",
    "{% generation %}gen{% endgeneration %}",
    "a\n  {% raw %}{{ x }} {% if %}\n  {% endraw %}\nb {%- raw -%}  c  {%- endraw -%}  d{% raw %}e{% endraw %}",
    "{% raw %}never closed",
    # filters
    "{{ l|length }} {{ s|length }} {{ u|length }} {{ d|count }} {{ undefined_var|length }}",
    "{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}",
    "{{ d|tojson }} {{ M[2].tool_calls|tojson }} {{ u|tojson }} {{ 'a\"\\n\\t\\u0001<>&'|tojson }}",
    "{{ d|tojson(indent=2) }}|{{ l|tojson(indent=4) }}|{{ {}|tojson(indent=2) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(sort_keys=true) }}",
    "{{ f|tojson }} {{ 1e100|tojson }} {{ none|tojson }} {{ t|tojson }} {{ (1, 2)|tojson }} {{ u|tojson(ensure_ascii=true) }}",
    "{{ undefined_var|default('dv') }} {{ e|default('dv') }} {{ e|default('dv', true) }} {{ none|d('x', boolean=true) }}",
    "{{ l|join(', ') }} {{ M|map(attribute='role')|join('/') }} {{ ['a', 'b']|join }}",
    "{{ M|selectattr('role', 'equalto', 'user')|list|length }} {{ M|rejectattr('role', 'eq', 'user')|map(attribute='content')|list }}",
    "{{ M|selectattr('tool_calls', 'defined')|list|length }} {{ l|select('odd')|list }} {{ l|reject('even')|list }}",
    "{{ l|sort }} {{ l|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} {{ M|sort(attribute='role')|map(attribute='role')|list }}",
    "{{ l|first }} {{ l|last }} {{ l|min }} {{ l|max }} {{ l|sum }} {{ l|reverse|list }} {{ s|reverse }} {{ [1, 1, 2, 'a', 'A']|unique|list }}",
    "{{ d|dictsort }} {{ d|items|list }} {{ s|replace('l', 'L') }} {{ s|replace('l', 'L', 1) }} {{ l|list }} {{ s|list|length }}",
    "{{ '3'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 2|float }} {{ -3|abs }} {{ 2.567|round(2) }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(width='> ', blank=true) }}",
    "{{ s|safe }} {{ '<b>'|e }} {{ ('<'|safe) + '<' }} {{ n|string ~ 'x' }} {{ l|string }} {{ '%s-%d'|format('a', 3) }}",
    "{{ 'a b  c'|wordcount }} {{ 'x'|center(5) }}| {{ l|batch(2)|list }}",
    "{{ u|upper }}|{{ 'ÀÉÎõü ßÿ ĀăĿŉ ΑΒΓ ΟΔΟΣ ς Жёж µ'|upper }}|{{ 'ÀÉÎõü ĀăĿ ΑΒΓ ΟΔΟΣ ΣΑ Жё'|lower }}",
    "{{ \"éCOLE ßtraße 東京abc ΟΔΟΣ ΑΒ they're a-b(c [d <e\"|title }}|{{ 'ßa'|capitalize }}|{{ 'ÉCOLE'.lower() }}|{{ 'straße'.upper() }}",
    "{{ \"hello wORLD they're 東京abc\".title() }}|{{ 'élan'.capitalize() }}",
    # tests
    "{{ n is number }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ s is sequence }} {{ none is none }} {{ x is defined }} {{ x is undefined }}",
    "{{ t is boolean }} {{ n is integer }} {{ f is float }} {{ t is true }} {{ z is false }} {{ n is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(2) }}",
    "{{ 'ab' is lower }} {{ 'AB' is upper }} {{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 'a' is in 'cat' }} {{ none is sameas none }} {{ n is not none }} {{ undefined_x is iterable }}",
    # methods
    "{{ ' a b '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}",
    "{{ ' a  b \\t c '.rsplit(none, 1) }}|{{ 'a b  c d'.rsplit(none, 2) }}|{{ '  x \\u3000 y'.rsplit(none, 1) }}|{{ 'one'.rsplit(none, 1) }}",
    "{{ 'a b c '.split(none, 1) }}|{{ '  a b  '.split(none, 0) }}|{{ ' a b '.split(none, 1) }}|{{ 'a\\tb\\n'.split(none, 1) }}",
    "{{ 2.5|round }} {{ 0.125|round(2) }} {{ 3|round }} {{ -2.5|round }} {{ 1.5|round }} {{ 2.675|round(2) }} {{ 1250|round(-2) }} {{ 1350|round(-2) }} {{ -1250|round(-2) }} {{ 1250.0|round(-2) }} {{ true|round }} {{ 7|round(1, 'floor') }} {{ 2.5|round(0, 'ceil') }}",
    "{{ 4000000000000000000|round(-19) }} {{ 9223372036854775800|round(-2) }} {{ -9223372036854775807|round(-30) }} {{ 5000000000000000000|round(-19) }} {{ -5000000000000000000|round(-19) }} {{ 15|round(-1) }} {{ 25|round(-1) }} {{ -15|round(-1) }}",
    "{{ 'a\\x7fb'|tojson }}|{{ {'k': 'x\\x7f'}|tojson }}",
    "{% set b %}{% set y = 1 %}in{{ y }}{% endset %}{{ b }}|{{ y is defined }}|{% filter upper %}{% set z = 2 %}{{ z }}x{% endfilter %}|{{ z is defined }}|{% set ns = namespace(v=0) %}{% set c %}{% set ns.v = 5 %}{% endset %}{{ ns.v }}",
    "{{ s.startswith('He') }} {{ s.endswith(('x', 'ld')) }} {{ s.upper() }} {{ s.lower() }} {{ s.replace('o', '0') }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.count('l') }}",
    "{{ '{} and {}'.format(1, 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{a}-{b!r}'.format(a=1, b='q') }} {{ '{:>5}|{:<4}|'.format('r', 'l') }} {{ '{{x}}'.format() }}",
    "{{ ', '.join(['a', 'b']) }} {{ 'line1\\nline2\\r\\nline3'.splitlines() }} {{ s.title() }} {{ 'abc'.capitalize() }} {{ s.isdigit() }} {{ '12'.isdigit() }}",
    "{{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list|length }} {{ d.items()|list|length }}",
    "{{ l.index(2) }} {{ l.count(1) }} {{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ dict(a=1, b=2) }} {{ namespace(a=1).a }}",
    "{{ strftime_now('%Y-%m-%d %d %b %Y %H:%M') }}",
    "{{ '%s|%5s|%-3d|%03d|%.2f|%x|%%'|format('a', 'b', 7, 5, 3.14159, 255) }}",
    # undefined semantics and errors (both must raise)
    "{{ undefined_var }}|{{ undefined_var ~ 'x' }}|{% if undefined_var %}y{% else %}n{% endif %}|{% for x in undefined_var %}{{ x }}{% endfor %}",
    "{{ undefined_var.attr }}",
    "{{ undefined_var + 1 }}",
    "{{ d.missing.deeper }}",
    "{{ raise_exception('custom failure') }}",
    "{{ l.append(4) }}",
    "{{ 1 / 0 }}",
    "{{ 'a' + 1 }}",
    "{{ d|tojson(indent=none) }}{{ M|map(attribute='role')|tojson }}",
    "{% for x in l %}",
    "{% if t %}x{% endfor %}",
    "{{ 1 + }}",
    "{% unknowntag %}",
    "{{ n|nosuchfilter }}",
    "{% if false %}{{ n|nosuchfilter }}{% endif %}ok",
    "{{ 'abc'[5] }}|{{ none[0] }}|{{ n[0] }}",
    "{{ M|selectattr('role', 'equalto', 'user')|length }}",
    "{% set ns = namespace(_x=1) %}",
    "{% set l2 = l %}{% set l2.x = 1 %}",
]

# Hostile templates: each must fail with one line naming the limit it hit
# (jinja2 would run out of stack or time on them, so there is no oracle).
LIMIT_CASES = [
    ("{% macro m(n) %}" + "{% if true %}" * 150 + "{{ m(n+1) }}" + "{% endif %}" * 150 +
     "{% endmacro %}{{ m(0) }}", "levels deep"),
    ("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}"
     "{% endfor %}{{ ns.x }}", "nested more than"),
    ("{% set ns = namespace(x=[]) %}{% for i in range(3000) %}{% set ns.x = [ns.x] %}"
     "{% endfor %}{{ ns.x|tojson }}", "nested more than"),
    ("{% for i in range(1000000) %}{% for j in range(1000000) %}x{% endfor %}{% endfor %}",
     "MiB of memory"),
    ("{% for i in range(300000) %}{{ (" + " + ".join(["i"] * 70) + ") * 0 }}{% endfor %}",
     "steps"),
    ("{{ 'x' * 100000000 }}", "too long"),
    ("{% for i in range(10000000) %}{% endfor %}", "range() of more than"),
    ("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "recurses"),
    ("{{ " + "(" * 300 + "1" + ")" * 300 + " }}", "levels deep"),
    ("{{ " + "-" * 5000 + "1 }}", "levels deep"),
    # work on large values counts as steps: scanning, membership, unique
    ("{% set big = 'a' * 4000000 %}{% for i in range(1000000) %}{{ big.find('zzzz') }}"
     "{% endfor %}", "steps"),
    ("{% set l = range(100000)|list %}{% for i in range(100000) %}{{ 99999 in l }}{% endfor %}",
     "steps"),
    ("{% set l = range(100000)|list %}{{ l|unique|list|length }}", "steps"),
    # integers are 64-bit: where Python's would grow, a clear error
    ("{{ 9223372036854775807|round(-1) }}", "does not fit in a 64-bit integer"),
    ("{{ 6000000000000000000|round(-19) }}", "does not fit in a 64-bit integer"),
]


def check_limits(renderer):
    inp = "".join(json.dumps({"template": c, "context": {}}) + "\n" for c, _ in LIMIT_CASES).encode()
    proc = subprocess.run([renderer, "--cases"], input=inp, capture_output=True, timeout=300)
    results = [json.loads(l) for l in proc.stdout.decode().splitlines()]
    failures = 0
    for (case, want), res in zip(LIMIT_CASES, results):
        if res["ok"] or want not in res["error"] or "line " not in res["error"]:
            failures += 1
            print(f"FAIL limit case {case[:60]!r}...: {res}")
    if len(results) != len(LIMIT_CASES):
        failures += 1
        print(f"FAIL: the renderer answered {len(results)} of {len(LIMIT_CASES)} limit cases "
              f"(exit {proc.returncode}: {proc.stderr.decode()[-300:]})")
    print(f"{len(LIMIT_CASES) - failures} of {len(LIMIT_CASES)} hostile templates stopped at a limit")
    return failures


def main():
    renderer = sys.argv[1]
    try:
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        from conformance import NOW, oracle
        import jinja2  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}; run scripts/install-deps")
        return 77
    inp = "".join(json.dumps({"template": c, "context": CTX}) + "\n" for c in CASES).encode()
    proc = subprocess.run([renderer, "--cases", "--now", str(int(NOW.timestamp()))], input=inp,
                          capture_output=True)
    if proc.returncode != 0:
        print(f"FAIL: the renderer exited {proc.returncode}: {proc.stderr.decode()[-500:]}")
        return 1
    results = [json.loads(l) for l in proc.stdout.decode().splitlines()]
    failures = 0
    raised = 0
    for case, res in zip(CASES, results):
        try:
            want_ok, want = True, oracle(case).render(**CTX)
        except Exception as e:
            want_ok, want = False, f"{type(e).__name__}: {e}"
        if want_ok and res["ok"] and res["out"] == want:
            continue
        if not want_ok and not res["ok"]:
            raised += 1
            err = res["error"]
            if "\n" in err or "line " not in err or "column " not in err:
                failures += 1
                print(f"FAIL {case!r}: the error is not one line naming line and column: {err!r}")
            continue
        failures += 1
        got = res["out"] if res["ok"] else "ERROR " + res["error"]
        exp = want if want_ok else "ERROR " + want
        print(f"FAIL {case!r}\n  jinja2: {exp!r}\n  plume:  {got!r}")
    print(f"{len(CASES) - failures} of {len(CASES)} cases match jinja2 ({raised} raise in both)")
    failures += check_limits(renderer)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
