#!/usr/bin/env bash
# Creates the default model repository entry (models/minilm-l6: random-weight MiniLM-L6 cross-encoder,
# ONNX Runtime-verified) when it is absent, incomplete, or was made by a different version of the
# export tools. Idempotent and quick (a hash and three file checks) when the entry is up to date.
#
# Environment:
#   TIDE_MODEL_REPOSITORY  repository folder (default: models)
#   TIDE_BINARY            tide binary used to verify the export (default: build/tide)
#   TIDE_TOKENIZER         a tokenizer.json to use instead of the generated WordPiece one
#   PYTHON                 interpreter with Debian's python3-torch and python3-onnx (default: /usr/bin/python3)
set -euo pipefail
cd "$(dirname "$0")/.."

REPO=${TIDE_MODEL_REPOSITORY:-models}
NAME=minilm-l6
PYTHON=${PYTHON:-/usr/bin/python3}
TIDE_BINARY=${TIDE_BINARY:-build/tide}
ENTRY="$REPO/$NAME"
STAMP="$REPO/.$NAME.export-stamp"

# The stamp records what produced the entry: the export tools and the tokenizer override, if any.
inputs=(tools/export_model.py tools/crossencoder.py tools/make_wordpiece_tokenizer.py)
[ -n "${TIDE_TOKENIZER:-}" ] && inputs+=("$TIDE_TOKENIZER")
want=$(sha256sum "${inputs[@]}" | sha256sum | cut -d' ' -f1)

up_to_date() {
  [ -f "$ENTRY/config.pbtxt" ] && [ -s "$ENTRY/1/model.onnx" ] && [ -f "$ENTRY/tokenizer.json" ] &&
    [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]
}
if up_to_date; then
  echo "ensure_models: $ENTRY is up to date"
  exit 0
fi

# One export at a time (parallel `make test` runs share models/); re-check once the lock is ours.
mkdir -p "$REPO"
exec 9>"$REPO/.ensure_models.lock"
flock 9
if up_to_date; then
  echo "ensure_models: $ENTRY was exported meanwhile"
  exit 0
fi

echo "ensure_models: exporting $ENTRY (random weights; see docs/models.md for real checkpoints)"
args=(--preset "$NAME" --repository "$REPO" --name "$NAME" --tide-binary "$TIDE_BINARY")
[ -n "${TIDE_TOKENIZER:-}" ] && args+=(--tokenizer "$TIDE_TOKENIZER")
rm -f "$STAMP"
"$PYTHON" tools/export_model.py "${args[@]}"
echo "$want" > "$STAMP"
echo "ensure_models: $ENTRY ready"
