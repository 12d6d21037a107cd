"""How much of each class a map at output stride s can hold at all: `bench/results/oracle_stride.json` (the pole of the synthetic scenes).

    python bench/experiments/oracle_stride.py [--preset cpu]

Each validation mask of the preset is made one-hot, average-pooled by s (what a perfect network's logits at stride s
could say), upsampled bilinearly to full size and arg-maxed, as the kit's evaluation does with logits; the IoU of that
against the mask is the ceiling of each class at stride s. DeepLabv3+ predicts at stride 4 (its decoder) from features
at the output stride (16 in the `cpu` preset: a 4x6 map of a 64x96 scene). Beside it, the confidence bank of the tail
classes at the end of each stored default run (`bench/results/default-run-cpu-*/metrics.jsonl`) and their IoU.
No training; about a second on any CPU."""
from __future__ import annotations
import argparse, json
from pathlib import Path
import torch, torch.nn.functional as F
from ael_nb.config import get_preset
from ael_nb.core import atomic_write_text
from ael_nb.plan import build_data

RESULTS = Path(__file__).resolve().parent / 'results'
STRIDES = (1, 2, 4, 8, 16)

def ceiling_iou(labels: torch.Tensor, C: int, stride: int, ignore: int = 255) -> list[float]:
    "Per-class IoU (%) of the best prediction a map at `stride` can make of `labels` (N, H, W)."
    valid = labels != ignore
    one_hot = F.one_hot(labels.clamp(max=C - 1), C).permute(0, 3, 1, 2).float() * valid[:, None]
    low = F.avg_pool2d(one_hot, stride) if stride > 1 else one_hot
    pred = F.interpolate(low, size=labels.shape[1:], mode='bilinear', align_corners=False).argmax(1)
    return [round(100 * ((pred == k) & (labels == k) & valid).sum().item() /
                  max((((pred == k) | (labels == k)) & valid).sum().item(), 1), 1) for k in range(C)]

def stored_runs(names: list[str]) -> dict:
    "Per stored default run: the bank's last value and the teacher's last IoU of each class (%)."
    out = {}
    for d in sorted(RESULTS.glob('default-run-cpu-*')):
        rows = [json.loads(l) for l in (d / 'metrics.jsonl').read_text().splitlines() if l.strip()]
        conf = [r['conf'] for r in rows if 'conf' in r][-1]
        last = [r['eval'] for r in rows if 'eval' in r][-1]
        model = 'teacher' if 'teacher' in last else next(iter(last))
        out[d.name] = dict(bank=dict(zip(names, [round(c, 3) for c in conf])),
                           iou={k: round(100 * v, 1) for k, v in last[model]['per_class'].items()})
    return out

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0]); p.add_argument('--preset', default='cpu')
    args = p.parse_args(argv)
    cfg = get_preset(args.preset); data = build_data(cfg); info = data.info
    labels = torch.stack([data.val[i]['label'] for i in range(len(data.val))]).long()
    names = list(info.class_names)
    px = torch.stack([(labels == k).sum() for k in range(info.num_classes)]).float()
    res = dict(preset=args.preset, val_images=len(labels), size=list(labels.shape[1:]),
               tail=[names[k] for k in info.tail_classes],
               pixel_share={n: round(v, 2) for n, v in zip(names, (100 * px / px.sum()).tolist())},
               ceiling={s: dict(zip(names, ceiling_iou(labels, info.num_classes, s))) for s in STRIDES},
               runs=stored_runs(names) if args.preset == 'cpu' else {})
    out = RESULTS / f'oracle_stride-{args.preset}.json'
    atomic_write_text(out, json.dumps(res, indent=1) + '\n')
    for s in STRIDES: print(f"stride {s:2d}: " + '  '.join(f"{n} {v:5.1f}" for n, v in res['ceiling'][s].items()))
    print(f"written {out}")

if __name__ == '__main__': main()
