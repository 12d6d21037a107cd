#!/usr/bin/env bash
# GPU evidence for the default run's setting, as ONE command for a lent GPU machine (one GPU, 16 cores), at most MINUTES
# of wall time (default 8). Every cell is a bench/grid.py cell (synthetic96, 800 steps, alpha ramped in over the first
# 400, bf16 autocast, one CPU thread each; --device cuda: JOBS processes share the GPU), run in priority order:
#   (a) grid `setting`: supervised, CutMix + ramp, AEL + ramp, AEL without the ramp, AEL + ramp with the authors' batch
#       (method.acm_targets=half: the default run), AEL + ramp in fp32 (bf16 vs fp32), seeds 0 1 2 (seed by seed);
#   (b) grid `choices`: the kit's choices vs the authors' (method.absent_as_zero=true, method.aes_source=student), seeds 0 1 2;
#   (c) grids `table6r` `table8r` `table9r` `table10r` (the ABLATIONS rows of Tables 6, 8, 9, 10), seed 0, then seeds 1 2.
# Before them, when the CamVid copy of bench/prepare_camvid.py is in bench/_work/camvid_180x240 (carry it: 32 MB): grid
# `camvid` on --dataset camvid160 (supervised, CutMix + ramp, AEL + ramp, full; 1500 steps, 160x160 crops, batch 8),
# seeds 0 1 2. CAMVID=0 skips it; GRIDS= (empty) runs only it.
# No cell starts after MINUTES - 1.5 min; grid.py stops running ones a minute later (they are left out, never half
# reported); cells whose run finished just then are rebuilt from their run directories (grid.py --recover).
# The fp32 cells of the same setting (supervised, AEL + ramp) are in bench/results/remedies-synthetic96-800it-cuda.
# Usage, from the repository root: bash bench/gpu_session.sh OUT [MINUTES]      (writes only under OUT)
# Back here: tar xzf OUT/results.tgz -C bench/ && python bench/grid.py setting choices table6r table8r table9r table10r \
#            --dataset synthetic96 --iters 800 --device cuda --report
#            && python bench/grid.py camvid --dataset camvid160 --device cuda --report
# Needs ael_nb's dependencies importable (on the lent machines: fastcore, carried as a wheel; see bench/README.md).
set -u
OUT=$(realpath -m "${1:?usage: gpu_session.sh OUT [MINUTES]}"); MIN=${2:-8}; JOBS=${JOBS:-16}
DEVICE=${DEVICE:-cuda}; ITERS=${ITERS:-800}      # a plumbing test elsewhere: DEVICE=cpu ITERS=2 GRIDS=choices:0 JOBS=2
mkdir -p "$OUT"
T0=$(date +%s)
STOP=$(date -d "@$((T0 + MIN * 60 - 90))" +%H:%M:%S)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=$(command -v python3 || command -v python)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
"$PY" -c "import torch, ael_nb.train; print(torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())" >> "$OUT/gpu.txt" 2>&1 \
    || { cat "$OUT/gpu.txt"; echo "ael_nb does not import here (see gpu.txt)"; exit 1; }
nproc >> "$OUT/gpu.txt"

GRIDS=${GRIDS-"setting choices table6r:0 table8r:0 table9r:0 table10r:0 table6r:1,2 table8r:1,2 table9r:1,2 table10r:1,2"}
COMMON_ARGS="--device $DEVICE --results $OUT/results --runs-dir /tmp/ael_gpu_runs"
CAMVID_ROOT=bench/_work/camvid_180x240
if [ "${CAMVID:-1}" = 1 ] && [ -d "$CAMVID_ROOT/train" ]; then
    CV="camvid --dataset camvid160 --root $CAMVID_ROOT ${CAMVID_ITERS:+--iters $CAMVID_ITERS} $COMMON_ARGS"
    "$PY" bench/grid.py $CV --jobs "$JOBS" --stop-by "$STOP" > "$OUT/grid_camvid.log" 2>&1
    "$PY" bench/grid.py $CV --recover /tmp/ael_gpu_runs --report > "$OUT/report_camvid.log" 2>&1
fi
ARGS="--dataset synthetic96 --iters $ITERS $COMMON_ARGS"
if [ -n "$GRIDS" ]; then
    "$PY" bench/grid.py $GRIDS $ARGS --order grid --jobs "$JOBS" --stop-by "$STOP" > "$OUT/grid.log" 2>&1
    "$PY" bench/grid.py $GRIDS $ARGS --recover /tmp/ael_gpu_runs --report > "$OUT/report.log" 2>&1
fi
grep -hE 'ok in|FAILED|stopped|recovered|grid done' "$OUT"/grid*.log "$OUT"/report*.log | tail -40
# the device tool returns flat folders only: pack the cells and tables, and the run directories (without checkpoints)
tar czf "$OUT/results.tgz" -C "$OUT" results && rm -rf "$OUT/results"
tar czf "$OUT/runs.tgz" --exclude='*.pth' --exclude='events.*' -C /tmp ael_gpu_runs
echo "done in $(( $(date +%s) - T0 )) s"
