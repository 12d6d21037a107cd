"""Golden figures from the authors' code: run SemiSeg-AEL's functions and the kit's on the same seeded inputs and
write what the authors' code returned to `tests/golden/authors.json`; `tests/test_authors_golden.py` holds the kit
to those figures on every run, without the authors' code.

    python tools/authors_golden.py --authors-repo /path/to/SemiSeg-AEL [--out tests/golden/authors.json]

The authors' files are imported from their checkout (never copied here); `cv2`, which only their image augmentation
needs, is stubbed. Where both sides draw random numbers, the kit draws from a seeded `torch.Generator` and the same
numbers are fed to the authors' `np.random` / `random` / `torch.rand` calls (`Feed`, `_np_shim`), so both sides make
the same random decisions. Each case names its inputs (seeds), its tolerance and what it checks; `KIT[name](**inputs)`
recomputes the kit's side."""
from __future__ import annotations
import argparse, ast, hashlib, importlib, importlib.util, random, subprocess, sys, time, types
from pathlib import Path
from types import SimpleNamespace
import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_json import write, compare, cpu_cuda   # the golden files' form and what the tools share
from ael_nb.config import get_preset
from ael_nb.conf_bank import ConfidenceBank
from ael_nb.sampling import sampling_prob
from ael_nb.copy_paste import batch_classes, paste_classes
from ael_nb.cutmix import ClassTable, acm_boxes, random_boxes
from ael_nb.steps import aes_dr_loss, pseudo_label, supervised_loss
from ael_nb.manifests import import_authors

GOLDEN = ROOT/'tests'/'golden'/'authors.json'
CITY_IGNORED = (0, 1, 2, 8, 10)   # the authors' `ignore_cat`, hard-coded in their train.py for every dataset

# ---------------------------------------------------------------- shared inputs (both sides)
def _g(seed: int) -> torch.Generator: return torch.Generator().manual_seed(seed)

def digest(t) -> str:
    "Short SHA-256 of a tensor's values (contiguous CPU bytes of its dtype)."
    a = t.detach().cpu().contiguous().numpy() if torch.is_tensor(t) else np.ascontiguousarray(t)
    return hashlib.sha256(a.tobytes()).hexdigest()[:16]

def bank_inputs(seed: int, C: int = 19, B: int = 2, H: int = 16, W: int = 16, steps: int = 3):
    "A start value per class and `steps` labeled batches: logits, labels with ignore, 4 classes absent."
    g = _g(seed)
    conf0 = torch.rand(C, generator=g)
    batches = []
    for _ in range(steps):
        logits = torch.randn(B, C, H, W, generator=g) * 3
        labels = torch.randint(0, C - 4, (B, H, W), generator=g)
        labels[torch.rand(B, H, W, generator=g) < 0.1] = 255
        batches.append((logits, labels))
    return conf0, batches

def loss_inputs(seed: int, C: int = 19, B: int = 2, H: int = 24, W: int = 24):
    "Student and teacher logits on an unlabeled batch and a confidence bank."
    g = _g(seed)
    student, teacher = torch.randn(B, C, H, W, generator=g) * 2, torch.randn(B, C, H, W, generator=g) * 2
    return student, teacher, torch.rand(C, generator=g)

def table_inputs(seed: int, C: int = 6, H: int = 12, W: int = 20, steps: int = 3, N: int = 5):
    "Per step, teacher logits of two images whose classes cover 0, 3, 4, 5 or 8 pixels (0.01 x 20^2 = 4), their ids."
    g = _g(seed)
    out = []
    for _ in range(steps):
        pred = torch.zeros(2, H * W, dtype=torch.long)
        for b in range(2):
            perm = torch.randperm(H * W, generator=g)
            sizes = torch.tensor([0, 3, 4, 5, 8])[torch.randint(0, 5, (C - 1,), generator=g)]
            at = 0
            for c in range(1, C): pred[b, perm[at:at + sizes[c - 1]]] = c; at += int(sizes[c - 1])
        logits = F.one_hot(pred.view(2, H, W), C).permute(0, 3, 1, 2).float() * 4 + torch.rand(2, C, H, W, generator=g)
        ids = torch.randperm(N, generator=g)[:2]
        out.append((logits, int(ids[0]), int(ids[1])))
    return out

def region_inputs(seed: int, H: int = 32):
    "A square prediction map: class-1..3 rectangles on class 0, some too small for r* = 0.005 (5.12 pixels)."
    g = _g(seed)
    pred = torch.zeros(H, H, dtype=torch.long)
    for i in range(12):
        c = 1 + i % 3
        h, w = (int(v) for v in torch.randint(1, 9, (2,), generator=g))
        y, x = int(torch.randint(0, H - h, (1,), generator=g)), int(torch.randint(0, H - w, (1,), generator=g))
        pred[y:y + h, x:x + w] = c
    return pred

def onehot_probs(pred: torch.Tensor, C: int) -> torch.Tensor:
    "[1,C,H,W] probabilities whose argmax is `pred` [H,W]."
    return F.one_hot(pred, C).permute(2, 0, 1)[None].float()

def paste_inputs(seed: int, C: int = 19, B: int = 3, H: int = 16, W: int = 16):
    "Targets and (jittered) sources with labels; the last image receives no paste."
    g = _g(seed)
    img, src = torch.randn(B, 3, H, W, generator=g), torch.randn(B, 3, H, W, generator=g)
    lab, src_lab = torch.randint(0, C, (B, H, W), generator=g), torch.randint(0, C, (B, H, W), generator=g)
    src_lab[torch.rand(B, H, W, generator=g) < 0.1] = 255
    query = sorted({int(c) for c in torch.randint(0, C, (3,), generator=g)})
    return img, lab, src, src_lab, query

def ohem_inputs(seed: int, C: int = 19, B: int = 2, H: int = 32, W: int = 32):
    g = _g(seed)
    main, aux = torch.randn(B, C, H, W, generator=g) * 2, torch.randn(B, C, H, W, generator=g) * 2
    target = torch.randint(0, C, (B, H, W), generator=g)
    target[torch.rand(B, H, W, generator=g) < 0.2] = 255
    return main, aux, target

def split_list(path, n: int, dataset: str = 'cityscapes') -> Path:
    "Write a list file of `n` lines in the authors' `data_list` format (image path, label path)."
    cities = ('aachen', 'bochum', 'bremen', 'cologne', 'darmstadt')
    if dataset == 'cityscapes':
        stem = lambda i: f'train/{cities[i % 5]}/{cities[i % 5]}_{i:06d}_000019'
        lines = [f'leftImg8bit/{stem(i)}_leftImg8bit.png gtFine/{stem(i)}_gtFine_labelTrainIds.png' for i in range(n)]
    else: lines = [f'JPEGImages/2008_{i:06d}.jpg SegmentationClassAug/2008_{i:06d}.png' for i in range(n)]
    Path(path).write_text('\n'.join(lines) + '\n')
    return Path(path)

# ---------------------------------------------------------------- the kit's side
def _method(preset: str = 'cityscapes-authors', **kw):
    cfg = get_preset(preset)                           # resolved: AEL's parts on under 'ael'
    for k, v in kw.items(): setattr(cfg.method, k, v)
    return cfg

def kit_bank(seed: int, momentum: float = 0.9, preset: str = 'cityscapes-authors'):
    m = get_preset(preset).method
    conf0, batches = bank_inputs(seed)
    bank = ConfidenceBank(len(conf0), momentum, m.indicator, init=conf0, absent_as_zero=m.absent_as_zero,
                          reduction=m.bank_reduction)
    for logits, labels in batches: bank.update(logits.softmax(1), labels)
    return dict(conf=bank.conf.tolist())

def kit_eq7(seed: int, preset: str = 'cityscapes-authors'):
    m = get_preset(preset).method
    conf = bank_inputs(seed)[0]
    target = [c for c in range(len(conf)) if c not in m.cp_exclude]
    return dict(acm=sampling_prob(conf, m.temperature, m.acm_exclude).tolist(),
                acp=sampling_prob(conf, m.temperature, m.cp_exclude, sqrt=m.cp_sqrt)[target].tolist())

def kit_cp_choice(seed: int, batches: int = 100, preset: str = 'cityscapes-authors'):
    "The classes `batch_classes` draws for `batches` batches (a source holding every class, so all draws show)."
    m = get_preset(preset).method
    conf, C = bank_inputs(seed)[0], 19
    every = torch.arange(C).view(1, 1, C)
    prob = sampling_prob(conf, m.temperature, m.cp_exclude, sqrt=m.cp_sqrt)
    return dict(classes=[batch_classes(every, prob, m.k, _g(seed * 1000 + i))[0].nonzero().flatten().tolist()
                         for i in range(batches)])

def kit_paste(seed: int):
    img, lab, src, src_lab, query = paste_inputs(seed)
    chosen = torch.zeros(len(img), 19, dtype=torch.bool); chosen[:-1, query] = True
    out_img, out_lab, _ = paste_classes(img, lab, src, src_lab, chosen)
    return dict(image=digest(out_img), label=digest(out_lab), changed=int((out_img != img).any(1).sum()))

def kit_unsup_loss(seed: int, dataset: str = 'cityscapes', aes: bool = True, **switches):
    "The kit's AES + DR + Eq. 11 (`ael_nb.steps.aes_dr_loss`) under the `-authors` preset and `switches`."
    cfg = _method(f'{dataset}-authors', aes=aes, **switches)
    student, teacher, conf = loss_inputs(seed)
    p = teacher.softmax(1)
    state = SimpleNamespace(cfg=cfg, bank=SimpleNamespace(conf=conf))
    return dict(loss=aes_dr_loss(state, student, p, pseudo_label(p, cfg.method.pl_threshold), _g(seed))[0].item())

def kit_table(seed: int, preset: str = 'cityscapes-authors'):
    m = get_preset(preset).method
    t = ClassTable(6, 5, r_star=m.r_star, rule=m.table_rule)
    for logits, i, j in table_inputs(seed):
        p = logits.softmax(1)
        t.update(torch.tensor([i]), pseudo_label(p[:1])); t.update(torch.tensor([j]), pseudo_label(p[1:]))
    return dict(table=t.table.long().tolist())

def region_case(seed: int, cls: str):
    "The map and class of a region case: 'present' (class 1), 'absent' (class 4) or 'whole' (a map all of class 2)."
    pred = region_inputs(seed)
    if cls == 'whole': return torch.full_like(pred, 2), 2
    return pred, 1 if cls == 'present' else 4

def kit_region(seed: int, cls: str = 'present', seeds: int = 48, preset: str = 'cityscapes-authors'):
    "Every box the region search returns over `seeds` generator seeds (found only), and whether it found a region."
    m = get_preset(preset).method
    pred, c = region_case(seed, cls)
    boxes, found = set(), set()
    for s in range(seeds):
        b, f = acm_boxes(onehot_probs(pred, 5), torch.tensor([c]), _g(s), m.r_star if m.acm_min_area is None else
                         m.acm_min_area, stride=m.acm_stride, full=m.acm_full, position=m.box_position)
        found.add(bool(f[0]))
        if f[0]: boxes.add(tuple(b[0].tolist()))
    return dict(found=sorted(found), boxes=sorted(map(list, boxes)))

def kit_fallback_box(seed: int, h: int = 769, n: int = 100, preset: str = 'cityscapes-authors'):
    b = random_boxes(n, h, h, (0.5, 0.5), _g(seed), position=get_preset(preset).method.box_position)
    return dict(boxes=b.tolist())

def kit_ohem(seed: int, min_kept: int = 100):
    cfg = get_preset('cityscapes-authors'); cfg.optim.ohem_min_kept = min_kept
    main, aux, target = ohem_inputs(seed)
    return dict(loss=supervised_loss(dict(out=main, aux=aux), target, cfg).item())

def kit_split(n_lines: int, n_sup: int, seed: int, dataset: str = 'cityscapes'):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        lst = split_list(Path(d)/'list.txt', n_lines, dataset)
        m = import_authors(lst, dataset, n_sup=n_sup, seed=seed)
    return split_figures(m.labeled, len(m.unlabeled))

def split_figures(labeled: list, n_unlabeled: int) -> dict:
    "Counts, a digest of the sorted labeled ids and the first three."
    sha = hashlib.sha256('\n'.join(labeled).encode()).hexdigest()[:16]
    return dict(labeled=len(labeled), unlabeled=n_unlabeled, labeled_sha=sha, first=labeled[:3])

# ---------------------------------------------------------------- one whole AEL step, three times
STEP_OVERRIDES = [  # tiny `cityscapes-authors` run: synthetic 32x32 scenes, ResNet-18, 2 labeled + 1 target + 1 source
    'data.dataset=synthetic', 'data.train_split=train', 'data.val_split=val', 'data.synthetic_size=32,32',
    'data.synthetic_n=16', 'data.fraction=1/4', 'data.crop_size=32', 'data.scale=1,1', 'data.batch_size=2',
    'data.num_workers=0', 'data.acm_prefetch=false', 'data.check=false', 'model.backbone=resnet18',
    'model.output_stride=16', 'model.pretrained=none', 'model.dropout=0', 'optim.iters=3', 'optim.amp=none',
    'optim.ohem_min_kept=200',
    'method.tau=0.9', 'method.cp_exclude=0,1,2,8', 'run.seed=0']

def _deterministic(model):
    """Training mode with BatchNorm on running statistics and dropout off, in both codes alike: one target image has no
    batch statistics without SyncBatchNorm, and the codes draw dropout masks from different random streams."""
    for mod in model.modules():
        if isinstance(mod, (torch.nn.modules.batchnorm._BatchNorm, torch.nn.modules.dropout._DropoutNd)): mod.eval()
    return model

def _grad_norms(model) -> list[float]:
    "Gradient norm of the backbone and of the heads."
    from ael_nb.model import param_groups
    return [torch.cat([p.grad.flatten() for p in g['params'] if p.grad is not None]).norm().item()
            for g in param_groups(model, 1.)]

def kit_steps(seed: int = 0, steps: int = 3, record: dict | None = None, overrides=()):
    "`steps` AEL steps under `cityscapes-authors`, tiny network: loss terms and gradient norms, then bank and table."
    import copy
    from ael_nb.config import get_config
    from ael_nb.core import make_generator, seed_everything
    from ael_nb.plan import build_data, make_loader, micro_batch, mix_seed, unlabeled_micro_batch
    from ael_nb.state import build_state
    from ael_nb.steps import Trace, ael_step
    from ael_nb.teacher import ema_update
    cfg = get_config('cityscapes-authors', overrides=STEP_OVERRIDES + [f'run.seed={seed}', *overrides])
    data = build_data(cfg); seed_everything(seed)
    state = build_state(cfg, data, torch.device('cpu'))
    if record is not None: record.update(student=copy.deepcopy(state.student), teacher=copy.deepcopy(state.teacher), cfg=cfg,
                                         bank0=state.bank.conf.clone(),
                                         n_unlabeled=len(data.unlabeled), feeds=[])
    dl_l = iter(make_loader(data.labeled, micro_batch(cfg), cfg, 0, 0, steps, True))
    dl_u = iter(make_loader(data.unlabeled, unlabeled_micro_batch(cfg), cfg, 1, 0, steps, False))
    out = []
    for _ in range(steps):
        g = make_generator(mix_seed(cfg.run.seed, 3, state.it, 0))
        _deterministic(state.student.train())
        state.optimizer.zero_grad(set_to_none=True)
        loss, logs, tr = ael_step(state, next(dl_l), next(dl_u), g, Trace())
        loss.backward()
        out.append(dict(loss_s=float(logs['loss_s']), loss_u=float(logs['loss_u']), grad=_grad_norms(state.student)))
        if record is not None: record['feeds'].append(tr)
        state.optimizer.step(); state.scheduler.step()
        ema_update(state.teacher, state.student, state.it, cfg.method.ema_decay, cfg.method.ema_buffers); state.it += 1
    return dict(steps=out, bank=state.bank.conf.tolist(), table=digest(state.table.table.to(torch.uint8)),
                table_count=int(state.table.table.sum()))

KIT = dict(bank=kit_bank, eq7=kit_eq7, cp_choice=kit_cp_choice, paste=kit_paste, unsup_loss=kit_unsup_loss,
           table=kit_table, region=kit_region, fallback_box=kit_fallback_box, ohem=kit_ohem, split=kit_split,
           steps=kit_steps)

# (name, kit function, inputs, tolerance, what it checks)
CASES = [
    ('bank', 'bank', dict(seed=0), 1e-6,
     "confidence bank after 3 EMA steps (cal_category_confidence + train.py's EMA), absent classes to 0, pixel-pooled"),
    ('eq7', 'eq7', dict(seed=1), 1e-6, "Eq. 7: ACM's class probabilities (sample_from_bank), ACP's (sqrt, ignore_cat)"),
    ('cp_choice', 'cp_choice', dict(seed=2), 0, "Copy-Paste classes: 3 draws with replacement per batch, 100 batches"),
    ('paste', 'paste', dict(seed=3), 0, "Copy-Paste compositing of the drawn classes (dynamic_copy_paste), digests"),
    ('loss_cityscapes_dr', 'unsup_loss', dict(seed=4, dataset='cityscapes', aes=False), 1e-6,
     "DR + Eq. 11 on an unlabeled batch, Cityscapes (Criterion_cons, sample=False, gamma 2)"),
    ('loss_cityscapes_aes', 'unsup_loss', dict(seed=5, dataset='cityscapes', aes=True), 1e-6,
     "AES (shared per-class maps) + DR + Eq. 11, Cityscapes (Criterion_cons, sample=True)"),
    ('loss_voc_aes', 'unsup_loss', dict(seed=6, dataset='voc', aes=True), 1e-6,
     "AES + DR + Eq. 11 on VOC: pseudo-labels below 0.7 ignored, their weights kept in the denominator"),
    ('table', 'table', dict(seed=7), 0, "ACM class table, 3 steps of 2 images, 12x20 maps (update_cutmix_bank)"),
    ('region', 'region', dict(seed=8, cls='present'), 0,
     "ACM region search: every box over 48 shuffles / generator seeds (generate_cutmix_mask, no_pad, no_slim)"),
    ('region_absent', 'region', dict(seed=8, cls='absent'), 0, "ACM region search, class absent: fallback"),
    ('region_whole', 'region', dict(seed=8, cls='whole'), 0, "ACM region search, class everywhere: fallback"),
    ('fallback_box', 'fallback_box', dict(seed=9, h=769), 0, "ACM fallback box (init_cutmix), 100 boxes of a 769 crop"),
    ('fallback_box_small', 'fallback_box', dict(seed=10, h=33), 0, "ACM fallback box, 100 boxes of a 33 crop"),
    ('ohem', 'ohem', dict(seed=11, min_kept=100), 1e-6, "OHEM + 0.4 x auxiliary OHEM (CriterionOhem), min_kept 100"),
    ('ohem_few', 'ohem', dict(seed=12, min_kept=5000), 1e-6, "OHEM with min_kept above the labeled pixels: plain CE"),
    ('split_city', 'split', dict(n_lines=2975, n_sup=186, seed=0), 0, "labeled draw of city_dset: 186 of 2975, seed 0"),
    ('split_city_seed1', 'split', dict(n_lines=2975, n_sup=372, seed=1), 0, "city_dset's draw: 372 of 2975, seed 1"),
    ('ael_steps', 'steps', dict(seed=0), 1e-4,
     "3 whole AEL steps under cityscapes-authors (train.py's train(), stubs fed the kit's draws): loss terms, gradient "
     "norms, bank, class table"),
    ('split_voc', 'split', dict(n_lines=10582, n_sup=662, seed=0, dataset='voc'), 0,
     "labeled draw of voc_dset: 662 of 10582, seed 0"),
]


# ---------------------------------------------------------------- the authors' side
class Feed(np.random.RandomState):
    "A RandomState whose uniforms come from a list: numpy's own `choice` then draws what the kit drew."
    def __init__(self, values): super().__init__(0); self.values = [float(v) for v in values]
    def random_sample(self, size=None):
        if size is None: return self.values.pop(0)
        n = int(np.prod(size)); out, self.values = self.values[:n], self.values[n:]
        return np.array(out).reshape(size)

def _shim(module, **replace):
    "A stand-in for `module` with the attributes `replace` swapped (everything else is the module's)."
    return SimpleNamespace(**{k: getattr(module, k) for k in dir(module) if not k.startswith('__')} | replace)

def _np_shim(random_ns): return _shim(np, random=random_ns)


def load_authors(repo) -> SimpleNamespace:
    "The authors' modules from their checkout (with `cv2` stubbed) and the commit it holds."
    repo = Path(repo).resolve()
    if not (repo/'semseg'/'utils'/'utils.py').is_file():
        raise SystemExit(f'{repo}: not a SemiSeg-AEL checkout (no semseg/utils/utils.py)')
    sys.modules.setdefault('cv2', types.ModuleType('cv2'))
    sys.path.insert(0, str(repo))
    try:
        utils, loss = importlib.import_module('semseg.utils.utils'), importlib.import_module('semseg.utils.loss_helper')
        lr_helper = importlib.import_module('semseg.utils.lr_helper')
        spec = importlib.util.spec_from_file_location('authors_train', repo/'train.py')
        train = importlib.util.module_from_spec(spec); spec.loader.exec_module(train)
        city = importlib.import_module('semseg.dataset.cityscapes_semi_cp')
        voc = importlib.import_module('semseg.dataset.pascal_voc_semi_cp')
    finally: sys.path.remove(str(repo))
    git = subprocess.run(['git', '-C', str(repo), 'rev-parse', 'HEAD'], capture_output=True, text=True)
    commit = git.stdout.strip()
    date = subprocess.run(['git', '-C', str(repo), 'log', '-1', '--format=%cI'], capture_output=True, text=True)
    return SimpleNamespace(repo=repo, commit=commit or 'unknown', commit_date=date.stdout.strip() or 'unknown', utils=utils, loss=loss, city=city, voc=voc,
                           lr_helper=lr_helper, train=train,
                           train_src=(repo/'train.py').read_text())

def _class_block(train_src: str) -> ast.Module:
    "The statements of train.py's step loop under `if acp or acm:` (Eq. 7 for Copy-Paste and its class draws)."
    fn = next(n for n in ast.parse(train_src).body if isinstance(n, ast.FunctionDef) and n.name == 'train')
    loop = next(n for n in ast.walk(fn) if isinstance(n, ast.For) and ast.unparse(n.target) == 'step')
    block = next(n for n in loop.body if isinstance(n, ast.If) and ast.unparse(n.test) == 'acp or acm')
    return ast.Module(body=block.body, type_ignores=[])

def authors_bank(A, seed: int, momentum: float = 0.9, **_):
    conf0, batches = bank_inputs(seed)
    cc = conf0[None].repeat(3, 1)
    for logits, labels in batches:
        cc = cc * momentum + A.utils.cal_category_confidence(logits, logits, labels, None, len(conf0)) * (1 - momentum)
    return dict(conf=cc[0].tolist())

def _run_class_block(A, conf: torch.Tensor, uniforms, num_cat: int = 3):
    "Run train.py's class block with the bank `conf`; returns (the p of each np.random.choice, query_cat)."
    seen, feed = [], Feed(uniforms)
    def choice(a, p=None): seen.append(np.asarray(p).tolist()); return feed.choice(a, p=p)
    ns = dict(class_criterion=conf[None].repeat(3, 1), target_cat=sorted(set(range(len(conf))) - set(CITY_IGNORED)),
              num_cat=num_cat, np=_np_shim(SimpleNamespace(choice=choice)))
    exec(compile(_class_block(A.train_src), 'train.py', 'exec'), ns)
    return seen, sorted(int(c) for c in ns['query_cat'])

def authors_eq7(A, seed: int, **_):
    conf = bank_inputs(seed)[0]
    seen = []
    A.utils.np = _np_shim(SimpleNamespace(choice=lambda a, p=None: seen.append(np.asarray(p).tolist()) or 0))
    A.utils.random = random.Random(0)
    try: A.utils.sample_from_bank(torch.ones(len(conf), 4), conf)
    finally: A.utils.np, A.utils.random = np, random
    return dict(acm=seen[0], acp=_run_class_block(A, conf, [0.5] * 3)[0][0])

def authors_cp_choice(A, seed: int, batches: int = 100, **_):
    conf = bank_inputs(seed)[0]
    return dict(classes=[_run_class_block(A, conf, torch.rand(3, generator=_g(seed * 1000 + i)).tolist())[1]
                         for i in range(batches)])

def authors_paste(A, seed: int, **_):
    img, lab, src, src_lab, query = paste_inputs(seed)
    src[-1], src_lab[-1] = 0, 0                  # the loader's 'no paste' sample: zeros
    out_img, out_lab = A.utils.dynamic_copy_paste(torch.cat([img, src], 1), torch.cat([lab, src_lab], 1), query)
    return dict(image=digest(out_img), label=digest(out_lab.long()), changed=int((out_img != img).any(1).sum()))

def authors_unsup_loss(A, seed: int, dataset: str = 'cityscapes', aes: bool = True, **_):
    student, teacher, conf = loss_inputs(seed)
    threshold = get_preset(f'{dataset}-authors').method.pl_threshold
    conf_unsup = F.softmax(teacher, dim=1).max(1)[0]          # as train.py computes the teacher's confidence and label
    label = teacher.max(1)[1]; label[conf_unsup < threshold] = 255
    C, (H, W) = student.shape[1], student.shape[2:]
    maps = iter(torch.rand((C, H, W), generator=_g(seed)))  # the kit's shared AES maps (aes_mask, shared=True)
    crit = A.loss.Criterion_cons(2, sample=aes, gamma2=1, ignore_index=255)
    A.loss.torch = _shim(torch, rand=lambda h, w: 1 - next(maps))   # keep: rand > 1 - s  <=>  1 - u > 1 - s  <=>  u < s
    try:
        with cpu_cuda(): loss = crit(student, conf_unsup, label, conf if aes else None)
    finally: A.loss.torch = torch
    return dict(loss=loss.item())

def authors_table(A, seed: int, **_):
    bank = torch.zeros(6, 5)
    for logits, i, j in table_inputs(seed): bank = A.utils.update_cutmix_bank(bank, logits, i, j, 0.01)
    return dict(table=bank.long().tolist())

def authors_region(A, seed: int, cls: str = 'present', seeds: int = 48, **_):
    pred, c = region_case(seed, cls)
    boxes, found = set(), set()
    for s in range(seeds):
        fell = []
        A.utils.random = random.Random(s)
        fallback = lambda low=0., high=1., size=None: fell.append(1) or np.full(size, 0.5)   # init_cutmix was called
        A.utils.np = _np_shim(SimpleNamespace(uniform=fallback))
        try:
            with cpu_cuda(): m = A.utils.generate_cutmix_mask(pred.numpy(), c, 0.005, no_pad=True, no_slim=True)
        finally: A.utils.random, A.utils.np = random, np
        found.add(not fell)
        if not fell:
            ys, xs = m.nonzero(as_tuple=True)
            boxes.add((int(ys.min()), int(xs.min()), int(ys.max()) + 1, int(xs.max()) + 1))
    return dict(found=sorted(found), boxes=sorted(map(list, boxes)))

def authors_fallback_box(A, seed: int, h: int = 769, n: int = 100, **_):
    u = torch.rand((n, 4), generator=_g(seed)).double().numpy()   # the kit's draws: area, aspect, y, x
    out = []
    for row in u:
        vals = iter([np.full((1, 1), 0.5), row[1:2].reshape(1, 1), row[2:4].reshape(1, 1, 2)])
        A.utils.np = _np_shim(SimpleNamespace(uniform=lambda low=0., high=1., size=None: next(vals)))
        try: out.append([int(v) for v in A.utils.init_cutmix(h)])
        finally: A.utils.np = np
    return dict(boxes=out)

def authors_ohem(A, seed: int, min_kept: int = 100, **_):
    main, aux, target = ohem_inputs(seed)
    crit = A.loss.CriterionOhem(0.4, thresh=0.7, min_kept=min_kept, ignore_index=255)
    return dict(loss=crit((main, aux), target).item())

def authors_split(A, n_lines: int, n_sup: int, seed: int, dataset: str = 'cityscapes', **_):
    import tempfile
    from ael_nb.manifests import path_to_id
    with tempfile.TemporaryDirectory() as d:
        lst = split_list(Path(d)/'list.txt', n_lines, dataset)
        cls = A.city.city_dset if dataset == 'cityscapes' else A.voc.voc_dset
        labeled = sorted(path_to_id(p[0]) for p in cls('', str(lst), None, seed, n_sup, split='train').list_sample_new)
        unlabeled = cls('', str(lst), None, seed, n_sup, split='train', unsup=True).list_sample_new
    return split_figures(labeled, len(unlabeled))

class _Loader:
    "A loader as train.py uses it: `sampler.set_epoch`, `len`, and an iterator with `.next()`, yielding `batches`."
    def __init__(self, batches, dataset=None):
        self.batches, self.dataset = batches, dataset
        self.sampler = SimpleNamespace(set_epoch=lambda e: None)
    def __len__(self): return len(self.batches)
    def __iter__(self): return _Iter(self.batches)

class _Iter:
    "Python 2's iterator protocol (`.next()`), which train.py calls."
    def __init__(self, items): self.it = iter(items)
    def __iter__(self): return self
    def __next__(self): return next(self.it)
    next = __next__

class _TupleOut(torch.nn.Module):
    "The kit's network answering as the authors' ModelBuilder does, (main, aux); `deterministic`: see `_deterministic`."
    def __init__(self, net, deterministic: bool = False):
        super().__init__(); self.net, self.deterministic = net, deterministic
    def forward(self, x): o = self.net(x); return o['out'], o['aux']
    def train(self, mode: bool = True):
        super().train(mode)
        if self.deterministic: _deterministic(self.net)
        return self

def _kit_draws(seed: int):
    "Run `kit_steps`, keeping its traces and the random numbers it drew for AES maps and fallback boxes."
    import ael_nb.aes, ael_nb.cutmix
    maps, boxes, record = [], [], {}
    real_rand, real_draw = torch.rand, ael_nb.cutmix.draw
    def rand(*a, **k): r = real_rand(*a, **k); maps.append(r); return r
    def draw(shape, *a, **k):
        r = real_draw(shape, *a, **k)
        if isinstance(shape, tuple) and len(shape) == 2 and shape[1] == 4: boxes.append(r)
        return r
    ael_nb.aes.torch, ael_nb.cutmix.draw = _shim(torch, rand=rand), draw
    try: figs = kit_steps(seed, record=record)
    finally: ael_nb.aes.torch, ael_nb.cutmix.draw = torch, real_draw
    return figs, record, maps, boxes

def authors_steps(A, seed: int = 0, **_):
    "train.py's `train()` for 3 steps on the kit's batches, weights and random decisions (fed through stubs)."
    from ael_nb.model import param_groups
    figs, rec, maps, boxes = _kit_draws(seed)
    cfg, C, steps = rec['cfg'], rec['student'].num_classes, len(rec['feeds'])
    m, o = cfg.method, cfg.optim
    acfg = {'net': {'num_classes': C, 'ema_decay': m.ema_decay, 'aux_loss': {'loss_weight': cfg.model.aux_weight}},
            'dataset': {'ignore_label': 255, 'acp': {'momentum': m.tau, 'number': m.k},
                        'train': {'acm': {'momentum': m.tau, 'area_thresh': m.acm_min_area, 'area_thresh2': m.r_star,
                                          'no_pad': True, 'no_slim': True}}},
            'criterion': {'threshold': m.pl_threshold, 'cons': {'sample': True, 'gamma': m.gamma},
                          'type': 'ohem', 'kwargs': {'thresh': o.ohem_thresh, 'min_kept': o.ohem_min_kept}},
            'trainer': {'epochs': 1}}
    feeds = rec['feeds']
    # the labeled batches: image and paste source side by side, the source showing the kit's pasted pixels only
    lab = []
    for tr in feeds:
        paste_lab = torch.where(tr['cp_mask'], tr['y_l'], 255)
        lab.append((torch.cat([tr['lb_image'], tr['x_l']], 1), torch.cat([tr['lb_label'], paste_lab], 1)))
    unl = [(tr['ub_image'].repeat(2, 1, 1, 1), None, tr['ub_index'].repeat(2)) for tr in feeds]   # the target, twice
    sources = iter(tr['acm_src_image'][0] for tr in feeds)
    dataset = type('Sources', (), {'__getitem__': lambda self, index: (next(sources), None, None),
                                   '__len__': lambda self: rec['n_unlabeled']})()
    # random decisions in train.py's order per step: Copy-Paste classes, target, ACM class + image, region or box, AES
    cp_classes = iter([sorted({int(c) for c in tr['y_l'][tr['cp_mask']].tolist()}) or [3] for tr in feeds])
    acm = iter([(int(tr['acm_class'][0]), int(tr['acm_src'][0]), bool(tr['acm_found'][0]), tr['cut_mask'][0])
                for tr in feeds])
    C_maps = iter([(maps[2 * i + 1], maps[2 * i]) for i in range(steps)])   # the kit: unlabeled first; theirs: labeled
    box_draws = iter(boxes)
    state = {}
    def choice_cp(a, p=None): return state.setdefault('cp', []).pop(0) if state.get('cp') else _next_cp()
    def _next_cp():
        cls = next(cp_classes); state['cp'] = (cls * 3)[1:3]; return cls[0]
    def bank_choice(a, p=None):
        state['acm'] = next(acm); state['maps'] = next(C_maps); state['box'] = next(box_draws)[0].double().numpy()
        return state['acm'][0]
    labeled_maps = []

    def shuffle(values):
        "Put first the component whose box is the kit's box."
        _, _, found, cut = state['acm']
        ys, xs = cut.nonzero(as_tuple=True)
        want = (int(ys.min()), int(xs.min()), int(ys.max()) + 1, int(xs.max()) + 1)
        lab_img = state['label']
        for i, v in enumerate(values):
            yy, xx = np.nonzero(lab_img == v)
            if (yy.min(), xx.min(), yy.max() + 1, xx.max() + 1) == want:
                values[0], values[i] = values[i], values[0]; return
    def label(x, *a, **k):
        state['label'] = A.utils_label(x, *a, **k); return state['label']
    def uniform(low=0., high=1., size=None):
        u = state['box']
        if tuple(size) == (1, 1, 2): return u[2:4].reshape(1, 1, 2)               # the offsets
        return np.full((1, 1), 0.5) if low == high else u[1:2].reshape(1, 1)      # the area (fixed), the aspect
    def rand(h, w):
        if not labeled_maps: labeled_maps.extend(list(state['maps'][0]) + list(state['maps'][1]))
        return 1 - labeled_maps.pop(0)
    # networks, optimiser, schedule, criteria
    student, teacher = _TupleOut(rec['student'], deterministic=True), _TupleOut(rec['teacher'])
    taken = []
    class SGD(torch.optim.SGD):
        def step(self, closure=None): taken.append(_grad_norms(student.net)); return super().step(closure)
    opt = SGD(param_groups(student.net, o.lr, o.head_lr_mult), lr=o.lr, momentum=o.momentum,
              weight_decay=o.weight_decay)
    sched = A.lr_helper.LRScheduler('poly', {'power': o.poly_power}, steps, opt, 1, 0)
    losses = []
    def recorded(crit):
        def f(*a): v = crit(*a); losses.append(float(v)); return v
        return f
    crit, crit_cons = recorded(A.loss.get_criterion(acfg)), recorded(A.loss.get_criterion(acfg, cons=True))
    A.train.cfg = acfg
    saved = dict(tnp=A.train.np, trandom=A.train.random, tdist=A.train.dist, unp=A.utils.np, urandom=A.utils.random,
                 ulabel=A.utils.label, ltorch=A.loss.torch)
    A.train.np = _np_shim(SimpleNamespace(choice=choice_cp))
    A.train.random = SimpleNamespace(random=lambda: 0.9)                  # picks image 0 of the pair: the kit's target
    A.train.dist = SimpleNamespace(all_reduce=lambda t: t)
    A.utils.np = _np_shim(SimpleNamespace(choice=bank_choice, uniform=uniform))
    A.utils.random = SimpleNamespace(choice=lambda seq: torch.tensor([state['acm'][1]]),
                                     randint=lambda a, b: state['acm'][1], shuffle=shuffle)
    A.utils_label, A.utils.label = A.utils.label, label
    A.loss.torch = _shim(torch, rand=rand)
    try:
        with cpu_cuda():
            bank0, table0 = rec['bank0'][None].repeat(3, 1), torch.zeros(C, rec['n_unlabeled'])
            _, bank, table = A.train.train(student, opt, sched, crit, _Loader(lab), 0, 0, teacher,
                                           _Loader(unl, dataset), crit_cons, bank0, table0)
    finally:
        A.train.np, A.train.random, A.train.dist = saved['tnp'], saved['trandom'], saved['tdist']
        A.utils.np, A.utils.random, A.utils.label = saved['unp'], saved['urandom'], saved['ulabel']
        A.loss.torch = saved['ltorch']
    out = [dict(loss_s=losses[3 * i], loss_u=losses[3 * i + 1] + losses[3 * i + 2], grad=taken[i])
           for i in range(steps)]                                       # criteria in order: sup, labeled, unlabeled
    return dict(steps=out, bank=bank[0].tolist(), table=digest(table.bool().to(torch.uint8)),
                table_count=int(table.sum()))

AUTHORS = dict(bank=authors_bank, eq7=authors_eq7, cp_choice=authors_cp_choice, paste=authors_paste,
               unsup_loss=authors_unsup_loss, table=authors_table, region=authors_region,
               fallback_box=authors_fallback_box,
               ohem=authors_ohem, split=authors_split, steps=authors_steps)

NOT_LINED_UP = [  # what the whole-step case feeds or holds equal instead of comparing, and why
    "BatchNorm of the student on running statistics and dropout off on both sides: one target image per GPU has batch "
    "statistics only through SyncBatchNorm over 8 GPUs, and the two codes draw dropout masks from different streams",
    "the authors' random decisions are fed the kit's: Copy-Paste classes (np.random.choice), the target of the pair "
    "(random.random), ACM's class and source image (sample_from_bank), the region (random.shuffle), the fallback box "
    "(np.random.uniform), the AES maps (torch.rand); the kit draws ACM's sources one step ahead (to load them in the "
    "background), so its bank and table at that draw are one step older than the authors'",
    "batches: the kit's loader and augmentation give both sides the same images (theirs read files with cv2)",
    "start: the authors' teacher is an independent random network and their bank uniform random numbers; both sides "
    "start from the kit's copy of the student and 1/C",
    "one process: dist.all_reduce is the identity",
]

def figures(A) -> dict:
    "Run every case on both sides; the authors' outputs are the golden figures."
    out = dict(authors_repo='https://github.com/hzhupku/SemiSeg-AEL', authors_commit=A.commit,
               authors_commit_date=A.commit_date, made_on=time.strftime('%Y-%m-%d', time.gmtime()),
               torch=torch.__version__, numpy=np.__version__, made_by='tools/authors_golden.py',
               not_lined_up=NOT_LINED_UP, cases={})
    differ = []
    for name, fn, inputs, tol, what in CASES:
        ref, kit = AUTHORS[fn](A, **inputs), KIT[fn](**inputs)
        diff = compare(kit, ref, tol)
        out['cases'][name] = dict(what=what, function=fn, inputs=inputs, tolerance=tol, authors=ref)
        if diff: differ.append(name)
        print(f"{name:22s} {'same' if not diff else 'DIFFERENT: ' + '; '.join(diff[:3])}")
    return out, differ

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--authors-repo', required=True, help='a SemiSeg-AEL checkout (read, not copied)')
    p.add_argument('--out', default=str(GOLDEN), help=f'golden file to write (default {GOLDEN.relative_to(ROOT)})')
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    fig, differ = figures(load_authors(args.authors_repo))
    out = write(fig, args.out)
    print(f"wrote {out} ({len(fig['cases']) - len(differ)} of {len(fig['cases'])} cases match the kit)")
    return 0 if not differ else 1

if __name__ == '__main__': sys.exit(main())
