"""How far a training step is from its floor: the network's own work on the step's images.

    python bench/floor.py                                        # the `cpu` preset on this machine: steps vs floors
    python bench/floor.py --device cuda --tag cuda_small         # the same preset on a GPU (data share of a GPU step)
    python bench/floor.py --device cuda --preset cityscapes --set data.dataset=synthetic ... --tag cuda_paper
    python bench/floor.py --switches --device cuda ...           # AEL's step under each speed switch
    python bench/floor.py --variant memory= --variant paper-sources=method.cp_source=batch,method.acm_fallback=box
                                                                 # AEL's step under named override sets
    python bench/floor.py --tiny --reps 2 --out /tmp/f           # plumbing (seconds on one CPU thread)

Floor of a method, per step: the student's forward + backward on the images it sees (labeled + unlabeled, one joint
forward, a cross-entropy on the main and auxiliary heads) plus the teacher's forward on the images it labels (the
unlabeled batch; AEL with adaptive CutMix: also ACM's source images), with the run's network, precision and memory
format, on fixed tensors already on the device: no data loading, no pseudo-labels, no AEL bookkeeping, no SGD/EMA.
Step: `Run.step()` of the engine with real data (loaders, the method's step function, backward, SGD, EMA), for
supervised, CutMix and AEL set up in the same process with the same initialisation. Floors and steps are timed
interleaved, round by round (a change of machine load hits each alike); reported: median seconds, step / floor and
floor / step (the goal at paper scale: AEL's floor / step >= 0.85), and from one timed `Trace` per round the
data share of each step (`section('data')`: waiting for the loaders and the host-to-device copy).
`--switches`: AEL only, one run per speed switch (fp32, channels_last, bf16, cudnn.benchmark, torch.compile,
run.deterministic), each variant's first step (compile / autotuning included) and steady step beside its own floor and
the first variant's step; the process-wide switches (cuDNN autotuning, deterministic kernels) are set before each
variant's every call, as the variants share one process.
`--variant NAME=KEY=VALUE,...`: AEL only, one run per named override set (the first is the reference of the ratios).
Writes <out>/floor_<tag>.{json,md} (default out: bench/results)."""
from __future__ import annotations
import argparse, atexit, copy, datetime as dt, json, os, shutil, statistics, sys, tempfile, time
from pathlib import Path
import torch
import torch.nn.functional as F

RESULTS = Path(__file__).resolve().parent / 'results'
QUIET = ['run.progress=false', 'run.tensorboard=false', 'run.plots=false', 'data.check=false', 'run.trace_interval=0',
         'eval.interval=0', 'optim.iters=100000']
def _switches(amp, channels_last=False, cudnn_benchmark=False, compile=False, deterministic=False) -> list[str]:
    "Every speed switch pinned, so that a preset's own choice (the `cpu` preset's channels_last) cannot leak in."
    return [f'optim.amp={amp}', f'model.channels_last={channels_last}', f'run.cudnn_benchmark={cudnn_benchmark}',
            f'model.compile={compile}', f'run.deterministic={deterministic}']

SWITCHES = {'fp32': _switches('none'), 'fp32 + channels_last': _switches('none', True),
            'bf16': _switches('bf16'), 'bf16 + channels_last': _switches('bf16', True),
            'bf16 + channels_last + cudnn.benchmark': _switches('bf16', True, cudnn_benchmark=True),
            'bf16 + channels_last + compile': _switches('bf16', True, compile=True),
            'fp32 + deterministic': _switches('none', deterministic=True),
            'bf16 + channels_last + deterministic': _switches('bf16', True, deterministic=True)}
DETERMINISTIC_MISSING = ("run.deterministic is not a configuration key of this checkout (the switch for reproducible "
                         "GPU runs): merge it first")


def has_deterministic() -> bool:
    "This checkout's configuration has `run.deterministic`."
    from ael_nb.config import valid_keys
    return 'run.deterministic' in valid_keys()


def pinned(overrides: list[str]) -> list[str]:
    "`overrides` less `run.deterministic=False` where the key does not exist yet; asking for it on raises SystemExit."
    if has_deterministic(): return overrides
    if 'run.deterministic=True' in overrides: raise SystemExit(f"floor.py: {DETERMINISTIC_MISSING}")
    return [o for o in overrides if o != 'run.deterministic=False']


def switched(run, fn):
    "`fn` with `run`'s process-wide switches (cuDNN autotuning, deterministic kernels) set first: variants share a process."
    from ael_nb import core
    det, bench = getattr(run.cfg.run, 'deterministic', False), run.cfg.run.cudnn_benchmark
    def call(*a):
        if hasattr(core, 'set_deterministic'): core.set_deterministic(det, bench)
        else: torch.backends.cudnn.benchmark = bench
        return fn(*a)
    return call


def sync(device):
    if device.type == 'cuda': torch.cuda.synchronize(device)


def tiny_overrides() -> list[str]:
    "The kit's tiny setting (`ael_nb.plan.TINY`) less what this script sets itself."
    from ael_nb.plan import TINY
    return [o for o in TINY if o.split('=')[0] not in ('optim.iters', 'eval.interval')]


def images(ds, n: int, cfg, labeled: bool) -> dict:
    "`n` augmented images of `ds` (repeated if it has fewer), collated: the floor's fixed input."
    from ael_nb.plan import Augmented, collate
    aug = Augmented(ds, cfg.data.crop_size, cfg.data.scale, cfg.data.flip, labeled=labeled)
    return collate([aug[(i % len(ds), i)] for i in range(n)])


def floor_fn(run, n_student_u: int, n_teacher: int):
    "`run`'s floor: student fwd+bwd on its labeled + `n_student_u` unlabeled images, teacher fwd on `n_teacher`."
    from ael_nb.model import unwrap
    from ael_nb.plan import micro_batch
    from ael_nb.train import _autocast
    cfg, dev = run.cfg, run.device
    fmt = torch.channels_last if cfg.model.channels_last else torch.contiguous_format
    student = copy.deepcopy(unwrap(run.state.student)).train()
    teacher = copy.deepcopy(run.state.teacher if run.state.teacher is not None else student).eval()
    if cfg.model.compile: student.compile(); teacher.compile()       # a deep copy drops the compilation
    n_l = micro_batch(cfg)
    lb = images(run.data.labeled, n_l, cfg, True)
    ub = images(run.data.unlabeled, max(n_student_u, n_teacher), cfg, False) if max(n_student_u, n_teacher) else None
    x_s = torch.cat([lb['image']] + ([ub['image'][:n_student_u]] if n_student_u else []))
    x_s = x_s.to(dev).contiguous(memory_format=fmt)
    x_t = ub['image'][:n_teacher].to(dev).contiguous(memory_format=fmt) if n_teacher else None
    y = torch.cat([lb['label']] * (1 + -(-n_student_u // n_l)))[:len(x_s)].to(dev)   # labeled images' labels, reused
    aux_w = cfg.model.aux_weight

    def fn():
        student.zero_grad(set_to_none=True)
        with _autocast(dev, cfg.optim.amp):
            if x_t is not None:
                with torch.no_grad(): teacher(x_t)
            out = student(x_s)
        loss = F.cross_entropy(out['out'].float(), y, ignore_index=255)
        if 'aux' in out: loss = loss + aux_w * F.cross_entropy(out['aux'].float(), y, ignore_index=255)
        loss.backward()
    return fn, dict(student_images=len(x_s), teacher_images=0 if x_t is None else len(x_t))


def floor_counts(run) -> tuple[int, int]:
    "(unlabeled images in the student's forward, images the teacher labels) of `run`'s method."
    from ael_nb.plan import unlabeled_micro_batch
    m = run.cfg.method
    if m.name == 'supervised': return 0, 0
    n_u = unlabeled_micro_batch(run.cfg)
    return n_u, n_u * (2 if m.name == 'ael' and m.acm else 1)   # AEL: the teacher labels ACM's sources too


def step_fn(run):
    "One `Run.step()`; with AEL's background source loading, the step ends when the next step's sources are loaded."
    def fn(trace=None):
        run.step(trace)
        if run.state.sources is not None and run.state.sources.future is not None: run.state.sources.future.result()
    return fn


def timed(fn, device) -> float:
    sync(device); t = time.perf_counter(); fn(); sync(device)
    return time.perf_counter() - t


def med(ts): return dict(median_s=statistics.median(ts), min_s=min(ts), max_s=max(ts), n=len(ts))


def measure(runs: dict, reps: int, warmup: int) -> dict:
    "Steps and floors of `runs` (name -> Run), interleaved; the data share of each step from a timed Trace per round."
    from ael_nb.steps import Trace
    from ael_nb.plan import loader_settings
    out = {}
    fns = {}
    for name, run in runs.items():
        f, counts = floor_fn(run, *floor_counts(run))
        fns[name] = (switched(run, step_fn(run)), switched(run, f))
        out[name] = dict(floor_images=counts, loader=loader_settings(run.cfg.data, run.device), amp=run.cfg.optim.amp,
                         channels_last=run.cfg.model.channels_last, compile=run.cfg.model.compile,
                         cudnn_benchmark=run.cfg.run.cudnn_benchmark,
                         deterministic=getattr(run.cfg.run, 'deterministic', False))
    for name, (s, f) in fns.items():                                 # first calls: compilation, autotuning, allocator
        dev = runs[name].device
        out[name]['first_step_s'] = timed(s, dev); out[name]['first_floor_s'] = timed(f, dev)
        for _ in range(warmup - 1): s(); f()
    step_t, floor_t, data_t, traced_t = ({n: [] for n in runs} for _ in range(4))
    sections = {n: {} for n in runs}
    for r in range(reps):
        for name, (s, f) in fns.items():
            dev = runs[name].device
            step_t[name].append(timed(s, dev)); floor_t[name].append(timed(f, dev))
        for name, (s, f) in fns.items():
            tr = Trace(timed=True, device=runs[name].device)
            traced_t[name].append(timed(lambda: s(tr), runs[name].device))
            data_t[name].append(tr.times.get('data', 0.0))
            for k, v in tr.times.items(): sections[name][k] = sections[name].get(k, 0.0) + v
        print(f"round {r + 1}/{reps}: " + ', '.join(f"{n} {step_t[n][-1]:.3f}/{floor_t[n][-1]:.3f}" for n in runs),
              flush=True)
    for name in runs:
        st, fl = statistics.median(step_t[name]), statistics.median(floor_t[name])
        out[name].update(step=med(step_t[name]), floor=med(floor_t[name]), step_over_floor=st / fl,
                         floor_over_step=fl / st,
                         step_over_floor_per_round=med([a / b for a, b in zip(step_t[name], floor_t[name])]),
                         data_share=sum(data_t[name]) / sum(traced_t[name]), data_s=statistics.median(data_t[name]),
                         images_per_step=runs[name].n_img_per_step,
                         section_share={k: v / sum(traced_t[name]) for k, v in sorted(sections[name].items())})
    return out


def setup_runs(args, variants: dict) -> dict:
    "One run per variant (name -> overrides), each in its own temporary folder, same initialisation (`run.seed`)."
    from ael_nb.config import get_config
    from ael_nb.train import setup
    from ael_nb.plan import micro_batch, unlabeled_micro_batch
    tmp = Path(tempfile.mkdtemp(prefix='ael_floor_'))
    atexit.register(shutil.rmtree, tmp, True)   # the runs' folders hold nothing the report needs
    runs = {}
    if any('run.deterministic=True' in ov for ov in variants.values()):
        os.environ.setdefault('CUBLAS_WORKSPACE_CONFIG', ':4096:8')    # read when cuBLAS starts: before the first variant
    for i, (name, ov) in enumerate(variants.items()):
        cfg = get_config(args.preset, overrides=QUIET + (tiny_overrides() if args.tiny else []) + [f'run.device={args.device}']
                         + args.set + pinned(ov) + [f'run.out={tmp / str(i)}'])
        if args.threads: torch.set_num_threads(args.threads)
        run = setup(cfg)
        run.n_img_per_step = micro_batch(cfg) * cfg.optim.accum_steps + (
            unlabeled_micro_batch(cfg) * cfg.optim.accum_steps if cfg.method.name != 'supervised' else 0)
        runs[name] = run
    return runs


def markdown(res: dict, cmd: str) -> str:
    h, s = res['host'], res['setting']
    L = [f"# Step vs floor ({res['tag']}: {h['device']}; {res['when']})", '',
         f"`{cmd}`", '',
         f"preset `{s['preset']}`, crop {s['crop']}, {s['batch_labeled']} labeled + {s['batch_unlabeled']} unlabeled "
         f"images per step, {s['backbone']} OS{s['output_stride']}, torch {h['torch']}, {h['threads']} thread(s), "
         f"load average before / after {h['load_before'][0]:.1f} / {h['load_after'][0]:.1f}; {s['reps']} interleaved "
         f"rounds, median. Overrides: {' '.join(s['overrides']) or 'none'}.",
         '', '| variant | step s | floor s | step / floor | floor / step | per-round step / floor (min-max) | '
         'data share | first step s | img/s | loader (workers, pinned, prefetch) | floor images (student, teacher) |',
         '|---|---|---|---|---|---|---|---|---|---|---|']
    for n, x in res['variants'].items():
        q, ld = x['step_over_floor_per_round'], x['loader']
        L.append(f"| {n} | {x['step']['median_s']:.4f} | {x['floor']['median_s']:.4f} | {x['step_over_floor']:.2f} | "
                 f"{x['floor_over_step']:.2f} | {q['median_s']:.2f} ({q['min_s']:.2f}-{q['max_s']:.2f}) | "
                 f"{100 * x['data_share']:.1f}% | "
                 f"{x['first_step_s']:.2f} | {x['images_per_step'] / x['step']['median_s']:.1f} | "
                 f"{ld['num_workers']}, {ld['pin_memory']}, {ld['prefetch_factor']} | "
                 f"{x['floor_images']['student_images']}, {x['floor_images']['teacher_images']} |")
    L += ['', "Share of the timed step per section of `ael_nb.steps` (one timed `Trace` per round):",
          '',
          '| section | ' + ' | '.join(res['variants']) + ' |', '|---|' + '---|' * len(res['variants'])]
    names = sorted({k for x in res['variants'].values() for k in x['section_share']})
    share = lambda x, k: f"{100 * x['section_share'][k]:.1f}%" if k in x['section_share'] else ''
    L += [f"| {k} | " + ' | '.join(share(x, k) for x in res['variants'].values()) + ' |' for k in names]
    if 'vs_first' in res:
        L += ['', 'Step of each variant / the first: ' + ', '.join(f"{k} {v:.2f}" for k, v in res['vs_first'].items())]
    return '\n'.join(L) + '\n'


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--preset', default='cpu')
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--set', nargs='*', default=[], help='config overrides for every run')
    ap.add_argument('--methods', nargs='+', default=['supervised', 'cutmix', 'ael'])
    ap.add_argument('--switches', nargs='*', default=None, help='AEL under these switch sets (none named: all)')
    ap.add_argument('--variant', action='append', default=None, metavar='NAME=KEY=VALUE,...',
                    help='AEL under these overrides, named NAME (repeat; NAME= alone: the preset as it is)')
    ap.add_argument('--reps', type=int, default=5, help='interleaved rounds')
    ap.add_argument('--warmup', type=int, default=2, help='untimed calls of each step and floor (the first reported)')
    ap.add_argument('--threads', type=int, default=None, help='torch threads (default: as is)')
    ap.add_argument('--tiny', action='store_true', help="the kit's tiny setting (plumbing test)")
    ap.add_argument('--tag', default=None, help='results name: floor_<tag> (default: <device>_<preset>)')
    ap.add_argument('--out', default=str(RESULTS))
    args = ap.parse_args(argv)
    cmd = 'python bench/floor.py ' + ' '.join(sys.argv[1:] if argv is None else argv)
    from ael_nb.core import device_name, resolve_device
    tag = args.tag or f"{resolve_device(args.device).type}_{args.preset}" + ('_switches' if args.switches is not None else '')
    if args.variant is not None:
        variants = {name: ['method.name=ael'] + [o for o in sets.split(',') if o]
                    for name, _, sets in (v.partition('=') for v in args.variant)}
    elif args.switches is not None:
        variants = {n: ['method.name=ael'] + SWITCHES[n]
                    for n in (args.switches or [n for n in SWITCHES if 'deterministic' not in n or has_deterministic()])}
    else: variants = {m: [f'method.name={m}'] for m in args.methods}
    load_before = os.getloadavg()
    runs = setup_runs(args, variants)
    first = next(iter(runs.values()))
    c = first.cfg
    try: res_v = measure(runs, args.reps, max(args.warmup, 1))
    finally:
        for r in runs.values(): r.close()
    for n, ov in variants.items(): res_v[n]['overrides'] = ov
    res = dict(tag=tag, when=dt.datetime.now().isoformat(timespec='seconds'),
               host=dict(device=device_name(first.device), torch=torch.__version__, threads=torch.get_num_threads(),
                         cpus=os.cpu_count(), load_before=load_before, load_after=os.getloadavg()),
               setting=dict(preset=args.preset, crop=list(c.data.crop_size), batch_labeled=c.data.batch_size,
                            batch_unlabeled=c.data.batch_size * c.data.unlabeled_ratio, backbone=c.model.backbone,
                            output_stride=c.model.output_stride, reps=args.reps,
                            overrides=(tiny_overrides() if args.tiny else []) + args.set),
               variants=res_v)
    if args.switches is not None or args.variant is not None:
        ref = next(iter(res_v.values()))['step']['median_s']
        res['vs_first'] = {n: x['step']['median_s'] / ref for n, x in res_v.items()}
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    from ael_nb.core import atomic_write_text
    atomic_write_text(out / f'floor_{tag}.json', json.dumps(res, indent=1))
    md = markdown(res, cmd)
    atomic_write_text(out / f'floor_{tag}.md', md)
    print(md)
    return 0


if __name__ == '__main__': sys.exit(main())
