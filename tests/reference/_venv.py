"""Re-executes the running script under the project's .venv python when the
interpreter meson found (find_program('python3') at setup time) lacks the
packages the model tests need.  Import this before numpy/gguf; require()
does that and skips the test when a package is still missing."""

import os
import sys

NEEDED = ("numpy", "gguf", "safetensors", "tokenizers")


def ensure():
    try:
        for m in NEEDED:
            __import__(m)
        return
    except ImportError:
        pass
    if os.environ.get("PLUME_VENV_REEXEC"):
        return  # already re-executed once; let the caller skip
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.environ.get("PLUME_SOURCE_ROOT", os.path.normpath(os.path.join(here, "..", "..")))
    vpy = os.path.join(root, ".venv", "bin", "python")
    if os.path.exists(vpy):
        os.environ["PLUME_VENV_REEXEC"] = "1"
        os.execv(vpy, [vpy] + sys.argv)


def require(*modules):
    """ensure(), then imports modules; prints SKIP and exits 77 (meson's
    skip) when one is missing.  The caller imports what it uses by name."""
    ensure()
    for m in modules:
        try:
            __import__(m)
        except ImportError as e:
            print("SKIP: missing Python package: %s" % e)
            sys.exit(77)
