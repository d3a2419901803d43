#!/usr/bin/env bash
# plume generate --pipeline configs/spec-draft.yaml (f16 SmolLM2 target,
# Q4_1 draft) gives the same greedy text as the same pipeline without its
# speculative section.  The f16 target is scripts/make-f16-model's; when it
# has not been made, the test makes its own copy the same way (plume
# convert, a few seconds).  Skips (77) only when the Q4_1 GGUF is missing
# (scripts/fetch-model).
set -euo pipefail
plume=$(cd "$(dirname "$1")" && pwd)/$(basename "$1") src=$2
cd "$src"
q4=models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -e "$q4" ] || { echo "SKIP: $q4 missing (scripts/fetch-model)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
f16=$src/models/SmolLM2-135M-Instruct-f16
if [ ! -e "$f16/model.safetensors" ]; then
  f16=$tmp/SmolLM2-135M-Instruct-f16
  "$plume" convert "$q4" --to hf "$f16" --dtype f16 --force >/dev/null 2>&1
fi
sed "s|\.\./models/SmolLM2-135M-Instruct-f16|$f16|; s|\.\./models/|$src/models/|g" \
  configs/spec-draft.yaml > "$tmp/draft.yaml"
grep -v '^speculative:' "$tmp/draft.yaml" | sed 's|plugins: \[spec-draft\]|plugins: []|' \
  > "$tmp/off.yaml"
for prompt in "Write a short poem about the sea." "List the planets of the solar system."; do
  a=$("$plume" generate --pipeline "$tmp/draft.yaml" --chat --prompt "$prompt" --max-tokens 96 2>"$tmp/a.err")
  b=$("$plume" generate --pipeline "$tmp/off.yaml" --chat --prompt "$prompt" --max-tokens 96 2>/dev/null)
  grep -q 'speculative (draft)' "$tmp/a.err" || { echo "no speculation reported:"; cat "$tmp/a.err"; exit 1; }
  if [ "$a" != "$b" ]; then
    printf 'greedy text differs for %s\n--- draft:\n%s\n--- off:\n%s\n' "$prompt" "$a" "$b"
    exit 1
  fi
  grep 'speculative' "$tmp/a.err"
done
echo "same greedy text with and without draft speculation"
