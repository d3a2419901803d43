"""libplume exports the SDK and nothing else, and plugins use nothing else.

    check_exports.py INCLUDE_DIR LIBPLUME_SO LIBPLUME_CORE_A [PLUGIN_SO ...]

The SDK is the set of functions declared in INCLUDE_DIR (core/include/plume).
Checks, each failure one line saying what is wrong and what to do:

1. every function declared in a public header carries PLUME_API (plume/api.h);
2. the dynamic symbols libplume.so defines are exactly those functions: an
   internal symbol there is a leak, a missing one breaks plugins;
3. no plugin refers to a symbol the core defines but does not export (it
   would link, since shared modules may leave symbols undefined, and then
   fail to load with RTLD_NOW);
4. libplume.so needs no HTTP library (libcurl, libmicrohttpd): those belong
   to libplume-serve (core/src/serve), so a program can embed the engine
   without an HTTP stack;
5. no header outside INCLUDE_DIR (under $PLUME_SOURCE_ROOT) reuses the
   include guard of a public one (whichever is included second would
   silently vanish).

Prints the number of exported symbols.  Exits 1 on any failure.
"""
import glob
import os
import re
import subprocess
import sys

# Exported without being SDK: nothing (the `plume` command is its own
# executable on the SDK and libplume-serve).  Keep this set empty.
NOT_SDK = set()


def statements(text):
    """Top-level declarations of a header: comments, preprocessor lines and
    the C++ extern "C" wrapper removed, split at ';' outside braces, each
    with what precedes its last '}' (a struct body, an inline function)
    dropped."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"#ifdef __cplusplus.*?#endif", " ", text, flags=re.S)
    text = re.sub(r"^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    out, depth, cur = [], 0, []
    for ch in text:
        depth += (ch == "{") - (ch == "}")
        if ch == ";" and depth == 0:
            s = " ".join("".join(cur).split())
            out.append(re.sub(r"^.*\}", "", s).strip())
            cur = []
        else:
            cur.append(ch)
    return [s for s in out if s]


def declared_functions(include_dir, errors):
    """Names of the functions the public headers declare; a declaration
    without PLUME_API is reported in errors."""
    names = {}
    for h in sorted(glob.glob(os.path.join(include_dir, "*.h"))):
        with open(h, encoding="utf-8") as f:
            text = f.read()
        for s in statements(text):
            if s.startswith("typedef") or s.startswith("static"):
                continue
            m = re.search(r"\b([A-Za-z_]\w*)\s*\(", s)
            if not m or m.group(1) in ("__attribute__",):
                continue
            name = m.group(1)
            names[name] = h
            if not s.startswith("PLUME_API "):
                errors.append(f"{h}: {name} is declared without PLUME_API, so libplume does "
                              f"not export it; start its declaration with PLUME_API (plume/api.h)")
    return names


def nm(path, *flags):
    """(type, name) of the symbols `nm flags path` lists, versions stripped."""
    r = subprocess.run(["nm", *flags, path], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"check_exports: nm {' '.join(flags)} {path} failed: {r.stderr.strip()}")
    out = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and len(parts[-2]) == 1:
            out.append((parts[-2], parts[-1].split("@")[0]))
    return out


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    include_dir, so, core_a, plugins = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    errors = []
    sdk = declared_functions(include_dir, errors)
    if len(sdk) < 50:
        errors.append(f"only {len(sdk)} functions found in {include_dir}/*.h: the header "
                      f"parser in {__file__} no longer understands the headers; fix it")
    exported = {name for _, name in nm(so, "-D", "--defined-only")}
    for name in sorted(exported - set(sdk) - NOT_SDK):
        errors.append(f"{so} exports {name}, which no header in {include_dir} declares: an "
                      f"internal symbol leaks; it is compiled with hidden visibility unless "
                      f"something marks it (PLUME_API, __attribute__((visibility))) — remove "
                      f"that, or declare it in a public header if it is meant to be SDK")
    for name in sorted(set(sdk) - exported):
        errors.append(f"{sdk[name]} declares {name} but {so} does not export it: define it in "
                      f"the core (a file that includes its header), or remove the declaration")
    for name in sorted(NOT_SDK - exported):
        errors.append(f"{so} does not export {name}; the `plume` executable needs it")

    # Global symbols the core defines (the archive holds all of them, hidden
    # or not); a plugin may refer to the exported ones only.
    core = {name for t, name in nm(core_a, "--defined-only") if t.isupper()}
    for p in plugins:
        for _, name in nm(p, "-D", "--undefined-only"):
            if name in core and name not in exported:
                errors.append(f"{p} uses {name}, an internal function of the core that "
                              f"libplume does not export (the plugin would fail to load): use "
                              f"the SDK (core/include/plume) instead, or make {name} SDK")

    r = subprocess.run(["readelf", "-d", so], capture_output=True, text=True)
    if r.returncode != 0:
        errors.append(f"readelf -d {so} failed: {r.stderr.strip()}")
    for lib in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", r.stdout):
        if lib.startswith(("libcurl", "libmicrohttpd")):
            errors.append(f"{so} needs {lib}: libplume links no HTTP library; move the code "
                          f"that uses it to libplume-serve (core/src/serve/meson.build)")

    guards = {}
    for h in glob.glob(os.path.join(include_dir, "*.h")):
        with open(h, encoding="utf-8") as f:
            m = re.search(r"^#ifndef (\w+)", f.read(), flags=re.M)
        if m:
            guards[m.group(1)] = h
    root = os.environ.get("PLUME_SOURCE_ROOT")
    if root:
        for sub in ("core/src", "plugins", "tests", "examples"):
            for h in glob.glob(os.path.join(root, sub, "**", "*.h"), recursive=True):
                with open(h, encoding="utf-8") as f:
                    m = re.search(r"^#ifndef (\w+)", f.read(), flags=re.M)
                if m and m.group(1) in guards:
                    errors.append(f"{h} uses the include guard {m.group(1)} of {guards[m.group(1)]}: "
                                  f"give it its own, named after its directory "
                                  f"(PLUME_<DIR>_<NAME>_H)")

    for e in errors:
        print(e, file=sys.stderr)
    print(f"libplume exports {len(exported)} symbols: {len(sdk)} SDK functions declared in "
          f"{include_dir}; no HTTP library needed; "
          f"{len(plugins)} plugins checked")
    sys.exit(1 if errors else 0)


main()
