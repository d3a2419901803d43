"""Renders every chat template in a directory with plume's Jinja engine
(tests/template/jinja_render) and with jinja2 set up exactly as transformers
sets it up (its own compile function: ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, its tojson, raise_exception, strftime_now, dict
and namespace), over the conversations of conversations.py, and checks that
the outputs are byte-identical and that plume raises where jinja2 raises.

usage: conformance.py RENDERER [TEMPLATE_DIR] [NAME_FILTER...]
TEMPLATE_DIR defaults to the 70 templates scripts/fetch-templates puts under
models/chat-templates/ (fetched on first use).  Prints one line per template
(pass/fail counts) and a total; exits 1 when any template differs or is
refused where jinja2 renders it, 77 (skip) when the templates cannot be
fetched (offline) or jinja2/transformers are missing."""
import datetime
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conversations import conversations  # noqa: E402

# strftime_now's fixed time for the comparison: 2026-07-26 12:00 UTC
NOW = datetime.datetime(2026, 7, 26, 12, 0, 0, tzinfo=datetime.timezone.utc)


def oracle(source):
    from transformers.utils.chat_template_utils import _cached_compile_jinja_template

    tmpl = _cached_compile_jinja_template(source)
    tmpl.environment.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return tmpl


def contexts():
    from transformers.utils.chat_template_utils import _alias_reasoning_fields

    out = []
    for name, messages, tools, agp, kwargs in conversations():
        ctx = {"messages": _alias_reasoning_fields(json.loads(json.dumps(messages))),
               "tools": tools, "documents": None, "add_generation_prompt": agp,
               "bos_token": "<|bos|>", "eos_token": "<|eos|>"}
        ctx.update(kwargs)
        out.append((name, ctx))
    return out


SKIP = 77
ROOT = os.environ.get("PLUME_SOURCE_ROOT",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEFAULT_DIR = os.path.join(ROOT, "models", "chat-templates", "llama-cpp-python-0.3.36")


def main():
    renderer = sys.argv[1]
    args = [a for a in sys.argv[2:] if not a.startswith("--")]
    tdir = args[0] if args and os.path.isdir(args[0]) else DEFAULT_DIR
    only = args[1:] if args and os.path.isdir(args[0]) else args
    try:
        import jinja2  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"SKIP: {e}; run scripts/install-deps")
        return SKIP
    if tdir == DEFAULT_DIR and not os.path.exists(os.path.join(tdir, ".complete")):
        if subprocess.run([os.path.join(ROOT, "scripts", "fetch-templates")]).returncode != 0:
            print("SKIP: the templates could not be fetched (offline?); run scripts/fetch-templates")
            return SKIP
    ctxs = contexts()
    lines = "".join(json.dumps(c, ensure_ascii=False) + "\n" for _, c in ctxs).encode()
    names = sorted(f for f in os.listdir(tdir) if f.endswith(".jinja"))
    if only:
        names = [n for n in names if any(o in n for o in only)]
    total_pass = total = 0
    templates_ok = 0
    refused = []
    for name in names:
        with open(os.path.join(tdir, name), encoding="utf-8") as f:
            source = f.read()
        try:
            tmpl = oracle(source)
            compile_err = None
        except Exception as e:  # jinja2 refuses the template itself
            tmpl, compile_err = None, f"{type(e).__name__}: {e}"
        proc = subprocess.run([renderer, os.path.join(tdir, name), "--now",
                               str(int(NOW.timestamp()))], input=lines, capture_output=True)
        if proc.returncode != 0:
            print(f"FAIL {name}: renderer exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
            total += len(ctxs)
            continue
        results = [json.loads(l) for l in proc.stdout.decode().splitlines()]
        npass = 0
        first_fail = None
        for (cname, ctx), res in zip(ctxs, results):
            raised = None  # the message of the template's own raise_exception
            if compile_err:
                want_ok, want = False, compile_err
            else:
                try:
                    want_ok, want = True, tmpl.render(**ctx)
                except Exception as e:
                    want_ok, want = False, f"{type(e).__name__}: {e}"
                    if type(e).__name__ == "TemplateError":
                        raised = str(e)
            if want_ok and res["ok"] and res["out"] == want:
                npass += 1
            elif not want_ok and not res["ok"] and (
                    raised is None or f"the template raised an error: {raised}" in res["error"]):
                npass += 1  # both refuse (with the template's own message when it raised)
            elif first_fail is None:
                first_fail = (cname, want_ok, want, res)
            if res.get("compile") and not compile_err and cname == ctxs[0][0]:
                refused.append((name, res["error"]))
        total_pass += npass
        total += len(ctxs)
        status = "pass" if npass == len(ctxs) else "FAIL"
        templates_ok += npass == len(ctxs)
        print(f"{status} {name}: {npass}/{len(ctxs)}" + (f" (jinja2 refuses it too: {compile_err[:100]})" if compile_err else ""))
        if first_fail:
            cname, want_ok, want, res = first_fail
            got = res.get("out") if res["ok"] else "ERROR " + res["error"]
            exp = want if want_ok else "ERROR " + want
            if want_ok and res["ok"]:
                i = next((k for k in range(min(len(got), len(exp))) if got[k] != exp[k]), min(len(got), len(exp)))
                print(f"    first difference in '{cname}' at char {i}:\n      jinja2: {exp[max(0,i-60):i+80]!r}\n      plume:  {got[max(0,i-60):i+80]!r}")
            else:
                print(f"    '{cname}': jinja2: {exp[:300]!r}\n      plume: {got[:300]!r}")
    print(f"templates: {templates_ok} of {len(names)} byte-identical on all {len(ctxs)} conversations; "
          f"renders: {total_pass} of {total} identical")
    for name, err in refused:
        print(f"refused by plume: {name}: {err}")
    return 0 if templates_ok == len(names) else 1


if __name__ == "__main__":
    sys.exit(main())
