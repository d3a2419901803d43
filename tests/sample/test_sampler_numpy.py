"""plume's sampling distribution against a numpy oracle written after vLLM's
v1 sampler, in float64, over 600 + 300 random cases (fixed seed 20261203) with
temperature != 1 and every filter: the order documented in docs/engine.md
("Sampling").  The oracle follows vLLM's code path, not plume's and not
tests/sample/oracle.h: penalties on logits (with llama.cpp's
repeat_last_n window, which vLLM lacks), logits / temperature, min-p
masking (probs < min_p * max -> -inf), then top-k masking and top-p on the
ascending cumulative sum of the renormalised survivors (mask where
cumsum <= 1 - top_p, the largest always kept).  The presence and frequency
penalties follow vLLM's apply_penalties (after the repetition penalty:
logits -= frequency * count + presence * (count > 0), the counts over the
output tokens only, i.e. the history after its prompt part).  A case where a token lies
within 1e-5 of a threshold is skipped (float rounding may legitimately
decide it); at most 5% may be.  Deterministic: no statistics.

usage: test_sampler_numpy.py PROBE_SAMPLER   (exit 0 pass, 1 fail, 77 skip)"""

import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy missing")
    sys.exit(77)

SEED = 20261203
N_CASES = 600
N_PENALTY_CASES = 300
MARGIN = 1e-5
ATOL = 3e-6


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def oracle(logits, hist, t, top_k, top_p, min_p, pen, last_n, pres, freq, n_prompt):
    """(probs, margin): the distribution vLLM's order gives, and how close a
    token came to a threshold."""
    x = logits.astype(np.float64).copy()
    nv = x.size
    if pen != 1.0 and len(hist):
        window = hist if last_n < 0 else hist[max(0, len(hist) - last_n):] if last_n > 0 else []
        mask = np.zeros(nv, dtype=bool)
        mask[[h for h in window if 0 <= h < nv]] = True
        x = np.where(mask, np.where(x > 0, x / pen, x * pen), x)
    counts = np.bincount(np.array(hist[n_prompt:], dtype=np.int64), minlength=nv)[:nv]
    x = x - freq * counts - pres * (counts > 0)
    if t == 0.0:
        out = np.zeros(nv)
        out[int(np.argmax(x))] = 1.0
        top2 = np.sort(x)[-2:]
        return out, (top2[1] - top2[0]) if nv > 1 else np.inf
    x = x / t
    margin = np.inf
    # min-p (vLLM: apply_min_p, before top-k/top-p)
    if min_p > 0.0:
        p = np.exp(x - x.max())
        p /= p.sum()
        ratio = p / p.max()
        margin = min(margin, np.min(np.abs(ratio - min_p)))
        x = np.where(ratio < min_p, -np.inf, x)
    # top-k then top-p (vLLM: apply_top_k_top_p), on ascending order
    order = np.argsort(x, kind="stable")
    xs = x[order]
    if 0 < top_k < nv:
        kth = np.sort(x)[nv - top_k]
        xs = np.where(xs < kth, -np.inf, xs)
    if top_p < 1.0:
        ps = np.exp(xs - xs.max())
        ps /= ps.sum()
        cs = np.cumsum(ps)
        live = np.isfinite(xs)
        if live.sum() > 1:
            margin = min(margin, np.min(np.abs(cs[live][:-1] - (1 - top_p))))
        drop = cs <= 1 - top_p
        drop[-1] = False
        xs = np.where(drop, -np.inf, xs)
    x = np.empty(nv)
    x[order] = xs
    p = np.exp(x - x.max())
    return p / p.sum(), margin


def f32(v):
    return float(np.float32(v))


def make_cases(rng):
    cases = []
    for _ in range(N_CASES):
        nv = int(rng.integers(2, 41))
        logits = rng.normal(0.0, 2.0, nv).astype(np.float32)
        t = f32(0.0 if rng.random() < 0.05 else rng.choice([rng.uniform(0.2, 0.95),
                                                             rng.uniform(1.05, 3.0)]))
        top_k = int(rng.integers(1, nv + 1)) if rng.random() < 0.6 else 0
        top_p = f32(rng.uniform(0.2, 0.99)) if rng.random() < 0.7 else 1.0
        min_p = f32(rng.uniform(0.01, 0.5)) if rng.random() < 0.6 else 0.0
        pen = f32(rng.uniform(1.05, 2.0)) if rng.random() < 0.5 else 1.0
        last_n = int(rng.choice([-1, 0, int(rng.integers(1, 9))]))
        hist = [int(h) for h in rng.integers(0, nv, int(rng.integers(0, 11)))]
        cases.append((logits, hist, t, top_k, top_p, min_p, pen, last_n, 0.0, 0.0, 0))
    # presence and frequency penalties (half the cases also repetition),
    # histories with repeats and a prompt part they must not count
    for _ in range(N_PENALTY_CASES):
        nv = int(rng.integers(2, 41))
        logits = rng.normal(0.0, 2.0, nv).astype(np.float32)
        t = f32(0.0 if rng.random() < 0.1 else rng.uniform(0.3, 2.0))
        top_k = int(rng.integers(1, nv + 1)) if rng.random() < 0.4 else 0
        top_p = f32(rng.uniform(0.5, 0.99)) if rng.random() < 0.4 else 1.0
        min_p = f32(rng.uniform(0.01, 0.2)) if rng.random() < 0.4 else 0.0
        pen = f32(rng.uniform(1.05, 2.0)) if rng.random() < 0.5 else 1.0
        last_n = int(rng.choice([-1, int(rng.integers(1, 9))]))
        pres = f32(rng.uniform(-2.0, 2.0)) if rng.random() < 0.8 else 0.0
        freq = f32(rng.uniform(-2.0, 2.0)) if rng.random() < 0.8 else 0.0
        n_prompt = int(rng.integers(0, 8))
        n_out = int(rng.integers(0, 16))
        hist = [int(h) for h in rng.integers(0, min(nv, 6), n_prompt + n_out)]
        cases.append((logits, hist, t, top_k, top_p, min_p, pen, last_n, pres, freq, n_prompt))
    return cases


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rng = np.random.default_rng(SEED)
    cases = make_cases(rng)
    lines = []
    for logits, hist, t, top_k, top_p, min_p, pen, last_n, pres, freq, n_prompt in cases:
        fields = [repr(t), str(top_k), repr(top_p), repr(min_p), repr(pen), str(last_n),
                  repr(pres), repr(freq), str(n_prompt), str(logits.size), str(len(hist))]
        fields += [repr(float(v)) for v in logits] + [str(h) for h in hist]
        lines.append(" ".join(fields))
    r = subprocess.run([sys.argv[1]], input="\n".join(lines) + "\n", capture_output=True, text=True)
    check(r.returncode == 0, "probe_sampler exits 0 (%d: %s)" % (r.returncode, r.stderr.strip()))
    out = r.stdout.strip().split("\n")
    check(len(out) == len(cases), "one output line per case (%d of %d)" % (len(out), len(cases)))
    checked = skipped = 0
    for i, (case, line) in enumerate(zip(cases, out)):
        logits, hist, t, top_k, top_p, min_p, pen, last_n, pres, freq, n_prompt = case
        want, margin = oracle(*case)
        if margin < MARGIN:
            skipped += 1
            continue
        vals = line.split()
        kept = int(vals[0])
        got = np.array([float(v) for v in vals[1:]])
        what = ("case %d (nv %d, T %g, top-k %d, top-p %g, min-p %g, penalty %g over %d, "
                "presence %g, frequency %g, prompt %d of %d)") % (
            i, logits.size, t, top_k, top_p, min_p, pen, last_n, pres, freq, n_prompt, len(hist))
        check(got.size == logits.size, what + ": nv probabilities")
        check(np.array_equal(got > 0, want > 0),
              what + ": kept set %s, oracle %s" % (np.flatnonzero(got > 0).tolist(),
                                                   np.flatnonzero(want > 0).tolist()))
        check(kept == int((want > 0).sum()), what + ": kept count")
        err = float(np.max(np.abs(got - want)))
        check(err <= ATOL, what + ": max |plume - oracle| = %.3g" % err)
        checked += 1
    check(skipped * 20 <= len(cases), "at most 5%% of cases borderline (%d)" % skipped)
    penalised = sum(1 for c in cases if c[8] != 0.0 or c[9] != 0.0)
    print("ok   %d cases match the vLLM-order oracle (%d with presence/frequency penalties; "
          "%d borderline skipped)" % (checked, penalised, skipped))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failure as e:
        print("FAIL " + str(e))
        sys.exit(1)
