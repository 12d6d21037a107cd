"""Time the `folder` preset's step on CamVid laid out as a user's folder, on this machine's CPU.

    python bench/folder_step.py --camvid $AEL_CAMVID_ROOT --steps 20 --tag cpu_avx2

The folder is built under /tmp (links to the CamVid files, nothing copied, never in the repository): its 367
training images in `images/`, every 8th one's mask in `labels/` (the first 45), the 101 validation images and masks
in `val/`, and a `classes.yaml` of CamVid's 11 names with `ignore: 11`. The `folder` preset's AEL run is set up
once (`setup(cfg)`, the engine's own step, no evaluation) and stepped `--warmup` + `--steps` times with one torch
thread; each timed step's wall time and the process's CPU time are kept. With one thread the CPU time is the work
done whatever the load from other processes, so on a shared machine it is the steadier figure; two threads share
the work out over two cores (bench/RESULTS.md: 2 threads halve the wall time of an idle 2-core machine).
Writes bench/results/folder_step_<tag>.json and .md."""
from __future__ import annotations
import argparse, datetime as dt, json, os, platform, statistics, tempfile, time
from pathlib import Path
import torch
from stored import refresh              # bench/stored.py: the package's copy of bench/results

RESULTS = Path(__file__).resolve().parent / 'results'
NAMES = ['sky', 'building', 'pole', 'road', 'pavement', 'tree', 'sign_symbol', 'fence', 'car', 'pedestrian', 'bicyclist']

def camvid_folder(src: Path, dst: Path, every: int = 8, labeled: int = 45) -> Path:
    "CamVid as a new user lays it out: links under `dst`, 1 mask in `every` images (at most `labeled`), val/ whole."
    for d in ('images', 'labels', 'val/images', 'val/labels'): (dst / d).mkdir(parents=True)
    train = sorted((src / 'train').glob('*.png'))
    for p in train: (dst / 'images' / p.name).symlink_to(p.resolve())
    for p in train[::every][:labeled]: (dst / 'labels' / p.name).symlink_to((src / 'trainannot' / p.name).resolve())
    for p in sorted((src / 'val').glob('*.png')):
        (dst / 'val' / 'images' / p.name).symlink_to(p.resolve()); (dst / 'val' / 'labels' / p.name).symlink_to((src / 'valannot' / p.name).resolve())
    (dst / 'classes.yaml').write_text('classes:\n' + ''.join(f'- {n}\n' for n in NAMES) + 'ignore: 11\n')
    return dst

def cpu_name() -> str:
    for line in Path('/proc/cpuinfo').read_text().splitlines():
        if line.startswith('model name'): return line.split(':', 1)[1].strip()
    return platform.processor()

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('--camvid', required=True, help='SegNet-layout CamVid root (read in place)')
    ap.add_argument('--steps', type=int, default=20, help='timed steps')
    ap.add_argument('--warmup', type=int, default=2, help='untimed first steps')
    ap.add_argument('--tag', default='cpu', help='results file name: folder_step_<tag>')
    ap.add_argument('set', nargs='*', help='configuration overrides key=value')
    args = ap.parse_args(argv)
    from ael_nb.config import get_config
    from ael_nb.train import setup
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix='ael_folder_step_'))
    root = camvid_folder(Path(args.camvid), tmp / 'camvid_folder')
    over = [f'data.root={root}', f'run.out={tmp / "run"}', 'run.progress=false', 'run.tensorboard=false', 'eval.interval=0', *args.set]
    cfg = get_config('folder', overrides=over)
    wall, cpu = [], []
    with setup(cfg) as run:
        for k in range(args.warmup + args.steps):
            t0, c0 = time.perf_counter(), time.process_time(); run.step()
            w, c = time.perf_counter() - t0, time.process_time() - c0
            print(f'step {k + 1}: {w:.2f} s wall, {c:.2f} CPU s', flush=True)
            if k >= args.warmup: wall.append(w); cpu.append(c); report(args, cfg, wall, cpu)   # kept after every step

def precision(cfg) -> str:
    "fp32 or bf16: what `optim.amp` resolves to on this CPU."
    from ael_nb.core import resolve_amp
    amp = resolve_amp(cfg.optim.amp, torch.device('cpu'))
    return f"{'fp32' if amp == 'none' else amp} (optim.amp={cfg.optim.amp})"

def report(args, cfg, wall, cpu):
    "Write the json and md of the steps timed so far."
    from ael_nb.core import instruction_path, resolve_amp
    from ael_nb.train import about_minutes
    med = statistics.median(cpu)
    path = instruction_path('cpu', resolve_amp(cfg.optim.amp, torch.device('cpu')))   # what ael-train matches it by
    res = dict(date=dt.date.today().isoformat(), cpu=cpu_name(), capability=torch.backends.cpu.get_cpu_capability(), path=path,
               torch=torch.__version__, threads=1, precision=precision(cfg), preset='folder', overrides=args.set, iters=cfg.optim.iters,
               crop=list(cfg.data.crop_size), batch=cfg.data.batch_size, steps=len(cpu), warmup=args.warmup,
               cpu_s_median=med, cpu_s_min=min(cpu), cpu_s_max=max(cpu), wall_s_median=statistics.median(wall),
               wall_s_min=min(wall), wall_s_max=max(wall), load_average_1min_at_end=os.getloadavg()[0],
               estimate_h_one_core=med * cfg.optim.iters / 3600, estimate_h_two_cores=med * cfg.optim.iters / 2 / 3600,
               command='python bench/folder_step.py ' + ' '.join([f'--camvid {args.camvid}', f'--steps {args.steps}', f'--warmup {args.warmup}', f'--tag {args.tag}', *args.set]))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f'folder_step_{args.tag}.json').write_text(json.dumps(res, indent=1) + '\n')
    md = (f"# `folder` preset step on CamVid as a folder, {res['date']}\n\n{res['cpu']} ({res['capability']}), torch {res['torch']}, "
          f"1 torch thread, {res['precision']}; {cfg.data.crop_size[0]}x{cfg.data.crop_size[1]} crops, batch {res['batch']} + "
          f"{res['batch']}, {args.warmup} untimed + {len(cpu)} timed steps.\n\n| measure | median | min | max |\n|---|---|---|---|\n"
          f"| CPU s per step | {med:.2f} | {min(cpu):.2f} | {max(cpu):.2f} |\n"
          f"| wall s per step (shared machine) | {res['wall_s_median']:.2f} | {min(wall):.2f} | {max(wall):.2f} |\n\n"
          f"{res['iters']} steps: {about_minutes(60 * res['estimate_h_one_core'])} on one idle core, "
          f"{about_minutes(60 * res['estimate_h_two_cores'])} on two "
          f"(CPU time / 2), evaluations not included.\n\n`{res['command']}`\n")
    (RESULTS / f'folder_step_{args.tag}.md').write_text(md)
    refresh(RESULTS)                    # the time estimate ael-train prints reads the package's copy

if __name__ == '__main__': main()
