#!/usr/bin/env bash
# GPU evidence for the default run's setting, as ONE command for one GPU machine (one GPU, 16 cores), at most MINUTES
# of wall time (default 8). Every cell is a bench/grid.py cell (alpha ramped in over the first half, bf16 autocast, one
# CPU thread each; --device cuda: JOBS processes share the GPU). Cells already in bench/results are not run again
# (the script starts from a copy of it). Three phases, in priority order, all under the same stop time:
#   (1) synthetic96, 800 steps, GRIDS (default: grid `frameworks`, then `setting`): `frameworks` is the frameworks' evidence,
#       supervised, CutMix, AEL, FixMatch, FixMatch + AEL, UniMatch, UniMatch + AEL, full (and FixMatch / UniMatch
#       labeled by the student, as their code), seeds 0 1 2; `setting`'s fp32 CutMix + ramp cells are the last ones
#       missing on the H200 (bf16 beside fp32 for supervised, CutMix + ramp and AEL + ramp);
#   (2) CamVid, at the same time as (1), when the copy of bench/prepare_camvid.py is in bench/_work/camvid_180x240
#       (carry it: 32 MB): CAMVID_GRIDS (default: `frameworks`, then `camvid`) on --dataset camvid160 (1500 steps,
#       160x160, batch 8): the same framework rows, then `camvid`'s AEL with one part changed (threshold 0.7, no ACP,
#       no DR + AES, no ACM, the 8 + 8 batch), seeds 0 1 2, cells already in results/ skipped (CAMVID=0 skips it).
#       (1) and (2) together are 15 processes on 16 cores;
#   (3) after both, synthetic96 at 1600 steps: grid `schedule` (supervised, AEL + ramp, full, and AEL with alpha 0.5 or
#       a 0.7 threshold), seeds 0 1 2, finished cells skipped (SCHEDULE=0 skips it).
# No cell starts after MINUTES - 1.5 min; grid.py stops running ones a minute later (they are left out, never half
# reported); cells whose run finished just then are rebuilt from their run directories (grid.py --recover).
# Usage, from the repository root: bash bench/gpu_session.sh OUT [MINUTES]      (writes only under OUT)
# Back here: tar xzf OUT/results.tgz -C /tmp && cp -rn /tmp/results/* bench/results/ && python bench/grid.py \
#            frameworks --dataset synthetic96 --iters 800 --device cuda --report   (and so on per grid and dataset)
#            which classes reached the unlabeled loss (runs.tgz keeps the traces): tar xzf OUT/runs.tgz -C /tmp, then
#            python bench/experiments/pseudo_labels.py /tmp/ael_gpu_runs/frameworks-camvid160-1500it/{cutmix,ael,fixmatch,fixmatchpael,
#            unimatch,unimatchpael}__1-8__s? --csv bench/results/frameworks-camvid160-1500it_loss_classes.csv
# Needs ael_nb's dependencies importable (on a bare GPU machine: fastcore, carried as a wheel; see bench/README.md).
set -u
OUT=$(realpath -m "${1:?usage: gpu_session.sh OUT [MINUTES]}"); MIN=${2:-8}; JOBS=${JOBS:-16}
DEVICE=${DEVICE:-cuda}; ITERS=${ITERS:-800}      # a plumbing test elsewhere: DEVICE=cpu ITERS=2 CAMVID_ITERS=2 SCHEDULE_ITERS=2 GRIDS=frameworks:0 CAMVID_GRIDS=frameworks:0 JOBS=2
mkdir -p "$OUT"
T0=$(date +%s)
STOP=$(date -d "@$((T0 + MIN * 60 - 90))" +%H:%M:%S)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
PY=$(command -v python3 || command -v python)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
"$PY" -c "import torch, ael_nb.train; print(torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())" >> "$OUT/gpu.txt" 2>&1 \
    || { cat "$OUT/gpu.txt"; echo "ael_nb does not import here (see gpu.txt)"; exit 1; }
nproc >> "$OUT/gpu.txt"

GRIDS=${GRIDS-frameworks setting}; CAMVID_GRIDS=${CAMVID_GRIDS-frameworks camvid}
cp -r bench/results "$OUT/results"                       # finished cells are skipped, shared cells reused
COMMON_ARGS="--device $DEVICE --results $OUT/results --runs-dir /tmp/ael_gpu_runs --jobs $JOBS"
phase() {   # phase NAME GRID-ARGS...: run the cells, then rebuild those that finished at the stop time, then the tables
    local name=$1; shift
    "$PY" bench/grid.py "$@" $COMMON_ARGS --order grid --stop-by "$STOP" > "$OUT/grid_$name.log" 2>&1
    "$PY" bench/grid.py "$@" $COMMON_ARGS --recover /tmp/ael_gpu_runs --report > "$OUT/report_$name.log" 2>&1
}
[ -n "$GRIDS" ] && phase synthetic $GRIDS --dataset synthetic96 --iters "$ITERS" &
CAMVID_ROOT=bench/_work/camvid_180x240
[ "${CAMVID:-1}" = 1 ] && [ -d "$CAMVID_ROOT/train" ] && phase camvid $CAMVID_GRIDS --dataset camvid160 --root "$CAMVID_ROOT" ${CAMVID_ITERS:+--iters $CAMVID_ITERS} &
wait
[ "${SCHEDULE:-1}" = 1 ] && phase schedule schedule --dataset synthetic96 --iters "${SCHEDULE_ITERS:-1600}"
grep -hE 'ok in|FAILED|stopped|recovered|grid done' "$OUT"/grid*.log "$OUT"/report*.log | tail -40
# a remote runner may return flat folders only: pack the cells and tables, and the run directories (without checkpoints)
tar czf "$OUT/results.tgz" -C "$OUT" results && rm -rf "$OUT/results"
tar czf "$OUT/runs.tgz" --exclude='*.pth' --exclude='events.*' -C /tmp ael_gpu_runs
echo "done in $(( $(date +%s) - T0 )) s"
