"""Building an example plugin the way a third party does: this build's SDK
installed with `meson install --destdir`, the example's source copied out,
configured with nothing but pkg-config against that SDK, built and installed
into a plugin directory.  Shared by the out-of-tree example tests."""
import os
import re
import shutil
import subprocess
import sys


def header_abi():
    """PLUME_ABI_MAJOR.PLUME_ABI_MINOR as plume/plugin.h in the source tree says."""
    path = os.path.join(os.environ["PLUME_SOURCE_ROOT"], "core", "include", "plume", "plugin.h")
    with open(path) as f:
        text = f.read()
    major = re.search(r"#define PLUME_ABI_MAJOR (\d+)", text).group(1)
    minor = re.search(r"#define PLUME_ABI_MINOR (\d+)", text).group(1)
    return major + "." + minor


def run(cmd, env=None):
    """Runs cmd (env: extra variables); exits with its output when it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        sys.exit(f"FAILED ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r


def find(root, name):
    for d, _, files in os.walk(root):
        if name in files:
            return os.path.join(d, name)
    sys.exit(f"{name} not found under {root}")


def install_sdk(build_root, tmp):
    """Installs the build into tmp/dest; returns (dest, the pkg-config env)."""
    dest = os.path.join(tmp, "dest")
    run(["meson", "install", "-C", build_root, "--no-rebuild", "--quiet", "--destdir", dest])
    pc_dir = os.path.dirname(find(dest, "plume-plugin.pc"))
    return dest, dict(PKG_CONFIG_PATH=pc_dir, PKG_CONFIG_SYSROOT_DIR=dest,
                      PKG_CONFIG_LIBDIR=pc_dir)


def build_example(example_src, tmp, env):
    """Builds the example at example_src against the SDK env names; returns
    the plugin directory it was installed into (tmp/plugins)."""
    src = os.path.join(tmp, os.path.basename(os.path.normpath(example_src)))
    shutil.copytree(example_src, src)
    bld = os.path.join(tmp, "build")
    plugins = os.path.join(tmp, "plugins")
    run(["meson", "setup", bld, src, "-Dpluginsdir=" + plugins], env=env)
    run(["ninja", "-C", bld], env=env)
    run(["meson", "install", "-C", bld, "--quiet"], env=env)
    return plugins
