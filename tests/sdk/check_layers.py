"""The include rules of DESIGN.md's "who may use whom", checked on the tree.

    check_layers.py SOURCE_ROOT

A quoted #include of a header under core/src is the tell of one layer
reaching into another's internals.  For each directory, the prefixes its
quoted includes may start with:
  core/src/cli    plume/ (the SDK), cli/, serve/ (libplume-serve's headers)
  core/src/serve  plume/, serve/: the engine API and its own files
  core/src/model  no backend/: the model calls the backend interface only
  core/src/engine no backend/, cli/, serve/
  core/src/backend/cpu  no model/, engine/
  plugins/*       plume/ and the plugin's own or shared plugin headers
Prints one line per offending include, saying which rule and what to do;
exits 1 if there is any.
"""
import glob
import os
import re
import sys

RULES = [
    ("core/src/cli", {"allow": ("plume/", "cli/", "serve/")},
     "the CLI uses public headers only: add what it needs to core/include/plume "
     "(or to libplume-serve for HTTP)"),
    ("core/src/serve", {"allow": ("plume/", "serve/")},
     "libplume-serve uses the engine API (core/include/plume) only"),
    ("core/src/model", {"deny": ("backend/",)},
     "the model calls the backend interface (plume/backend.h), never a backend's files"),
    ("core/src/engine", {"deny": ("backend/", "cli/", "serve/")},
     "the engine knows no backend, no command line and no server"),
    ("core/src/backend/cpu", {"deny": ("model/", "engine/")},
     "a backend implements plume/backend.h and knows no model"),
    ("plugins", {"deny": ("runtime/", "engine/", "model/", "backend/", "formats/", "tokenizer/",
                          "sample/", "serve/", "cli/", "quant/", "convert/", "eval/")},
     "a plugin includes core/include/plume only"),
]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def main():
    root = sys.argv[1]
    bad = []
    n = 0
    for d, rule, why in RULES:
        for path in sorted(glob.glob(os.path.join(root, d, "**", "*"), recursive=True)):
            if not path.endswith((".c", ".h", ".cu", ".cuh")):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                n += 1
                if "/" not in inc:
                    continue  # a file next to it
                if "allow" in rule:
                    ok = inc.startswith(rule["allow"])
                else:
                    ok = not inc.startswith(rule["deny"])
                if not ok:
                    bad.append(f"{os.path.relpath(path, root)}: #include \"{inc}\" crosses a "
                               f"layer: {why} (DESIGN.md, who may use whom)")
    for b in bad:
        print(b, file=sys.stderr)
    print(f"check_layers: {n} quoted includes checked, {len(bad)} crossing a layer")
    sys.exit(1 if bad else 0)


main()
