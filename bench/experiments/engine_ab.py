"""Is the redesigned engine's untraced step as fast as the engine before it? An A/B of two package versions.

    python bench/experiments/engine_ab.py --old bench/_work/ael_nb_before --device cpu --steps 40 --rounds 3
    git -C . archive 1f3c265 ael_nb | tar x -C bench/_work/ael_nb_before     # the engine before the redesign

Each round trains the same configuration (the `cpu` preset, AEL; keys the old version lacks are pinned to what it did:
per-pixel ACM regions, fp32, contiguous memory, every unlabeled image a target; so both versions do the same work) once with the old package and once with this checkout's, each in a fresh process, alternating, and reads
the throughput the engine itself logs (`img_per_s` of metrics.jsonl, the first log line left out as warm-up).
Writes bench/results/engine_ab_<device>.json and .md. Timings only: no assertion anywhere."""
from __future__ import annotations
import argparse, json, os, platform, statistics, subprocess, sys, tempfile, time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
CHILD = r'''
import json, sys, torch
src, out, device, steps, threads = sys.argv[1:6]
if src != '-': sys.path.insert(0, src)          # the other version of the package, for this child only
from ael_nb.config import get_config
from ael_nb.train import train
torch.set_num_threads(int(threads))
ov = ['method.name=ael', f'optim.iters={steps}', 'eval.interval=0', 'eval.max_images=1', 'run.log_interval=5', 'run.progress=false',
      'run.tensorboard=false', 'run.plots=false', 'data.check=false', f'run.device={device}', f'run.out={out}', f'run.threads={threads}']
for pin in ('method.acm_stride=1', 'optim.amp=none', 'model.channels_last=false', 'method.acm_targets=all'):
    try: get_config('cpu', overrides=ov + [pin]); ov.append(pin)   # the new engine does what the old one did ...
    except Exception: pass                                         # ... which has no such key
import ael_nb; print('PKG', ael_nb.__file__, flush=True)
train(get_config('cpu', overrides=ov))
'''

def one(src, device, steps, threads) -> dict:
    out = tempfile.mkdtemp(prefix='ael_ab_')
    p = subprocess.run([sys.executable, '-c', CHILD, src or '-', out, device, str(steps), str(threads)], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
    if p.returncode: raise SystemExit(f"engine_ab: the run with {src or 'this checkout'} failed:\n{p.stderr[-2000:]}")
    recs = [json.loads(l) for l in Path(out, 'metrics.jsonl').read_text().splitlines() if l]
    ips = [r['img_per_s'] for r in recs if 'img_per_s' in r][1:]
    pkg = [l for l in p.stdout.splitlines() if l.startswith('PKG ')][0][4:]
    return dict(package=pkg, img_per_s=statistics.median(ips), lines=len(ips))

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--old', required=True, help='folder holding the old version of the package (an ael_nb/ folder inside)')
    ap.add_argument('--device', default='cpu'); ap.add_argument('--steps', type=int, default=40)
    ap.add_argument('--rounds', type=int, default=3); ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--results', default=str(BENCH / 'results'))
    args = ap.parse_args(argv)
    if not (Path(args.old) / 'ael_nb' / 'train.py').is_file(): ap.error(f'{args.old}: no ael_nb/train.py inside')
    runs = dict(before=[], after=[])
    for r in range(args.rounds):
        for name, src in (('before', str(Path(args.old).resolve())), ('after', None)):
            runs[name].append(one(src, args.device, args.steps, args.threads)); print(r, name, runs[name][-1], flush=True)
    med = {k: statistics.median(x['img_per_s'] for x in v) for k, v in runs.items()}
    res = dict(device=args.device, machine=platform.processor() or platform.machine(), cores=os.cpu_count(), steps=args.steps, threads=args.threads,
               date=time.strftime('%Y-%m-%dT%H:%M:%S'), runs=runs, median_img_per_s=med, after_over_before_throughput=med['after'] / med['before'])
    out = Path(args.results); out.mkdir(parents=True, exist_ok=True)
    (out / f'engine_ab_{args.device}.json').write_text(json.dumps(res, indent=1))
    md = (f"# Engine before / after the redesign, untraced ({args.device}, {res['machine']}, {res['cores']} cores, {args.threads} threads, {res['date']})\n\n"
          f"AEL, `cpu` preset, {args.steps} steps, {args.rounds} alternating rounds, a fresh process each; throughput the engine logs (img/s).\n\n"
          "| engine | img/s per round | median |\n|---|---|---|\n"
          + ''.join(f"| {k} | {', '.join('%.1f' % x['img_per_s'] for x in v)} | {med[k]:.1f} |\n" for k, v in runs.items())
          + f"\nafter / before: **{res['after_over_before_throughput']:.3f}** (above 1: the new engine is faster).\n")
    (out / f'engine_ab_{args.device}.md').write_text(md); print(md)

if __name__ == '__main__': main()
