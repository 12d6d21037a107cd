#!/usr/bin/env bash
# The paper-scale notebook's commands, run for real on a lent GPU machine (one GPU): bench/paper_scale.py's three parts
# (built-in data through ael-launch; a Cityscapes-sized input, fp32 / bf16 / activation checkpointing; SIGTERM + resume).
# Usage: bash bench/paper_scale_gpu.sh OUT      results: OUT/paper_scale.{json,md}, OUT/paper_scale_<part>.log
# Sizes and parts: AEL_PS_SIZE, AEL_PS_STEPS, AEL_PS_PARTS, AEL_PS_VARIANTS, ... (bench/paper_scale.py --help).
# Runs from this checkout without installing it: PYTHONPATH and small console-script wrappers; fastcore, the one
# dependency a bare PyTorch image lacks, is installed from bench/_work/wheels when missing
# (here: pip download --no-deps -d bench/_work/wheels fastcore, and carry bench/_work/wheels).
set -u
OUT=$(realpath -m "${1:?usage: paper_scale_gpu.sh OUT}"); mkdir -p "$OUT"
REPO=$(cd "$(dirname "$0")/.." && pwd); cd "$REPO"
PY=$(command -v python3 || command -v python)
if ! "$PY" -c 'import fastcore' 2>/dev/null; then
  WHL=$(ls bench/_work/wheels/fastcore-*.whl 2>/dev/null | head -n 1)
  [ -n "$WHL" ] || { echo "paper_scale_gpu.sh: fastcore is not installed and bench/_work/wheels holds no fastcore wheel" >&2; exit 2; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/ael_site "$WHL" || exit 2
  export PYTHONPATH=/tmp/ael_site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
BIN=$(mktemp -d)                                   # this checkout's console scripts, first on PATH
for spec in ael-train:ael_nb.cli:ael_train ael-launch:ael_nb.launch:ael_launch; do
  IFS=: read -r name mod fn <<< "$spec"
  printf '#!%s\nimport sys\nfrom %s import %s\nsys.exit(%s())\n' "$PY" "$mod" "$fn" "$fn" > "$BIN/$name"
done
command -v torchrun >/dev/null || printf '#!/bin/sh\nexec %s -m torch.distributed.run "$@"\n' "$PY" > "$BIN/torchrun"
chmod +x "$BIN"/*
export PATH=$BIN:$PATH
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; nproc; } > "$OUT/paper_scale_machine.txt"
"$PY" bench/paper_scale.py --out "$OUT"
