"""UniMatch V2's step on one GPU: seconds per optimiser step and peak memory, ViT-S and ViT-B, at 518 and 798.

    python bench/unimatch_v2_gpu.py --out OUT                       # on a GPU (bench/unimatch_v2_gpu.sh wraps it)
    python bench/unimatch_v2_gpu.py --out OUT --cpu                 # plumbing: the tiny ViT, 2 steps, on the CPU

Each case is `Run.step()` of the engine (`--method unimatch_v2`: data loading from synthetic scenes of the crop's size,
the EMA teacher, the two strong views through one complementary-dropout forward, AdamW, the EMA update) with V2's
per-GPU batch: 4 labeled + 4 unlabeled images at 518 (VOC, ADE20K's crop), 2 + 2 at 798 (Cityscapes). Cases: each
network x crop x {V2 alone, with AEL's four parts} x {fp32, bf16 autocast}, in that order, until `--budget` seconds
are spent. Reported per case: the median seconds of the steps after `--warmup`, and `max_memory_allocated`. Networks
start from random weights (`model.pretrained=none`): the time does not depend on them. V2's own logs (4 GPUs, VOC,
518): 0.49 s/iter with ViT-S, 1.17 with ViT-B, beside the table.
Writes OUT/unimatch_v2_gpu.json and OUT/unimatch_v2_gpu.md."""
from __future__ import annotations
import argparse, gc, json, statistics, sys, tempfile, time
from pathlib import Path
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
V2_LOGS = {'dinov2_s': 0.49, 'dinov2_b': 1.17}    # s/iter in V2's VOC logs at 518 (4 GPUs, 4 + 4 images each)
AEL = ['method.acp=true', 'method.acm=true', 'method.aes=true', 'method.dr=true']
QUIET = ['run.progress=false', 'run.tensorboard=false', 'run.plots=false', 'data.check=false', 'run.trace_interval=0',
         'eval.interval=0', 'optim.iters=100000', 'model.pretrained=none', 'run.checkpoint_minutes=0']

def cases(archs, crops, amps) -> list[dict]:
    "Every network x crop x (V2, V2 + AEL) x precision, the cheapest first within each network and crop."
    return [dict(arch=a, crop=c, ael=e, amp=p) for a in archs for c in crops for e in (False, True) for p in amps]

def overrides(case: dict, device: str, out: Path) -> list[str]:
    "The run of one case: V2's preset of that crop on synthetic scenes of that size, V2's per-GPU batch."
    c = case['crop']
    per_gpu = 4 if c <= 518 else 2
    return [*QUIET, f"model.backbone={case['arch']}", 'data.dataset=synthetic', 'data.train_split=train',
            'data.val_split=val', f'data.synthetic_size={c}', f'data.crop_size={c}', 'data.scale=1,1',
            f'data.synthetic_n={8 * per_gpu}', 'data.fraction=0.5', f'data.batch_size={per_gpu}', 'eval.mode=whole',
            f"optim.amp={case['amp']}", f'run.device={device}', f'run.out={out}', 'run.overwrite=true',
            *(AEL if case['ael'] else [])]

def measure(case: dict, device: str, steps: int, warmup: int, out: Path) -> dict:
    "Median s/step after `warmup` steps and the peak memory of one case's run."
    from ael_nb.config import get_config
    from ael_nb.train import setup
    preset = 'voc-unimatch_v2' if case['crop'] <= 518 else 'cityscapes-unimatch_v2'
    cuda = device.startswith('cuda')
    sync = (lambda: torch.cuda.synchronize()) if cuda else (lambda: None)
    if cuda: torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    run = setup(get_config(preset, overrides=overrides(case, device, out)))
    try:
        setup_s, times = time.perf_counter() - t0, []
        for _ in range(steps):
            sync(); t = time.perf_counter(); run.step(); sync(); times.append(time.perf_counter() - t)
        steady = times[warmup:] or times
        return dict(case, rc=0, setup_s=setup_s, s_per_iter=statistics.median(steady), first_s=times[0],
                    steps=len(times), peak_gb=torch.cuda.max_memory_allocated() / 2 ** 30 if cuda else None,
                    images_per_step=2 * run.cfg.data.batch_size)
    finally:
        run.close(); del run; gc.collect()

def markdown(res: dict) -> str:
    "The table of s/iter and peak memory per case, V2's logged s/iter beside the cases it ran."
    rows = ['| network | crop | images / step | AEL parts | precision | s / iter | peak GB | V2 logs (4 GPUs, VOC) |',
            '|---|---|---|---|---|---|---|---|']
    for r in res['cases']:
        if r.get('rc'):
            rows.append(f"| {r['arch']} | {r['crop']} | - | {'on' if r['ael'] else 'off'} | {r['amp']} | "
                        f"failed: {r.get('error', '')[:80]} | - | - |"); continue
        ref = V2_LOGS.get(r['arch']) if r['crop'] == 518 and not r['ael'] else None
        peak = '-' if r['peak_gb'] is None else f"{r['peak_gb']:.1f}"
        rows.append(f"| {r['arch']} | {r['crop']} | {r['images_per_step']} | {'on' if r['ael'] else 'off'} | {r['amp']} | "
                    f"{r['s_per_iter']:.3f} | {peak} | {'-' if ref is None else ref} |")
    left = [f"{c['arch']} {c['crop']} {'AEL' if c['ael'] else 'V2'} {c['amp']}" for c in res['not_run']]
    return (f"# UniMatch V2 on one GPU: {res['device']}\n\n" + '\n'.join(rows) +
            (f"\n\nNot run (budget of {res['budget_s']:.0f} s spent): {', '.join(left)}" if left else '') + '\n')

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', required=True)
    p.add_argument('--cpu', action='store_true', help='plumbing: the tiny ViT at 28 pixels, 2 steps, fp32, on the CPU')
    p.add_argument('--archs', nargs='+', default=['dinov2_s', 'dinov2_b'])
    p.add_argument('--crops', nargs='+', type=int, default=[518, 798])
    p.add_argument('--amps', nargs='+', default=['none', 'bf16'])
    p.add_argument('--steps', type=int, default=8)
    p.add_argument('--warmup', type=int, default=3)
    p.add_argument('--budget', type=float, default=480, help='start no case after this many seconds')
    a = p.parse_args(argv)
    if a.cpu: a.archs, a.crops, a.amps, a.steps, a.warmup = ['dinov2_tiny'], [28], ['none'], 2, 1
    device = 'cpu' if a.cpu else 'cuda'
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    todo, done, t0 = cases(a.archs, a.crops, a.amps), [], time.perf_counter()
    name = torch.cuda.get_device_name() if device == 'cuda' and torch.cuda.is_available() else 'cpu'
    with tempfile.TemporaryDirectory() as tmp:
        while todo and time.perf_counter() - t0 < a.budget:
            case = todo.pop(0)
            try: done.append(measure(case, device, a.steps, a.warmup, Path(tmp) / 'run'))
            except Exception as e: done.append(dict(case, rc=1, error=f'{type(e).__name__}: {e}'))
            print(json.dumps(done[-1]), flush=True)
    res = dict(device=name, torch=torch.__version__, steps=a.steps, warmup=a.warmup, budget_s=a.budget,
               v2_logs=V2_LOGS, cases=done, not_run=todo)
    (out / 'unimatch_v2_gpu.json').write_text(json.dumps(res, indent=1) + '\n')
    (out / 'unimatch_v2_gpu.md').write_text(markdown(res))
    return 0 if done and not any(r.get('rc') for r in done) else 1

if __name__ == '__main__': sys.exit(main())
