"""Run a grid of (method or ablation) x (label fraction) x (seed) under a fixed CPU budget and tabulate it.

    python bench/grid.py table2 --dataset synthetic --seeds 0 1 2 --jobs 2
    python bench/grid.py table2 --dataset camvid --root /tmp/camvid_180x240 --seeds 0 1 2 --jobs 2
    python bench/grid.py table5 --dataset synthetic --seeds 0 1 2 --jobs 2
    python bench/grid.py table2 --dataset synthetic --report     # tables and plots from the finished cells only
    python bench/grid.py table5 table7 remedies --dataset synthetic96 --jobs 2           # several grids, one pool
    python bench/grid.py table5 --dataset synthetic96 --device cuda --jobs 12 --results $OUT   # the same cells on a GPU

Every cell is one `ael_nb.train.train(cfg)` run in its own process (OMP_NUM_THREADS=1, torch threads 1), built
from the `cpu96` preset (`BASE`) plus dotted overrides: a method or an ablation is a list of `key=value` strings, never a
code edit. A finished cell is stored as `bench/results/<grid>-<dataset>/<cell>.json` (written atomically), its `host`
naming what the numbers are reproducible given: the instruction path (`amx-bf16`, `avx512-bf16`, `avx2-fp32`), the
thread count and the torch version (cells older than `host.path` are read by `ael_nb.draws.provenance`);
a rerun skips finished cells, resumes a half-finished one from its `latest.pth` and recomputes a cell whose
stored configuration differs from the one asked for. A cell with the same configuration finished by another
grid (e.g. `dr+aes` of table5 = `confidence` of table7) is reused, not recomputed; grids named together share one
pool of processes, cells ordered seed by seed, and a cell they share runs once.

`--device cuda` runs the same configurations (model, crops, batch, steps: the CPU budget) on a GPU, many processes
sharing it; its cells are stored under `<grid>-<dataset>-<iters>it-cuda` and never mixed with CPU cells (GPU kernels are
not bit-deterministic, so the numbers differ from the CPU's by run-to-run noise).

The number reported for a run is the final EMA teacher's (the model the authors evaluate) where the method has
one, else the student's (supervised runs have no teacher); the students' numbers are tabulated too."""
from __future__ import annotations
from fractions import Fraction
import argparse, datetime as dt, hashlib, json, math, os, shutil, subprocess, sys, time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
RESULTS = BENCH / 'results'

# ---------------------------------------------------------------- what is run
# variants: name -> overrides on top of the dataset setting. 'full' = supervised on every training image.
FULL = ['method.name=supervised', 'data.manifest=none', 'data.fraction=1']
from ael_nb.paper import ABLATIONS      # every ablation row is defined once, there
from stored import refresh             # bench/stored.py: the package's copy of bench/results
def _ael(row: str) -> list[str]: return ['method.name=ael'] + ABLATIONS[row]

GRIDS = {
    # Table 2 (and Table 4 per class): supervised, Mean Teacher, CutMix basic framework, AEL, fully-labeled ceiling
    'table2': dict(variants={'supervised': ['method.name=supervised'], 'meanteacher': ['method.name=meanteacher'],
                             'cutmix': ['method.name=cutmix'], 'ael': ['method.name=ael'], 'full': FULL},
                   baseline='supervised', ceiling='full'),
    # Table 5: components on top of the basic framework (all switches of the AEL step)
    'table5': dict(variants={'basic': _ael('baseline'), '+DR': _ael('dr'), '+AES': _ael('aes'), '+ACM': _ael('acm'),
                             '+ACP': _ael('acp'), 'DR+AES': _ael('dr+aes'), 'DR+AES+ACM': _ael('dr+aes+acm'), 'all': _ael('ael')},
                   baseline='basic', ceiling=None),
    # Table 7: indicator of the confidence bank, with DR+AES (the paper's 'None' row = DR alone)
    'table7': dict(variants={'none (DR only)': _ael('dr'), **{i: _ael(f'indicator={i}') for i in ('confidence', 'margin', 'entropy')}},
                   baseline='none (DR only)', ceiling=None),
    # not in the paper: a teacher trained from scratch never predicts the tail (RESULTS.md), so let the unlabeled
    # term in gradually: alpha ramps up from 0 over the first half of training ({half} = iters // 2)
    'remedies': dict(variants={'supervised': ['method.name=supervised'], 'cutmix': ['method.name=cutmix'], 'ael': ['method.name=ael'],
                               'cutmix ramp': ['method.name=cutmix', 'method.alpha_rampup={half}'],
                               'ael ramp': ['method.name=ael', 'method.alpha_rampup={half}'],
                               'meanteacher ramp': ['method.name=meanteacher', 'method.alpha_rampup={half}'], 'full': FULL},
                     baseline='supervised', ceiling='full'),
}
# Tables 6, 8, 9, 10: the hyper-parameter rows of `ael_nb.paper.ABLATIONS`, each on the AEL step; baseline = the paper's value
def _ablation_grid(prefix: str, baseline: str) -> dict:
    return dict(variants={k: _ael(k) for k in ABLATIONS if k.startswith(prefix)}, baseline=baseline, ceiling=None)
GRIDS.update(table6=_ablation_grid('gamma=', 'gamma=2'), table8=_ablation_grid('r_star=', 'r_star=0.005'),
             table9=_ablation_grid('k=', 'k=3'), table10=_ablation_grid('alpha=', 'alpha=1.0'))

# The default run's setting (`ael-train` with no arguments): 800 steps, alpha ramped in over the first half, bf16 autocast.
# Every row here adds the ramp and bf16 to its overrides, so its cells are stored apart from the fp32 grids above.
RAMP, BF16 = ['method.alpha_rampup={half}'], ['optim.amp=bf16']
HALF = ['method.acm_targets=half']
C64H128 = ['data.crop_size=64,96', 'model.head_channels=128']   # random 64x96 crops of the 96x128 scenes, 128 channels
S64H64 = ['data.synthetic_size=64,96', 'data.crop_size=64,96', 'model.head_channels=64', 'optim.lr=0.02']   # whole 64x96 scenes
CPU = S64H64 + ['data.batch_size=4', 'optim.iters=1600', 'method.alpha_rampup=1600', f'method.tau={1 - 18 / 1600}']   # the cpu preset's values on BASE
def _story(rows: dict) -> dict: return {k: v + RAMP + BF16 for k, v in rows.items()}
GRIDS.update({
    # the default run's comparison: supervised vs the basic framework vs AEL, ramped; AEL without the ramp (paper's alpha from step 0)
    'setting': dict(variants={'supervised': ['method.name=supervised'] + RAMP + BF16,
                              'ael ramp acm half': ['method.name=ael', 'method.acm_targets=half'] + RAMP + BF16,   # = ael-train
                              'ael ramp': ['method.name=ael'] + RAMP + BF16, 'cutmix ramp': ['method.name=cutmix'] + RAMP + BF16,
                              'ael no ramp': ['method.name=ael'] + BF16,
                              'ael ramp fp32': ['method.name=ael'] + RAMP,    # bf16 vs fp32 on today's code (the fp32 cells of remedies predate ACM's stride)
                              'cutmix ramp fp32': ['method.name=cutmix'] + RAMP,   # = remedies' 'cutmix ramp' (no ACM: unchanged since)
                              'supervised fp32': ['method.name=supervised']},      # = remedies' 'supervised' (alpha weighs only the unlabeled loss)
                    baseline='supervised', ceiling=None),
    # the default run's comparison on real data (give --dataset camvid160): does AEL's tail gain hold on CamVid?
    # (rows in the order they run seed by seed on the CPU: the question's two first)
    'camvid': dict(variants={'supervised': ['method.name=supervised'] + RAMP + BF16,
                             'ael ramp acm half': ['method.name=ael', 'method.acm_targets=half'] + RAMP + BF16,
                             'cutmix ramp': ['method.name=cutmix'] + RAMP + BF16, 'full': FULL + BF16,
                             # what might make it hold: pseudo-labels the teacher is unsure of (tail pixels it calls head) ignored
                             'ael ramp acm half thr0.7': ['method.name=ael', 'method.acm_targets=half',
                                                          'method.pl_threshold=0.7'] + RAMP + BF16,
                             # which of AEL's parts keeps the teacher from the tail (CutMix's teacher has it by step 750, AEL's not)
                             'ael ramp acm half no acp': ['method.name=ael', 'method.acm_targets=half', 'method.acp=false'] + RAMP + BF16,
                             'ael ramp acm half no dr aes': ['method.name=ael', 'method.acm_targets=half', 'method.dr=false',
                                                             'method.aes=false'] + RAMP + BF16,
                             'ael ramp no acm': ['method.name=ael', 'method.acm=false'] + RAMP + BF16,   # plain CutMix (its batch: 8 targets)
                             'ael ramp': ['method.name=ael'] + RAMP + BF16},                              # ACM with 8 targets + 8 sources
                   baseline='supervised', ceiling='full'),
    # the share of the supervised-to-full gap at a longer schedule (give --iters 1600): at 800 steps AEL still gains
    # 3-4 mIoU per 200 steps while supervised training has levelled off (RESULTS.md)
    'schedule': dict(variants={'supervised': ['method.name=supervised'] + RAMP + BF16,
                               'ael ramp acm half': ['method.name=ael', 'method.acm_targets=half'] + RAMP + BF16, 'full': FULL + BF16,
                               # at 1600 steps AEL peaks near step 1200 and then loses head classes (road, sidewalk, car):
                               # a smaller unlabeled weight (Table 10's best row at 800 steps), or unsure pseudo-labels ignored
                               'ael ramp acm half alpha=0.5': ['method.name=ael', 'method.acm_targets=half', 'method.alpha=0.5'] + RAMP + BF16,
                               'ael ramp acm half thr0.7': ['method.name=ael', 'method.acm_targets=half',
                                                            'method.pl_threshold=0.7'] + RAMP + BF16},
                     baseline='supervised', ceiling='full'),
    # AEL's components on today's weak-to-strong frameworks, on the default run's setting (--dataset synthetic96
    # --iters 800) and on CamVid (--dataset camvid160, 1500 steps): each framework alone and with AEL's four components
    # (4 targets + 4 ACM sources, as ael-train); FixMatch and UniMatch label with the EMA teacher (the kit's labeler, so that
    # only the framework differs from AEL's rows), and once more with the student under stop-gradient (their own code's)
    'frameworks': dict(variants=_story({'supervised': ['method.name=supervised'], 'cutmix': ['method.name=cutmix'],
                                        'ael': ['method.name=ael'] + HALF, 'fixmatch': ['method.name=fixmatch'],
                                        'fixmatch+ael': ['method.name=ael', 'method.base=fixmatch'] + HALF,
                                        'unimatch': ['method.name=unimatch'],
                                        'unimatch+ael': ['method.name=ael', 'method.base=unimatch'] + HALF,
                                        # the threshold or the teacher: FixMatch + AEL with every pseudo-label, AES the only filter (as on CutMix)
                                        'fixmatch+ael thr0': ['method.name=ael', 'method.base=fixmatch', 'method.conf_thresh=0'] + HALF})
                               | {'full': FULL + BF16}
                               | _story({'fixmatch student-labeled': ['method.name=fixmatch', 'method.teacher=student'],
                                         'unimatch student-labeled': ['method.name=unimatch', 'method.teacher=student']}),
                       baseline='supervised', ceiling='full'),
    # the candidate default run (give --dataset synthetic64 --iters 800: AEL as `ael-train` runs it) beside supervised
    # training and the fully-labeled ceiling: the cells its closing summary would compare with; bf16 as `ael-train`
    # runs where the processor has bf16 kernels, and the same rows in fp32 (what it runs elsewhere)
    'default': dict(variants=_story({'supervised': ['method.name=supervised'], 'ael': ['method.name=ael'] + HALF})
                             | {'full': FULL + BF16, 'supervised fp32': ['method.name=supervised'] + RAMP,
                                'ael fp32': ['method.name=ael'] + HALF + RAMP, 'full fp32': FULL},
                    baseline='supervised', ceiling='full'),
    # a cheaper default run (give --dataset synthetic96 --iters 800): supervised and AEL as `ael-train` runs it,
    # each with a narrower ASPP + decoder (model.head_channels), random crops of the whole scenes (objects keep their size;
    # evaluation on whole scenes) and/or 600 steps (alpha ramped over the first half, the bank's time constant as the same
    # share of the run), beside today's setting
    'cheaper': dict(variants={f'{m}{tag}': [f'method.name={m}'] + (HALF if m == 'ael' else []) + RAMP + BF16 + ov
                              for tag, ov in (('', []), (' c64x96 h128', C64H128), (' c64x64', ['data.crop_size=64,64']),
                                              # the narrower network learns the tail more slowly: a larger step, or the unlabeled loss later
                                              (' c64x96 h128 lr0.02', C64H128 + ['optim.lr=0.02']),
                                              (' c64x96 h128 ramp800', C64H128 + ['method.alpha_rampup=800']),
                                              # whole 64x96 scenes, 64 channels (0.33x of today's step capped to AVX2): a larger step, and
                                              # the unlabeled loss later or only on confident pseudo-labels
                                              (' s64x96 h64 lr0.02', S64H64),
                                              (' s64x96 h64 lr0.02 ramp800', S64H64 + ['method.alpha_rampup=800']),
                                              (' s64x96 h64 lr0.02 thr0.7', S64H64 + ['method.pl_threshold=0.7']),
                                              # the same work as 800 steps of batch 8 + 8, as twice the steps of batch 4 + 4
                                              (' s64x96 h64 lr0.02 b4 1600 ramp1600', CPU))
                              for m in ('supervised', 'ael')}
                           # the same two rows in fp32, what a CPU without bf16 kernels runs (run them capped to AVX2)
                           | {f'{m} s64x96 h64 lr0.02 b4 1600 ramp1600 fp32': [f'method.name={m}'] + (HALF if m == 'ael' else []) + CPU
                              for m in ('supervised', 'ael')}
                           | {'full s64x96 h64 lr0.02': FULL + BF16 + S64H64,
                              'full s64x96 h64 lr0.02 b4 1600': FULL + BF16 + S64H64 + ['data.batch_size=4', 'optim.iters=1600']},
                    baseline='supervised', ceiling=None),
    # candidates for a default run whose AEL tail gain is larger than the draw on the AVX2 fp32 path (run it
    # capped: ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2; --dataset synthetic96 --iters 800): the `cpu` preset's
    # setting in fp32 with one change. os8: the ASPP at stride 8, where a pole still shows (oracle_stride: 0.1 -> 20.7 IoU)
    'screen': dict(variants={f'{m}{tag} fp32': [f'method.name={m}'] + (HALF if m == 'ael' else []) + CPU + ov
                             for tag, ov in ((' os8', ['model.output_stride=8']),) for m in ('supervised', 'ael')}
                            # spare: classes the bank does not see yet out of the unlabeled softmax (04_losses); the
                            # supervised rows of this setting are `cheaper`'s fp32 ones, same configuration, reused
                            | {f'ael spare{s} fp32': ['method.name=ael'] + HALF + CPU + [f'method.spare_unseen={s}'] for s in (0.3, 0.5)}
                            # spared only where the teacher gives the class some probability: false positives still pushed down
                            | {f'ael spare0.5 q{q} fp32': ['method.name=ael'] + HALF + CPU + ['method.spare_unseen=0.5', f'method.spare_prob={q}']
                               for q in (0.1,)}
                            | {'full os8 fp32': FULL + S64H64 + ['data.batch_size=4', 'optim.iters=1600', 'model.output_stride=8']}
                            # half the unlabeled weight (Table 10's best row; at cpu96's 1600 steps it steadied AEL's tail),
                            # evaluated on the preset's 400 val scenes
                            | {'ael alpha0.5 fp32': ['method.name=ael'] + HALF + CPU + ['method.alpha=0.5', 'data.synthetic_val_n=400']}
                            # the confirmation's supervised draws and fully-labeled ceiling at the `cpu` setting, run on this machine;
                            # evaluated on 100 val scenes (the preset's 400: `bench/store_run.py --val-n 400` re-evaluates a cell's run)
                            # a memory of the labeled set feeds ACP and ACM a class the batch and the pseudo-labels lack (12, 13)
                            | {'ael memory fp32': ['method.name=ael'] + HALF + CPU + ['method.cp_source=memory', 'method.acm_fallback=labeled']}
                            | {'supervised fp32': ['method.name=supervised'] + CPU, 'ael fp32': ['method.name=ael'] + HALF + CPU,
                               'full fp32': FULL + S64H64 + ['data.batch_size=4', 'optim.iters=1600']},
                   baseline='supervised os8 fp32', ceiling='full os8 fp32'),
    # this kit's choices vs the authors' code, as rows against AEL with the kit's defaults
    'choices': dict(variants=_story({'ael ramp': ['method.name=ael'], 'absent_as_zero': ['method.name=ael', 'method.absent_as_zero=true'],
                                     'aes from student': ['method.name=ael', 'method.aes_source=student']}),
                    baseline='ael ramp', ceiling=None),
    # Tables 6, 8, 9, 10 on the default run's setting, its batch included (4 targets + 4 ACM sources; no effect without ACM)
    **{f'{t}r': dict(GRIDS[t], variants={k: v + HALF for k, v in _story(GRIDS[t]['variants']).items()})
       for t in ('table6', 'table8', 'table9', 'table10')}})

MIN_GAP = 2.0   # points of mIoU (single-seed differences of 1-2 points are noise here, cpu-regime.md): below this ceiling-minus-baseline gap, 'share of the gap recovered' is not reported
TABLE5_FLAGS = {'basic': '', '+DR': 'dr', '+AES': 'aes', '+ACM': 'acm', '+ACP': 'acp', 'DR+AES': 'dr aes',
                'DR+AES+ACM': 'dr aes acm', 'all': 'dr aes acm acp'}

BASE = 'cpu96'   # every cell's starting point: its network, optimiser and schedule unless an override says otherwise

# dataset settings: the budget. Every run of a dataset gets exactly these (plus the variant's overrides).
SETTINGS = {
    'synthetic': dict(iters=300, overrides=['data.dataset=synthetic', 'data.synthetic_size=[96,128]', 'data.crop_size=[64,64]',
                                            'data.batch_size=4', 'eval.mode=whole']),
    # the `cpu` preset's own regime (whole 96x128 scenes, batch 8), where the fully-labeled model learns the tail
    'synthetic96': dict(iters=400, manifests='synthetic',
                        overrides=['data.dataset=synthetic', 'data.synthetic_size=[96,128]', 'data.crop_size=[96,128]',
                                   'data.scale=[1.0,1.0]', 'data.batch_size=8', 'eval.mode=whole']),
    # the candidate for a cheaper default run (the one above is the `cpu` preset's): whole 64x96 scenes,
    # batch 4 (+ 4 unlabeled), 0.32x the 96x128 batch-8 step's CPU time in fp32 on AVX2 (results/levers_cpu_avx2_*.md)
    'synthetic64': dict(iters=800, manifests='synthetic',
                        overrides=['data.dataset=synthetic', 'data.synthetic_size=[64,96]', 'data.crop_size=[64,96]',
                                   'data.scale=[1.0,1.0]', 'data.batch_size=4', 'eval.mode=whole']),
    # the real-data check of the default run's setting: 180x240 copies (bench/prepare_camvid.py), 160x160 crops, batch 8
    'camvid160': dict(iters=1500, manifests='camvid', overrides=['data.dataset=camvid', 'data.crop_size=[160,160]', 'data.batch_size=8',
                                                                 'data.scale=[0.75,1.5]', 'eval.mode=whole']),
    'camvid': dict(iters=300, overrides=['data.dataset=camvid', 'data.crop_size=[128,128]', 'data.batch_size=4',
                                         'data.scale=[0.75,1.5]', 'eval.mode=whole']),
}
COMMON = ['model.backbone=resnet18', 'model.output_stride=16', 'model.aux=false', 'optim.sup_loss=ce',
          'eval.interval=0', 'eval.models=[teacher,student]', 'data.num_workers=0', 'data.check=false',
          'run.threads=1', 'run.progress=false', 'run.tensorboard=false', 'run.plots=false',
          'method.alpha_rampup=0',   # the paper's alpha from step 0 unless a variant says otherwise (the cpu preset ramps)
          'optim.amp=none',          # fp32 unless a variant says otherwise (the cpu preset's 'auto' depends on the machine)
          'method.tau=0.99', 'method.acm_targets=all']   # the cpu preset's values before it became the 800-step default run

def manifest_for(dataset: str, fraction: str, seed: int) -> list[str]:
    "Shipped manifest `data_manifests/<dataset>/<1-8>_fold<seed>.json` if there is one, else a draw with `run.seed`."
    p = REPO / 'data_manifests' / dataset / f"{fraction.replace('/', '-')}_fold{seed}.json"
    from fractions import Fraction
    return [f'data.manifest={p}'] if p.exists() else ['data.manifest=none', f'data.fraction={float(Fraction(fraction))!r}']

def cell_name(variant: str, fraction: str, seed: int) -> str:
    safe = variant.replace(' ', '_').replace('(', '').replace(')', '').replace('+', 'p').replace('/', '-')
    return f"{safe}__{fraction.replace('/', '-')}__s{seed}"

def cell_overrides(grid: str, variant: str, dataset: str, fraction: str, seed: int, iters: int, root: str|None,
                   device: str = 'cpu') -> list[str]:
    s = SETTINGS[dataset]
    ov = COMMON + s['overrides'] + [f'optim.iters={iters}', f'run.seed={seed}', f'run.device={device}']
    if iters >= 600: ov.append(f'eval.interval={iters // 4}')   # long runs: a latest.pth to resume from every quarter
    if root: ov.append(f'data.root={root}')
    ov += manifest_for(s.get('manifests', dataset), fraction, seed)
    var = [v.format(half=iters // 2) for v in GRIDS[grid]['variants'][variant]]
    if 'method.name=ael' in var: ov.append(f'method.tau={bank_tau(iters)}')
    return ov + var                                    # the variant's own overrides come last and win

def bank_tau(iters: int, paper_tau: float = 0.999, paper_iters: int = 18000) -> float:
    "Bank momentum with the paper's time constant as a fraction of training: 1 - (1 - 0.999) x 18000 / iters."
    return round(max(0.0, 1 - (1 - paper_tau) * paper_iters / iters), 4)

KEYS_ADDED_LATER = [('optim', 'loss_per_rank', False), ('method', 'acm_targets', 'all'), ('method', 'student_forward', 'joint'),
                    ('method', 'teacher_mode', 'eval'), ('method', 'labeled_unsup', False), ('method', 'acm_min_area', None),
                    ('model', 'checkpointing', False), ('model', 'head_channels', 256), ('run', 'deterministic', False),
                    ('run', 'allow_changes', False), ('run', 'keep_previous', True),
                    # the authors' code's switches, at the kit's values
                    ('method', 'aes_bank', 'before'), ('method', 'aes_draw', 'pixel'), ('method', 'unsup_denominator', 'labeled'),
                    ('method', 'table_rule', 'share'), ('method', 'acm_full', 'region'), ('method', 'box_position', 'uniform'),
                    ('method', 'cp_choice', 'present'),
                    ('method', 'spare_unseen', 0.0),   # off: the paper's unlabeled loss
                    ('method', 'spare_prob', 0.0),
                    ('method', 'cp_source', 'batch'), ('method', 'acm_fallback', 'box'), ('method', 'memory_slots', 4),   # off: the paper's sources
                    # UniMatch V2's keys (18d, 05a), at their defaults: no effect on the ResNet methods with SGD
                    ('model', 'lock_backbone', False), ('optim', 'optimizer', 'sgd'), ('optim', 'betas', [0.9, 0.999]),
                    ('optim', 'lr_lag', 0), ('method', 'comp_drop', True),
                    # the weak-to-strong frameworks' keys, at their defaults: no effect on the earlier methods
                    ('method', 'base', 'cutmix'), ('method', 'teacher', 'ema'), ('method', 'conf_thresh', 0.95),
                    ('method', 'strong_views', 2), ('method', 'fp_dropout', 0.5), ('method', 'unimatch_weights', [0.5, 0.5]),
                    ('method', 'halve_loss', True), ('method', 'jitter', [0.5, 0.5, 0.5, 0.25]), ('method', 'jitter_prob', 0.8),
                    ('method', 'gray_prob', 0.2), ('method', 'blur_prob', 0.5), ('method', 'blur_sigma', [0.1, 2.0]),
                    ('method', 'mix_prob', 0.5), ('method', 'mix_area', [0.02, 0.4])]

def cell_key(overrides: list[str]) -> str:
    "Hash of the resolved configuration (minus where it is written): equal keys = the same experiment."
    from ael_nb.config import get_config, to_dict
    d = to_dict(get_config(BASE, overrides=overrides))
    d['preset'] = 'cpu'   # a name decides nothing; the stored keys hash BASE's values under the name they had then
    d['run'].pop('out', None); d['run'].pop('resume', None); d['eval'].pop('interval', None)   # no effect on the result
    d['data'].pop('acm_prefetch', None)                                                       # timing only, same numbers
    e = d['eval']                                             # the kit's own evaluation: stored when eval.protocol named the mode
    if e.get('protocol') == 'kit' and (e.get('scales'), e.get('base_size'), e.get('multiple')) == ([1.0], None, None):
        e['protocol'] = e.pop('mode'); e.pop('scales'); e.pop('base_size'); e.pop('multiple')
    d['model'].pop('channels_last', None)                                                     # timing only, same numbers up to rounding
    for sec, k in (('model', 'compile'), ('data', 'pin_memory'), ('data', 'prefetch_factor'), ('run', 'cudnn_benchmark')):
        d[sec].pop(k, None)                                                   # timing only, same numbers up to rounding
    for k in ('checkpoint_interval', 'checkpoint_minutes', 'overwrite'): d['run'].pop(k, None)           # no effect on the result
    if d['run'].get('on_nonfinite') == 'stop': d['run'].pop('on_nonfinite'); d['run'].pop('max_skipped', None)  # added later; default: a diverged run fails
    if d['method'].get('alpha_rampup') == 0: d['method'].pop('alpha_rampup')   # added later; 0 = the earlier behaviour
    for sec, k, earlier in KEYS_ADDED_LATER:                                  # the same: keys added later, at the earlier behaviour
        if d[sec].get(k) == earlier: d[sec].pop(k)
    d['run'].pop('trace_interval', None); d['run'].pop('trace_images', None) # no effect on the result
    acm_on = d['method']['acm']                                               # ACM on, under any method
    parts = ('acp', 'acm', 'aes', 'dr')                                       # the other methods once ignored AEL's switches,
    if d['method']['name'] != 'ael' and not any(d['method'][p] for p in parts):   # left at their default (on): the same runs
        d['method'].update({p: True for p in parts})
    if not acm_on:                                                            # ACM only: no effect without it
        d['method'].pop('acm_stride', None); d['method'].pop('acm_targets', None)
    if d['data'].get('manifest'): d['data']['manifest'] = Path(d['data']['manifest']).name   # not the checkout path
    if acm_on:                                                # ACM's sources, since the engine redesign (2026-11-26): drawn one step
        d['acm_draw'] = 'from the previous step table, one teacher call'   # ahead from the table as the previous step left it, one teacher call
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]

# ---------------------------------------------------------------- running one cell (in a child process)
def run_cell(spec_path: str):
    "Child: train one cell and write its JSON atomically."
    import torch
    torch.set_num_threads(1)
    from ael_nb.config import get_config, to_dict
    from ael_nb.core import atomic_write_text
    from ael_nb.train import train
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec['run_dir'])
    ov = spec['overrides'] + [f'run.out={out}']
    ov.append('run.resume=true' if (out / 'latest.pth').exists() else 'run.overwrite=true')   # a cell never checkpointed starts again
    cfg = get_config(BASE, overrides=ov)
    t0 = time.time()
    s = train(cfg)
    host = dict(cpus=os.cpu_count(), torch=torch.__version__, threads=torch.get_num_threads(), device=s.get('device_name'), path=s.get('path'))
    atomic_write_text(spec['result'], json.dumps(cell_record(spec, s, to_dict(cfg), time.time() - t0, host), indent=1))

def cell_record(spec: dict, s: dict, config: dict, wall_s: float|None, host: dict, finished: str|None = None) -> dict:
    "The stored JSON of a finished cell: its spec, the run's summary (`train`'s return value), configuration and provenance."
    return dict(spec, primary='teacher' if 'teacher' in s['last'] else 'student', metrics=s['last'], best=s['best'],
                time_s=s['time_s'], wall_s=wall_s, it=s['it'], manifest=s['manifest'], manifest_hash=s['manifest_hash'],
                conf=s['conf'], config=config, finished=finished or dt.datetime.now().isoformat(timespec='seconds'), host=host,
                code={p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:12] for p in sorted((REPO / 'ael_nb').glob('*.py'))})

def recover(runs_dir: Path, log) -> int:
    "Rebuild missing cell JSONs from finished run directories (`summary.json` at the last step), e.g. a GPU machine's."
    from ael_nb.config import read_yaml
    from ael_nb.core import atomic_write_text
    n = 0
    for sp in sorted(runs_dir.glob('*/*/spec.json')):
        spec, sm = json.loads(sp.read_text()), sp.parent / 'summary.json'
        res = RESULTS / Path(spec['gdir']).name / f"{spec['name']}.json"
        if res.exists() or not sm.exists(): continue
        s = json.loads(sm.read_text())
        if s['it'] != s['iters']: continue
        spec.update(gdir=str(res.parent), run_dir=str(sp.parent), result=str(res))
        config = read_yaml(sp.parent / 'config.yaml')
        finished = dt.datetime.fromtimestamp(sm.stat().st_mtime).isoformat(timespec='seconds')
        res.parent.mkdir(parents=True, exist_ok=True)
        host = dict(recovered_from=str(sp.parent), device=s.get('device_name'), **{k: s[k] for k in ('path', 'threads', 'torch') if k in s})
        atomic_write_text(res, json.dumps(cell_record(spec, s, config, None, host, finished), indent=1))
        log(f"{res.parent.name}/{res.name}: recovered from {sp.parent}"); n += 1
    return n

# ---------------------------------------------------------------- the grid (parent)
def plan(grid, dataset, fractions, seeds, iters, root, variants=None, device='cpu'):
    "The cells of one grid, each with the directory its result goes to, seed by seed, baseline and ceiling first."
    gdir = str(grid_dir(grid, dataset, iters, device))
    cells = []
    for seed in seeds:                                  # seed-major: every method's seed 0 before any seed 1
        for frac in fractions:
            for v in GRIDS[grid]['variants']:
                if variants and v not in variants: continue
                if v == 'full' and frac != fractions[0]: continue   # one ceiling per seed
                ov = cell_overrides(grid, v, dataset, frac, seed, iters, root, device)
                cells.append(dict(grid=grid, gdir=gdir, dataset=dataset, variant=v, fraction='1' if v == 'full' else frac,
                                  seed=seed, iters=iters, overrides=ov, key=cell_key(ov), name=cell_name(v, frac, seed)))
    # ceiling and lower bound first: they are what every other number is judged against
    first = {GRIDS[grid]['ceiling'], GRIDS[grid]['baseline']}
    return sorted(cells, key=lambda c: (c['seed'], c['variant'] not in first))

def find_existing(cell) -> Path|None:
    "A finished cell JSON with the same key anywhere under bench/results; never a draw measured elsewhere and folded in (`measured`)."
    for p in RESULTS.glob('*/*.json'):
        try: d = json.loads(p.read_text())
        except Exception: continue
        if d.get('key') == cell['key'] and 'metrics' in d and 'measured' not in d: return p
    return None

def grid_dir(grid, dataset, iters, device='cpu'): return RESULTS / (f'{grid}-{dataset}-{iters}it' + ('' if device == 'cpu' else f'-{device}'))

def reuse(c, log) -> bool:
    "Fill cell `c` from a finished cell of the same configuration (any grid); False if there is none."
    from ael_nb.core import atomic_write_text
    other = find_existing(c)
    if other is None: return False
    d = json.loads(other.read_text()); d.update(grid=c['grid'], variant=c['variant'], name=c['name'], reused_from=str(other.relative_to(RESULTS)))
    atomic_write_text(Path(c['gdir']) / f"{c['name']}.json", json.dumps(d, indent=1)); log(f"{c['name']}: reused {other.relative_to(RESULTS)}")
    return True

def launch(cells, runs_dir: Path, jobs: int, stop_by: dt.datetime|None, log):
    todo, later, keys = [], [], set()
    for c in cells:
        res = Path(c['gdir']) / f"{c['name']}.json"
        if res.exists():
            d = json.loads(res.read_text())
            if d.get('key') == c['key']: continue
            log(f"{res.name}: stored configuration differs ({d.get('key')} != {c['key']}): moved to .stale, recomputing")
            res.rename(res.with_suffix('.json.stale'))
        if reuse(c, log): continue
        if c['key'] in keys: later.append(c); continue      # another grid's cell: copied once it has run
        keys.add(c['key']); todo.append(c)
    log(f"{len(cells) - len(todo) - len(later)} of {len(cells)} cells finished, {len(todo)} to run with {jobs} processes")

    def one(c):
        if stop_by and dt.datetime.now() >= stop_by: return c, 'skipped (stop-by time reached)', 0.0
        gdir = Path(c['gdir'])
        run_dir = runs_dir / gdir.name / c['name']; run_dir.mkdir(parents=True, exist_ok=True)
        spec = dict(c, run_dir=str(run_dir), result=str(gdir / f"{c['name']}.json"))
        sp = run_dir / 'spec.json'; sp.write_text(json.dumps(spec, indent=1))
        env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1', PYTHONUNBUFFERED='1')
        timeout = (stop_by - dt.datetime.now()).total_seconds() + 60 if stop_by else None
        t0 = time.time()
        with open(run_dir / 'stdout.log', 'a') as f:
            p = subprocess.Popen([sys.executable, __file__, '--run-cell', str(sp)], stdout=f, stderr=subprocess.STDOUT, cwd=REPO, env=env)
            try: rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.terminate()
                try: p.wait(30)
                except subprocess.TimeoutExpired: p.kill(); p.wait()
                return c, 'stopped at the stop-by time (resumable from latest.pth only if one was written)', time.time() - t0
        return c, 'ok' if rc == 0 else f'FAILED rc={rc} (see {run_dir}/stdout.log)', time.time() - t0

    with ThreadPoolExecutor(jobs) as ex:
        for fut in as_completed([ex.submit(one, c) for c in todo]):
            c, status, t = fut.result()
            msg = ''
            if status == 'ok':
                d = json.loads((Path(c['gdir']) / f"{c['name']}.json").read_text()); m = d['metrics'][d['primary']]
                msg = f" mIoU {100 * m['miou']:.1f} tail {100 * m['tail_miou']:.1f}"
            log(f"{Path(c['gdir']).name}/{c['name']}: {status} in {t:.0f} s{msg}")
    for c in later: reuse(c, log)

# ---------------------------------------------------------------- tables
def load_cells(gdir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(gdir.glob('*.json'))]

def _ms(xs):
    import numpy as np
    xs = np.asarray([x for x in xs if x == x], float)
    if len(xs) == 0: return float('nan'), float('nan'), 0
    return float(xs.mean()), float(xs.std(ddof=1)) if len(xs) > 1 else float('nan'), len(xs)

def _paired(a, b, key: str = 'by_seed') -> str:
    "Mean ± std over the seeds both variants finished of (a - b) (`key`: 'by_seed' mIoU, 'tail_by_seed' tail mIoU): seed-to-seed spread cancels."
    if b is None: return 'n/a'
    common = sorted(set(a[key]) & set(b[key]))
    if not common: return 'n/a'
    m, sd, n = _ms([a[key][k] - b[key][k] for k in common])
    return f"{m:+.1f}" + (f" ± {sd:.1f}" if sd == sd else '') + f" (n={n})"

def _fmt(m, s, n=None):
    if m != m: return 'n/a'
    return f"{m:.1f}" + (f" ± {s:.1f}" if s == s else '') + (f" (n={n})" if n is not None else '')

def aggregate(cells: list[dict], which: str = 'primary') -> dict:
    "variant -> dict(n, miou, tail, head, per_class, seeds) with lists over seeds, in %."
    out = {}
    for d in cells:
        m = d['metrics'][d['primary'] if which == 'primary' else which] if (which == 'primary' or which in d['metrics']) else None
        if m is None: continue
        a = out.setdefault(d['variant'], dict(seeds=[], miou=[], tail=[], head=[], per_class={}, time=[], model=set()))
        a['seeds'].append(d['seed']); a['time'].append(d['time_s']); a['model'].add(d['primary'] if which == 'primary' else which)
        a.setdefault('by_seed', {})[d['seed']] = 100 * m['miou']; a.setdefault('tail_by_seed', {})[d['seed']] = 100 * m['tail_miou']
        a['miou'].append(100 * m['miou']); a['tail'].append(100 * m['tail_miou']); a['head'].append(100 * m['head_miou'])
        for k, v in m['per_class'].items(): a['per_class'].setdefault(k, []).append(100 * v if v == v else float('nan'))
    return out

def write_report(grid: str, dataset: str, gdir: Path, tag: str) -> str:
    "Markdown tables (+ plots) of a grid's finished cells, one section per label fraction; also written to results/<tag>.md."
    from ael_nb.core import atomic_write_text
    cells = load_cells(gdir)
    if not cells: return f'(no finished cells in {gdir})\n'
    ceil = GRIDS[grid].get('ceiling')
    fracs = sorted({c['fraction'] for c in cells if c['variant'] != ceil}, key=lambda f: -Fraction(f))
    if len(fracs) <= 1: md = _report(grid, dataset, cells, tag)
    else:                                              # each fraction against its own baseline; the ceiling in every one
        md = ''.join(_report(grid, dataset, [c for c in cells if c['fraction'] == f or c['variant'] == ceil],
                             f"{tag}_{f.replace('/', '-')}", f', {f} of the labels') for f in fracs)
    atomic_write_text(RESULTS / f'{tag}.md', md)
    return md

def _report(grid: str, dataset: str, cells: list[dict], tag: str, title: str = '') -> str:
    info = _info(dataset)
    g = GRIDS[grid]; order = [v for v in g['variants'] if any(c['variant'] == v for c in cells)]
    it = sorted({c['iters'] for c in cells}); secs = [c['time_s'] for c in cells]
    lines = [f"## {grid} on {dataset}{title} ({tag})\n",
             f"{len(cells)} finished cells; {it} iterations per run; train time per run {min(secs):.0f}-{max(secs):.0f} s "
             f"(one core each). Numbers: final {'EMA teacher (student where the method has no teacher)'}; mean ± sample std over seeds, in %.\n"]
    for which, title in (('primary', 'reported model'), ('student', 'student only (same model kind for every method)')):
        A = aggregate(cells, which)
        base, ceil = g.get('baseline'), g.get('ceiling')
        bm = _ms(A[base]['miou'])[0] if base in A else float('nan')
        cm = _ms(A[ceil]['miou'])[0] if ceil and ceil in A else float('nan')
        bt = _ms(A[base]['tail'])[0] if base in A else float('nan')
        ct = _ms(A[ceil]['tail'])[0] if ceil and ceil in A else float('nan')
        hdr = ['variant', 'seeds', 'mIoU', 'tail mIoU', 'head mIoU', f'Δ mIoU vs {base}', f'paired Δ vs {base} (same seeds)', 'paired Δ tail']
        if ceil: hdr += ['gap recovered (mIoU)', 'gap recovered (tail)']
        lines += [f"\n### {title}\n", '| ' + ' | '.join(hdr) + ' |', '|' + '---|' * len(hdr)]
        for v in order:
            if v not in A: continue
            a = A[v]; mm = _ms(a['miou']); tm = _ms(a['tail']); hm = _ms(a['head'])
            row = [v, ','.join(map(str, sorted(a['seeds']))), _fmt(mm[0], mm[1]), _fmt(tm[0], tm[1]), _fmt(hm[0], hm[1]),
                   f"{mm[0] - bm:+.1f}" if bm == bm else 'n/a', _paired(a, A.get(base)), _paired(a, A.get(base), 'tail_by_seed')]
            if ceil:
                gap = lambda x, b, c: f"{100 * (x - b) / (c - b):.0f}%" if (c == c and b == b and c - b >= MIN_GAP) else 'n/a (no gap)'
                row += [gap(mm[0], bm, cm) if v not in (base, ceil) else '', gap(tm[0], bt, ct) if v not in (base, ceil) else '']
            lines.append('| ' + ' | '.join(row) + ' |')
        if which == 'primary' and ceil and ceil in A and base in A:
            lines.append(f"\nSupervised-to-full gap: mIoU {cm - bm:+.1f}, tail mIoU {ct - bt:+.1f}. 'Gap recovered' is given only where the ceiling "
                         f"beats the {base} model by at least {MIN_GAP} point(s); a smaller or negative gap makes it meaningless.")
    # per class (Table 4 shape), reported model
    A = aggregate(cells, 'primary')
    names = list(info.class_names); tail = [names[i] for i in info.tail_classes]; head = [n for n in names if n not in tail]
    cols = head + tail
    lines += ["\n### per-class IoU (Table 4 shape; mean over seeds, %; tail classes after the bar)\n",
              '| variant | mIoU | tail | ' + ' | '.join(head) + ' ‖ ' + ' | '.join(tail) + ' |',
              '|' + '---|' * (3 + len(cols))]
    for v in order:
        if v not in A: continue
        a = A[v]; pc = [_ms(a['per_class'].get(n, []))[0] for n in cols]
        f = lambda x: f'{x:.1f}' if x == x else 'n/a'
        cells_ = [f(x) for x in pc]
        lines.append(f"| {v} | {f(_ms(a['miou'])[0])} | {f(_ms(a['tail'])[0])} | " + ' | '.join(cells_[:len(head)]) + ' ‖ ' + ' | '.join(cells_[len(head):]) + ' |')
    if grid == 'table5':
        lines += ['\n### Table 5 shape\n', '| DR | AES | ACM | ACP | mIoU | tail mIoU |', '|---|---|---|---|---|---|']
        for v in order:
            fl = TABLE5_FLAGS[v].split(); a = A[v]; mm = _ms(a['miou']); tm = _ms(a['tail'])
            lines.append('| ' + ' | '.join('✓' if k in fl else '' for k in ('dr', 'aes', 'acm', 'acp')) + f" | {_fmt(mm[0], mm[1])} | {_fmt(tm[0], tm[1])} |")
    _plots(grid, dataset, A, order, info, g, tag)
    return '\n'.join(lines) + '\n'

def _info(dataset):
    from ael_nb.datasets import CAMVID_INFO
    if dataset.startswith('camvid'): return CAMVID_INFO
    from ael_nb.synthetic import SYNTHETIC_INFO
    return SYNTHETIC_INFO

def _plots(grid, dataset, A, order, info, g, tag):
    import numpy as np, matplotlib
    matplotlib.use('Agg'); import matplotlib.pyplot as plt
    names = list(info.class_names); tail = [names[i] for i in info.tail_classes]
    cols = [n for n in names if n not in tail] + tail
    vs = [v for v in order if v in A]
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(cols) * max(1, len(vs)) / 3), 4))
    w = 0.8 / len(vs); x = np.arange(len(cols))
    for i, v in enumerate(vs):
        m = [_ms(A[v]['per_class'].get(n, []))[0] for n in cols]
        s = [_ms(A[v]['per_class'].get(n, []))[1] for n in cols]
        ax.bar(x + i * w - 0.4 + w / 2, np.nan_to_num(m), w, yerr=np.nan_to_num(s), label=f"{v} ({_ms(A[v]['miou'])[0]:.1f})", capsize=1.5)
    for j, n in enumerate(cols):
        if n in tail: ax.axvspan(j - 0.5, j + 0.5, color='tab:red', alpha=0.07, lw=0)
    ax.set_xticks(x, cols, rotation=45, ha='right'); ax.set_ylabel('IoU (%)')
    ax.set_title(f'{tag}: per-class IoU, mean ± std over seeds (tail classes shaded)', fontsize=10)
    ax.legend(fontsize=7, ncol=2); fig.tight_layout(); fig.savefig(RESULTS / f'{tag}_per_class.png', dpi=110); plt.close(fig)
    base, ceil = g.get('baseline'), g.get('ceiling')
    if ceil and ceil in A and base in A:
        bm, cm = _ms(A[base]['miou'])[0], _ms(A[ceil]['miou'])[0]
        bt, ct = _ms(A[base]['tail'])[0], _ms(A[ceil]['tail'])[0]
        semi = [v for v in vs if v not in (base, ceil)]
        if not semi: return
        fig, ax = plt.subplots(figsize=(6, 3.5)); x = np.arange(len(semi))
        gm = [(_ms(A[v]['miou'])[0] - bm) / (cm - bm) * 100 if cm - bm >= MIN_GAP else np.nan for v in semi]
        gt = [(_ms(A[v]['tail'])[0] - bt) / (ct - bt) * 100 if ct - bt >= MIN_GAP else np.nan for v in semi]
        ax.bar(x - 0.2, gm, 0.4, label=f'mIoU (gap {cm - bm:+.1f})'); ax.bar(x + 0.2, gt, 0.4, label=f'tail mIoU (gap {ct - bt:+.1f})')
        ax.axhline(0, color='k', lw=0.8); ax.axhline(100, color='k', lw=0.8, ls='--')
        ax.set_xticks(x, semi); ax.set_ylabel(f'% of the {base}-to-{ceil} gap recovered')
        ax.set_title(f'{tag}' + ('' if cm - bm >= MIN_GAP else ': no supervised-to-full gap, nothing to recover'), fontsize=9); ax.legend(fontsize=8); fig.tight_layout()
        fig.savefig(RESULTS / f'{tag}_gap.png', dpi=110); plt.close(fig)

# ---------------------------------------------------------------- command line
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('grids', nargs='*', metavar='grid', help=f"one or more of {', '.join(GRIDS)}; grid:0,1 runs only those seeds of it")
    ap.add_argument('--dataset', default='synthetic', choices=sorted(SETTINGS))
    ap.add_argument('--root', default=None, help='dataset root (camvid: default $AEL_CAMVID_ROOT)')
    ap.add_argument('--fractions', nargs='+', default=['1/8'])
    ap.add_argument('--seeds', nargs='+', type=int, default=[0, 1, 2])
    ap.add_argument('--variants', nargs='+', default=None, help='only these variants of the grid')
    ap.add_argument('--iters', type=int, default=None, help='optimiser steps per run (default: the dataset setting)')
    ap.add_argument('--jobs', type=int, default=2, help='processes in parallel (one core each)')
    ap.add_argument('--device', default='cpu', choices=['cpu', 'cuda'], help='where each cell trains (cuda: all processes share the GPU)')
    ap.add_argument('--results', default=None, help='where cells, tables and plots go (default bench/results)')
    ap.add_argument('--runs-dir', default='/tmp/ael_bench_runs', help='run directories (checkpoints, logs); not kept in git')
    ap.add_argument('--order', default='seed', choices=['seed', 'grid'],
                    help="seed: every grid's seed 0 before any seed 1 (default); grid: the grids one after another as named (a priority list)")
    ap.add_argument('--stop-by', default=None, help='HH:MM[:SS]: start no cell after this time, stop running ones a minute later (they stay unfinished)')
    ap.add_argument('--report', action='store_true', help='only write the tables/plots of finished cells')
    ap.add_argument('--recover', default=None, metavar='RUNS_DIR', help='first rebuild missing cells from the finished runs under RUNS_DIR')
    ap.add_argument('--dry-run', action='store_true', help='print the cells and their overrides')
    ap.add_argument('--run-cell', default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_cell: return run_cell(args.run_cell)
    if not args.grids: ap.error('name a grid')
    seeds_of = {}                                              # 'table6r:0' -> table6r with seed 0 only (overrides --seeds)
    for g in args.grids:
        name, _, ss = g.partition(':')
        seeds_of.setdefault(name, []).append([int(x) for x in ss.split(',')] if ss else args.seeds)
    args.grids = [g.partition(':')[0] for g in args.grids]
    if set(args.grids) - set(GRIDS): ap.error(f"unknown grid(s) {sorted(set(args.grids) - set(GRIDS))}; choose from {', '.join(GRIDS)}")
    if args.variants and (bad := [v for v in args.variants if not any(v in GRIDS[g]['variants'] for g in args.grids)]):
        ap.error(f"variant(s) {bad} in none of {args.grids}; they have: "
                 + '; '.join(f"{g}: {', '.join(repr(v) for v in GRIDS[g]['variants'])}" for g in dict.fromkeys(args.grids)))
    global RESULTS
    if args.results: RESULTS = Path(args.results).resolve()
    iters = args.iters or SETTINGS[args.dataset]['iters']
    gdirs = {g: grid_dir(g, args.dataset, iters, args.device) for g in dict.fromkeys(args.grids)}
    if not args.dry_run:
        for d in gdirs.values(): d.mkdir(parents=True, exist_ok=True)
    name = (args.grids[0] if len(gdirs) == 1 else 'grids') + f'-{args.dataset}-{iters}it' + ('' if args.device == 'cpu' else f'-{args.device}')
    logf = RESULTS / f'{name}.log'
    def log(msg):
        line = f"[{dt.datetime.now():%H:%M:%S}] {msg}"; print(line, flush=True)
        with open(logf, 'a') as f: f.write(line + '\n')
    cells = [c for g in args.grids for c in plan(g, args.dataset, args.fractions, seeds_of[g].pop(0), iters, args.root, args.variants, args.device)]
    if args.order == 'seed': cells.sort(key=lambda c: c['seed'])  # stable: within a seed, each grid's own order
    if args.dry_run:
        for c in cells: print(c['name'], c['key'], ' '.join(c['overrides']))
        return
    if args.recover: recover(Path(args.recover), log)
    if args.report:                                               # no training: only fill cells that another grid has
        for c in cells:
            if not (Path(c['gdir']) / f"{c['name']}.json").exists(): reuse(c, log)
    else:
        stop_by = None
        if args.stop_by:
            h, m, sec = (list(map(int, args.stop_by.split(':'))) + [0])[:3]; now = dt.datetime.now()
            stop_by = now.replace(hour=h, minute=m, second=sec, microsecond=0)
            if stop_by < now - dt.timedelta(hours=12): stop_by += dt.timedelta(days=1)
        log(f"start: {' '.join(sys.argv)}")
        t0 = time.time()
        launch(cells, Path(args.runs_dir), args.jobs, stop_by, log)
        log(f"grid done in {time.time() - t0:.0f} s wall")
    for g, d in gdirs.items(): print(write_report(g, args.dataset, d, d.name))
    refresh(RESULTS)                                              # the package's copy of the stored draws

if __name__ == '__main__':
    main()
