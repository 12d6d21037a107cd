#!/usr/bin/env bash
# The GPU part of bench/RESULTS.md, as one script for a lent GPU machine (one GPU, 16 cores):
#   1. cost of an AEL step on the GPU, ACM's source images loaded in the background vs in the step (bench/cost.py);
#   2. the CPU-budget grids (Tables 5 and 7, the remedies, Table 2 as a same-device reference) on that GPU,
#      JOBS processes sharing it, until MINUTES have passed (unfinished cells are left out, never half-reported).
# Usage: bash bench/gpu_session.sh OUT [MINUTES] [CAMVID_ROOT]   (results land in OUT/; nothing else is written)
# Back here: tar xzf OUT/results.tgz -C bench/ (cells, tables) or python bench/grid.py ... --device cuda --recover RUNS --report
# Needs the package importable (pip install -e . or PYTHONPATH) and, for step 1, a CamVid copy made by
# bench/prepare_camvid.py (default bench/_work/camvid_180x240).
set -u
OUT=$(realpath -m "${1:?usage: gpu_session.sh OUT [MINUTES] [CAMVID_ROOT]}"); MIN=${2:-6}
CAMVID=${3:-bench/_work/camvid_180x240}; JOBS=${JOBS:-14}
mkdir -p "$OUT"
STOP=$(date -d "+$MIN min" +%H:%M:%S)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
python -c "import torch; print(torch.__version__, torch.cuda.get_device_name())" >> "$OUT/gpu.txt" 2>&1

# 1. cost: R101 OS8 deep stem, 8+8 CamVid crops of 160x160 (the setting of results/cost_cuda.md)
timeout 150 python bench/cost.py --device cuda --parts a --dataset camvid --root "$CAMVID" --batch 8 --crop 160 --reps 20 \
    --set model.backbone=resnet101 model.output_stride=8 model.deep_stem=true --tag cuda_prefetch > "$OUT/cost.log" 2>&1
cp bench/results/cost_cuda_prefetch.* "$OUT/" 2>/dev/null

# 2. grids: every cell of the four grids once, seed by seed, until STOP
python bench/grid.py table5 table7 remedies table2 --dataset synthetic96 --device cuda --seeds 0 1 2 --jobs "$JOBS" \
    --stop-by "$STOP" --results "$OUT/results" --runs-dir /tmp/ael_gpu_runs > "$OUT/grid.log" 2>&1
tail -3 "$OUT/grid.log"
# the device tool returns flat folders only: pack the cells, and the run directories (without checkpoints) from which
# `grid.py --recover` rebuilds a cell whose run finished just as the stop-by time killed it
tar czf "$OUT/results.tgz" -C "$OUT" results && rm -rf "$OUT/results"
tar czf "$OUT/runs.tgz" --exclude='*.pth' --exclude='events.*' -C /tmp ael_gpu_runs
