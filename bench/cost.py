"""What AEL's bookkeeping costs next to the network.

    python bench/cost.py                       # CPU, all three parts, small training setting + paper-scale components
    python bench/cost.py --device cuda         # the same on a GPU (paper-scale model: R101 OS8, batch 16 if it fits)
    python bench/cost.py --parts a --dataset camvid --root /tmp/camvid_180x240

(a) `step`: time per training step of supervised / cutmix / ael in one process, same initialisation, through the engine
    itself (`ael_nb.train.setup(cfg).step()`: data, step function, backward, SGD, EMA), each step three ways, interleaved:
    untraced (what training runs), with a `Trace` recording what the step decided, and with a timed `Trace` whose named
    sections give AEL's per-component times (`ael_nb.steps.section`: labels come from the step's own code, so a change
    of call order cannot mislabel them). Also: what the disabled trace points cost per step. AEL is measured with its
    ACM source images loaded in a background thread (the timed step ends only when the next step's images are loaded)
    and loaded inside the step (`data.acm_prefetch=false`).
(b) `components`: each AEL component alone at the paper's scale (batch 16 of 769x769, 19 classes) vs one
    forward+backward of the network on the same input (what fits on the device: see the JSON's `model` entry).
    ACM's region search is timed at stride 4 (the kit's default) and 1 (pixels), and next to the authors'
    per-image scikit-image routine (bench/acm_reference.py) on the same input.
(d) `frameworks`: FixMatch's and UniMatch's steps against the CutMix framework's, and each framework with AEL's four
    components on top (AEL's sections' share of that step), through the engine as in (a), in one process.
(c) `memory`: peak memory of training steps per method, each in a fresh subprocess (CPU: ru_maxrss; CUDA:
    torch.cuda.max_memory_allocated).
Writes bench/results/cost_<device>.json and cost_<device>.md. Run as `python bench/cost.py` (its folder is then on
the import path, for grid.py and acm_reference.py); ael_nb is imported from the installed package."""
from __future__ import annotations
import argparse, contextlib, datetime as dt, functools, gc, json, os, resource, statistics, subprocess, sys, time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / 'results'

import torch

def sync(device):
    if torch.device(device).type == 'cuda': torch.cuda.synchronize()

def timeit(fn, device, reps=5, warmup=1) -> dict:
    "Median / min wall seconds of `fn()` over `reps` calls after `warmup` calls."
    for _ in range(warmup): fn(); sync(device)
    ts = []
    for _ in range(reps):
        sync(device); t = time.perf_counter(); fn(); sync(device); ts.append(time.perf_counter() - t)
    return dict(median_s=statistics.median(ts), min_s=min(ts), reps=reps)

def timeit_interleaved(fns: dict, device, reps=5, warmup=1) -> dict:
    "`timeit` of several functions in turn, round by round, so that a change of machine load hits each alike."
    ts, out = {k: [] for k in fns}, {}
    for _ in range(warmup):
        for k, fn in fns.items():
            try: fn(); sync(device)
            except RuntimeError as e: out[k] = dict(error=str(e)[:200]); ts.pop(k, None)
    for _ in range(reps):
        for k in ts:
            sync(device); t = time.perf_counter(); fns[k](); sync(device); ts[k].append(time.perf_counter() - t)
    out.update({k: dict(median_s=statistics.median(v), min_s=min(v), reps=reps, interleaved=True) for k, v in ts.items()})
    return {k: out[k] for k in fns}

# ------------------------------------------------------------------ training setting shared by (a) and (c)
SET = []   # extra config overrides for (a) and (c), from --set

def small_config(dataset, root, device, method, batch=None, crop=None, extra=()):
    from grid import BASE, COMMON, SETTINGS   # bench/grid.py, beside this script
    from ael_nb.config import get_config
    ov = COMMON + SETTINGS[dataset]['overrides'] + ['optim.iters=1000', f'method.name={method}', f'run.device={device}',
                                                              'data.manifest=none', 'data.fraction=0.125', 'run.out=/tmp/ael_cost_run']
    if root: ov.append(f'data.root={root}')
    if batch: ov.append(f'data.batch_size={batch}')
    if crop: ov.append(f'data.crop_size=[{crop},{crop}]')
    return get_config(BASE, overrides=ov + SET + list(extra))

def step_config(args, device, method, extra=(), out='/tmp/ael_cost_run'):
    return small_config(args.dataset, args.root, device, method, args.batch, args.crop,
                        list(extra) + [f'run.out={out}', 'run.progress=false', 'run.tensorboard=false', 'run.plots=false', 'run.trace_interval=0'])

def time_steps(args, device, variants: dict) -> dict:
    "Engine steps (`Run.step`) of each variant (name -> (method, overrides)) in one process, untraced, traced and timed, interleaved."
    import atexit, shutil, tempfile
    from ael_nb.train import setup
    from ael_nb.steps import Trace
    dev = torch.device(device)
    tmp = Path(tempfile.mkdtemp(prefix='ael_cost_'))
    atexit.register(shutil.rmtree, tmp, True)   # the runs' folders hold nothing the report needs
    runs = {name: setup(step_config(args, device, m, extra, tmp / name.replace(' ', '_').replace(',', '').replace('+', 'p')))
            for name, (m, extra) in variants.items()}
    cfg0 = next(iter(runs.values())).cfg
    res = dict(setting=dict(dataset=args.dataset, crop=list(cfg0.data.crop_size), batch_labeled=cfg0.data.batch_size,
                            batch_unlabeled=cfg0.data.batch_size * cfg0.data.unlabeled_ratio, backbone=cfg0.model.backbone,
                            output_stride=cfg0.model.output_stride, threads=torch.get_num_threads(), reps=args.reps, extra=list(SET)), methods={})
    modes = {'untraced': lambda: None, 'traced': lambda: Trace(), 'timed': lambda: Trace(timed=True, device=dev)}
    times = {(n, m): [] for n in runs for m in modes}
    sections = {n: {} for n in runs}
    def one(name, mode):
        run = runs[name]
        tr = modes[mode]()
        sync(device); t0 = time.perf_counter()
        run.step(tr)
        if run.state.sources is not None and run.state.sources.future is not None: run.state.sources.future.result()   # next sources loaded within this step
        sync(device); dt = time.perf_counter() - t0
        if mode == 'timed':
            for k, v in tr.times.items(): sections[name][k] = sections[name].get(k, 0.0) + v
        return dt
    for name in runs:                                                 # warm-up
        for _ in range(2): one(name, 'untraced')
    for _ in range(args.reps):                                        # interleaved: a load change hits every method and mode alike
        for name in runs:
            for mode in modes: times[(name, mode)].append(one(name, mode))
    for name, run in runs.items():
        ts = {m: times[(name, m)] for m in modes}
        res['methods'][name] = dict(step_s=statistics.median(ts['untraced']), step_min_s=min(ts['untraced']), step_mean_s=statistics.mean(ts['untraced']),
                                    traced_step_s=statistics.median(ts['traced']), timed_step_mean_s=statistics.mean(ts['timed']),
                                    components_s={k: v / args.reps for k, v in sorted(sections[name].items())})
        run.close()
    return res

def part_step(args, device) -> dict:
    "(a) time per training step of supervised / cutmix / ael through the engine (`Run.step`), untraced and traced, and AEL's sections."
    from ael_nb.steps import section
    variants = {'supervised': ('supervised', []), 'cutmix': ('cutmix', []), 'ael': ('ael', []),
                'ael, sources loaded in the step': ('ael', ['data.acm_prefetch=false']),
                "ael, authors' arrangement": ('ael', ['method.acm_targets=half'])}   # half the unlabeled batch are targets, sources the rest
    res = time_steps(args, device, variants)
    # what the trace points cost when no trace is asked for: the number of `section` calls per step x the cost of one
    calls = len(res['methods']['ael']['components_s'])
    n = 100000; t0 = time.perf_counter()
    for _ in range(n):
        with section(None, 'x'): pass
    per_call = (time.perf_counter() - t0) / n
    m = res['methods']; ael = m['ael']
    network = ('data', 'teacher forward', 'student forward', 'backward', 'optimizer + EMA')   # what the basic framework pays too
    book = {k: v for k, v in ael['components_s'].items() if k not in network}
    res['ratios'] = dict(ael_over_supervised=ael['step_s'] / m['supervised']['step_s'], ael_over_cutmix=ael['step_s'] / m['cutmix']['step_s'],
                         ael_in_step_loading_over_cutmix=m['ael, sources loaded in the step']['step_s'] / m['cutmix']['step_s'],
                         ael_authors_arrangement_over_cutmix=m["ael, authors' arrangement"]['step_s'] / m['cutmix']['step_s'],
                         cutmix_over_supervised=m['cutmix']['step_s'] / m['supervised']['step_s'],
                         ael_traced_over_untraced=ael['traced_step_s'] / ael['step_s'],
                         ael_bookkeeping_share={k: v / ael['timed_step_mean_s'] for k, v in book.items()},
                         ael_bookkeeping_total_share=sum(book.values()) / ael['timed_step_mean_s'])
    res['trace_points'] = dict(sections_per_ael_step=calls, disabled_section_s=per_call,
                               share_of_ael_step=calls * per_call / ael['step_s'])
    return res

# ------------------------------------------------------------------ (d) the weak-to-strong frameworks and AEL on them
AEL_SECTIONS = ('ACP', 'ACM: sources', 'ACM: class table', 'ACM: regions + paste', 'AES', 'DR')   # AEL's own work in a step

def part_frameworks(args, device) -> dict:
    "(d) FixMatch and UniMatch against the CutMix framework, and each framework with AEL's four components, in one process."
    plus = ['method.acm_targets=half']                                # AEL's rows as ael-train and the frameworks grid run them
    variants = {'cutmix': ('cutmix', []), 'fixmatch': ('fixmatch', []), 'unimatch': ('unimatch', []),
                'cutmix+ael': ('ael', plus), 'fixmatch+ael': ('ael', ['method.base=fixmatch'] + plus),
                'unimatch+ael': ('ael', ['method.base=unimatch'] + plus)}
    res = time_steps(args, device, variants)
    m = res['methods']
    res['ratios'] = {f'{f}_over_cutmix': m[f]['step_s'] / m['cutmix']['step_s'] for f in ('fixmatch', 'unimatch')}
    for f in ('cutmix', 'fixmatch', 'unimatch'):
        a = m[f'{f}+ael']
        res['ratios'][f'{f}+ael_over_{f}'] = a['step_s'] / m[f]['step_s']
        res['ratios'][f'{f}+ael_components_share'] = {k: v / a['timed_step_mean_s'] for k, v in a['components_s'].items() if k in AEL_SECTIONS}
    return res

# ------------------------------------------------------------------ (b) components at paper scale
ACM_AUTHORS = "ACM region search: authors' routine (per image, CPU, scikit-image)"
ACM_KIT = {s: f'ACM region search: kit, stride {s}' + (' (default)' if s == 4 else ' (pixels)') for s in (4, 1)}
ACM_MASK = {'kit': 'ACM class mask alone: kit (class_mask)', 'authors': "ACM class mask alone: torch argmax == class (authors')"}

# the rows that are AEL's own work at the kit's defaults (the others are references: per-pixel search, the authors'
# routine, class masks alone, plain CutMix and the unsupervised loss, which the basic framework pays too)
AEL_OWN = ('bank update (Eq. 3-6)', 'class table update', 'AES rates + mask (Eq. 8-9)', 'DR weights (Eq. 10)',
           'ACM: sample classes + images (table)', ACM_KIT[4], 'ACM: adaptive_cutmix (region search + paste), stride 4',
           'ACP: adaptive_copy_paste (K=3)')
WHY = {'ACP: adaptive_copy_paste (K=3)': 'resizes and crops each pasting image\'s source at full resolution, then two full-batch selects',
       'bank update (Eq. 3-6)': 'reads every pixel\'s class probabilities once',
       'class table update': 'a histogram of every image\'s pseudo-label'}

def over_one_percent(c: dict) -> str:
    "One line: AEL's own components above 1% of the forward+backward at paper scale, or that none is, with the largest."
    r = {k: v for k, v in c.get('ratio_to_model_fwd_bwd', {}).items() if k in AEL_OWN}
    if not r: return ''
    over = sorted((k for k in r if r[k] > 0.01), key=r.get, reverse=True)
    if not over:
        k = max(r, key=r.get); return f"Every AEL component is under 1% of the forward+backward (largest: {k}, {100 * r[k]:.2f}%)."
    return "AEL components over 1% of the forward+backward: " + '; '.join(
        f"{k} {100 * r[k]:.2f}%" + (f" ({WHY[k]})" if k in WHY else '') for k in over) + '.'

def acm_ratios(comps: dict) -> dict:
    "Kit / authors' ACM region search time, from the medians and from the minima; also each less its class mask."
    out = {}
    for stat in ('median_s', 'min_s'):
        t = {k: v[stat] for k, v in comps.items() if stat in v}
        if not all(k in t for k in (ACM_AUTHORS, *ACM_KIT.values(), *ACM_MASK.values())): return {}
        out[stat[:-2]] = {f'stride {s}': t[k] / t[ACM_AUTHORS] for s, k in ACM_KIT.items()}
        out[f'{stat[:-2]}, less the class masks'] = {f'stride {s}': (t[k] - t[ACM_MASK['kit']]) / (t[ACM_AUTHORS] - t[ACM_MASK['authors']])
                                                     for s, k in ACM_KIT.items()}
    return out

def part_components(args, device) -> dict:
    from ael_nb.conf_bank import ConfidenceBank
    from ael_nb.sampling import sampling_prob
    from ael_nb.aes import aes_rates, aes_mask
    from ael_nb.losses import dr_weights, unsup_loss
    from ael_nb.cutmix import ClassTable, sample_classes, adaptive_cutmix, acm_boxes, class_mask, cutmix
    import numpy as np
    try: from acm_reference import authors_acm_boxes          # needs scikit-image (the `dev` extra)
    except ImportError as e:
        def authors_acm_boxes(*a, _e=e): raise RuntimeError(f"bench/acm_reference.py: {_e} (pip install scikit-image)")
    from ael_nb.copy_paste import adaptive_copy_paste
    from ael_nb.model import build_model
    from ael_nb.core import make_generator
    B, H, W, C = args.paper_batch, args.paper_size, args.paper_size, 19
    dev = torch.device(device)
    g = torch.Generator(device=dev).manual_seed(0)
    # a plausible scene: blocky label maps (32x32 cells) so that classes form regions, and probs peaked on them
    cells = torch.randint(0, C, (B, (H + 31) // 32, (W + 31) // 32), generator=g, device=dev)
    labels = cells.repeat_interleave(32, 1).repeat_interleave(32, 2)[:, :H, :W].contiguous()
    logits = torch.randn(B, C, H, W, generator=g, device=dev) + 4 * torch.nn.functional.one_hot(labels, C).permute(0, 3, 1, 2)
    probs = logits.softmax(1); del logits
    images = torch.randn(B, 3, H, W, generator=g, device=dev)
    src_images, src_probs = images.roll(1, 0), probs.roll(1, 0)
    conf = torch.linspace(0.2, 0.9, C, device=dev)
    bank = ConfidenceBank(C, device=dev)
    table = ClassTable(C, 2975, r_star=0.005, device=dev)
    idx = torch.arange(B, device=dev)
    pseudo = probs.argmax(1)
    classes = sample_classes(sampling_prob(conf), B, g)
    table.update(idx, pseudo)
    keep = aes_mask(pseudo, aes_rates(conf), generator=g)
    student_logits = torch.randn(B, C, H, W, device=dev, requires_grad=True)
    r = dict(setting=dict(batch=B, size=[H, W], classes=C, reps=args.reps, threads=torch.get_num_threads()), components={})
    rng = np.random.default_rng(0)
    AUTHORS, KIT, MASK = ACM_AUTHORS, ACM_KIT, ACM_MASK
    comps = {
        'bank update (Eq. 3-6)': lambda: bank.update(probs, labels),
        'class table update': lambda: table.update(idx, pseudo),
        'AES rates + mask (Eq. 8-9)': lambda: aes_mask(pseudo, aes_rates(conf), generator=g),
        'DR weights (Eq. 10)': lambda: dr_weights(probs, 2.0, keep),
        'ACM: sample classes + images (table)': lambda: table.sample_images(sample_classes(sampling_prob(conf), B, g), g),
        KIT[4]: lambda: acm_boxes(src_probs, classes, g, stride=4),
        KIT[1]: lambda: acm_boxes(src_probs, classes, g, stride=1),
        AUTHORS: lambda: authors_acm_boxes(src_probs, classes, rng),
        MASK['kit']: lambda: class_mask(src_probs, classes),
        MASK['authors']: lambda: src_probs.argmax(1) == classes.view(B, 1, 1),
        'ACM: adaptive_cutmix (region search + paste), stride 4': lambda: adaptive_cutmix(images, probs, src_images, src_probs, classes, g, stride=4),
        'ACM: adaptive_cutmix (region search + paste), stride 1': lambda: adaptive_cutmix(images, probs, src_images, src_probs, classes, g, stride=1),
        'plain CutMix (basic framework)': lambda: cutmix(images, probs, generator=g),
        'ACP: adaptive_copy_paste (K=3)': lambda: adaptive_copy_paste(images, labels, sampling_prob(conf), k=3, generator=g),
        'unsup loss Eq. 11 fwd+bwd (not AEL-specific)': lambda: unsup_loss(student_logits, pseudo, keep.float()).backward(),
    }
    r['components'] = timeit_interleaved(comps, device, reps=args.reps, warmup=1)
    for name, v in r['components'].items(): print(f"  {name}: {v}", flush=True)
    # the three searches choose among the same regions: found (a region above min_area exists) per image
    if all('median_s' in r['components'][k] for k in (AUTHORS, *KIT.values())):
        r['acm_found'] = dict(classes=classes.cpu().tolist(), authors=authors_acm_boxes(src_probs, classes, rng)[1].tolist(),
                              **{f'kit stride {s}': acm_boxes(src_probs, classes, g, stride=s)[1].cpu().tolist() for s in KIT})
        r['acm_kit_over_authors'] = acm_ratios(r['components'])
    del student_logits, probs, src_probs; gc.collect()
    # the network on the same input: as much of it as fits
    model_specs = ([('resnet101', 8, B), ('resnet101', 8, B // 2), ('resnet101', 8, 2), ('resnet50', 16, 2)] if dev.type == 'cuda'
                   else [(args.cpu_backbone, args.cpu_os, args.cpu_model_batch)])
    for bb, os_, mb in model_specs:
        try:
            model = build_model(C, bb, os_, deep_stem=(bb == 'resnet101'), aux=False).to(dev).train()
            x, y = images[:mb].contiguous(), labels[:mb].contiguous()
            def fb():
                model.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(x)['out'], y).backward()
            if dev.type == 'cuda': torch.cuda.reset_peak_memory_stats()
            t = timeit(fb, device, reps=max(1, min(args.reps, 3)), warmup=1)
            per_img = t['median_s'] / mb
            r['model'] = dict(backbone=bb, output_stride=os_, deep_stem=bb == 'resnet101', batch=mb, size=[H, W], fwd_bwd=t,
                              per_image_s=per_img, extrapolated_batch_s=per_img * B, extrapolation='linear in batch' if mb != B else 'none',
                              peak_mem_gib=torch.cuda.max_memory_allocated() / 2**30 if dev.type == 'cuda' else None)
            print(f"  model {bb} OS{os_} batch {mb}: {t}", flush=True)
            del model; gc.collect()
            if dev.type == 'cuda': torch.cuda.empty_cache()
            break
        except (RuntimeError, torch.cuda.OutOfMemoryError) as e:
            r.setdefault('model_failed', []).append(dict(backbone=bb, output_stride=os_, batch=mb, error=str(e)[:200]))
            model = None; gc.collect()
            if dev.type == 'cuda': torch.cuda.empty_cache()
    if 'model' in r:
        ref = r['model']['extrapolated_batch_s']
        r['ratio_to_model_fwd_bwd'] = {k: v['median_s'] / ref for k, v in r['components'].items() if 'median_s' in v}
    return r

# ------------------------------------------------------------------ (c) peak memory, one subprocess per method
def memory_child(args):
    "Child: three training steps of one method through the engine; prints a JSON line with the peak memory."
    global RSS0
    RSS0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    import tempfile
    from ael_nb.plan import build_data
    from ael_nb.train import setup
    device = args.device
    cfg = step_config(args, device, args.mem_method, out=tempfile.mkdtemp(prefix='ael_cost_mem_'))
    build_data(cfg)
    rss_setup = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    run = setup(cfg)
    rss_model = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if torch.device(device).type == 'cuda': torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats(); base = torch.cuda.memory_allocated()
    for i in range(3): run.step()
    run.close()
    out = dict(method=args.mem_method, maxrss_at_start_mib=RSS0 / 1024, maxrss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               maxrss_after_data_mib=rss_setup / 1024, maxrss_after_model_mib=rss_model / 1024)
    if torch.device(device).type == 'cuda':
        out.update(cuda_peak_mib=torch.cuda.max_memory_allocated() / 2**20, cuda_before_steps_mib=base / 2**20)
    print('MEMORY ' + json.dumps(out), flush=True)

def part_memory(args, device) -> dict:
    res = {}
    for m in ('supervised', 'meanteacher', 'cutmix', 'ael'):
        cmd = [sys.executable, __file__, '--mem-child', '--mem-method', m, '--device', device, '--dataset', args.dataset]
        if args.root: cmd += ['--root', args.root]
        if args.batch: cmd += ['--batch', str(args.batch)]
        if args.crop: cmd += ['--crop', str(args.crop)]
        if args.set: cmd += ['--set', *args.set]
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=dict(os.environ, OMP_NUM_THREADS=str(torch.get_num_threads())))
        line = [l for l in p.stdout.splitlines() if l.startswith('MEMORY ')]
        res[m] = json.loads(line[-1][7:]) if line else dict(error=(p.stderr or p.stdout)[-500:])
        print(f"  {m}: {res[m]}", flush=True)
    return res

# ------------------------------------------------------------------ report
def markdown(r: dict) -> str:
    L = [f"# Cost of AEL's bookkeeping on {r['device_name']} ({r['date']})\n"]
    if 'step' in r:
        s = r['step']; st = s['setting']
        L += [f"## (a) time per training step\n",
              f"{st['dataset']}, crop {st['crop'][0]}x{st['crop'][1]}, {st['batch_labeled']} labeled + {st['batch_unlabeled']} unlabeled images, "
              f"{st['backbone']} OS{st['output_stride']}, {st['threads']} thread(s), median of {st['reps']} steps after 2 warm-up steps; "
              "one process, same initialisation, `Run.step()` of the engine (data, step function, backward, SGD, EMA).\n",
              '| method | step (s) | × supervised | with a Trace (s) |', '|---|---|---|---|']
        sup = s['methods']['supervised']['step_s']
        for k, v in s['methods'].items(): L.append(f"| {k} | {v['step_s']:.3f} | {v['step_s'] / sup:.2f} | {v['traced_step_s']:.3f} |")
        rt, tp = s['ratios'], s['trace_points']
        L += ['', f"AEL / CutMix: {rt['ael_over_cutmix']:.2f} (sources loaded in the step: {rt['ael_in_step_loading_over_cutmix']:.2f}; "
              f"authors' arrangement, half the unlabeled batch targets and half ACM's sources, so the teacher sees as many images as CutMix's: "
              f"**{rt.get('ael_authors_arrangement_over_cutmix', float('nan')):.2f}**); "
              f"CutMix / supervised: {rt['cutmix_over_supervised']:.2f}. AEL with a Trace / without: {rt['ael_traced_over_untraced']:.3f}. "
              f"Untraced, the {tp['sections_per_ael_step']} trace points of an AEL step cost {tp['disabled_section_s'] * 1e6:.2f} µs each, "
              f"{100 * tp['share_of_ael_step']:.4f}% of the step.\n",
              'AEL step, per section of a timed Trace (mean s per step, share of the timed step):\n', '| section | s / step | share |', '|---|---|---|']
        mean = s['methods']['ael']['timed_step_mean_s']
        for k, v in s['methods']['ael']['components_s'].items(): L.append(f"| {k} | {v:.4f} | {100 * v / mean:.1f}% |")
        L.append(f"| **AEL bookkeeping total** (all sections but data, teacher and student forward, backward, optimizer + EMA, which the basic framework also pays) | | "
                 f"**{100 * rt['ael_bookkeeping_total_share']:.1f}%** |\n")
    if 'frameworks' in r:
        f = r['frameworks']; st = f['setting']; m, rt = f['methods'], f['ratios']
        L += ["## (d) the weak-to-strong frameworks, alone and with AEL\n",
              f"{st['dataset']}, crop {st['crop'][0]}x{st['crop'][1]}, {st['batch_labeled']} labeled + {st['batch_unlabeled']} unlabeled images, "
              f"{st['backbone']} OS{st['output_stride']}, {st['threads']} thread(s), median of {st['reps']} steps after 2 warm-up steps, one process. "
              "'+ael': the four components, half the unlabeled batch targets and half ACM's sources, as ael-train.\n",
              '| framework | step (s) | × CutMix | + AEL (s) | + AEL / alone | AEL components, share of the + AEL step |', '|---|---|---|---|---|---|']
        for k in ('cutmix', 'fixmatch', 'unimatch'):
            share = rt[f'{k}+ael_components_share']
            L.append(f"| {k} | {m[k]['step_s']:.3f} | {m[k]['step_s'] / m['cutmix']['step_s']:.2f} | {m[k + '+ael']['step_s']:.3f} | "
                     f"{rt[f'{k}+ael_over_{k}']:.2f} | {100 * sum(share.values()):.1f}% ("
                     + ', '.join(f'{s} {100 * v:.1f}%' for s, v in share.items()) + ') |')
        L.append('')
    if 'components' in r:
        c = r['components']; st = c['setting']
        L += [f"## (b) each component alone at paper scale\n",
              f"Batch {st['batch']} of {st['size'][0]}x{st['size'][1]}, {st['classes']} classes, {st['threads']} thread(s), median of {st['reps']}"
              + (" (components timed in turn, round by round)" if any(v.get('interleaved') for v in c['components'].values()) else '') + '. ']
        if 'model' in c:
            m = c['model']
            L.append(f"Reference: forward+backward of DeepLabv3+ {m['backbone']} OS{m['output_stride']}{' deep stem' if m['deep_stem'] else ''} "
                     f"on batch {m['batch']} of the same images: {m['fwd_bwd']['median_s']:.3f} s, i.e. {m['per_image_s']:.3f} s per image; "
                     f"{'extrapolated linearly to' if m['batch'] != st['batch'] else 'for'} batch {st['batch']}: {m['extrapolated_batch_s']:.2f} s"
                     + (f"; peak GPU memory {m['peak_mem_gib']:.1f} GiB" if m.get('peak_mem_gib') else '') + '.')
        for f in c.get('model_failed', []): L.append(f"(did not fit/run: {f['backbone']} OS{f['output_stride']} batch {f['batch']}: {f['error'][:80]})")
        L += ['', '| component | s (batch), median | min | median / model fwd+bwd (batch) |', '|---|---|---|---|']
        for k, v in c['components'].items():
            if 'median_s' in v: L.append(f"| {k} | {v['median_s']:.4f} | {v['min_s']:.4f} | {c.get('ratio_to_model_fwd_bwd', {}).get(k, float('nan')):.4f} |")
            else: L.append(f"| {k} | error: {v['error'][:60]} | | |")
        if over_one_percent(c): L += ['', over_one_percent(c)]
        if c.get('acm_kit_over_authors'):
            f = c['acm_found']; n = len(f['authors'])
            L += ['', "ACM region search (teacher argmax == class, components, a random one above r* = 0.5% of the image, its box, "
                  "else a random half-image box), kit / authors' per-image scikit-image routine (bench/acm_reference.py) on the same "
                  "input; 'less the class masks' compares the searches proper (each routine less its \"class mask alone\" row):\n",
                  '| kit / authors, from | stride 4 | stride 1 |', '|---|---|---|']
            L += [f"| {k} | {v['stride 4']:.3f} | {v['stride 1']:.3f} |" for k, v in c['acm_kit_over_authors'].items()]
            L += ['', f"Images with a region above r* (of {n}; the rest take the fallback box): kit stride 1 {sum(f['kit stride 1'])}, "
                  f"kit stride 4 {sum(f['kit stride 4'])}, authors {sum(f['authors'])}; kit stride 1 and authors agree on "
                  f"{sum(a == b for a, b in zip(f['kit stride 1'], f['authors']))} of {n}."]
        L.append('')
    if 'memory' in r:
        L += ['## (c) peak memory of a training step (3 steps, fresh process per method)\n']
        cuda = any('cuda_peak_mib' in v for v in r['memory'].values())
        L += ['| method | peak RSS (MiB) | RSS after data (MiB) | RSS after model (MiB) | step peak over model (MiB) |' + (' CUDA peak allocated (MiB) |' if cuda else ''),
              '|---|---|---|---|---|' + ('---|' if cuda else '')]
        for k, v in r['memory'].items():
            if 'error' in v: L.append(f"| {k} | error | | |"); continue
            L.append(f"| {k} | {v['maxrss_mib']:.0f} | {v['maxrss_after_data_mib']:.0f} | {v['maxrss_after_model_mib']:.0f} | {v['maxrss_mib'] - v['maxrss_after_model_mib']:.0f} |"
                     + (f" {v['cuda_peak_mib']:.0f} |" if cuda else ''))
        L.append('')
    return '\n'.join(L)

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('--device', default='cpu')
    ap.add_argument('--parts', default='abcd', help="any of a (step), b (components), c (memory), d (frameworks)")
    ap.add_argument('--dataset', default='synthetic'); ap.add_argument('--root', default=None)
    ap.add_argument('--batch', type=int, default=None, help='(a, c) labeled batch (default: the grid setting)')
    ap.add_argument('--crop', type=int, default=None, help='(a, c) square crop (default: the grid setting)')
    ap.add_argument('--reps', type=int, default=5)
    ap.add_argument('--threads', type=int, default=None, help='torch threads (default: 1 on the CPU, as the grid)')
    ap.add_argument('--paper-batch', type=int, default=16); ap.add_argument('--paper-size', type=int, default=769)
    ap.add_argument('--cpu-backbone', default='resnet50'); ap.add_argument('--cpu-os', type=int, default=16)
    ap.add_argument('--cpu-model-batch', type=int, default=2, help='>= 2 (the ASPP pooling BatchNorm needs 2 in train mode)')
    ap.add_argument('--set', nargs='*', default=[], help='(a, c) extra config overrides, e.g. model.backbone=resnet101 model.output_stride=8')
    ap.add_argument('--tag', default=None, help='file name tag (default: the device type)')
    ap.add_argument('--mem-child', action='store_true', help=argparse.SUPPRESS); ap.add_argument('--mem-method', help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.device == 'cpu': torch.set_num_threads(args.threads or 1)
    elif args.threads: torch.set_num_threads(args.threads)
    SET[:] = args.set
    if args.mem_child: return memory_child(args)
    dev = torch.device(args.device)
    from ael_nb.core import device_name
    name = device_name(dev)
    r = dict(device=args.device, device_name=name, torch=torch.__version__, date=dt.datetime.now().isoformat(timespec='seconds'), argv=sys.argv[1:])
    tag = args.tag or dev.type
    out = RESULTS / f'cost_{tag}.json'; RESULTS.mkdir(parents=True, exist_ok=True)
    if out.exists():   # keep parts measured earlier
        old = json.loads(out.read_text()); r = {**{k: v for k, v in old.items() if k in ('step', 'components', 'memory', 'frameworks')}, **r}
    from ael_nb.core import atomic_write_text
    def save():
        atomic_write_text(out, json.dumps(r, indent=1)); atomic_write_text(out.with_suffix('.md'), markdown(r))
    t0 = time.time()
    # (c) first: Linux keeps a parent's ru_maxrss high-water mark in children across fork+exec, so the memory
    # children must be started while this process is still small
    if 'c' in args.parts: print('(c) memory', flush=True); r['memory'] = part_memory(args, args.device); save()
    if 'a' in args.parts: print('(a) step', flush=True); r['step'] = part_step(args, args.device); save()
    if 'b' in args.parts: print('(b) components', flush=True); r['components'] = part_components(args, args.device); save()
    if 'd' in args.parts: print('(d) frameworks', flush=True); r['frameworks'] = part_frameworks(args, args.device); save()
    print(markdown(r)); print(f'wrote {out} in {time.time() - t0:.0f} s')

if __name__ == '__main__':
    main()
