#!/bin/sh
# Runs the pipeline fuzz target for a bounded time over a copy of the seed
# corpus.  Exit 77 (skipped) when the target was not built (no clang with
# libFuzzer, or a sanitizer build whose runtime clang cannot share).
fuzzer="$1"; corpus="$2"; seconds="${3:-20}"
if [ ! -x "$fuzzer" ]; then
  echo "fuzz target not built (needs clang with -fsanitize=fuzzer); skipping"
  exit 77
fi
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
cp "$corpus"/* "$work"/
# crash reproducers go next to the fuzzer (libFuzzer's artifact_prefix)
cd "$work" && "$fuzzer" -artifact_prefix="$(dirname "$fuzzer")/" -max_total_time="$seconds" -error_exitcode=1 -max_len=4096 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 "$work"
