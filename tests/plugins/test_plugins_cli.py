"""`plume plugins`, `plume plugins --check` and `plume check` from the
command line, with the fixture plugins."""
import os
import shutil
import subprocess
import sys
import tempfile

from out_of_tree import header_abi

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

plume, fixtures = sys.argv[1:3]
build_plugins = os.path.join(os.environ["PLUME_BUILD_ROOT"], "plugins")
ABI = header_abi()


def run(*args, rc=0):
    r = subprocess.run([plume, *args], capture_output=True, text=True)
    check(r.returncode == rc, (args, r.returncode, r.stdout, r.stderr))
    return r


def plugin_rows(out):
    """The plugin-file table of `plume plugins`: {file: (name, version, abi,
    status, second line)}, in order."""
    lines = out.splitlines()
    check(lines[0] == "plugin files on the plugin path:", lines[:2])
    check(lines[1].split()[:5] == ["PLUGIN", "VERSION", "ABI", "STATUS", "FILE"], lines[1])
    rows = {}
    i = 2
    while i < len(lines) and lines[i].strip() and not lines[i].startswith("  ("):
        f = lines[i].split()
        check(len(f) == 5 and lines[i + 1].startswith("    "), lines[i:i + 2])
        rows[f[4]] = (f[0], f[1], f[2], f[3], lines[i + 1].strip())
        i += 2
    return rows


def provider_lines(out):
    lines = out.splitlines()
    i = lines.index("registered providers (built-in, and those of the loaded plugins):")
    check(lines[i + 1].split() == ["KIND", "NAME", "VERSION", "PLUGIN", "ABI", "FILE"], lines[i + 1])
    return lines[i + 2:]


r = run("plugins")
lines = provider_lines(r.stdout)
for kind, name in [("weight-format", "gguf"), ("weight-format", "safetensors"),
                   ("linear", "native"), ("backend", "cpu"), ("sampler", "standard"),
                   ("scheduler", "continuous")]:
    check(any(l.split()[:2] == [kind, name] and l.split()[-1] == "built-in" for l in lines), (kind, name))

# Every in-tree plugin of the build is listed from the build tree, not loaded.
rows = plugin_rows(r.stdout)
in_tree = sorted(d for d in os.listdir(build_plugins)
                 if os.path.isfile(os.path.join(build_plugins, d, f"plume-{d}.so")))
check({"spec-ngram", "quant-gptq"} <= set(in_tree), in_tree)
for d in in_tree:
    f = os.path.join(build_plugins, d, f"plume-{d}.so")
    check(f in rows, (f, rows))
    name, version, abi, status, provs = rows[f]
    check(name == d and abi == ABI and status == "available" and version != "?", rows[f])
check(rows[os.path.join(build_plugins, "spec-ngram", "plume-spec-ngram.so")][4] == "proposer:ngram",
      rows)
check(rows[os.path.join(build_plugins, "quant-gptq", "plume-quant-gptq.so")][4] == "linear:gptq", rows)

# Loaded by --plugin: "loaded"; its providers are registered.
r = run("plugins", "--plugin", "spec-ngram")
check(plugin_rows(r.stdout)[os.path.join(build_plugins, "spec-ngram", "plume-spec-ngram.so")][3]
      == "loaded", r.stdout)
check(any(l.split()[:2] == ["proposer", "ngram"] for l in provider_lines(r.stdout)), r.stdout)

# The fixtures: the good one available, each broken one rejected with its
# reason; a second copy of a name later on the path is shadowed.
with tempfile.TemporaryDirectory() as later:
    shutil.copy(os.path.join(fixtures, "plume-good.so"), later)
    r = run("plugins", "--plugin-dir", fixtures, "--plugin-dir", later)
    rows = plugin_rows(r.stdout)
    good = rows[os.path.join(fixtures, "plume-good.so")]
    check(good == ("good", "1.2.3", ABI, "available", "sampler:fixture-argmax, proposer:fixture-repeat"),
          good)
    check(rows[os.path.join(later, "plume-good.so")][:4] == ("good", "1.2.3", ABI, "shadowed"), rows)
    for name, needle in [("noentry", "not a plume plugin"), ("badmagic", "magic is 0x12345678"),
                         ("abimajor", "built for plume ABI %d.%s" % (int(ABI.split(".")[0]) + 1, ABI.split(".")[1])), ("misnamed", "file name says"),
                         ("initfail", "init failed: cannot open")]:
        row = rows[os.path.join(fixtures, f"plume-{name}.so")]
        check(row[3] == "rejected" and needle in row[4], (name, row))

r = run("plugins", "--plugin-dir", fixtures, "--plugin", "good")
check(any(l.split() == ["sampler", "fixture-argmax", "1.2.3", "good", ABI,
                        os.path.join(os.path.realpath(fixtures), "plume-good.so")]
          for l in provider_lines(r.stdout)), r.stdout)
check(plugin_rows(r.stdout)[os.path.join(fixtures, "plume-good.so")][3] == "loaded", r.stdout)
check(any(l.strip() == fixtures for l in r.stdout.splitlines()), "search path not listed")

good = os.path.join(fixtures, "plume-good.so")
r = run("plugins", "--check", good)
check("plume plugin 'good' 1.2.3, built for plume ABI " + ABI in r.stdout, r.stdout)
check("would register 2 providers:" in r.stdout, r.stdout)
check("  sampler        fixture-argmax (interface version 1)" in r.stdout, r.stdout)
check("  proposer       fixture-repeat (interface version 2)" in r.stdout, r.stdout)

for name, needle in [("noentry", "not a plume plugin"), ("badmagic", "magic is 0x12345678"),
                     ("abimajor", "built for plume ABI %d.%s" % (int(ABI.split(".")[0]) + 1, ABI.split(".")[1])), ("abiminor", "newer than"),
                     ("toosmall", "descriptor of 16 bytes"), ("initfail", "init failed: cannot open"),
                     ("dup", "already registered by plugin 'core'")]:
    r = run("plugins", "--check", os.path.join(fixtures, f"plume-{name}.so"), rc=1)
    check(needle in r.stderr and r.stderr.count("\n") == 1, (name, r.stderr))

r = run("plugins", "--plugin", "no-such-plugin", rc=1)
check("plume plugins: plugin 'no-such-plugin' not found: no plume-no-such-plugin.so" in r.stderr, r.stderr)

# plume check with a provider from a fixture plugin, and an unknown one
tiny = os.path.join(os.environ["PLUME_BUILD_ROOT"], "tests", "tiny.gguf")
p = os.path.join(fixtures, "cli_check.yaml")
with open(p, "w") as f:
    f.write(f"model: {tiny}\nplugins: [good]\nsampling: {{ method: fixture-argmax, offset: 3 }}\n"
            "speculative: { method: fixture-repeat, num_speculative_tokens: 3 }\n")
r = run("check", "--plugin-dir", fixtures, p)
check("  method: fixture-argmax" in r.stdout and "  offset: 3" in r.stdout, r.stdout)
check("speculative:\n  method: fixture-repeat" in r.stdout, r.stdout)
with open(p, "w") as f:
    f.write(f"model: {tiny}\nsampling: {{ method: fixture-argmax }}\n")
r = run("check", p, rc=1)
check(r.stderr.strip() == (f"{p}:2:21: sampling.method: no sampler provider 'fixture-argmax'; "
                            "available: standard (a plugin that provides it must be listed in "
                            "plugins:)"), r.stderr)
os.remove(p)
print("ok")
