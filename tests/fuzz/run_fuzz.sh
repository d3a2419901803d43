#!/bin/sh
# run_fuzz.sh FUZZER CORPUS [SECONDS] [MAX_LEN]: runs a fuzz target for a
# bounded time over a copy of its seed corpus (the checked-in corpus is not
# changed; scripts/fuzz keeps what a campaign finds).  Exit 77 (skipped) when
# the target was not built (no clang with libFuzzer, or a sanitizer build
# whose runtime clang cannot share).
fuzzer="$1"; corpus="$2"; seconds="${3:-20}"; max_len="${4:-4096}"
if [ ! -x "$fuzzer" ]; then
  echo "fuzz target not built (needs clang with -fsanitize=fuzzer); skipping"
  exit 77
fi
work=$(mktemp -d) || exit 1
trap 'rm -rf "$work"' EXIT
cp "$corpus"/* "$work"/
# crash reproducers go next to the fuzzer (libFuzzer's artifact_prefix)
cd "$work" && "$fuzzer" -artifact_prefix="$(dirname "$fuzzer")/" -max_total_time="$seconds" \
  -error_exitcode=1 -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
  -print_final_stats=1 "$work"
