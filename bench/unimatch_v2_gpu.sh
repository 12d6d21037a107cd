#!/usr/bin/env bash
# UniMatch V2's step on one GPU, one command of at most 9 minutes (bench/unimatch_v2_gpu.py): s/iter and
# peak memory of ViT-S and ViT-B at 518 (4 + 4 images) and 798 (2 + 2), V2 alone and with AEL's four parts, fp32 and
# bf16; no case starts after AEL_V2_BUDGET s (480). V2's logs beside: 0.49 s/iter (S), 1.17 (B), VOC at 518, 4 GPUs.
#   bash bench/unimatch_v2_gpu.sh $OUT          leaves OUT/unimatch_v2_gpu.json and OUT/unimatch_v2_gpu.md
#   bash bench/unimatch_v2_gpu.sh $OUT --cpu    the plumbing on the CPU: the tiny ViT, 2 steps (tests/test_bench.py)
# Runs from this checkout without installing it; fastcore, which a bare PyTorch image lacks, is installed from
# bench/_work/wheels when missing (here: pip download --no-deps -d bench/_work/wheels fastcore, and carry it).
set -u
OUT=$(realpath -m "${1:?usage: unimatch_v2_gpu.sh OUT [--cpu]}"); mkdir -p "$OUT"
case "${2:-}" in
  --cpu) EXTRA=--cpu; export OMP_NUM_THREADS=1 ;;
  '') EXTRA= ;;
  *) echo "unimatch_v2_gpu.sh: unknown option $2 (only --cpu)" >&2; exit 2 ;;
esac
REPO=$(cd "$(dirname "$0")/.." && pwd); cd "$REPO"
PY=$(command -v python3 || command -v python)
if ! "$PY" -c 'import fastcore' 2>/dev/null; then
  WHL=$(ls bench/_work/wheels/fastcore-*.whl 2>/dev/null | head -n 1)
  [ -n "$WHL" ] || { echo "unimatch_v2_gpu.sh: fastcore is not installed and bench/_work/wheels holds no wheel" >&2; exit 2; }
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/ael_site "$WHL" || exit 2
  export PYTHONPATH=/tmp/ael_site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH} AEL_OFFLINE=1
"$PY" bench/unimatch_v2_gpu.py --out "$OUT" --budget "${AEL_V2_BUDGET:-480}" $EXTRA; rc=$?
echo "unimatch_v2_gpu.sh: rc $rc; results in $OUT/unimatch_v2_gpu.{json,md}"
exit $rc
