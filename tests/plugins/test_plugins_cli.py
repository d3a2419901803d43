"""`plume plugins`, `plume plugins --check` and `plume check` from the
command line, with the fixture plugins."""
import os
import subprocess
import sys

plume, fixtures = sys.argv[1:3]


def run(*args, rc=0):
    r = subprocess.run([plume, *args], capture_output=True, text=True)
    assert r.returncode == rc, (args, r.returncode, r.stdout, r.stderr)
    return r


r = run("plugins")
lines = r.stdout.splitlines()
assert lines[0].split() == ["KIND", "NAME", "VERSION", "PLUGIN", "ABI", "FILE"], lines[0]
for kind, name in [("weight-format", "gguf"), ("weight-format", "safetensors"),
                   ("linear", "native"), ("backend", "cpu"), ("sampler", "standard"),
                   ("scheduler", "continuous")]:
    assert any(l.split()[:2] == [kind, name] and l.split()[-1] == "built-in" for l in lines), (kind, name)

r = run("plugins", "--plugin-dir", fixtures, "--plugin", "good")
assert any(l.split() == ["sampler", "fixture-argmax", "1.2.3", "good", "1.0",
                         os.path.join(os.path.realpath(fixtures), "plume-good.so")]
           for l in r.stdout.splitlines()), r.stdout
assert any(l.strip() == fixtures for l in r.stdout.splitlines()), "search path not listed"

good = os.path.join(fixtures, "plume-good.so")
r = run("plugins", "--check", good)
assert "plume plugin 'good' 1.2.3, built for plume ABI 1.0" in r.stdout, r.stdout
assert "would register 2 providers:" in r.stdout
assert "  sampler        fixture-argmax (interface version 1)" in r.stdout
assert "  proposer       fixture-repeat (interface version 1)" in r.stdout

for name, needle in [("noentry", "not a plume plugin"), ("badmagic", "magic is 0x12345678"),
                     ("abimajor", "built for plume ABI 2.0"), ("abiminor", "newer than"),
                     ("toosmall", "descriptor of 16 bytes"), ("initfail", "init failed: cannot open"),
                     ("dup", "already registered by plugin 'core'")]:
    r = run("plugins", "--check", os.path.join(fixtures, f"plume-{name}.so"), rc=1)
    assert needle in r.stderr and r.stderr.count("\n") == 1, (name, r.stderr)

r = run("plugins", "--plugin", "no-such-plugin", rc=1)
assert "plume plugins: plugin 'no-such-plugin' not found: no plume-no-such-plugin.so" in r.stderr

# plume check with a provider from a fixture plugin, and an unknown one
tiny = os.path.join(os.environ["PLUME_BUILD_ROOT"], "tests", "tiny.gguf")
p = os.path.join(fixtures, "cli_check.yaml")
with open(p, "w") as f:
    f.write(f"model: {tiny}\nplugins: [good]\nsampling: {{ method: fixture-argmax, offset: 3 }}\n"
            "speculative: { method: fixture-repeat, num_speculative_tokens: 3 }\n")
r = run("check", "--plugin-dir", fixtures, p)
assert "  method: fixture-argmax" in r.stdout and "  offset: 3" in r.stdout, r.stdout
assert "speculative:\n  method: fixture-repeat" in r.stdout, r.stdout
with open(p, "w") as f:
    f.write(f"model: {tiny}\nsampling: {{ method: fixture-argmax }}\n")
r = run("check", p, rc=1)
assert r.stderr.strip() == (f"{p}:2:21: sampling.method: no sampler provider 'fixture-argmax'; "
                            "available: standard (a plugin that provides it must be listed in "
                            "plugins:)"), r.stderr
os.remove(p)
print("ok")
