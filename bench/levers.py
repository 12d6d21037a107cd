"""Which levers make the default run (`ael-train`, the `cpu` preset) faster on this machine's CPU.

    python bench/levers.py                     # steps: fp32 / bf16 / bf16 + channels_last, 2 threads vs 1; evaluation
    python bench/levers.py --reps 7 --tag cpu_idle

One process, the `cpu` preset's AEL run set up once per variant (same initialisation, the engine's own
`setup(cfg).step()`), and the variants' steps **interleaved** (A, B, C, A, B, C, ...) `--reps` times: a load change
from other processes on a shared machine hits every variant alike. Reported per variant: median, min and max seconds
per step, and the median of the per-round ratio to the first variant (the spread of that ratio says how much to trust
it). Evaluation (whole 96x128 val scenes, `--eval-images` of them, per model) is timed the same way. The `data`
share of a step comes from a timed `Trace` (`ael_nb.steps.section`).
Writes bench/results/levers_<tag>.json and .md."""
from __future__ import annotations
import argparse, datetime as dt, json, os, platform, statistics, tempfile, time
from pathlib import Path
import torch

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / 'results'

def channels_last(run):
    "Student and teacher in channels_last memory format (what oneDNN's bf16 convolutions prefer)."
    for m in (run.S.student, run.S.teacher):
        if m is not None: m.to(memory_format=torch.channels_last)
    return run

VARIANTS = {   # name -> (config overrides, run transform, torch threads)
    'fp32': (['optim.amp=none'], None, 2),
    'bf16': (['optim.amp=bf16'], None, 2),
    'bf16 + channels_last': (['optim.amp=bf16'], channels_last, 2),
    'bf16, 1 thread': (['optim.amp=bf16'], None, 1),
    'bf16, acm_targets=half': (['optim.amp=bf16', 'method.acm_targets=half'], None, 2),   # the authors' batch: 4 targets + 4 sources
}

def spread(ts): return dict(median_s=statistics.median(ts), min_s=min(ts), max_s=max(ts), n=len(ts))

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('--reps', type=int, default=5, help='interleaved rounds')
    ap.add_argument('--steps', type=int, default=4, help='steps per variant per round')
    ap.add_argument('--eval-images', type=int, default=20, help='val scenes per timed evaluation (the default run uses 100)')
    ap.add_argument('--variants', nargs='*', default=list(VARIANTS))
    ap.add_argument('--set', nargs='*', default=[], help='extra config overrides for every variant')
    ap.add_argument('--tag', default='cpu')
    a = ap.parse_args(argv)
    from ael_nb.config import get_config
    from ael_nb.train import setup
    from ael_nb.steps import Trace
    from ael_nb.runlog import evaluate_models
    tmp = Path(tempfile.mkdtemp(prefix='ael_levers_'))
    base = ['run.progress=false', 'run.tensorboard=false', 'run.plots=false', 'optim.iters=800', 'method.alpha_rampup=400',
            f'eval.max_images={a.eval_images}', 'data.check=false']
    runs = {}
    for name in a.variants:
        ov, fn, _ = VARIANTS[name]
        torch.set_num_threads(2)
        r = setup(get_config('cpu', overrides=base + a.set + ov + [f"run.out={tmp / name.replace(' ', '_').replace(',', '').replace('+', 'p')}"]))
        runs[name] = fn(r) if fn else r
    step_t = {n: [] for n in runs}; data_t = {n: [] for n in runs}; eval_t = {(n, m): [] for n in runs for m in ('teacher', 'student')}
    def steps(name, timed=False):
        torch.set_num_threads(VARIANTS[name][2])
        run, ts = runs[name], []
        for _ in range(a.steps):
            tr = Trace(timed=True) if timed else None
            t0 = time.perf_counter(); run.step(tr)
            if run.S.sources is not None and run.S.sources.future is not None: run.S.sources.future.result()
            ts.append(time.perf_counter() - t0)
            if timed: data_t[name].append(tr.times.get('data', float('nan')))
        return statistics.median(ts)
    def evals(name, model):
        torch.set_num_threads(VARIANTS[name][2])
        run = runs[name]; models = run.cfg.eval.models
        run.cfg.eval.models = (model,)          # evaluate_models reads S.cfg, the same object
        t0 = time.perf_counter(); evaluate_models(run.S, run.data, run.device); t = time.perf_counter() - t0
        run.cfg.eval.models = models
        return t
    for name in runs: steps(name)                                            # warm-up (and the ACM table fills)
    for rnd in range(a.reps):
        for name in runs: step_t[name].append(steps(name))
        for name in runs: steps(name, timed=True) if rnd == 0 else None
        for name in runs:
            for m in ('teacher', 'student'): eval_t[(name, m)].append(evals(name, m))
        print(f"round {rnd + 1}/{a.reps}: " + ', '.join(f"{n} {step_t[n][-1]:.3f}" for n in runs), flush=True)
    ref = a.variants[0]
    res = dict(when=dt.datetime.now().isoformat(timespec='seconds'), host=dict(cpus=os.cpu_count(), cpu=platform.processor() or platform.machine(),
               torch=torch.__version__, load_avg=os.getloadavg(), cpu_capability=torch.backends.cpu.get_cpu_capability()),
               setting=dict(preset='cpu', overrides=base + a.set, steps_per_round=a.steps, rounds=a.reps, eval_images=a.eval_images),
               step={n: dict(spread(step_t[n]), ratio_to_ref=spread([x / y for x, y in zip(step_t[n], step_t[ref])]),
                             data_s=statistics.median(data_t[n]) if data_t[n] else None) for n in runs},
               eval_per_image={f'{n} / {m}': spread([t / a.eval_images for t in eval_t[(n, m)]]) for (n, m) in eval_t})
    for r in runs.values(): r.close()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f'levers_{a.tag}.json').write_text(json.dumps(res, indent=1))
    md = [f"# Levers on the CPU ({a.tag}, {res['when']}, load average at the end {res['host']['load_avg'][0]:.1f})\n",
          f"`python bench/levers.py {' '.join(argv or [])}`: {a.reps} interleaved rounds of {a.steps} AEL steps per variant (`cpu` preset, "
          f"800-step schedule), median of each round's steps; ratio = per-round ratio to `{ref}`.\n",
          '| variant | step s (median) | min-max | ratio to ref (median, min-max) | data s |', '|---|---|---|---|---|']
    for n, s in res['step'].items():
        q = s['ratio_to_ref']
        md.append(f"| {n} | {s['median_s']:.3f} | {s['min_s']:.3f}-{s['max_s']:.3f} | {q['median_s']:.2f} ({q['min_s']:.2f}-{q['max_s']:.2f}) | " +
                  ('' if s['data_s'] is None else f"{s['data_s']:.3f}") + ' |')
    md += ['\n| evaluation, per val scene | s (median) | min-max |', '|---|---|---|']
    md += [f"| {k} | {v['median_s']:.4f} | {v['min_s']:.4f}-{v['max_s']:.4f} |" for k, v in res['eval_per_image'].items()]
    (RESULTS / f'levers_{a.tag}.md').write_text('\n'.join(md) + '\n')
    print('\n'.join(md))

if __name__ == '__main__':
    main()
