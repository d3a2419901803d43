"""`plume bench context` on the tiny model, for every KV dtype: --json has a
row per depth with decode and prefill figures beside positive rooflines
(prefill null at depth 0; its % of the vpdpbusd roofline at least its % of
the level's), the KV bytes per token of the dtype (int8 about
half of f16, f16 half of f32), and bad --depths / --kv-dtype are usage
errors naming the option; --batch N decodes N sequences together, its
roofline (per unit of measured bandwidth) above batch 1's since the weights
are read once per step for all of them.  Speeds are printed, never
asserted."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from checks import check  # noqa: E402

plume, tiny = sys.argv[1:3]


def bench(*args, rc=0):
    r = subprocess.run([plume, "bench", "context", "--model", tiny, "--steps", "3", "--reps", "1",
                        "--threads", "2", *args], capture_output=True, text=True)
    check(r.returncode == rc, (args, r.returncode, r.stdout, r.stderr))
    return r


kvb = {}
for kv in ["f32", "f16", "int8"]:
    out = json.loads(bench("--depths", "0,5,40", "--kv-dtype", kv, "--chunk", "16", "--json").stdout)
    check(out["kv_dtype"] == kv, out)
    check([r["depth"] for r in out["rows"]] == [0, 5, 40], out)
    for r in out["rows"]:
        check(r["decode_tok_s"] > 0 and r["decode_roofline_tok_s"] > 0, r)
        if r["depth"] == 0:
            check(r["prefill_tok_s"] is None and r["prefill_pct"] is None
                  and r["prefill_vec_pct"] is None, r)
        else:
            check(r["prefill_tok_s"] > 0 and r["prefill_roofline_tok_s"] > 0, r)
            check(r["prefill_vec_pct"] >= r["prefill_pct"] > 0, r)
    kvb[kv] = out["kv_bytes_per_token"]
    print(kv, out["rows"])
check(kvb["f32"] == 2 * kvb["f16"] and kvb["f16"] / 2 < kvb["int8"] < kvb["f16"], kvb)
r = bench("--depths", "40,5", rc=2)
check("--depths" in r.stderr, r.stderr)
r = bench("--kv-dtype", "int4", rc=2)
check("--kv-dtype" in r.stderr and "int8" in r.stderr, r.stderr)
r = bench("--batch", "0", rc=2)
check("--batch" in r.stderr, r.stderr)

per_bw = {}
for b in [1, 4]:
    out = json.loads(bench("--depths", "0,40", "--batch", str(b), "--chunk", "16", "--json").stdout)
    check(out["batch"] == b and [r["depth"] for r in out["rows"]] == [0, 40], out)
    for r in out["rows"]:
        check(r["decode_tok_s"] > 0 and r["decode_roofline_tok_s"] > 0, r)
    per_bw[b] = [r["decode_roofline_tok_s"] / out["machine"]["bandwidth_gbs"] for r in out["rows"]]
    print("batch", b, out["rows"])
check(all(x4 > x1 for x1, x4 in zip(per_bw[1], per_bw[4])), per_bw)
