"""Golden figures of evaluation: run each codebase's own evaluation function (SemiSeg-AEL's `eval.py`, UniMatch V2's and
UniMatch V1's `supervised.evaluate`, U2PL's `eval.py`) on seeded images with a seeded tiny network, and write the
confusion matrix of its predictions to `tests/golden/eval_<protocol>.json`; `tests/test_eval_golden.py` recomputes
each case with the kit's `predict` under that protocol, without the codebases, and asserts the same matrix.

    python tools/eval_golden.py --ael-repo PATH --v2-repo PATH --v1-repo PATH --u2pl-repo PATH [--commits FILE]
                                [--out tests/golden]

Each repository is a checkout; its commit (from git, or from `--commits` for an exported tree) is written into the
figures. The evaluation functions
are taken from their files by name (`ast`) and run in a namespace that supplies what they import: their own
`AverageMeter` and `intersectionAndUnion`; `Tensor.cuda` as the identity and `dist.all_reduce` as a no-op (one
process on the CPU); for AEL and U2PL, which read images with PIL and write PNGs, an `Image` that hands out the seeded
arrays (already normalised: they are given mean 0 and std 1) and a `colorize` that keeps each predicted map. The
confusion matrix is counted from the predicted maps they produce, the same way `ConfusionMatrix` counts (label row,
prediction column, ignore 255 left out); where the function returns per-class IoU itself (UniMatch), that is stored
too. Images are Cityscapes' (1024x2048) and VOC's (375x500, 500x333) shapes scaled down by 8 and 4, with one image
smaller than the window, sides that are not a multiple of the stride, and several scales where the code offers them."""
from __future__ import annotations
import argparse, ast, datetime, json, subprocess, sys, time
from pathlib import Path
from types import SimpleNamespace
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path: sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from golden_json import write, cpu_cuda   # the golden files' form and what the tools share

GOLDEN_DIR = ROOT/'tests'/'golden'
IGNORE = 255

# ---------------------------------------------------------------- shared inputs (both sides)
class TinySeg(nn.Module):
    "A seeded segmenter with local and image-wide context, so that windows, pads and scales all change its output."
    def __init__(self, num_classes: int, seed: int):
        super().__init__()
        torch.manual_seed(seed)
        self.local = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, num_classes, 3, padding=1))
        self.coarse = nn.Conv2d(3, num_classes, 3, padding=1)
        self.image = nn.Linear(3, num_classes)
    def forward(self, x):
        h, w = x.shape[-2:]
        coarse = self.coarse(F.adaptive_avg_pool2d(x, (-(-h // 4), -(-w // 4))))
        out = self.local(x) + F.interpolate(coarse, (h, w), mode='bilinear', align_corners=False)
        return dict(out=out + 2 * self.image(x.mean((2, 3)))[..., None, None])

def images(seed: int, shapes) -> list[tuple[torch.Tensor, torch.Tensor]]:
    "Normalised images [3,H,W] (smooth blobs plus noise) and labels [H,W] (some pixels 255) of the given shapes."
    g, out = torch.Generator().manual_seed(seed), []
    for (h, w), C in shapes:
        base = F.interpolate(torch.randn(1, 3, max(2, h // 8), max(2, w // 8), generator=g), (h, w), mode='bilinear')
        img = (base + 0.3 * torch.randn(1, 3, h, w, generator=g))[0].float()
        lab = torch.randint(0, C, (max(2, h // 16), max(2, w // 16)), generator=g).float()
        lab = F.interpolate(lab[None, None], (h, w), mode='nearest')[0, 0].long()
        lab[torch.rand(h, w, generator=g) < 0.05] = IGNORE
        out.append((img, lab))
    return out

# Cityscapes at 1/8 (128x256, window 97 for 769-801) and VOC at 1/4 (94x125, 125x83); 80x150 is smaller than the
# window (and 60x256, also at AEL's base size 256), and none of the sides is a multiple of the strides (65 = ceil(97 x 2/3), 64 = int(97 x 2/3))
CITY = [[(128, 256), 19], [(80, 150), 19], [(60, 256), 19]]
VOC = [[(94, 125), 21], [(125, 83), 21]]
WINDOW = (97, 97)
# name: (protocol, the codebase's function, what the kit is given: mode, window, stride, scales, base_size, multiple, image shapes)
CASES = {
    'ael_city_multiscale': ('ael', 'validate_city', dict(mode='sliding', window=WINDOW, stride=(65, 65),
                            scales=(0.75, 1.0, 1.25), base_size=240, multiple=None, shapes=CITY)),
    'ael_city': ('ael', 'validate_city', dict(mode='sliding', window=WINDOW, stride=(65, 65), scales=(1.0,),
                 base_size=256, multiple=None, shapes=CITY)),
    'ael_voc_multiscale': ('ael', 'valiadte_whole', dict(mode='whole', window=WINDOW, stride=(65, 65),
                           scales=(0.5, 1.0, 1.75), base_size=None, multiple=None, shapes=VOC)),
    'unimatch_v2_sliding': ('unimatch_v2', 'evaluate', dict(mode='sliding', window=WINDOW, stride=(64, 64), scales=(1.0,),
                            base_size=None, multiple=None, shapes=CITY)),
    'unimatch_v2_original': ('unimatch_v2', 'evaluate', dict(mode='whole', window=WINDOW, stride=(64, 64), scales=(1.0,),
                             base_size=None, multiple=14, shapes=VOC)),
    'unimatch_sliding': ('unimatch', 'evaluate', dict(mode='sliding', window=WINDOW, stride=(64, 64), scales=(1.0,),
                         base_size=None, multiple=None, shapes=CITY)),
    'unimatch_original': ('unimatch', 'evaluate', dict(mode='whole', window=WINDOW, stride=(64, 64), scales=(1.0,),
                          base_size=None, multiple=None, shapes=VOC)),
    'u2pl_city_multiscale': ('u2pl', 'validate_city', dict(mode='sliding', window=WINDOW, stride=(65, 65),
                             scales=(0.75, 1.0), base_size=256, multiple=None, shapes=CITY)),
    'u2pl_voc': ('u2pl', 'valiadte_whole', dict(mode='whole', window=WINDOW, stride=(65, 65), scales=(1.0, 1.5),
                 base_size=None, multiple=None, shapes=VOC)),
}
MODEL_SEED, IMAGE_SEED = 0, 1
REPOS = dict(ael='SemiSeg-AEL', unimatch_v2='UniMatch-V2', unimatch='UniMatch', u2pl='U2PL')
FLAGS = dict(ael='--ael-repo', unimatch_v2='--v2-repo', unimatch='--v1-repo', u2pl='--u2pl-repo')

def num_classes(inputs) -> int: return inputs['shapes'][0][1]

def confusion(preds, labels, C: int) -> torch.Tensor:
    "[C,C] counts, label row and prediction column, ignored labels left out (as `ConfusionMatrix`)."
    mat = torch.zeros(C, C, dtype=torch.long)
    for p, t in zip(preds, labels):
        p, t = torch.as_tensor(np.asarray(p)).long().flatten(), torch.as_tensor(np.asarray(t)).long().flatten()
        keep = t != IGNORE
        mat += torch.bincount(t[keep] * C + p[keep], minlength=C * C).view(C, C)
    return mat

# ---------------------------------------------------------------- the kit's side
def kit(inputs, protocol, **change) -> torch.Tensor:
    "The kit's confusion matrix of the case; `change` replaces the named fields of the protocol (`Protocol`)."
    from dataclasses import replace
    from ael_nb.evaluate import PROTOCOL, predict
    C = num_classes(inputs)
    net = TinySeg(C, MODEL_SEED).eval()
    P = replace(PROTOCOL[protocol], **change)
    preds, labels = [], []
    with torch.no_grad():
        for img, lab in images(IMAGE_SEED, inputs['shapes']):
            s = predict(net, img[None], inputs['mode'], tuple(inputs['window']), tuple(inputs['stride']), protocol=P,
                        scales=tuple(inputs['scales']), base_size=inputs['base_size'], multiple=inputs['multiple'])
            preds.append(s.argmax(1)[0]); labels.append(lab)
    return confusion(preds, labels, C)

# ---------------------------------------------------------------- the codebases' side
def load_functions(path: Path, names, ns: dict) -> dict:
    "Run the top-level definitions `names` of the Python file `path` in `ns` (nothing else of the file runs)."
    tree = ast.parse(path.read_text())
    nodes = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name in names]
    missing = set(names) - {n.name for n in nodes}
    if missing: raise SystemExit(f"{path}: no {', '.join(sorted(missing))}")
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), 'exec'), ns)
    return ns


class Called(nn.Module):
    "`net` as a codebase calls its model: its logits through `out` (a tensor, or U2PL's `dict(pred=...)`)."
    def __init__(self, net, out=lambda logits: logits): super().__init__(); self.net, self.out = net, out
    def forward(self, x): return self.out(self.net(x)['out'])

class _Saved:
    def save(self, *a, **k): pass

def _files(pairs):
    "A PIL `Image` stand-in handing out the seeded arrays by file name (`img<i>`, `lab<i>`)."
    arrays = {}
    for i, (img, lab) in enumerate(pairs):
        arrays[f'img{i}'] = img.permute(1, 2, 0).numpy()               # H x W x 3, float32, normalised
        arrays[f'lab{i}'] = lab.numpy().astype(np.uint8)
    class Opened:
        def __init__(self, a): self.a = a
        def convert(self, mode): return self.a
    return SimpleNamespace(open=lambda p: Opened(arrays[p]), fromarray=lambda a: _Saved())

def _ael_like(repo: Path, function: str, inputs: dict, utils: Path, model_out) -> dict:
    "AEL's or U2PL's `eval.py`: `validate_city` or `valiadte_whole` on the seeded images, through their file list."
    C = num_classes(inputs)
    pairs = images(IMAGE_SEED, inputs['shapes'])
    net = TinySeg(C, MODEL_SEED).eval()
    grays = []
    util = load_functions(utils, ['AverageMeter', 'intersectionAndUnion'], dict(np=np))
    ns = dict(np=np, torch=torch, F=F, time=time, os=__import__('os'), Image=_files(pairs), AverageMeter=util['AverageMeter'],
              intersectionAndUnion=util['intersectionAndUnion'], check_makedirs=lambda p: None,
              colorize=lambda gray, *a: (grays.append(np.array(gray)), _Saved())[1],
              logger=SimpleNamespace(info=lambda *a, **k: None), args=SimpleNamespace(use_auxloss=False), colormap=None)
    load_functions(repo/'eval.py', ['net_process', 'scale_crop_process', 'scale_whole_process', function], ns)
    data_list = [(f'img{i}', f'lab{i}') for i in range(len(pairs))]
    model = Called(net, model_out)
    zero, one = [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]
    with cpu_cuda(), torch.no_grad():
        if function == 'validate_city':
            ns[function](model, C, data_list, zero, one, inputs['base_size'], *inputs['window'], list(inputs['scales']),
                         'gray', 'color')
        else: ns[function](model, C, data_list, zero, one, list(inputs['scales']), 'gray', 'color')
    return dict(confusion=confusion(grays, [lab for _, lab in pairs], C).tolist())

def codebase_ael(repo, inputs, function):
    return _ael_like(repo, function, inputs, repo/'semseg'/'utils'/'utils.py', lambda out: out)

def codebase_u2pl(repo, inputs, function):
    return _ael_like(repo, function, inputs, repo/'u2pl'/'utils'/'utils.py', lambda out: dict(pred=out))

def _unimatch(repo: Path, inputs: dict, v2: bool) -> dict:
    "UniMatch's `supervised.evaluate` over a loader of the seeded images (V2 with its `multiplier`)."
    C = num_classes(inputs)
    pairs = images(IMAGE_SEED, inputs['shapes'])
    net = TinySeg(C, MODEL_SEED).eval()
    util = load_functions(repo/'util'/'utils.py', ['AverageMeter', 'intersectionAndUnion'], dict(np=np))
    seen = []
    def counted(output, target, K, ignore_index=255):
        seen.append((output.copy(), target.copy()))
        return util['intersectionAndUnion'](output, target, K, ignore_index)
    ns = dict(np=np, torch=torch, F=F, AverageMeter=util['AverageMeter'], intersectionAndUnion=counted,
              dist=SimpleNamespace(all_reduce=lambda t: None))
    load_functions(repo/'supervised.py', ['evaluate'], ns)
    mode = dict(sliding='sliding_window', whole='original')[inputs['mode']]
    loader = [(img[None], lab[None], f'img{i}') for i, (img, lab) in enumerate(pairs)]
    cfg = dict(crop_size=inputs['window'][0], nclass=C)
    model = Called(net)
    with cpu_cuda():
        miou, iou = (ns['evaluate'](model, loader, mode, cfg, multiplier=inputs['multiple']) if v2
                     else ns['evaluate'](model, loader, mode, cfg))
    return dict(confusion=confusion([p for p, _ in seen], [t for _, t in seen], C).tolist(),
                iou=[float(v) for v in iou], miou=float(miou))

def codebase_unimatch_v2(repo, inputs, function): return _unimatch(repo, inputs, v2=True)
def codebase_unimatch(repo, inputs, function): return _unimatch(repo, inputs, v2=False)

CODEBASE = dict(ael=codebase_ael, u2pl=codebase_u2pl, unimatch_v2=codebase_unimatch_v2, unimatch=codebase_unimatch)

def commit_of(repo: Path, commits: Path|None) -> str:
    "The checkout's commit: `git rev-parse HEAD`, else its line `NAME HASH` in `commits` (an exported tree has no git)."
    r = subprocess.run(['git', '-C', str(repo), 'rev-parse', 'HEAD'], capture_output=True, text=True)
    if r.returncode == 0: return r.stdout.strip()
    for line in (commits.read_text().splitlines() if commits else ()):
        name, _, sha = line.partition(' ')
        if name == repo.name and len(sha.strip()) == 40: return sha.strip()
    raise SystemExit(f"{repo}: not a git checkout; give --commits FILE with a line '{repo.name} HASH'")

def plain(inputs: dict) -> dict:
    "The inputs as the JSON file keeps them (tuples as lists)."
    return json.loads(json.dumps(inputs))

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    for protocol, flag in FLAGS.items(): p.add_argument(flag, dest=protocol, type=Path, help=f'checkout of {REPOS[protocol]}')
    p.add_argument('--commits', type=Path, help="lines 'NAME HASH' naming the commit of a checkout without git")
    p.add_argument('--out', type=Path, default=GOLDEN_DIR)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    for protocol, name in REPOS.items():
        repo = getattr(args, protocol)
        if repo is None: continue
        t0, cases = time.time(), {}
        for case, (proto, function, inputs) in CASES.items():
            if proto != protocol: continue
            theirs = CODEBASE[protocol](repo, inputs, function)
            ours = kit(inputs, protocol)
            if ours.tolist() != theirs['confusion']:
                print(f"{case}: the kit differs from {name} in {int((ours != torch.tensor(theirs['confusion'])).sum())} cells")
            cases[case] = dict(function=function, inputs=plain(inputs), codebase=theirs)
        fig = dict(codebase=name, commit=commit_of(repo, args.commits), made_on=datetime.date.today().isoformat(),
                   model=f'TinySeg(num_classes, seed={MODEL_SEED})', images_seed=IMAGE_SEED, cases=cases)
        out = write(fig, args.out/f'eval_{protocol}.json')
        print(f"{out}: {len(cases)} cases from {name} {fig['commit'][:7]} in {time.time() - t0:.1f} s")

if __name__ == '__main__': main()
