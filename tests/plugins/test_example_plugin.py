"""The example plugin (examples/plugins/typical) built out of tree against
an installed SDK with nothing but pkg-config, loaded from a pipeline, and
sampling the way locally typical sampling should.

1. `meson install --destdir D` of this build: headers, libplume,
   plume-plugin.pc.
2. A fresh meson project in a temp dir (a copy of the example) configured
   with PKG_CONFIG_PATH/PKG_CONFIG_SYSROOT_DIR pointing into D, built and
   installed into D; its plume-typical.so lands in the .pc's pluginsdir.
3. `plume plugins --check`, `plume check` on a pipeline that lists it.
4. Generation on the tiny model: with typical_p tiny, every token must be
   the most typical one (surprisal closest to the entropy), computed here
   independently from the logits; and that must differ from greedy at
   least once.  `plume generate --pipeline` (the engine) produces the same
   tokens.  With the standard sampler at temperature 0, every token
   is the argmax.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

from out_of_tree import build_example, find, header_abi, install_sdk, run

ABI = header_abi()

plume, tiny, example_src, helper = sys.argv[1:5]
build_root = os.environ["PLUME_BUILD_ROOT"]


def require(cond, what):
    """Raises with what when cond is false (an assert would vanish under python -O)."""
    if not cond:
        raise RuntimeError("check failed: %s" % (what,))


with tempfile.TemporaryDirectory() as tmp:
    dest, env = install_sdk(build_root, tmp)
    require(os.path.exists(find(dest, "plugin.h")), "plume/plugin.h was not installed")
    pcvars = run(["pkg-config", "--variable=abi_version", "plume-plugin"], env=env).stdout.strip()
    require(pcvars == ABI, pcvars)
    pluginsdir = run(["pkg-config", "--variable=pluginsdir", "plume-plugin"], env=env).stdout.strip()
    require(pluginsdir.endswith("/plume/plugins"), pluginsdir)

    destplugins = build_example(example_src, tmp, env)
    so = os.path.join(destplugins, "plume-typical.so")
    require(os.path.exists(so), so)

    # plume plugins --check and the listing
    r = run([plume, "plugins", "--check", so])
    require("plume plugin 'typical' 0.1.0, built for plume ABI " + ABI in r.stdout, r.stdout)
    require("sampler        typical (interface version 1)" in r.stdout, r.stdout)

    def pipeline(name, sampling):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(f"model: {tiny}\nplugins: [typical]\nthreads: 1\nsampling: {sampling}\n")
        return path

    typical = pipeline("typical.yaml", "{ method: typical, typical_p: 0.000001, seed: 3 }")
    r = run([plume, "check", "--plugin-dir", destplugins, typical])
    require("method: typical" in r.stdout and "typical_p: 1e-06" in r.stdout, r.stdout)
    require("temperature: 1.0                           # default" in r.stdout, r.stdout)
    r = run([plume, "plugins", "--plugin-dir", destplugins, "--pipeline", typical])
    require(any(l.split()[:2] == ["sampler", "typical"] and so in l
               for l in r.stdout.splitlines()), r.stdout)

    # a bad setting is reported by the plugin's own validate, with its position
    bad = pipeline("bad.yaml", "{ method: typical, typical_p: 1.5 }")
    r = subprocess.run([plume, "check", "--plugin-dir", destplugins, bad],
                       capture_output=True, text=True)
    require(r.returncode == 1, 'r.returncode == 1')
    require(r.stderr.strip() == (f"{bad}:4:41: sampling.typical_p must be a number in (0.0, 1.0], "
                                f"got '1.5'"), r.stderr)

    def generate(path):
        out = run([helper, path, tiny, destplugins, "12", "1,7,42,9"]).stdout.splitlines()
        head = json.loads(out[0])
        return head, [json.loads(l) for l in out[1:]]

    def most_typical(logits):
        mx = max(logits)
        e = [math.exp(x - mx) for x in logits]
        s = sum(e)
        p = [x / s for x in e]
        h = -sum(q * math.log(q) for q in p if q > 0)
        d = [abs(-math.log(q) - h) if q > 0 else math.inf for q in p]
        return min(range(len(p)), key=lambda i: (d[i], i))

    head, steps = generate(typical)
    require(head["sampler"] == "typical", head)
    differs = 0
    for st in steps:
        lg = st["logits"]
        require(st["token"] == most_typical(lg), (st["token"], most_typical(lg)))
        differs += st["token"] != max(range(len(lg)), key=lambda i: lg[i])
    require(differs > 0, "typical sampling never differed from greedy")

    # the engine behind `plume generate --pipeline` runs the plugin's sampler:
    # its tokens are exactly the ones checked step by step above
    r = run([plume, "generate", "--plugin-dir", destplugins, "--pipeline", typical,
             "--prompt-ids", "1,7,42,9", "--max-tokens", "12", "--ignore-eos", "--json"])
    gen = json.loads(r.stdout)["token_ids"]
    require(gen == [st["token"] for st in steps], (gen, [st["token"] for st in steps]))

    greedy = pipeline("greedy.yaml", "{ method: standard, temperature: 0 }")
    head, steps = generate(greedy)
    require(head["sampler"] == "standard", 'head["sampler"] == "standard"')
    for st in steps:
        lg = st["logits"]
        require(st["token"] == max(range(len(lg)), key=lambda i: lg[i]), 'st["token"] == max(range(len(lg)), key=lambda i: lg[i])')
print("ok")
