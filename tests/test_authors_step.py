"""The training step honours every `-authors` switch and the EMA decay: `tests/test_authors_golden.py` holds the
components to the authors' code, this file holds the step to its configuration. Each check runs one real step
(`setup(cfg)`, `Run.step(trace)`) with the switch at the authors' value and at the kit's, on the same seed and batch,
reads from what the step decided (the trace, the state before and after) which value it acted on, and asserts that
it is the configured one. A step that ignores a switch acts alike under both values and fails one of the two runs.

Where a switch acts only on rare inputs (adaptive CutMix's region search, the class table's threshold), the teacher
labels every image with a fixed map drawn here, and the bank is set so that ACM draws the class of that map."""
import copy, itertools, math, tempfile
from functools import lru_cache
from types import SimpleNamespace
import os
from pathlib import Path
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from ael_nb.aes import aes_rates
from ael_nb.conf_bank import ConfidenceBank
from ael_nb.config import get_config
from ael_nb.cutmix import mask_boxes
from ael_nb.losses import unsup_loss
from ael_nb.sampling import sampling_prob
from ael_nb.steps import Trace
from ael_nb.train import setup

pytestmark = pytest.mark.slow

def state_of(run):
    "The ONE adapter to the engine's internals: a `Run`'s state (`student`, `teacher`, `bank.conf`, `table.table`, step `it`)."
    return run.state


# a tiny `cityscapes-authors` run: synthetic 32x48 scenes (non-square, so the class table's two rules differ),
# ResNet-18, 4 labeled + 4 unlabeled images a step (the authors' arrangement: 2 targets + 2 ACM sources)
BASE = ['data.dataset=synthetic', 'data.train_split=train', 'data.val_split=val', 'data.synthetic_size=32,48',
        'data.synthetic_n=16', 'data.fraction=1/4', 'data.crop_size=32,48', 'data.scale=1,1', 'data.batch_size=4',
        'data.num_workers=0', 'data.acm_prefetch=false', 'data.check=false', 'model.backbone=resnet18',
        'model.output_stride=16', 'model.pretrained=none', 'model.dropout=0', 'optim.iters=2000', 'optim.amp=none',
        'optim.ohem_min_kept=200', 'method.tau=0.9', 'method.cp_exclude=0,1,2,8', 'run.seed=0', 'run.progress=false',
        'run.tensorboard=false', 'run.plots=false', 'run.threads=1', 'eval.interval=0']
H, W, C = 32, 48, 10
C1, C2, C3 = 6, 7, 9                    # ACM's class, and two classes of the class-table check

def fixed_map(kind: str) -> torch.Tensor:
    """What the crafted teacher sees in every image: 'whole' = all C1; 'small' = class 0 with two 3x4 patches of C1
    one pixel apart, 20 pixels of C2 and 10 of C3."""
    m = torch.full((H, W), C1 if kind == 'whole' else 0, dtype=torch.long)
    if kind == 'small': m[4:7, 4:8] = m[4:7, 9:13] = C1; m[20:24, 4:9] = C2; m[20:22, 30:35] = C3
    return m

def labels_by(label_map: torch.Tensor):
    "A teacher forward that labels every image with `label_map` (logits 8 on its class, 0 elsewhere), in any mode."
    def forward(x):
        logits = F.one_hot(label_map.to(x.device), C).permute(2, 0, 1).float()[None] * 8
        return dict(out=logits.expand(len(x), -1, -1, -1).clone())
    return forward

RUNS, COUNT = tempfile.TemporaryDirectory(prefix='ael_switches_'), itertools.count()   # removed when the tests end

@lru_cache(maxsize=None)
def one_step(overrides: tuple = (), craft: str|None = None, it: int|None = None, conf: float|None = None):
    "One step of the tiny run: its config, trace, and the state before and after (bank, table, student, teacher)."
    cfg = get_config('cityscapes-authors', overrides=BASE + list(overrides) + [f'run.out={RUNS.name}/{next(COUNT)}'])
    with setup(cfg) as run:
        state = state_of(run)
        rec = SimpleNamespace(cfg=cfg, m=cfg.method, bank_start=state.bank.conf.clone())
        if conf is not None: state.bank.conf.fill_(conf)
        elif craft is None:               # a bank that is not uniform, so that AES and Eq. 7 tell the switches apart
            state.bank.conf.copy_(torch.rand(C, generator=torch.Generator().manual_seed(0)) * 0.8 + 0.1)
        else:                             # ACM draws C1 (lowest confidence, temperature 0.05), the teacher draws the map
            state.bank.conf.fill_(1.0); state.bank.conf[C1] = 0.0
            state.teacher.forward = labels_by(fixed_map(craft))
        if it is not None: state.it = it
        rec.bank0, rec.student0, rec.teacher0 = state.bank.conf.clone(), copy.deepcopy(state.student), copy.deepcopy(state.teacher)
        rec.trace = run.step(Trace())
        rec.bank1, rec.table1, rec.student1, rec.teacher1 = (state.bank.conf.clone(), state.table.table.clone(),
                                                             copy.deepcopy(state.student), copy.deepcopy(state.teacher))
    return rec

def crafted(craft, *overrides): return one_step(('method.temperature=0.05',) + overrides, craft)

@pytest.fixture(autouse=True)
def one_thread(): torch.set_num_threads(1)


# ---------------------------------------------------------------- what the step decided, replayed
def student_outputs(rec, separate: bool):
    "The student before the step, in train mode, on the step's labeled and unlabeled images: one forward or two."
    st, tr = copy.deepcopy(rec.student0).train(), rec.trace
    with torch.no_grad():
        if separate: return st(tr['x_l']), st(tr['x_u'])
        out, n = st(torch.cat([tr['x_l'], tr['x_u']])), len(tr['x_l'])
    return {k: v[:n] for k, v in out.items()}, {k: v[n:] for k, v in out.items()}

def one_of(matches: dict):
    "The one value whose replay matches what the step did (None when none or several match: the batch cannot tell)."
    hits = [v for v, ok in matches.items() if ok]
    return hits[0] if len(hits) == 1 else None

def unlabeled_loss(rec, per_image, denominator):
    "Eq. 11 on the step's unlabeled images from its pseudo-labels and weights, the student replayed."
    out_u = student_outputs(rec, rec.m.student_forward == 'separate')[1]
    return unsup_loss(out_u['out'].float(), rec.trace['y_hat'], rec.trace['w'], per_image=per_image, denominator=denominator).item()

def seen_student_forward(rec):
    return one_of({mode: torch.equal(student_outputs(rec, mode == 'separate')[0]['out'].argmax(1), rec.trace['pred_l'])
                   for mode in ('joint', 'separate')})

def seen_teacher_mode(rec):
    tr, out = rec.trace, {}
    for mode in ('eval', 'train'):
        t = copy.deepcopy(rec.teacher0).train(mode == 'train')
        with torch.no_grad():                   # train mode: the weak views and ACM's sources in one call, as the step
            x = torch.cat([tr['ub_image'], tr['acm_src_image']]) if mode == 'train' else tr['ub_image']
            out[mode] = torch.allclose(t(x)['out'].float().softmax(1)[:len(tr['ub_image'])], tr['p_t'], atol=1e-5)
    return one_of(out)

def seen_labeled_unsup(rec):
    return abs(rec.trace['loss_u'] - unlabeled_loss(rec, rec.m.unsup_per_image, rec.m.unsup_denominator)) > 1e-4

def seen_per_image(rec):
    "Eq. 11 per image or over the batch, read off the step's loss (runs without the labeled term)."
    return one_of({p: any(abs(rec.trace['loss_u'] - unlabeled_loss(rec, p, d)) < 1e-5 for d in ('labeled', 'all'))
                   for p in (True, False)})

def seen_denominator(rec):
    "'all' when pixels without a pseudo-label got AES's keep (so a weight in Eq. 11's denominator), and the loss agrees."
    tr = rec.trace; ignored = tr['y_hat'] == 255
    assert ignored.float().mean() > 0.1, 'too few pixels below the pseudo-label threshold'
    seen = 'all' if (tr['keep'] & ignored).any() else 'labeled'
    return seen if abs(tr['loss_u'] - unlabeled_loss(rec, rec.m.unsup_per_image, seen)) < 1e-5 else None

def seen_aes_bank(rec):
    return one_of({'before': torch.allclose(rec.trace['aes_rates'], aes_rates(rec.bank0, rec.m.beta)),
                   'after': torch.allclose(rec.trace['aes_rates'], aes_rates(rec.bank1, rec.m.beta))})

def seen_aes_draw(rec):
    "'class' when two images keep alike every pixel where they have the same class (one map per class), else 'pixel'."
    cls, keep, s = rec.trace['aes_class'], rec.trace['keep'], rec.trace['aes_rates']
    rate = s[cls[0].clamp(max=C - 1)]
    same = (cls[0] == cls[1]) & (cls[0] != 255) & (rate > 0) & (rate < 1)
    assert same.sum() >= 20, 'too few pixels of one class at one place in both targets'
    return 'pixel' if (keep[0] != keep[1])[same].any() else 'class'

def seen_aes_source(rec):
    tr = rec.trace
    counted = tr['y_hat'] != 255 if rec.m.unsup_denominator == 'labeled' else tr['p_u'].amax(1) > 0
    return one_of({'teacher': torch.equal(tr['aes_class'], tr['y_hat']),
                   'student': torch.equal(tr['aes_class'], torch.where(counted, tr['pred_u'], 255))})

def seen_cp_choice(rec):
    "'batch' when the images of the batch paste at most K classes between them (K draws for the batch), else 'present'."
    return 'batch' if rec.trace['cp_classes'].any(0).sum() <= rec.m.k else 'present'

def seen_cp_sqrt(rec):
    m = rec.m
    return one_of({s: torch.allclose(rec.trace['r_cp'], sampling_prob(rec.bank0, m.temperature, m.cp_exclude, sqrt=s))
                   for s in (True, False)})

def seen_acm_targets(rec):
    return {2: 'half', 4: 'all'}.get(len(rec.trace['ub_image']))

def seen_bank(rec):
    "(absent_as_zero, bank_reduction) of the bank update (Eq. 3-6), from the student's replayed labeled softmax."
    p = student_outputs(rec, rec.m.student_forward == 'separate')[0]['out'].float().softmax(1)
    def after(absent, reduction):
        b = ConfidenceBank(C, rec.m.tau, rec.m.indicator, init=rec.bank0, absent_as_zero=absent, reduction=reduction)
        b.update(p, rec.trace['y_l']); return b.conf
    return one_of({(a, r): torch.allclose(after(a, r), rec.bank1, atol=1e-6) for a in (True, False) for r in ('image', 'pixel')})


# ---------------------------------------------------------------- one switch at a time, real teacher
LOSS_ONLY = ('method.labeled_unsup=false', 'method.pl_threshold=0.2')
SWITCHES = [  # (key, the kit's value, how the step's decision shows it, overrides both runs share)
    ('student_forward', 'joint', seen_student_forward, ()),
    ('teacher_mode', 'eval', seen_teacher_mode, ()),
    ('labeled_unsup', 'false', seen_labeled_unsup, ()),
    ('aes_bank', 'before', seen_aes_bank, ()),
    ('aes_draw', 'pixel', seen_aes_draw, ()),
    ('aes_source', 'teacher', seen_aes_source, ()),
    ('cp_choice', 'present', seen_cp_choice, ('method.cp_prob=1', 'method.k=1')),
    ('cp_sqrt', 'false', seen_cp_sqrt, ()),
    ('acm_targets', 'all', seen_acm_targets, ()),
    ('absent_as_zero', 'false', lambda rec: (s := seen_bank(rec)) and s[0], ()),
    ('bank_reduction', 'image', lambda rec: (s := seen_bank(rec)) and s[1], ()),
    # Eq. 11 read off the loss: without the labeled term, pseudo-labels below 0.2 ignored (what the denominators count)
    ('unsup_per_image', 'true', seen_per_image, LOSS_ONLY),
    ('unsup_denominator', 'labeled', seen_denominator, LOSS_ONLY),
]

def _value(v): return {'true': True, 'false': False}.get(v, v)

@pytest.mark.parametrize('key,kit,seen,shared', SWITCHES, ids=[s[0] for s in SWITCHES])
def test_step_acts_on_the_switch(key, kit, seen, shared):
    authors, flipped = one_step(shared), one_step(shared + (f'method.{key}={kit}',))
    assert getattr(authors.m, key) != getattr(flipped.m, key)
    assert seen(authors) == getattr(authors.m, key), f"{key}: the step acted as {seen(authors)!r} under the authors' {getattr(authors.m, key)!r}"
    assert seen(flipped) == _value(kit), f"{key}: the step acted as {seen(flipped)!r} under the kit's {kit!r}"

def test_bank_starts_from_bank_init():
    test = lambda rec, v: torch.allclose(rec.bank_start, torch.full((C,), v))
    assert test(one_step(), 1 / C) and test(one_step(('method.bank_init=0.3',)), 0.3)


def test_aes_keeps_every_pixel_when_every_class_is_confident():
    "Every class at Conf = 1 when AES reads the bank: every counted pixel kept (the kit's choice in the differences table; the authors' none)."
    rec = one_step(('method.aes_bank=before',), conf=1.0); tr = rec.trace     # 'after': the step's update moves Conf first
    counted = tr['y_hat'] != 255 if rec.m.unsup_denominator == 'labeled' else tr['p_u'].amax(1) > 0
    assert counted.any() and torch.equal(tr['keep'], counted) and tr['aes_kept'] == 1
    assert math.isfinite(tr['loss_u']) and tr['loss_u'] > 0


# ---------------------------------------------------------------- ACM and the class table, crafted teacher
def test_acm_min_area_decides_the_region():
    "Two 12-pixel patches of the drawn class: a region over 0.005 of the image (7.7 pixels), none over 0.01 (15.4)."
    assert crafted('small').m.acm_min_area == 0.005
    for flip, found in (((), True), (('method.acm_min_area=0.01',), False)):
        rec = crafted('small', *flip)
        assert (rec.trace['acm_class'] == C1).all()
        assert rec.trace['acm_found'].tolist() == [found] * 2, f'acm_min_area={rec.m.acm_min_area}: found {rec.trace["acm_found"].tolist()}'

def test_acm_stride_decides_the_components():
    "Per pixel (authors, stride 1) the two patches are two regions of 12 pixels; on 4x4 cells one region, 3 x 9."
    for flip, size in (((), 12), (('method.acm_stride=4',), 27)):
        rec = crafted('small', *flip); cut = rec.trace['cut_mask']
        assert cut.flatten(1).sum(1).tolist() == [size] * 2, f'acm_stride={rec.m.acm_stride}: cut {cut.flatten(1).sum(1).tolist()} pixels'

def test_table_rule_decides_the_class_table():
    "20 pixels of C2 in a 32 x 48 map: share 0.013 > r* = 0.01 holds it; 20 < 0.01 x 48^2 = 23.04 (authors) does not."
    assert (crafted('small').m.r_star, crafted('small').m.table_rule) == (0.01, 'authors')
    for flip, held in (((), False), (('method.table_rule=share',), True)):
        rec = crafted('small', *flip)
        cols = rec.table1[:, rec.trace['ub_index']]
        assert cols[C1].all() and not cols[C3].any(), cols          # 24 pixels of C1 pass both rules, 10 of C3 neither
        assert cols[C2].tolist() == [held] * 2, f'table_rule={rec.m.table_rule}: C2 held {cols[C2].tolist()}'

def test_acm_full_decides_a_source_all_of_the_class():
    assert crafted('whole').m.acm_full == 'fallback'
    for flip, found in (((), False), (('method.acm_full=region',), True)):
        tr = crafted('whole', *flip).trace
        assert tr['acm_found'].tolist() == [found] * 2, f'{flip}: found {tr["acm_found"].tolist()}'
        if found: assert tr['cut_mask'].all()                        # the region is the whole source
        else: assert tr['cut_mask'].flatten(1).float().mean(1).sub(0.5).abs().max() < 0.1   # a random box of half the image

def test_box_position_decides_the_fallback_offset():
    "Same draws u, two rules: round(u (H-h)) (authors) and floor(u (H-h+1)) (kit); the boxes move, their sizes do not."
    assert crafted('whole').m.box_position == 'round'
    boxes = {p: mask_boxes(crafted('whole', *flip).trace['cut_mask']) for p, flip in (('round', ()), ('uniform', ('method.box_position=uniform',)))}
    size = lambda b: b[:, 2:] - b[:, :2]
    assert torch.equal(size(boxes['round']), size(boxes['uniform']))
    assert not torch.equal(boxes['round'], boxes['uniform']), 'the step placed the boxes alike under both rules'
    for r, u, (h, w) in zip(boxes['round'].tolist(), boxes['uniform'].tolist(), size(boxes['round']).tolist()):
        assert one_u(r[0], u[0], H - h) and one_u(r[1], u[1], W - w), (r, u)

def one_u(a: int, b: int, n: int) -> bool:
    "Is there one u in [0, 1) with round(u n) = a and min(floor(u (n+1)), n) = b? (n: room left for the box)"
    if n == 0: return a == b == 0
    return max((a - 0.5) / n, b / (n + 1), 0) < min((a + 0.5) / n, (b + 1) / (n + 1), 1)


# ---------------------------------------------------------------- the EMA teacher
@pytest.mark.parametrize('decay', [None, 0.9])
def test_ema_update_follows_the_configured_decay(decay):
    "At step 1000 the teacher moves by min(1 - 1/(it+1), decay) = decay: the authors' 0.99 (`-authors` preset), or 0.9."
    rec = one_step(() if decay is None else (f'method.ema_decay={decay}',), it=1000)
    d = min(1 - 1 / 1001, rec.m.ema_decay)
    assert rec.m.ema_decay == (0.99 if decay is None else decay)     # the authors' net.ema_decay (experiments/*/config.yaml)
    t0, t1, s1 = (dict(m.named_parameters()) for m in (rec.teacher0, rec.teacher1, rec.student1))
    def worst(d): return max((t1[k] - (d * t0[k] + (1 - d) * s1[k])).abs().max().item() for k in t0)
    assert worst(d) < 1e-6, worst(d)
    assert worst(0.98 if d != 0.98 else 0.99) > 1e-4                 # another decay is told apart


# ---------------------------------------------------------------- Eq. 7 inside the step; Copy-Paste's draw per source
AUTHORS_REPO = os.environ.get('AEL_AUTHORS_REPO')

def authors_eq7(conf: torch.Tensor) -> torch.Tensor:
    """ACM's class probabilities from `conf` as the authors compute them (`semseg/utils/utils.py` `sample_from_bank`:
    `conf = (1 - conf).numpy(); conf = np.exp(conf) / np.sum(np.exp(conf))`); with `AEL_AUTHORS_REPO` set, by running it."""
    if not AUTHORS_REPO: return np.exp(1 - conf.numpy()) / np.sum(np.exp(1 - conf.numpy()))
    import importlib.util, random
    spec = importlib.util.spec_from_file_location('authors_golden', Path(__file__).parents[1] / 'tools' / 'authors_golden.py')
    ag = importlib.util.module_from_spec(spec); spec.loader.exec_module(ag)
    A, seen = ag.load_authors(AUTHORS_REPO), []
    A.utils.np = ag._np_shim(SimpleNamespace(choice=lambda a, p=None: seen.append(np.asarray(p)) or 0))
    A.utils.random = random.Random(0)
    try: A.utils.sample_from_bank(torch.ones(len(conf), 4), conf)
    finally: A.utils.np, A.utils.random = np, random
    return seen[0]

def test_step_acm_probabilities_are_the_authors_eq7():
    "The probabilities the step drew ACM's classes with (its trace's `r_cm`) are Eq. 7 of the bank it started from."
    rec = one_step()
    assert rec.m.temperature == 1 and not rec.m.acm_exclude                # as in the authors' code
    theirs = torch.as_tensor(authors_eq7(rec.bank0.float()), dtype=torch.float64)
    torch.testing.assert_close(rec.trace['r_cm'].double(), theirs, rtol=0, atol=1e-6)
    drawn = rec.trace['acm_class']
    torch.testing.assert_close(rec.trace['acm_prob'].double(), theirs[drawn], rtol=0, atol=1e-6)

@pytest.mark.parametrize('choice', ['present', 'batch'])
def test_copy_paste_draws_per_source_or_per_batch(choice):
    "Six sources holding the same four classes, K=1: 'present' draws for each image, 'batch' (authors') once."
    from ael_nb.copy_paste import adaptive_copy_paste
    B, prob = 6, torch.tensor([0.25, 0.25, 0.25, 0.25, 0.0])
    labels = torch.arange(4).repeat_interleave(4).view(1, 4, 4).expand(B, -1, -1).clone()  # classes 0..3, each row
    images = torch.zeros(B, 3, 4, 4)
    rows = []
    for seed in range(12):
        info = adaptive_copy_paste(images, labels, prob, k=1, p=1.0, scale=(1, 1), flip=False,
                                   generator=torch.Generator().manual_seed(seed), return_info=True, choice=choice)[2]
        assert (info['classes'].sum(1) == 1).all()                         # one class from each source
        rows.append(info['classes'].float().argmax(1))
    differ = [bool((r != r[0]).any()) for r in rows]
    assert (any(differ) if choice == 'present' else not any(differ)), (choice, rows)
    counts = torch.bincount(torch.cat(rows), minlength=4)                 # every class drawn, none of probability 0
    assert (counts[:4] > 0).all() and len(counts) == 4, counts
