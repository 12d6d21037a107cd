"""Golden figures from UniMatch V2's code: run V2's DPT (DINOv2 + DPT head) and the kit's `ael_nb.dpt.DPT` with the same
weights on the same seeded inputs, and write what V2's code returned to `tests/golden/unimatch_v2.json`;
`tests/test_unimatch_v2_golden.py` holds the kit to those figures on every run, without V2's code.

    python tools/unimatch_v2_golden.py --v2-repo /path/to/UniMatch-V2 [--out tests/golden/unimatch_v2.json]

`--v2-repo` is a git checkout of LiheYoung/UniMatch-V2, or its bare git directory (then its `model/` folder is
extracted to a temporary folder): the figures name its commit. V2's modules are imported from there (never copied
here); `Tensor.cuda` is the identity while they run (V2 moves its dropout masks with `.cuda()`). Both sides are a
random-init tiny ViT (4 blocks of 32 dimensions, 2 heads, every block feeding the head) and a small DPT head, filled
from one seeded state dict (`weights`). Each case names its inputs (seeds), its tolerance and what it checks;
`KIT[function](**inputs)` recomputes the kit's side."""
from __future__ import annotations
import argparse, importlib, subprocess, sys, tarfile, io, tempfile, time
from functools import partial
from pathlib import Path
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_json import write, compare, cpu_cuda   # the golden files' form and what the tools share
from ael_nb.dpt import DPT, DINOV2, complementary_dropout_masks

GOLDEN = ROOT/'tests'/'golden'/'unimatch_v2.json'
V2_URL = 'https://github.com/LiheYoung/UniMatch-V2'
TINY = DINOV2['dinov2_tiny']
NUM_CLASSES = 5

# ---------------------------------------------------------------- shared inputs (both sides)
def weights(seed: int) -> dict:
    "A seeded state dict for the kit's tiny DPT: weights ~ N(0, 1/fan_in), norms and layer scales ~ 1 + N(0, 0.1)."
    g, out = torch.Generator().manual_seed(seed), {}
    for k, v in DPT(NUM_CLASSES, 'dinov2_tiny').state_dict().items():
        r = torch.randn(v.shape, generator=g)
        if k.endswith('gamma') or ('norm' in k and k.endswith('weight')): out[k] = 1 + 0.1 * r
        elif k.endswith('bias'): out[k] = 0.1 * r
        elif k in ('backbone.pos_embed', 'backbone.cls_token'): out[k] = 0.5 * r
        else: out[k] = r / (v[0].numel() ** 0.5)
    return out

def image(seed: int, b: int, h: int, w: int) -> torch.Tensor:
    return torch.randn(b, 3, h, w, generator=torch.Generator().manual_seed(seed))

def kit_model(seed: int) -> DPT:
    m = DPT(NUM_CLASSES, 'dinov2_tiny').eval()
    m.load_state_dict(weights(seed))
    return m

def summary(t: torch.Tensor, n: int = 16) -> dict:
    "Shape, mean, mean |x|, and `n` values at seeded positions of a float tensor."
    flat = t.detach().double().flatten()
    idx = torch.randint(0, flat.numel(), (n,), generator=torch.Generator().manual_seed(0))
    return dict(shape=list(t.shape), mean=flat.mean().item(), abs_mean=flat.abs().mean().item(),
                values=[round(v, 7) for v in flat[idx].tolist()])

# ---------------------------------------------------------------- the kit's side
def kit_forward(seed: int, size: list, batch: int = 2, comp_drop: bool = False, drop_seed: int = 0) -> dict:
    "The kit's logits on a seeded batch (with complementary dropout: masks from the global generator at `drop_seed`)."
    m, x = kit_model(seed), image(seed + 1, batch, *size)
    torch.manual_seed(drop_seed)
    with torch.no_grad(): return summary(m(x, comp_drop=comp_drop)['out'])

GRAD_KEYS = ('backbone.pos_embed', 'backbone.patch_embed.proj.weight', 'backbone.blocks.0.attn.qkv.weight',
             'backbone.blocks.3.ls2.gamma', 'head.resize_layers.0.weight', 'head.scratch.refinenet1.resConfUnit1.conv1.weight',
             'head.scratch.output_conv.2.weight')

def grads(named: dict) -> dict:
    "The gradients of `GRAD_KEYS`, each as log10 of its mean |g| and 8 seeded values over that mean (relative figures)."
    out = {}
    for k in GRAD_KEYS:
        g = named[k].grad.detach().double().flatten()
        mean, idx = g.abs().mean(), torch.randint(0, g.numel(), (8,), generator=torch.Generator().manual_seed(0))
        out[k] = dict(shape=list(named[k].grad.shape), log10_abs_mean=round(mean.log10().item(), 7),
                      values=[round(v, 7) for v in (g[idx] / mean).tolist()])
    return out

def kit_grad(seed: int, size: list, batch: int = 2, comp_drop: bool = False, drop_seed: int = 0) -> dict:
    "The kit's gradients of mean(logits^2) in training mode, at every parameter of `GRAD_KEYS`."
    m, x = kit_model(seed).train(), image(seed + 1, batch, *size)
    torch.manual_seed(drop_seed)
    m(x, comp_drop=comp_drop)['out'].square().mean().backward()
    return grads(dict(m.named_parameters()))

def kit_masks(bs: int, dim: int, seed: int) -> list:
    "The kit's complementary masks drawn from the global CPU generator seeded with `seed`."
    torch.manual_seed(seed)
    return complementary_dropout_masks(bs, dim).to(torch.int8).tolist()

KIT = dict(forward=kit_forward, grad=kit_grad, masks=kit_masks)

CASES = [  # (name, function, inputs, tolerance, what)
    ('forward_37x37', 'forward', dict(seed=0, size=[518, 518]), 1e-4,
     "logits at DINOv2's own 37x37 grid (518x518 input): position embeddings as stored"),
    ('forward_20x30', 'forward', dict(seed=1, size=[280, 420]), 1e-4,
     'logits at a 20x30 grid (280x420): position embeddings resized by (n + 0.1) / 37, bicubic, no anti-aliasing'),
    ('comp_drop_20x30', 'forward', dict(seed=2, size=[280, 420], batch=4, comp_drop=True, drop_seed=5), 1e-4,
     "logits of one forward of two 'views' of two images with complementary channel dropout (comp_drop=True)"),
    ('grad_20x30', 'grad', dict(seed=4, size=[280, 420], batch=4, comp_drop=True, drop_seed=6), 1e-4,
     'training mode, complementary dropout: gradients of mean(logits^2), position embeddings and ViT to the classifier'),
    ('masks', 'masks', dict(bs=8, dim=32, seed=3), 0,
     'the complementary dropout masks V2 multiplies the four feature maps by, same seed'),
]

# ---------------------------------------------------------------- V2's side

def load_v2(repo) -> tuple:
    "V2's `model.semseg.dpt` module, its commit and the folder it was imported from."
    repo = Path(repo)
    commit = subprocess.run(['git', '-C', str(repo), 'rev-parse', 'HEAD'], capture_output=True, text=True)
    if commit.returncode: raise SystemExit(f"{repo}: not a git checkout or git directory of UniMatch-V2")
    src = repo
    if not (repo/'model'/'semseg'/'dpt.py').is_file():        # a bare git directory: extract model/
        src = Path(tempfile.mkdtemp(prefix='unimatch_v2_'))
        tar = subprocess.run(['git', '-C', str(repo), 'archive', 'HEAD', 'model'], capture_output=True, check=True)
        tarfile.open(fileobj=io.BytesIO(tar.stdout)).extractall(src, filter='data')
    sys.path.insert(0, str(src))
    for name in [n for n in sys.modules if n == 'model' or n.startswith('model.')]: del sys.modules[name]
    return importlib.import_module('model.semseg.dpt'), commit.stdout.strip(), src

def v2_model(V2, seed: int):
    "V2's `DPT` with the tiny ViT (its own `DinoVisionTransformer` at DINOv2's settings) and the shared weights."
    vit = importlib.import_module('model.backbone.dinov2')
    layers = importlib.import_module('model.backbone.dinov2_layers')
    def tiny(model_name):
        return vit.DinoVisionTransformer(
            img_size=518, patch_size=14, embed_dim=TINY.dim, depth=TINY.depth, num_heads=TINY.heads, mlp_ratio=4,
            block_fn=partial(layers.NestedTensorBlock, attn_class=layers.MemEffAttention), init_values=1.0,
            ffn_layer='mlp', block_chunks=0, num_register_tokens=0, interpolate_antialias=False, interpolate_offset=0.1)
    saved, V2.DINOv2 = V2.DINOv2, tiny
    try: m = V2.DPT('small', nclass=NUM_CLASSES, features=TINY.features, out_channels=list(TINY.out_channels))
    finally: V2.DINOv2 = saved
    m.intermediate_layer_idx['small'] = list(TINY.layers)
    missing, unexpected = m.load_state_dict(weights(seed), strict=False)
    assert not unexpected and sorted(missing) == sorted(
        ['backbone.mask_token'] + [k for k in m.state_dict() if 'refinenet4.resConfUnit1' in k]), (missing, unexpected)
    return m.eval()

def v2_forward(V2, seed: int, size: list, batch: int = 2, comp_drop: bool = False, drop_seed: int = 0) -> dict:
    m, x = v2_model(V2, seed), image(seed + 1, batch, *size)
    torch.manual_seed(drop_seed)
    with torch.no_grad(), cpu_cuda(): return summary(m(x, comp_drop=comp_drop))

def v2_grad(V2, seed: int, size: list, batch: int = 2, comp_drop: bool = False, drop_seed: int = 0) -> dict:
    m, x = v2_model(V2, seed).train(), image(seed + 1, batch, *size)
    torch.manual_seed(drop_seed)
    with cpu_cuda(): m(x, comp_drop=comp_drop).square().mean().backward()
    return grads(dict(m.named_parameters()))

def v2_masks(V2, bs: int, dim: int, seed: int) -> list:
    "V2's masks, read off its forward: feature maps of ones come to the head as the masks themselves."
    m, seen = V2.DPT.__new__(V2.DPT), []
    torch.nn.Module.__init__(m)
    m.binomial, m.encoder_size, m.intermediate_layer_idx = torch.distributions.binomial.Binomial(probs=0.5), 's', {'s': 0}
    m.backbone = type('Ones', (), dict(get_intermediate_layers=lambda self, x, idx: [torch.ones(bs, 1, dim)] * 4))()
    m.head = lambda feats, h, w: seen.append([f[:, 0] for f in feats]) or torch.zeros(bs, 1, 1, 1)
    torch.manual_seed(seed)
    with cpu_cuda(): m.forward(torch.zeros(bs, 3, 14, 14), comp_drop=True)
    assert all(torch.equal(f, seen[0][0]) for f in seen[0]), 'one mask for all four maps'
    return seen[0][0].to(torch.int8).tolist()

V2_SIDE = dict(forward=v2_forward, grad=v2_grad, masks=v2_masks)

# ---------------------------------------------------------------- figures

def figures(V2, commit: str) -> tuple[dict, list]:
    "Run every case on both sides; V2's outputs are the golden figures."
    out = dict(v2_repo=V2_URL, v2_commit=commit, made_on=time.strftime('%Y-%m-%d', time.gmtime()),
               torch=torch.__version__, made_by='tools/unimatch_v2_golden.py', cases={})
    differ = []
    for name, fn, inputs, tol, what in CASES:
        ref, kit = V2_SIDE[fn](V2, **inputs), KIT[fn](**inputs)
        diff = compare(kit, ref, tol)
        out['cases'][name] = dict(what=what, function=fn, inputs=inputs, tolerance=tol, v2=ref)
        if diff: differ.append(name)
        print(f"{name:18s} {'same' if not diff else 'DIFFERENT: ' + '; '.join(diff[:3])}")
    return out, differ

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--v2-repo', required=True, help='a UniMatch-V2 git checkout or git directory (read, not copied)')
    p.add_argument('--out', default=str(GOLDEN), help=f'golden file to write (default {GOLDEN.relative_to(ROOT)})')
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    V2, commit, _ = load_v2(args.v2_repo)
    fig, differ = figures(V2, commit)
    out = write(fig, args.out)
    print(f"wrote {out} ({len(fig['cases']) - len(differ)} of {len(fig['cases'])} cases match the kit)")
    return 0 if not differ else 1

if __name__ == '__main__': sys.exit(main())
