"""Writes a safetensors file with the reference implementation (the PyPI
`safetensors` package) for test_safetensors_pypi.c to read back.

Usage: write_with_pypi.py OUT.safetensors
Exits 77 (meson's "skipped") when safetensors or numpy is not installed.
The values are formulas that the C test recomputes; keep the two in sync.
"""
import sys

try:
    import numpy as np
    from safetensors.numpy import save_file
except ImportError as e:  # pragma: no cover - depends on the environment
    print(f"skipping: {e}", file=sys.stderr)
    sys.exit(77)


def tensors():
    return {
        "f32": np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 1.0,
        "f16": (np.arange(30, dtype=np.float32).reshape(2, 3, 5) / 8).astype(np.float16),
        "i32": np.arange(7, dtype=np.int32) * 1000 - 3000,
        "i64": np.arange(4, dtype=np.int64).reshape(2, 2) * (1 << 40),
        "u8": (np.arange(10, dtype=np.uint8) * 25).astype(np.uint8),
        "f64_scalar": np.array(3.25, dtype=np.float64),
        "mask": np.array([True, False, True, True]),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "w4d": np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5),
    }


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    save_file(tensors(), sys.argv[1], metadata={"format": "np"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
