#!/usr/bin/env bash
# plume generate --pipeline configs/spec-draft.yaml (f16 SmolLM2 target,
# Q4_1 draft) gives the same greedy text as the same pipeline without its
# speculative section.  Skips (77) when the f16 target has not been made
# (scripts/make-f16-model) or the Q4_1 GGUF is missing.
set -euo pipefail
plume=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") src=$2
cd "$src"
for m in models/SmolLM2-135M-Instruct-f16/model.safetensors models/SmolLM2-135M-Instruct.Q4_1.gguf; do
  [ -e "$m" ] || { echo "SKIP: $m missing (scripts/make-f16-model)"; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -v '^speculative:' configs/spec-draft.yaml | sed 's|plugins: \[spec-draft\]|plugins: []|' \
  | sed "s|\.\./models/|$src/models/|g" > "$tmp/off.yaml"
for prompt in "Write a short poem about the sea." "List the planets of the solar system."; do
  a=$("$plume" generate --pipeline configs/spec-draft.yaml --chat --prompt "$prompt" --max-tokens 96 2>"$tmp/a.err")
  b=$("$plume" generate --pipeline "$tmp/off.yaml" --chat --prompt "$prompt" --max-tokens 96 2>/dev/null)
  grep -q 'speculative (draft)' "$tmp/a.err" || { echo "no speculation reported:"; cat "$tmp/a.err"; exit 1; }
  if [ "$a" != "$b" ]; then
    printf 'greedy text differs for %s\n--- draft:\n%s\n--- off:\n%s\n' "$prompt" "$a" "$b"
    exit 1
  fi
  grep 'speculative' "$tmp/a.err"
done
echo "same greedy text with and without draft speculation"
