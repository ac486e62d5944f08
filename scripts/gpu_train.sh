#!/usr/bin/env bash
# One prepared GPU training run for the bundled model (issue 5), sized for the device machine's
# 15 minutes (one `run` call of at most 10). Everything it needs travels with the working tree.
#
#   Here, once:   bash scripts/gpu_train.sh --fetch-wheels
#                 (transformers 5.24 as a cp312 wheel into .whl/, which git ignores: the device's
#                 image has 5.17; its torch, tokenizers, safetensors, click and jinja2 are used)
#                 runs/transcripts4.jsonl: the two `clover train --make-transcripts` commands of
#                 the model card (seeds 11 and 12), then cat
#   Device:       run(command="OUT=$OUT bash scripts/gpu_train.sh", timeout_s=600,
#                     carry=[".whl", "runs/transcripts4.jsonl"])
#   Here, check:  bash scripts/gpu_train.sh --dry-run      (the same flow on the CPU, a few steps)
#
# On the device it installs Clover without dependencies into /tmp/site, trains the "mini" size
# (5.8M parameters, 11 MB in bf16: inside the 16 MiB limit) from scratch with the bundled
# tokenizer, in bf16 on CUDA, on the device's own Python sources (code) plus the carried
# transcripts and the synthetic copy/call sources. A 60-step calibration measures steps/s so the
# cosine schedule of the main run ends when TRAIN_MINUTES do. Then it exports the model to
# $OUT/model (bf16, ready for `clover train --export $OUT/model engine/bundled/tiny`) and
# evaluates it (held-out calls, copy, losses) into $OUT/eval.json. Logs: $OUT/train.log.
set -euo pipefail
cd "$(dirname "$0")/.."

TRANSCRIPTS=${TRANSCRIPTS:-runs/transcripts4.jsonl}
# the shipped model's last mix (its copy share is what made names copy), with more code: a GPU
# sees enough tokens for code to matter
MIX=${MIX:-dense_copy:0.3,curriculum:0.04,calls:0.13,calls_sys:0.15,transcripts:0.09,transcripts_sys:0.11,code:0.18}

if [[ "${1:-}" == "--fetch-wheels" ]]; then
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        --platform any -d .whl "transformers==5.24.0"
    ls -la .whl
    exit 0
fi

if [[ "${1:-}" == "--dry-run" ]]; then
    PY=${PY:-.venv/bin/python}
    OUT=${OUT:-$(mktemp -d /tmp/clover-gpu-dry.XXXXXX)}
    DEVICE=cpu DTYPE=float32 SIZE=nano BATCH=2 SEQ=256 CALIBRATE=4 TRAIN_MINUTES=0.3 EVAL_N=2
else
    PY=${PY:-python3}
    OUT=${OUT:?set OUT to the folder that comes back}
    DEVICE=${DEVICE:-cuda} DTYPE=${DTYPE:-bfloat16} SIZE=${SIZE:-mini} BATCH=${BATCH:-64}
    SEQ=${SEQ:-256} CALIBRATE=${CALIBRATE:-60} TRAIN_MINUTES=${TRAIN_MINUTES:-5.5} EVAL_N=${EVAL_N:-30}
    if [[ -d .whl ]]; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    fi
    # Clover itself, without its dependencies (torch etc. come from the image)
    $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --target /tmp/site .
    export PYTHONPATH=/tmp/site PYTHONSAFEPATH=1  # not the checkout's clover_cli/ (no engine/ inside)
    nvidia-smi --query-gpu=name,memory.total --format=csv | tee "$OUT/gpu.txt" || true
fi
[[ -f "$TRANSCRIPTS" ]] || { echo "missing $TRANSCRIPTS (carry it, or make it: see docs/model.md)" >&2; exit 2; }
export PYTHONUNBUFFERED=1
RUN="$OUT/run"
LOG="$OUT/train.log"
train() {
    $PY -m clover_cli.cli train --out "$RUN" --tokenizer engine/bundled/tiny --size "$SIZE" \
        --device "$DEVICE" --dtype "$DTYPE" --seq-len "$SEQ" --batch-size "$BATCH" --lr 2e-3 --warmup 50 \
        --mix "$MIX" --transcripts "$TRANSCRIPTS" --ar-fraction 0.45 --real-names 0.4 --vocab-names 0.5 \
        --log-every 20 "$@" 2>&1 | tee -a "$LOG"
}

# 1. calibration: steps per second of this model, batch and data pipeline on this machine
train --steps "$CALIBRATE" --no-eval --save-every "$CALIBRATE"
STEPS=$($PY - "$RUN" "$CALIBRATE" "$TRAIN_MINUTES" <<'EOF'
import json, sys
state = json.load(open(f"{sys.argv[1]}/train_state.json"))
rate = int(sys.argv[2]) / max(state["elapsed"], 1e-6)  # steps/s, data pipeline included
print(max(int(sys.argv[2]) + 1, int(rate * float(sys.argv[3]) * 60 * 0.9)))
EOF
)
echo "calibrated: $STEPS steps in about $TRAIN_MINUTES minutes" | tee -a "$LOG"

# 2. the run: the cosine schedule spans STEPS; --max-minutes is the safety net
train --steps "$STEPS" --eval-every 1000000 --save-every 500 --max-minutes "$TRAIN_MINUTES"

# 3. export (bf16) and evaluate
mkdir -p "$OUT/model"
$PY -m clover_cli.cli train --export "$RUN" "$OUT/model" 2>&1 | tee -a "$LOG"
$PY -m clover_cli.training.evaluation_hooks "$OUT/model" "$TRANSCRIPTS" "$EVAL_N" \
    > "$OUT/eval.json" 2>> "$LOG"
rm -f "$RUN/optimizer.pt"  # 2x the weights; $RUN/model (fp32) and $OUT/model (bf16) come back
cat "$OUT/eval.json"
