#!/usr/bin/env bash
# The paper-scale checks on one GPU machine, in two commands of at most 9 minutes each (bench/paper_scale.py):
#   bash bench/paper_scale_gpu.sh $OUT a   reproducible GPU runs: SIGTERM / SIGUSR1 / SIGKILL to ael-train and to
#                                          torchrun under run.deterministic=true -> --resume bit-identical to an uninterrupted
#                                          run (signals); two uninterrupted runs without it (spread); the switch's cost, AEL
#                                          with and without it at paper and small scale (detcost): the cityscapes preset
#                                          under the switch, whose step tests/test_deterministic.py holds to no op that
#                                          CUDA refuses under it (OHEM's threshold, the region search's hook)
#   bash bench/paper_scale_gpu.sh $OUT b   the default run's time (default); speed and memory: step vs floor at paper and small scale with the data share
#                                          (floor); fp32 / bf16 / activation checkpointing at 769x769, img/s and peak memory
#                                          (scale); the speed switches (switches); built-in data through ael-launch (launch)
#   --cpu after the stage: a dry run of the same parts on the CPU at tiny size, 2 steps (ResNet-18 OS16, 64-pixel crops);
#   stage a's detcost runs the cityscapes preset under run.deterministic=true there too.
# Each command leaves two files in OUT (a remote runner may bring back only a few): paper_scale_<stage>.tgz (paper_scale.json
# and .md, floor_*.{json,md}, the logs, the machine's description) and paper_scale_<stage>.md. Back here, unpack both
# tarballs into two folders and fold them into bench/results (bench/README.md):
#   python bench/fold_gpu.py A B --device h100 --date YYYY-MM-DD --commit <commit> --how '...'
# Each stage stops starting parts after AEL_PS_BUDGET s (500). Sizes and parts: AEL_PS_SIZE, AEL_PS_STEPS, AEL_PS_PARTS
# (replaces the stage's parts), AEL_PS_SIGNALS, AEL_PS_VARIANTS, AEL_PS_TIMEOUT, ... (bench/paper_scale.py --help).
# Runs from this checkout without installing it: PYTHONPATH and small console-script wrappers; fastcore, the one
# dependency a bare PyTorch image lacks, is installed from bench/_work/wheels when missing
# (here: pip download --no-deps -d bench/_work/wheels fastcore, and carry bench/_work/wheels).
set -u
USAGE="usage: paper_scale_gpu.sh OUT a|b [--cpu]"
OUT=$(realpath -m "${1:?$USAGE}"); STAGE=${2:-}; mkdir -p "$OUT"
case "$STAGE" in
  a) PARTS="signals spread detcost" ;;
  b) PARTS="default floor scale switches launch" ;;
  *) echo "paper_scale_gpu.sh: stage '$STAGE': a or b ($USAGE)" >&2; exit 2 ;;
esac
export AEL_PS_PARTS=${AEL_PS_PARTS:-$PARTS} AEL_PS_BUDGET=${AEL_PS_BUDGET:-500}
if [ "${3:-}" = "--cpu" ]; then
  export AEL_PS_DEVICE=cpu AEL_PS_TINY=1 AEL_PS_SIZE=${AEL_PS_SIZE:-64} AEL_PS_STEPS=${AEL_PS_STEPS:-2} AEL_PS_LAUNCH_STEPS=2 \
         AEL_PS_BACKBONE=resnet18 AEL_PS_OS=16 AEL_PS_REPS=1 AEL_PS_SIG_STEP=2 AEL_PS_RESUME_TO=${AEL_PS_RESUME_TO:-12} \
         AEL_PS_SWITCHES=${AEL_PS_SWITCHES:-fp32|bf16 + channels_last} AEL_PS_BUDGET=3600 OMP_NUM_THREADS=1
elif [ -n "${3:-}" ]; then echo "paper_scale_gpu.sh: unknown option $3 (only --cpu; $USAGE)" >&2; exit 2
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
BIN=$(mktemp -d); RES=$(mktemp -d)                 # console scripts; the reports (only the tarball and the summary go to OUT)
trap 'rm -rf "$BIN" "$RES"' EXIT
for spec in ael-train:ael_nb.cli:ael_train ael-launch:ael_nb.launch:ael_launch; do
  IFS=: read -r name mod fn <<< "$spec"
  printf '#!%s\nimport sys\nfrom %s import %s\nsys.exit(%s())\n' "$PY" "$mod" "$fn" "$fn" > "$BIN/$name"
done
command -v torchrun >/dev/null || printf '#!/bin/sh\nexec %s -m torch.distributed.run "$@"\n' "$PY" > "$BIN/torchrun"
chmod +x "$BIN"/*
export PATH=$BIN:$PATH
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1; nproc; uptime; git -C "$REPO" log -1 --format=%H 2>&1; } \
  > "$RES/paper_scale_machine.txt"
"$PY" bench/paper_scale.py --out "$RES"; rc=$?
(cd "$RES" && tar czf "$OUT/paper_scale_$STAGE.tgz" paper_scale* floor_* 2>/dev/null)
cp "$RES/paper_scale.md" "$OUT/paper_scale_$STAGE.md" 2>/dev/null
echo "paper_scale_gpu.sh: rc $rc; results in $OUT/paper_scale_$STAGE.tgz"
exit $rc
