"""Golden figures of UniMatch V2's training step: run the body of the loop in V2's `unimatch_v2.py` (inside its
`main()`, read from a checkout and executed with `.cuda()` patched out) for 3 iterations, and write what it computed to
`tests/golden/unimatch_v2_step.json`; `tests/test_unimatch_v2_step_golden.py` holds the kit's `unimatch_v2_step` to
those figures on every run, without V2's code.

    python tools/unimatch_v2_step_golden.py --v2-repo /path/to/UniMatch-V2 [--out tests/golden/unimatch_v2_step.json]

Both sides train the tiny DINOv2 + DPT (`dinov2_tiny`: V2's own `DPT` and `DinoVisionTransformer` from the checkout on
its side, the kit's `ael_nb.dpt.DPT` on the other, built and seeded as `tools/unimatch_v2_golden.py` does) from the same
weights on the same seeded inputs: labeled images and labels, weak and two strong views, padding, the two CutMix boxes,
and the same global seed before each step, so that the complementary dropout masks agree. Equal: the three losses, the
learning rates of both AdamW groups, and the student's and the EMA teacher's weights after each step (each of the
kit's parameters beside V2's of the same name; V2's never-used `mask_token` and `refinenet4.resConfUnit1` aside)."""
from __future__ import annotations
import argparse, ast, contextlib, json, subprocess, sys, time, warnings
from copy import deepcopy
from pathlib import Path
import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
from ael_nb.config import get_config
from ael_nb.conf_bank import ConfidenceBank
from ael_nb.model import param_groups
from ael_nb.state import TrainState, make_optimizer, make_scheduler
from ael_nb.teacher import make_teacher, ema_update
from ael_nb.unimatch_v2 import v2_boxes
import ael_nb.unimatch_v2 as kit_v2
sys.path.insert(0, str(ROOT/'tools'))
import unimatch_v2_golden as model_golden     # the tiny DINOv2 + DPT on both sides, the same weights
import golden_json

GOLDEN = ROOT/'tests'/'golden'/'unimatch_v2_step.json'
V2_COMMIT = 'f6afb4dfca2d9dcbcee2307e97717954ca75c0ba'
SETTING = dict(classes=model_golden.NUM_CLASSES, batch=4, size=56, iters=3, epoch_len=40, lr=1e-3, lr_multi=40.0,
               conf_thresh=0.3, seed=0)
# 3 steps from the start (the EMA's warm-up, the lr's first steps) and from step 400 of 800 (decay capped at 0.996)
CASES = dict(start=dict(epoch=0, epochs=1), late=dict(epoch=10, epochs=20))
# relative: AdamW's normalised step turns rounding-size gradient differences (the kit's attention is PyTorch's fused
# kernel, V2's is spelled out; logits agree to ~1e-6) into weights up to 8e-5 apart after 3 steps, while the smallest
# switch the test tells apart (optim.lr_lag=0 from step 400) moves them by 8e-3
TOL = 5e-4

def network(V2=None) -> nn.Module:
    "The tiny DINOv2 + DPT in training mode: V2's own when its `model.semseg.dpt` module is given, else the kit's."
    m = model_golden.kit_model(SETTING['seed']) if V2 is None else model_golden.v2_model(V2, SETTING['seed'])
    return m.train()

def batch(it: int) -> dict:
    "Iteration `it`'s inputs as V2's loaders give them (ignore_mask 255 on padding; boxes from V2's law)."
    s = SETTING; g = torch.Generator().manual_seed(1000 + it)
    B, C, H = s['batch'], s['classes'], s['size']
    img = lambda: torch.randn(B, 3, H, H, generator=g)
    mask_x = torch.randint(0, C, (B, H, H), generator=g); mask_x[:, :3] = 255
    ignore = torch.zeros(B, H, H, dtype=torch.long); ignore[1, :, -5:] = 255
    return dict(img_x=img(), mask_x=mask_x, img_u_w=img(), img_u_s1=img(), img_u_s2=img(), ignore_mask=ignore,
                cutmix_box1=v2_boxes(B, H, H, g).long(), cutmix_box2=v2_boxes(B, H, H, g).long())

def without_key_bias(name: str, p: torch.Tensor) -> torch.Tensor:
    "A parameter as the figures hold it: an attention's qkv bias without its key third, whose gradient is zero."
    # q . (k + b_k) shifts a query's logits over all keys alike, so softmax cancels b_k: its gradient is rounding
    # noise, which AdamW's normalised step turns into lr-sized moves of either sign on either side
    return p.view(3, -1)[[0, 2]] if name.endswith('attn.qkv.bias') else p

def _figures(student, teacher, lrs, losses) -> dict:
    "What one step leaves: its losses, the rates it trained at, per-tensor sums of the student's and teacher's weights."
    names = [k for k, _ in model_golden.kit_model(SETTING['seed']).named_parameters()]
    sums = lambda m: [[float(p.detach().double().sum()), float(p.detach().double().pow(2).sum())]
                      for p in map(lambda k: without_key_bias(k, dict(m.named_parameters())[k]), names)]
    return dict(losses=losses, lr=lrs, student=sums(student), teacher=sums(teacher))

# ---------------------------------------------------------------- V2's side
@contextlib.contextmanager
def no_cuda():
    "`.cuda()` of tensors and modules returns them as they are (V2's code calls it everywhere)."
    t, m = torch.Tensor.cuda, nn.Module.cuda
    torch.Tensor.cuda = lambda self, *a, **k: self; nn.Module.cuda = lambda self, *a, **k: self
    try: yield
    finally: torch.Tensor.cuda, nn.Module.cuda = t, m

def v2_parts(repo) -> dict:
    "The statements of V2's `main()` a step needs, by what they do, compiled from the checkout's `unimatch_v2.py`."
    tree = ast.parse((Path(repo)/'unimatch_v2.py').read_text())
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == 'main')
    text = lambda n: ast.unparse(n)
    pick = lambda pred: [n for n in main.body if pred(text(n))]
    epochs = next(n for n in main.body if isinstance(n, ast.For) and text(n.target) == 'epoch')
    loop = next(n for n in epochs.body if isinstance(n, ast.For) and 'enumerate(loader)' in text(n.iter))
    body = ast.Module(body=loop.body, type_ignores=[])
    lr = [n for n in loop.body if text(n).startswith(('lr = cfg', 'optimizer.param_groups['))]
    assert len(lr) == 3, [text(n)[:40] for n in lr]
    setup = pick(lambda s: s.startswith(('optimizer = AdamW', 'model_ema = deepcopy', 'model_ema.eval()',
                                         'for param in model_ema.parameters()', 'criterion_u =', 'total_iters ='))
                 or (s.startswith('if cfg[') and 'criterion_l' in s))
    assert len(setup) == 7, [text(n)[:40] for n in setup]
    return dict(setup=compile(ast.Module(body=setup, type_ignores=[]), 'unimatch_v2.py:main', 'exec'),
                step=compile(body, 'unimatch_v2.py:main:loop', 'exec'),
                lr=compile(ast.Module(body=lr, type_ignores=[]), 'unimatch_v2.py:main:lr', 'exec'))

class _Meter:
    def update(self, v): pass

class _Loader:
    def __len__(self): return SETTING['epoch_len']

def v2_steps(repo, epoch: int, epochs: int) -> list[dict]:
    "V2's loop body for `SETTING['iters']` iterations from the start of `epoch` on its tiny DPT; figures after each."
    from torch.optim import AdamW
    s, parts = SETTING, v2_parts(repo)
    cfg = dict(lr=s['lr'], lr_multi=s['lr_multi'], conf_thresh=s['conf_thresh'], epochs=epochs,
               criterion=dict(name='CELoss', kwargs=dict(ignore_index=255)))
    V2 = model_golden.load_v2(repo)[0]
    ns = dict(torch=torch, nn=nn, AdamW=AdamW, deepcopy=deepcopy, cfg=cfg, model=network(V2), rank=1,
              local_rank=0, trainloader_u=_Loader(), epoch=epoch, total_loss=_Meter(), total_loss_x=_Meter(),
              total_loss_s=_Meter(), total_mask_ratio=_Meter())
    out = []
    with no_cuda():
        exec(parts['setup'], ns)
        ns['model'].train()
        if epoch: exec(parts['lr'], ns | dict(iters=epoch * s['epoch_len'] - 1))   # the rate the step before set
        for i in range(s['iters']):
            ns.update(batch(i), i=i)
            lrs = [g['lr'] for g in ns['optimizer'].param_groups]
            torch.manual_seed(100 + i)
            exec(parts['step'], ns)
            losses = [float(ns[k].detach()) for k in ('loss_x', 'loss_u_s1', 'loss_u_s2', 'loss')]
            out.append(_figures(ns['model'], ns['model_ema'], lrs, losses))
    return out

# ---------------------------------------------------------------- the kit's side
def kit_state(epochs: int, overrides=()) -> TrainState:
    "A `TrainState` on the kit's tiny DPT at V2's settings (as `voc-unimatch_v2` sets them) and the golden setting."
    s = SETTING
    cfg = get_config('cpu', overrides=['method.name=unimatch_v2', 'model.backbone=dinov2_tiny', 'data.crop_size=28',
                                       'optim.optimizer=adamw', f"optim.lr={s['lr']}",
                                       f"optim.head_lr_mult={s['lr_multi']}", 'optim.weight_decay=0.01',
                                       'optim.lr_lag=1', f"optim.iters={s['epoch_len'] * epochs}", 'optim.sup_loss=ce',
                                       'method.ema_decay=0.996', f"method.conf_thresh={s['conf_thresh']}",
                                       'method.alpha_rampup=0', *overrides])
    student = network()
    opt = make_optimizer(param_groups(student, cfg.optim.lr, cfg.optim.head_lr_mult), cfg.optim)
    return TrainState(cfg, None, student, make_teacher(student), opt, make_scheduler(opt, cfg.optim), None,
                      ConfidenceBank(s['classes']))

def kit_steps(epoch: int, epochs: int, overrides=()) -> list[dict]:
    "`unimatch_v2_step` for the same iterations, its strong views and boxes fed from `batch` as V2's loader feeds."
    state, out, start = kit_state(epochs, overrides), [], epoch * SETTING['epoch_len']
    with warnings.catch_warnings():             # the schedule moved on to `start` before any optimiser step
        warnings.simplefilter('ignore'); [state.scheduler.step() for _ in range(start)]
    for i in range(SETTING['iters']):
        b = batch(i)
        views, boxes = iter([b['img_u_s1'], b['img_u_s2']]), iter([b['cutmix_box1'], b['cutmix_box2']])
        lb = dict(image=b['img_x'], label=b['mask_x'])
        ub = dict(image=b['img_u_w'], valid=b['ignore_mask'] != 255, index=torch.arange(len(b['img_u_w'])))
        lrs = [g['lr'] for g in state.optimizer.param_groups]
        with _patched(kit_v2, strong_view=lambda *a, **k: next(views), v2_boxes=lambda *a, **k: next(boxes).bool()):
            state.optimizer.zero_grad(set_to_none=True)
            torch.manual_seed(100 + i)
            loss, logs, _ = kit_v2.unimatch_v2_step(state, lb, ub, torch.Generator().manual_seed(i))
        loss.backward(); state.optimizer.step(); state.scheduler.step()
        ema_update(state.teacher, state.student, start + i, state.cfg.method.ema_decay, state.cfg.method.ema_buffers)
        losses = [float(logs[k]) for k in ('loss_s', 'loss_s1', 'loss_s2')] + [float(loss.detach())]
        out.append(_figures(state.student, state.teacher, lrs, losses))
    return out

@contextlib.contextmanager
def _patched(module, **names):
    old = {k: getattr(module, k) for k in names}
    for k, v in names.items(): setattr(module, k, v)
    try: yield
    finally:
        for k, v in old.items(): setattr(module, k, v)

def compare(kit: list[dict], v2: list[dict], tol: float = TOL) -> list[str]:
    "Where `kit`'s figures differ from `v2`'s by more than `tol` (relative to max(1, |value|)): 'step i key: a vs b'."
    bad = []
    def walk(a, b, where):
        if isinstance(a, list): return [walk(x, y, f'{where}[{j}]') for j, (x, y) in enumerate(zip(a, b))]
        if abs(a - b) > tol * max(1.0, abs(b)): bad.append(f'{where}: {a} vs {b}')
    for i, (k, v) in enumerate(zip(kit, v2)):
        for key in v: walk(k[key], v[key], f'step {i} {key}')
    return bad

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--v2-repo', required=True, help='a checkout of LiheYoung/UniMatch-V2 (outside this repository)')
    ap.add_argument('--out', default=str(GOLDEN))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    git = lambda *c: subprocess.run(['git', '-C', a.v2_repo, *c], capture_output=True, text=True).stdout.strip()
    commit = git('rev-parse', 'HEAD') or V2_COMMIT     # an archive extract has no .git: the commit it was taken at
    cases = {name: dict(inputs=c, steps=v2_steps(a.v2_repo, **c)) for name, c in CASES.items()}
    golden_json.write(dict(v2_commit=commit, made_on=time.strftime('%Y-%m-%d'), setting=SETTING, tolerance=TOL,
                           cases=cases), a.out)
    for name, c in cases.items():
        diff = compare(kit_steps(**c['inputs']), c['steps'])
        print(f"{name}: {len(c['steps'])} steps of V2's code; the kit "
              f"{'agrees' if not diff else 'differs: ' + '; '.join(diff[:5])}")
    return 0

if __name__ == '__main__': sys.exit(main())
