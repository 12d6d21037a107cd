"""Calibrate `ael_nb.arithmetic.memory_estimate` against a GPU: peak memory of one student step of a preset's network.

One training step of the student alone (forward on labeled + unlabeled images per GPU, cross-entropy, backward,
SGD with momentum) plus an EMA teacher's weights, at the preset's crop, fp32 and bf16 autocast; prints
`torch.cuda.max_memory_allocated` next to the estimate. No data: random images and labels of the crop size.
Overrides such as `model.checkpointing=true` change the network as they change a run.

Without a GPU (`--device cpu`) the same step runs in a fresh process per probe size (`--probe`, default 97 and 161)
and the process's resident-set high-water mark (`ru_maxrss`) after the step, minus the one after building the
networks, is the step's peak (activations, gradients, momentum, the backward's temporaries: large tensors are
mmap'ed and given back, so the RSS follows the live tensors). Two probe sizes fit `peak = a + b x pixels`,
extrapolated to the crop; the weights of student and teacher are added. fp32 only.

    python bench/memory.py --preset cityscapes --gpus 8                       # R101 OS8 769x769, 2+2 images per GPU
    python bench/memory.py --preset cityscapes --gpus 8 model.checkpointing=true
    python bench/memory.py --preset cityscapes --gpus 8 --device cpu [model.checkpointing=true]   # CPU extrapolation
Output: one JSON line per precision (and `--json FILE` to keep them).
"""
import argparse, json, os, resource, subprocess, sys, warnings
import torch
from ael_nb.arithmetic import batch_arithmetic, memory_estimate
from ael_nb.launch import resolve, train_argv
from ael_nb.model import build_model


def step_peak(cfg, images: int, size, device: str, amp: str, num_classes: int) -> float:
    "GB at the peak of one student step (CUDA: max_memory_allocated; CPU: rise of ru_maxrss during the step, weights excluded)."
    model_cfg = cfg.model
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        shape = (num_classes, model_cfg.backbone, model_cfg.output_stride, model_cfg.deep_stem, model_cfg.aux, None)
        student = build_model(*shape, dropout=model_cfg.dropout, checkpointing=model_cfg.checkpointing).to(device)
        teacher = build_model(*shape, dropout=model_cfg.dropout).to(device).eval()
    opt = torch.optim.SGD(student.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(images, 3, *size, device=device)
    y = torch.randint(0, num_classes, (images, *size), device=device)
    if device.startswith('cuda'): torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(2):                       # the second step holds the momentum buffers
        with torch.autocast(device.split(':')[0], dtype=torch.bfloat16, enabled=amp == 'bf16'):
            with torch.no_grad(): teacher(x)
            out = student(x)
            loss = torch.nn.functional.cross_entropy(out['out'], y) + 0.4 * torch.nn.functional.cross_entropy(out['aux'], y) \
                if 'aux' in out else torch.nn.functional.cross_entropy(out['out'], y)
        opt.zero_grad(set_to_none=False); loss.backward(); opt.step()
    if not device.startswith('cuda'): return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024 ** 2   # KiB -> GB
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() / 1024 ** 3


def cpu_extrapolation(args, cfg, images, est) -> int:
    "The CPU method of the module docstring: two probe sizes in fresh processes, linear in pixels, plus the weights."
    peaks = {}
    for n in args.probe:
        cmd = [sys.executable, __file__, '--preset', args.preset, '--gpus', str(args.gpus), '--classes', str(args.classes), '--images', str(images),
               '--child', str(n)] + args.overrides
        r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'))
        if r.returncode: sys.exit(f"memory.py: probe {n} failed: {r.stderr[-1000:]}")
        peaks[n] = float(r.stdout.split()[-1])
    (n0, p0), (n1, p1) = peaks.items()
    slope = (p1 - p0) / (n1 * n1 - n0 * n0)
    h, w = cfg.data.crop_size
    step = p0 + slope * (h * w - n0 * n0)
    row = dict(preset=args.preset, device='cpu (extrapolated)', crop=[h, w], backbone=cfg.model.backbone, output_stride=cfg.model.output_stride,
               checkpointing=cfg.model.checkpointing, images_per_gpu=images, amp='none', probes_gb=peaks,
               peak_gb=est['weights_gb'] / 2 + step, estimate_gb=est['weights_gb'] + est['act_per_image_gb'] * images)
    print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, 'w') as f: json.dump([row], f, indent=1)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--preset', default='cityscapes'); p.add_argument('--gpus', type=int, default=8)
    p.add_argument('--device', default='cuda'); p.add_argument('--classes', type=int, default=19)
    p.add_argument('--size', type=int, help='square crop instead of the preset\'s')
    p.add_argument('--images', type=int, help='images per GPU instead of labeled + unlabeled of the preset')
    p.add_argument('--probe', type=int, nargs=2, default=(97, 161), help='CPU: the two probe sizes')
    p.add_argument('--child', type=int, help=argparse.SUPPRESS)       # CPU: one probe step in this process, print its GB
    p.add_argument('--json'); p.add_argument('overrides', nargs='*')
    args = p.parse_args(argv)
    cfg = resolve(train_argv(args.preset, overrides=args.overrides + ([f'data.crop_size={args.size}'] if args.size else [])))
    b = batch_arithmetic(cfg, args.gpus)
    images = args.images or b['labeled_per_gpu'] + b['unlabeled_per_gpu']
    if args.child:
        torch.set_num_threads(1); print(step_peak(cfg, images, (args.child, args.child), 'cpu', 'none', args.classes)); return 0
    est = memory_estimate(cfg, args.gpus, num_classes=args.classes)
    if not args.device.startswith('cuda'): return cpu_extrapolation(args, cfg, images, est)
    rows = []
    for amp in ('none', 'bf16'):
        peak = step_peak(cfg, images, cfg.data.crop_size, args.device, amp, args.classes)
        rows.append(dict(preset=args.preset, device=torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu',
                         crop=list(cfg.data.crop_size), backbone=cfg.model.backbone, output_stride=cfg.model.output_stride,
                         checkpointing=cfg.model.checkpointing, images_per_gpu=images, amp=amp, peak_gb=peak,
                         estimate_gb=est['weights_gb'] + est['act_per_image_gb'] * images))
        print(json.dumps(rows[-1]), flush=True)
        if args.device.startswith('cuda'): torch.cuda.empty_cache()
    if args.json:
        with open(args.json, 'w') as f: json.dump(rows, f, indent=1)
    return 0


if __name__ == '__main__': sys.exit(main())
