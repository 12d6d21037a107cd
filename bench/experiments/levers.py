"""Which levers make the default run (`ael-train`, the `cpu` preset) faster on this machine's CPU.

    python bench/experiments/levers.py                     # steps: fp32 / bf16 / channels_last / the authors' ACM batch; evaluation
    python bench/experiments/levers.py --reps 7 --tag cpu_idle

One process, the `cpu` preset's AEL run set up once per variant (same initialisation, the engine's own
`setup(cfg).step()`), and the variants' steps **interleaved** (A, B, C, A, B, C, ...) `--reps` times: a load change
from other processes on a shared machine hits every variant alike. Reported per variant: median, min and max wall
seconds per step, the median of the per-round ratio to the first variant (its spread says how much to trust it), and
the same for the process's CPU time: with one torch thread the CPU time is the work done whatever the load, so on a
shared machine it is the steadier measure (the two-thread variant's CPU time includes its threads' waiting).
Evaluation (whole 96x128 val scenes, `--eval-images` of them, the teacher) is timed the same way. The `data` share of
a step comes from a timed `Trace` (`ael_nb.steps.section`).
Writes bench/results/levers_<tag>.json and .md."""
from __future__ import annotations
import argparse, datetime as dt, json, os, statistics, sys, tempfile, time
from pathlib import Path
import torch

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / 'results'

CL, HALF = ['model.channels_last=true'], ['method.acm_targets=half']   # the preset's values are pinned off in `base` below
VARIANTS = {   # name -> (config overrides, torch threads)
    'fp32': (['optim.amp=none'], 1),
    'bf16': (['optim.amp=bf16'], 1),
    'bf16 + channels_last': (['optim.amp=bf16'] + CL, 1),
    'bf16, acm_targets=half': (['optim.amp=bf16'] + HALF, 1),   # the authors' batch: 4 targets + 4 sources
    'bf16 + channels_last, acm_targets=half': (['optim.amp=bf16'] + CL + HALF, 1),
    'bf16, 2 threads': (['optim.amp=bf16'], 2),
}

def spread(ts): return dict(median_s=statistics.median(ts), min_s=min(ts), max_s=max(ts), n=len(ts))

def part_compile(reps: int, threads: int = 1) -> dict:
    "torch.compile of the `cpu` preset's network: compile time (first call) vs the eager and compiled fwd+bwd of a 16-image bf16 batch."
    from ael_nb.model import build_model
    torch.set_num_threads(threads)
    x = torch.randn(16, 3, 96, 128); y = torch.randint(0, 10, (16, 96, 128))
    def make(): torch.manual_seed(0); return build_model(10, 'resnet18', 16, False, False, None).train()
    def fb(m):
        with torch.autocast('cpu', dtype=torch.bfloat16): loss = torch.nn.functional.cross_entropy(m(x)['out'].float(), y)
        loss.backward()
    eager, comp = make(), torch.compile(make())
    out = {}
    for name, m in (('eager', eager), ('compiled', comp)):
        t0, c0 = time.perf_counter(), time.process_time(); fb(m)
        out[f'{name}_first_call'] = dict(wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0)
    ts = {'eager': [], 'compiled': []}
    for _ in range(reps):                                  # interleaved
        for name, m in (('eager', eager), ('compiled', comp)):
            c0 = time.process_time(); fb(m); ts[name].append(time.process_time() - c0)
    out.update({f'{n}_cpu_s': spread(v) for n, v in ts.items()}, threads=threads, batch='16 x 3 x 96 x 128, bf16 autocast, fwd+bwd')
    return out

def part_data(reps: int) -> dict:
    "CPU seconds to make one step's batches of the `cpu` preset in the main process (8 labeled + 8 unlabeled scenes, ACM's 8 sources)."
    import tempfile
    from ael_nb.config import get_config
    from ael_nb.train import setup
    from ael_nb.plan import collate
    torch.set_num_threads(1)
    run = setup(get_config('cpu', overrides=['run.progress=false', 'run.tensorboard=false', 'data.check=false',
                                             f'run.out={tempfile.mkdtemp(prefix="ael_levers_")}']))
    ts = {'labeled + unlabeled batch': [], 'ACM sources (8 scenes)': []}
    for _ in range(reps):
        c0 = time.process_time(); next(run.loaders.labeled); next(run.loaders.unlabeled); ts['labeled + unlabeled batch'].append(time.process_time() - c0)
        c0 = time.process_time(); collate([run.state.sources.unlabeled[(i, i)] for i in range(8)]); ts['ACM sources (8 scenes)'].append(time.process_time() - c0)
    run.close()
    return {k: spread(v) for k, v in ts.items()}

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('--reps', type=int, default=5, help='interleaved rounds')
    ap.add_argument('--steps', type=int, default=4, help='steps per variant per round')
    ap.add_argument('--eval-images', type=int, default=20, help='val scenes per timed evaluation (the default run uses 100)')
    ap.add_argument('--variants', nargs='*', default=list(VARIANTS))
    ap.add_argument('--set', nargs='*', default=[], help='extra config overrides for every variant')
    ap.add_argument('--custom', nargs='*', default=[], metavar="'NAME|THREADS|KEY=V KEY=V'",
                    help="more variants: a name, torch threads and their overrides (after --set), e.g. 'scenes 64x96|1|data.synthetic_size=[64,96] data.crop_size=[64,96]'")
    ap.add_argument('--tag', default='cpu')
    ap.add_argument('--compile', action='store_true', help='only time torch.compile of the network (part_compile)')
    ap.add_argument('--data', action='store_true', help="only time the making of a step's batches (part_data)")
    args = ap.parse_args(argv)
    for c in args.custom:
        name, threads, ov = c.split('|')
        VARIANTS[name] = (ov.split(), int(threads)); args.variants.append(name)
    args.variants = [v for v in args.variants if v in VARIANTS]
    if args.compile or args.data:
        part, res = ('compile', part_compile(args.reps)) if args.compile else ('data', part_data(args.reps))
        (RESULTS / f'levers_{part}_{args.tag}.json').write_text(json.dumps(res, indent=1)); print(json.dumps(res, indent=1)); return
    from ael_nb.config import get_config
    from ael_nb.core import device_name
    from ael_nb.train import setup
    from ael_nb.steps import Trace
    from ael_nb.runlog import evaluate_models
    tmp = Path(tempfile.mkdtemp(prefix='ael_levers_'))
    base = ['run.progress=false', 'run.tensorboard=false', 'run.plots=false', 'optim.iters=800', 'method.alpha_rampup=400',
            'model.channels_last=false', 'method.acm_targets=all',
            f'eval.max_images={args.eval_images}', 'data.check=false']
    runs = {}
    for name in args.variants:
        ov, _ = VARIANTS[name]
        torch.set_num_threads(2)
        runs[name] = setup(get_config('cpu', overrides=base + args.set + ov + [f"run.out={tmp / name.replace(' ', '_').replace(',', '').replace('+', 'p')}"]))
    step_t = {n: [] for n in runs}; cpu_t = {n: [] for n in runs}; data_t = {n: [] for n in runs}; eval_t = {n: [] for n in runs if 'acm_targets' not in n and 'batch' not in n}   # the network's cost only: one model, per val scene
    def steps(name, timed=False):
        torch.set_num_threads(VARIANTS[name][1])
        run, ts, cs = runs[name], [], []
        for _ in range(args.steps):
            tr = Trace(timed=True) if timed else None
            t0, c0 = time.perf_counter(), time.process_time(); run.step(tr)
            if run.state.sources is not None and run.state.sources.future is not None: run.state.sources.future.result()
            ts.append(time.perf_counter() - t0); cs.append(time.process_time() - c0)
            if timed: data_t[name].append(tr.times.get('data', float('nan')))
        return statistics.median(ts), statistics.median(cs)
    def evals(name):
        torch.set_num_threads(VARIANTS[name][1])
        run = runs[name]; models = run.cfg.eval.models
        run.cfg.eval.models = ('teacher',)       # evaluate_models reads state.cfg, the same object
        t0, c0 = time.perf_counter(), time.process_time(); evaluate_models(run.state, run.data, run.device)
        run.cfg.eval.models = models
        return (time.perf_counter() - t0) / args.eval_images, (time.process_time() - c0) / args.eval_images
    for name in runs: steps(name)                                            # warm-up (and the ACM table fills)
    for rnd in range(args.reps):
        for name in runs:
            w, c = steps(name); step_t[name].append(w); cpu_t[name].append(c)
        for name in runs: steps(name, timed=True) if rnd == 0 else None
        for name in eval_t: eval_t[name].append(evals(name))
        print(f"round {rnd + 1}/{args.reps}: " + ', '.join(f"{n} {step_t[n][-1]:.3f}" for n in runs), flush=True)
    ref = args.variants[0]
    res = dict(when=dt.datetime.now().isoformat(timespec='seconds'), host=dict(cpus=os.cpu_count(), cpu=device_name('cpu'),
               torch=torch.__version__, load_avg=os.getloadavg(), cpu_capability=torch.backends.cpu.get_cpu_capability()),
               setting=dict(preset='cpu', overrides=base + args.set, steps_per_round=args.steps, rounds=args.reps, eval_images=args.eval_images),
               step={n: dict(spread(step_t[n]), ratio_to_ref=spread([x / y for x, y in zip(step_t[n], step_t[ref])]),
                             cpu=spread(cpu_t[n]), cpu_ratio_to_ref=spread([x / y for x, y in zip(cpu_t[n], cpu_t[ref])]),
                             data_s=statistics.median(data_t[n]) if data_t[n] else None) for n in runs},
               eval_per_image={n: dict(wall=spread([w for w, _ in ts]), cpu=spread([c for _, c in ts])) for n, ts in eval_t.items()})
    for r in runs.values(): r.close()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f'levers_{args.tag}.json').write_text(json.dumps(res, indent=1))
    md = [f"# Levers on the CPU ({args.tag}: {res['host']['cpu']}; {res['when']}, load average at the end {res['host']['load_avg'][0]:.1f})\n",
          f"`python bench/experiments/levers.py {' '.join(sys.argv[1:] if argv is None else argv)}`: {args.reps} interleaved rounds of {args.steps} AEL steps per variant (`cpu` preset, "
          f"800-step schedule), median of each round's steps; ratio = per-round ratio to `{ref}`.\n",
          '| variant | step s (median) | min-max | ratio to ref (median, min-max) | CPU s (median, min-max) | CPU ratio to ref | data s |',
          '|---|---|---|---|---|---|---|']
    for n, s in res['step'].items():
        q, c, cq = s['ratio_to_ref'], s['cpu'], s['cpu_ratio_to_ref']
        md.append(f"| {n} | {s['median_s']:.3f} | {s['min_s']:.3f}-{s['max_s']:.3f} | {q['median_s']:.2f} ({q['min_s']:.2f}-{q['max_s']:.2f}) | "
                  f"{c['median_s']:.3f} ({c['min_s']:.3f}-{c['max_s']:.3f}) | {cq['median_s']:.2f} ({cq['min_s']:.2f}-{cq['max_s']:.2f}) | " +
                  ('' if s['data_s'] is None else f"{s['data_s']:.3f}") + ' |')
    md += ['\n| evaluation of one model, per val scene | wall s (median, min-max) | CPU s (median, min-max) |', '|---|---|---|']
    md += [f"| {k} | {v['wall']['median_s']:.4f} ({v['wall']['min_s']:.4f}-{v['wall']['max_s']:.4f}) | "
           f"{v['cpu']['median_s']:.4f} ({v['cpu']['min_s']:.4f}-{v['cpu']['max_s']:.4f}) |" for k, v in res['eval_per_image'].items()]
    (RESULTS / f'levers_{args.tag}.md').write_text('\n'.join(md) + '\n')
    print('\n'.join(md))

if __name__ == '__main__':
    main()
