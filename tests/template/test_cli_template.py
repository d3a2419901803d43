"""--chat-template FILE on plume generate: the file's template renders the
prompt (seen in the prompt's token count), a broken template or a missing
file is one error line naming the file (and the line and column), and
plume info says whose template the model uses.

usage: test_cli_template.py PLUME TINY_GGUF"""
import os
import re
import subprocess
import sys
import tempfile


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120)


def prompt_tokens(stderr):
    m = re.search(r"prompt: (\d+) tokens", stderr)
    assert m, f"no prompt line in: {stderr!r}"
    return int(m.group(1))


def main():
    plume, model = sys.argv[1], sys.argv[2]
    fails = 0

    def check(cond, what):
        nonlocal fails
        if not cond:
            fails += 1
            print("FAIL", what)
        else:
            print("ok  ", what)

    gen = [plume, "generate", "--model", model, "--prompt", "hi", "-n", "1", "--temperature", "0"]
    with tempfile.TemporaryDirectory() as d:
        long_t = os.path.join(d, "long.jinja")
        with open(long_t, "w") as f:
            f.write("{% for m in messages %}{{ m.content }}{% endfor %}{{ ' x' * 40 }}")
        short_t = os.path.join(d, "short.jinja")
        with open(short_t, "w") as f:
            f.write("{% for m in messages %}{{ m.content }}{% endfor %}")
        bad_t = os.path.join(d, "bad.jinja")
        with open(bad_t, "w") as f:
            f.write("{% for m in messages %}\n{{ m.content + }}\n{% endfor %}")
        r_long = run(*gen, "--chat-template", long_t)
        r_short = run(*gen, "--chat-template", short_t)
        check(r_long.returncode == 0 and r_short.returncode == 0,
              f"--chat-template renders (exit {r_long.returncode}, {r_short.returncode}: "
              f"{r_long.stderr[-300:]!r})")
        if r_long.returncode == 0 and r_short.returncode == 0:
            n_long, n_short = prompt_tokens(r_long.stderr), prompt_tokens(r_short.stderr)
            check(n_long >= n_short + 40,
                  f"the file's template is the one used ({n_long} vs {n_short} prompt tokens)")
        r = run(*gen, "--chat-template", bad_t)
        err = r.stderr.strip()
        check(r.returncode == 1 and len(err.splitlines()) == 1 and bad_t in err
              and "line 2, column" in err,
              f"a broken template is one line naming the file, line and column: {err!r}")
        missing = os.path.join(d, "missing.jinja")
        r = run(*gen, "--chat-template", missing)
        err = r.stderr.strip()
        check(r.returncode == 1 and len(err.splitlines()) == 1 and missing in err,
              f"a missing file is one line naming it: {err!r}")
    r = run(plume, "info", model)
    check(r.returncode == 0 and "chat template:  the model's (Jinja; family chatml)" in r.stdout,
          f"plume info names the template: {r.stdout[-200:]!r}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
