"""Golden figures for released models: build UniMatch V2's and UniMatch V1's networks with their OWN model code from
their checkouts, fill them from one seeded generator (`fill`), save each checkpoint as that codebase's training loop
saves it (`save_like`), run that codebase's forward on a seeded image, and write what it returned, with the keys and
shapes of its state dict, to `tests/golden/released_<codebase>.json`. `tests/test_released.py` regenerates the same
checkpoint from those keys, shapes and the seed (no checkout needed, no binary stored), loads it with
`ael_nb.released.released_model` and holds the kit's logits to the stored ones.

    python tools/released_golden.py --v2-repo /path/to/UniMatch-V2 --v1-repo /path/to/UniMatch [--out-dir tests/golden]

Each repo is a git checkout (its commit is recorded), or a bare git directory (its `model/` folder is extracted to a
temporary folder). The codebases' modules are imported from there, never copied here. V2 builds DINOv2 ViT-S/14 with
its DPT head (its real `DPT('small')`); V1 builds its DeepLabv3+ on its deep-stem ResNet-50, with `pretrained=True`
reading no file (the weights come from `fill`). `Tensor.cuda` is the identity while V2's code runs."""
from __future__ import annotations
import argparse, importlib, io, subprocess, sys, tarfile, tempfile, time
from pathlib import Path
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_json import write, cpu_cuda   # the golden files' form and what the tools share

URLS = dict(unimatch_v2='https://github.com/LiheYoung/UniMatch-V2', unimatch='https://github.com/LiheYoung/UniMatch')
NUM_CLASSES = 5

CASES = [  # (codebase, name, what that codebase builds, inputs, relative tolerance)
    ('unimatch_v2', 'dinov2_s_voc', "DPT('small', nclass=5) on DINOv2 ViT-S/14, as configs/pascal.yaml builds it",
     dict(seed=0, size=[98, 140], output_stride=16), 1e-4),
    ('unimatch', 'resnet50_os16', "DeepLabV3Plus on resnet50, replace_stride_with_dilation [F, F, T], dilations "
     "[6, 12, 18] (configs/pascal.yaml's and configs/cityscapes.yaml's settings)", dict(seed=1, size=[65, 97], output_stride=16), 1e-4),
    ('unimatch', 'resnet50_os8', "DeepLabV3Plus on resnet50, replace_stride_with_dilation [F, T, T], dilations "
     "[12, 24, 36] (output stride 8, the setting of V1's first arXiv version)", dict(seed=2, size=[57, 83], output_stride=8), 1e-4),
]

def golden_path(codebase: str, out_dir=ROOT / 'tests' / 'golden') -> Path: return Path(out_dir) / f'released_{codebase}.json'

# ---------------------------------------------------------------- shared by the tool and the test
def fill(keys: list, seed: int) -> dict:
    """A seeded state dict for `keys` ([name, shape, dtype] in order): integer buffers 0; running variances 1 + 0.1|N|;
    1-D weights (norm scales) and layer scales 1 + 0.1 N; other 1-D tensors (biases, running means) 0.1 N; position
    embedding and tokens 0.5 N; every other weight N / sqrt(fan in)."""
    g, out = torch.Generator().manual_seed(seed), {}
    for k, shape, dtype in keys:
        if not dtype.startswith('torch.float'): out[k] = torch.zeros(shape, dtype=getattr(torch, dtype.split('.')[1])); continue
        r = torch.randn(shape, generator=g)
        leaf = k.rsplit('.', 1)[-1]
        if leaf == 'running_var': out[k] = 1 + 0.1 * r.abs()
        elif leaf == 'gamma' or (leaf == 'weight' and len(shape) == 1): out[k] = 1 + 0.1 * r
        elif len(shape) == 1: out[k] = 0.1 * r
        elif leaf in ('pos_embed', 'cls_token', 'mask_token'): out[k] = 0.5 * r
        else: out[k] = r / (torch.Size(shape[1:]).numel() ** 0.5)
    return out

def save_like(codebase: str, sd: dict, path) -> Path:
    "`sd` saved as the codebase's training loop saves `latest.pth` under DistributedDataParallel (`module.` keys)."
    ddp = {f'module.{k}': v for k, v in sd.items()}
    ck = dict(model=ddp, optimizer={'state': {}, 'param_groups': []}, epoch=0, previous_best=0.0)
    if codebase == 'unimatch_v2': ck.update(model_ema=ddp, previous_best_ema=0.0, best_epoch=0, best_epoch_ema=0)
    torch.save(ck, path)
    return Path(path)

def image(seed: int, h: int, w: int) -> torch.Tensor: return torch.randn(1, 3, h, w, generator=torch.Generator().manual_seed(seed + 100))

def summary(t: torch.Tensor, n: int = 48) -> dict:
    "Shape, mean |x|, each class's mean, and `n` values at seeded positions of the logits."
    t = t.detach().double()
    flat = t.flatten()
    idx = torch.randint(0, flat.numel(), (n,), generator=torch.Generator().manual_seed(0))
    return dict(shape=list(t.shape), abs_mean=flat.abs().mean().item(),
                class_means=[round(v, 7) for v in t.mean((0, 2, 3)).tolist()],
                values=[round(v, 7) for v in flat[idx].tolist()])

def differ(kit: dict, ref: dict, rtol: float) -> list[str]:
    "Where `kit`'s summary misses `ref`'s: numbers beyond `rtol` x the reference's mean |logit|; [] when they agree."
    if kit['shape'] != ref['shape']: return [f"shape {kit['shape']} vs {ref['shape']}"]
    tol, out = rtol * ref['abs_mean'], []
    for f in ('class_means', 'values'):
        out += [f'{f}[{i}]: {a!r} vs {b!r}' for i, (a, b) in enumerate(zip(kit[f], ref[f])) if abs(a - b) > tol]
    if abs(kit['abs_mean'] - ref['abs_mean']) > tol: out.append(f"abs_mean {kit['abs_mean']!r} vs {ref['abs_mean']!r}")
    return out

def kit_logits(codebase: str, keys: list, inputs: dict, folder) -> dict:
    "The kit's side: the checkpoint rebuilt from `keys` and the seed, saved as the codebase saves it, loaded, run."
    from ael_nb.released import released_model
    path = save_like(codebase, fill(keys, inputs['seed']), Path(folder) / f"{codebase}_{inputs['seed']}.pth")
    model, _ = released_model(path, codebase, inputs['output_stride'])
    with torch.no_grad(): return summary(model(image(inputs['seed'], *inputs['size']))['out'])

# ---------------------------------------------------------------- the codebases' side

def checkout(repo) -> tuple[Path, str]:
    "The folder to import `model` from, and the commit."
    repo = Path(repo)
    commit = subprocess.run(['git', '-C', str(repo), 'rev-parse', 'HEAD'], capture_output=True, text=True)
    if commit.returncode: raise SystemExit(f"{repo}: not a git checkout or git directory")
    src = repo
    if not (repo / 'model').is_dir():
        src = Path(tempfile.mkdtemp(prefix='released_'))
        tar = subprocess.run(['git', '-C', str(repo), 'archive', 'HEAD', 'model'], capture_output=True, check=True)
        tarfile.open(fileobj=io.BytesIO(tar.stdout)).extractall(src, filter='data')
    return src, commit.stdout.strip()

def import_from(src: Path, module: str):
    "`module` of the codebase at `src` (a fresh `model` package: V1 and V2 both name theirs so)."
    for name in [n for n in sys.modules if n == 'model' or n.startswith('model.')]: del sys.modules[name]
    sys.path.insert(0, str(src))
    try: return importlib.import_module(module)
    finally: sys.path.remove(str(src))

def build_v2(src: Path, inputs: dict) -> torch.nn.Module:
    "V2's own `DPT` as `unimatch_v2.py` builds it for DINOv2-small (configs/pascal.yaml), before the backbone file is read."
    dpt = import_from(src, 'model.semseg.dpt')
    return dpt.DPT(encoder_size='small', nclass=NUM_CLASSES, features=64, out_channels=[48, 96, 192, 384])

def build_v1(src: Path, inputs: dict) -> torch.nn.Module:
    "V1's own `DeepLabV3Plus(cfg)`; `pretrained=True` reads its ImageNet file, which `torch.load` yields empty here."
    mod = import_from(src, 'model.semseg.deeplabv3plus')
    os8 = inputs['output_stride'] == 8
    cfg = dict(backbone='resnet50', nclass=NUM_CLASSES, replace_stride_with_dilation=[False, os8, True],
               dilations=[12, 24, 36] if os8 else [6, 12, 18])
    saved, torch.load = torch.load, lambda *a, **k: {}
    try: return mod.DeepLabV3Plus(cfg)
    finally: torch.load = saved

BUILD = dict(unimatch_v2=build_v2, unimatch=build_v1)

def their_logits(codebase: str, src: Path, inputs: dict, folder) -> tuple[dict, list]:
    "The codebase's side: its network filled from `fill`, saved by `save_like`, loaded back as its training loop loads it."
    net = BUILD[codebase](src, inputs)
    keys = [[k, list(v.shape), str(v.dtype)] for k, v in net.state_dict().items()]
    path = save_like(codebase, fill(keys, inputs['seed']), Path(folder) / f"theirs_{codebase}_{inputs['seed']}.pth")
    ddp = torch.nn.parallel.DistributedDataParallel.__new__(torch.nn.parallel.DistributedDataParallel)
    torch.nn.Module.__init__(ddp); ddp.module = net               # `module.` keys, as their DDP model loads them
    ddp.load_state_dict(torch.load(path, map_location='cpu')['model'])
    with torch.no_grad(), cpu_cuda(): out = net.eval()(image(inputs['seed'], *inputs['size']))
    return summary(out), keys

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--v2-repo', required=True, help='a UniMatch-V2 git checkout or git directory (read, not copied)')
    p.add_argument('--v1-repo', required=True, help='a UniMatch (V1) git checkout or git directory (read, not copied)')
    p.add_argument('--out-dir', default=str(ROOT / 'tests' / 'golden'))
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    repos = dict(unimatch_v2=checkout(args.v2_repo), unimatch=checkout(args.v1_repo))
    files, bad = {}, 0
    with tempfile.TemporaryDirectory() as tmp:
        for codebase, name, what, inputs, rtol in CASES:
            src, commit = repos[codebase]
            ref, keys = their_logits(codebase, src, inputs, tmp)
            d = differ(kit_logits(codebase, keys, inputs, tmp), ref, rtol)
            bad += bool(d)
            print(f"{codebase:12s} {name:14s} {'same' if not d else 'DIFFERENT: ' + '; '.join(d[:3])}")
            f = files.setdefault(codebase, dict(repo=URLS[codebase], commit=commit,
                                                made_on=time.strftime('%Y-%m-%d', time.gmtime()), torch=torch.__version__,
                                                made_by='tools/released_golden.py', num_classes=NUM_CLASSES, cases={}))
            f['cases'][name] = dict(what=what, inputs=inputs, rtol=rtol, logits=ref, keys=keys)
    for codebase, fig in files.items(): print(f"wrote {write(fig, golden_path(codebase, args.out_dir))}")
    return 1 if bad else 0

if __name__ == '__main__': sys.exit(main())
