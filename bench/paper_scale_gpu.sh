#!/usr/bin/env bash
# The paper-scale checks on a lent GPU machine (one GPU), in one command: bench/paper_scale.py's parts in priority order
# (step vs floor at paper and small scale with the data share; memory of fp32 / bf16 / activation checkpointing at 769x769;
# SIGTERM and SIGUSR1 to ael-train and to torchrun -> exit 75 -> --resume identical; the speed switches; ael-launch).
# Usage: bash bench/paper_scale_gpu.sh OUT [--cpu]
#   on a GPU, everything takes ~12-15 min: within the device tool's 10 min per command, run it as two commands, e.g.
#   AEL_PS_PARTS="floor scale signals switches" bash bench/paper_scale_gpu.sh $OUT/a, then
#   AEL_PS_PARTS="compile launch" bash bench/paper_scale_gpu.sh $OUT/b (each stops starting parts after AEL_PS_BUDGET s, 540)
#   results: OUT/paper_scale_results.tgz (paper_scale.{json,md}, floor_*.{json,md}, the logs, the machine's description)
#   bring paper_scale.json back as bench/results/paper_scale_<gpu>.json (nbs/26_arithmetic reads it), floor_* to bench/results
#   --cpu: a dry run of the same plumbing on the CPU at tiny size, 2 steps (ResNet-18 OS16, 64-pixel crops).
# Sizes and parts: AEL_PS_SIZE, AEL_PS_STEPS, AEL_PS_PARTS, AEL_PS_VARIANTS, AEL_PS_TIMEOUT, ... (bench/paper_scale.py --help).
# Runs from this checkout without installing it: PYTHONPATH and small console-script wrappers; fastcore, the one
# dependency a bare PyTorch image lacks, is installed from bench/_work/wheels when missing
# (here: pip download --no-deps -d bench/_work/wheels fastcore, and carry bench/_work/wheels).
set -u
OUT=$(realpath -m "${1:?usage: paper_scale_gpu.sh OUT [--cpu]}"); mkdir -p "$OUT"
if [ "${2:-}" = "--cpu" ]; then
  export AEL_PS_DEVICE=cpu AEL_PS_TINY=1 AEL_PS_SIZE=${AEL_PS_SIZE:-64} AEL_PS_STEPS=${AEL_PS_STEPS:-2} AEL_PS_LAUNCH_STEPS=2 \
         AEL_PS_BACKBONE=resnet18 AEL_PS_OS=16 AEL_PS_REPS=1 AEL_PS_SIG_STEP=2 AEL_PS_RESUME_TO=${AEL_PS_RESUME_TO:-30} \
         AEL_PS_SWITCHES=${AEL_PS_SWITCHES:-fp32|bf16 + channels_last} AEL_PS_BUDGET=${AEL_PS_BUDGET:-3600} OMP_NUM_THREADS=1
elif [ -n "${2:-}" ]; then echo "paper_scale_gpu.sh: unknown option $2 (only --cpu)" >&2; exit 2
fi
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
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; nproc; uptime; git -C "$REPO" log -1 --format=%H 2>&1; } \
  > "$OUT/paper_scale_machine.txt"
"$PY" bench/paper_scale.py --out "$OUT"; rc=$?
(cd "$OUT" && tar czf paper_scale_results.tgz --exclude=paper_scale_results.tgz paper_scale* floor_* 2>/dev/null)
echo "paper_scale_gpu.sh: rc $rc; results in $OUT/paper_scale_results.tgz"
exit $rc
