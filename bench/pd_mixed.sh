#!/bin/sh
# Prefill/decode disaggregation on one machine, measured (docs/disaggregation.md):
# a mixed workload -- short chats decoding while long prompts (1-2k words,
# about one token each) arrive -- against
#   colocated:      plume serve --threads 2
#   disaggregated:  prefill worker --threads 1, decode worker --threads 1, plume router
# Two `plume bench serve` runs go at once, one per request class; the chats'
# ITL is what disaggregation is about, the long prompts' TTFT what it costs.
#
#   bench/pd_mixed.sh CHAT_RATE LONG_RATE N_CHAT N_LONG [OUTDIR]
# e.g. bench/pd_mixed.sh 2 0.2 60 6 /tmp/pd-bench
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
plume=${PLUME:-$root/build/core/src/cli/plume}
model=${MODEL:-$root/models/SmolLM2-135M-Instruct.Q4_1.gguf}
chat_rate=$1 long_rate=$2 n_chat=$3 n_long=$4
out=${5:-$(mktemp -d)}
mkdir -p "$out"
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

wait_up() { # URL
    i=0
    until curl -sf "$1/health" >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -lt 600 ] || { echo "no server at $1" >&2; exit 1; }; sleep 0.2
    done
}

run_mix() { # URL NAME
    "$plume" bench serve --url "$1" --dataset random --input-len 32-64 --output-len 64-128 \
        --num-prompts "$n_chat" --request-rate "$chat_rate" --ignore-eos --temperature 0 \
        --seed 1 --json > "$out/$2-chat.json" &
    a=$!
    "$plume" bench serve --url "$1" --dataset random --input-len 1000-2000 --output-len 8 \
        --num-prompts "$n_long" --request-rate "$long_rate" --ignore-eos --temperature 0 \
        --seed 2 --json > "$out/$2-long.json" &
    b=$!
    wait $a $b
}

sock="$out/pd.sock"
sed -e "s#\.\./models/SmolLM2-135M-Instruct.Q4_1.gguf#$model#" -e "s#/tmp/plume-pd.sock#$sock#" \
    "$root/configs/pd-prefill.yaml" > "$out/pre.yaml"
sed -e "s#\.\./models/SmolLM2-135M-Instruct.Q4_1.gguf#$model#" "$root/configs/pd-decode.yaml" \
    > "$out/dec.yaml"

# colocated
"$plume" serve --model "$model" --port 8310 --threads 2 --ctx-size 16384 > "$out/colo.log" 2>&1 &
pids="$pids $!"
wait_up http://127.0.0.1:8310
run_mix http://127.0.0.1:8310 colo
cleanup; pids=""

# disaggregated
"$plume" serve --pipeline "$out/pre.yaml" --port 8311 --threads 1 > "$out/pre.log" 2>&1 &
pids="$pids $!"
"$plume" serve --pipeline "$out/dec.yaml" --port 8312 --threads 1 > "$out/dec.log" 2>&1 &
pids="$pids $!"
"$plume" router --prefill http://127.0.0.1:8311 --decode http://127.0.0.1:8312 --port 8313 --timeout 600 \
    > "$out/router.log" 2>&1 &
pids="$pids $!"
wait_up http://127.0.0.1:8313
until grep -q listening "$out/router.log"; do sleep 0.2; done
run_mix http://127.0.0.1:8313 pd
cleanup; pids=""

"$root/.venv/bin/python" - "$out" "$chat_rate" "$long_rate" <<'PY'
import json, sys
out, cr, lr = sys.argv[1:4]
print(f"chats at {cr}/s + long prompts at {lr}/s ({out})")
print(f"{'':14} {'chat TTFT p50/p99':>18} {'chat ITL p50/p99':>18} {'long TTFT p50/p99':>19} "
      f"{'out tok/s':>9} {'failed':>6}")
for name in ("colo", "pd"):
    c = json.load(open(f"{out}/{name}-chat.json"))
    l = json.load(open(f"{out}/{name}-long.json"))
    tput = c["output_throughput"] + l["output_throughput"]
    fail = c.get("failed", 0) + l.get("failed", 0)
    print(f"{'colocated' if name == 'colo' else 'disaggregated':14} "
          f"{c['ttft_ms']['p50']:8.0f}/{c['ttft_ms']['p99']:<8.0f} "
          f"{c['itl_ms']['p50']:8.1f}/{c['itl_ms']['p99']:<8.1f} "
          f"{l['ttft_ms']['p50']:9.0f}/{l['ttft_ms']['p99']:<8.0f} {tput:9.1f} {fail:6}")
PY
