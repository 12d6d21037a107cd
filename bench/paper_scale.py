"""Paper-scale checks for a lent GPU: the paper-scale notebook's commands, run for real (`bench/paper_scale_gpu.sh`).

Three parts, each through the kit's own console scripts (`ael-launch`, `ael-train`, `torchrun`):
  launch   built-in synthetic scenes, `cpu` preset, 1 GPU through `ael-launch` (torchrun): it trains, img/s, peak memory;
  scale    a Cityscapes-sized input: the `cityscapes` preset (R101 OS8, 769x769 crops, 2 labeled + 2 unlabeled images
           per GPU) on synthetic street scenes (10 classes; the dataset has no 19-class variant), ~20 steps per
           variant (fp32, bf16, activation checkpointing): img/s and peak memory per GPU;
  sigterm  SIGTERM to a running `ael-train` (expect exit 75 and a fresh latest.pth) and to a running `torchrun`
           (what the SLURM script does), then `--resume`: does the run continue from the step it saved?
Results: OUT/paper_scale.json (everything), OUT/paper_scale.md (tables), OUT/paper_scale_<part>.log (the runs' output).

    python bench/paper_scale.py --out /tmp/ps                                  # on the GPU machine (defaults: paper sizes)
    python bench/paper_scale.py --out /tmp/ps --device cpu --size 64 --steps 2 --backbone resnet18 --os 16 --tiny   # plumbing test
"""
import argparse, json, os, shlex, signal, subprocess, sys, time
from pathlib import Path


def env_default(name, default): return os.environ.get(f'AEL_PS_{name}', default)


def read_jsonl(path) -> list[dict]:
    p = Path(path)
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.is_file() else []


def run_cmd(cmd, log, timeout, env=None) -> dict:
    "Run `cmd` (logged to `log`), at most `timeout` s; returns rc (None on timeout) and wall seconds."
    t = time.time()
    with open(log, 'a') as f:
        f.write(f"\n$ {shlex.join(map(str, cmd))}\n"); f.flush()
        try: rc = subprocess.run(list(map(str, cmd)), stdout=f, stderr=subprocess.STDOUT, timeout=timeout, env=env).returncode
        except subprocess.TimeoutExpired: rc = None
    return dict(cmd=shlex.join(map(str, cmd)), rc=rc, wall_s=round(time.time() - t, 1))


def run_stats(run_dir, warm: int = 1) -> dict:
    "img/s (mean of the log lines after the first `warm`), peak GB per rank, steps and final mIoU of a run directory."
    recs = read_jsonl(Path(run_dir) / 'metrics.jsonl')
    train = [r for r in recs if 'loss' in r]
    s = json.loads((Path(run_dir) / 'summary.json').read_text()) if (Path(run_dir) / 'summary.json').is_file() else {}
    ips = [r['img_per_s'] for r in train[warm:]] or [r['img_per_s'] for r in train]
    return dict(steps=s.get('it'), img_per_s=round(sum(ips) / len(ips), 2) if ips else None,
                peak_mem_gb=s.get('peak_mem_gb') or (train[-1].get('peak_mem_gb') if train else None),
                loss_last=train[-1]['loss'] if train else None,
                miou={k: round(100 * v['miou'], 1) for k, v in (s.get('last') or {}).items()})


def common(a) -> list[str]:
    return [f'run.device={a.device}', 'run.progress=false', 'run.tensorboard=false', 'run.plots=false', 'data.check=false']


from ael_nb.plan import TINY as _TINY      # the kit's tiny setting, less what a part sets itself (steps, evaluation, logging)
TINY = [o for o in _TINY if o.split('=')[0] not in ('optim.iters', 'eval.interval', 'run.log_interval', 'run.progress', 'run.tensorboard', 'run.plots', 'data.check')]


def part_launch(a, R, log) -> dict:
    "The built-in data on one GPU through ael-launch -> torchrun -> ael-train."
    ov = common(a) + [f'optim.iters={a.launch_steps}', 'eval.interval=0', 'run.log_interval=10'] + (TINY if a.tiny else [])
    r = run_cmd(['ael-launch', '--preset', 'cpu', '--gpus', '1', '--out-root', R / 'launch'] + ov, log, a.timeout)
    return dict(r, **run_stats(R / 'launch' / 'cpu' / 'drawn_seed0'))


VARIANTS = {'fp32': [], 'bf16': ['optim.amp=bf16'], 'fp32+ckpt': ['model.checkpointing=true'],
            'bf16+ckpt': ['optim.amp=bf16', 'model.checkpointing=true']}


def part_scale(a, R, log) -> dict:
    "The cityscapes preset at its crop on synthetic scenes, one GPU, 2 + 2 images: one run per variant."
    half = (a.size + 1) // 2        # scenes drawn at half size and scaled x2 (rendering a 769^2 scene costs ~0.5 s of CPU)
    ov = common(a) + ['data.dataset=synthetic', f'data.synthetic_size={half},{half}', 'data.scale=2,2', f'data.crop_size={a.size}',
                      'data.synthetic_n=64', 'data.batch_size=2', f'data.num_workers={a.workers}', 'model.pretrained=none',
                      'method.cp_exclude=0,1,2,3,4',   # the preset's Cityscapes ids (road ... sky) are synthetic's 0-4
                      f'model.backbone={a.backbone}', f'model.output_stride={a.os}', f'optim.iters={a.steps}', 'eval.interval=0',
                      'eval.max_images=1', 'eval.models=teacher', 'eval.num_workers=0', 'eval.protocol=whole', f'run.log_interval={max(1, a.steps // 4)}']
    out = {}
    for v in a.variants:
        root = R / f'scale_{v.replace("+", "_")}'
        r = run_cmd(['ael-launch', '--preset', 'cityscapes', '--gpus', '1', '--out-root', root] + ov + VARIANTS[v], log, a.timeout)
        out[v] = dict(r, **run_stats(root / 'cityscapes' / 'drawn_seed0'))
        print(f"scale {v}: {json.dumps(out[v])}", flush=True)
    return dict(setting=dict(crop=a.size, scenes=f'{half}x{half} scaled x2', backbone=a.backbone, output_stride=a.os,
                             images_per_gpu='2 labeled + 2 unlabeled (+2 ACM sources through the teacher)', steps=a.steps,
                             classes=10), variants=out)


def wait_for_step(run_dir, proc, step: int, timeout: float) -> int:
    "Wait until metrics.jsonl logs `step` (or the process ends / `timeout` passes); the last logged step."
    t, last = time.time(), 0
    while time.time() - t < timeout and proc.poll() is None:
        recs = [r['it'] for r in read_jsonl(Path(run_dir) / 'metrics.jsonl') if 'loss' in r]
        last = max(recs, default=0)
        if last >= step: break
        time.sleep(0.5)
    return last


def saved_step(run_dir):
    p = Path(run_dir) / 'latest.pth'
    if not p.is_file(): return None
    import torch
    return int(torch.load(p, map_location='cpu', weights_only=False)['it'])


def signal_run(cmd, run_dir, log, a) -> dict:
    "Start `cmd`, SIGTERM it after `a.sig_step` logged steps, report its exit status and the step latest.pth holds."
    with open(log, 'a') as f:
        f.write(f"\n$ {shlex.join(map(str, cmd))}   (SIGTERM after step {a.sig_step})\n"); f.flush()
        p = subprocess.Popen(list(map(str, cmd)), stdout=f, stderr=subprocess.STDOUT)
        logged = wait_for_step(run_dir, p, a.sig_step, a.timeout)
        if p.poll() is not None: return dict(cmd=shlex.join(map(str, cmd)), error=f'ended by itself with {p.returncode} before the signal')
        t = time.time(); p.send_signal(signal.SIGTERM)
        try: rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired: p.kill(); rc = 'no exit within 120 s of SIGTERM (killed)'
    return dict(cmd=shlex.join(map(str, cmd)), logged_before_signal=logged, rc=rc, exit_s=round(time.time() - t, 1),
                latest_it=saved_step(run_dir))


def part_sigterm(a, R, log) -> dict:
    "SIGTERM to ael-train (expect 75) and to torchrun (the SLURM path), then --resume of the first."
    from ael_nb.launch import torchrun_argv, train_argv
    from ael_nb.core import EXIT_REQUEUE
    ov = common(a) + ['optim.iters=100000', 'eval.interval=0', 'run.log_interval=5'] + (TINY if a.tiny else [])
    out = dict(expected_rc=EXIT_REQUEUE)
    d1 = R / 'sig_direct'
    out['ael_train'] = signal_run(['ael-train', '--preset', 'cpu', '--out', d1] + ov, d1, log, a)
    it = out['ael_train'].get('latest_it')
    if it is not None:
        r = run_cmd(['ael-train', '--preset', 'cpu', '--out', d1, '--resume'] + ov + [f'run.stop_at={it + 5}'], log, a.timeout)
        recs = read_jsonl(d1 / 'metrics.jsonl')
        out['resume'] = dict(r, from_it=it, summary_it=run_stats(d1)['steps'], expected_it=it + 5,
                             logged_steps_after=[x['it'] for x in recs if 'loss' in x and x['it'] > it])
    else: out['resume'] = dict(skipped='no latest.pth after the signal: nothing to resume from')
    d2 = R / 'sig_torchrun'
    out['torchrun'] = signal_run(torchrun_argv(train_argv('cpu', out=str(d2), overrides=ov), gpus=1), d2, log, a)
    return out


def markdown(res: dict) -> str:
    L = [f"# Paper-scale checks ({res['device']})", '', f"torch {res['torch']}; {res['started']}; total {res['total_s']} s", '']
    if 'launch' in res:
        x = res['launch']; L += ['## Built-in data, 1 GPU via ael-launch', '', f"`{x['cmd']}`", '',
                                 f"rc {x['rc']}, {x['wall_s']} s wall, {x['steps']} steps, {x['img_per_s']} img/s, peak {x['peak_mem_gb']} GB, mIoU {x['miou']}", '']
    if 'scale' in res:
        s = res['scale']['setting']
        L += ['## Cityscapes-sized input (synthetic scenes), 1 GPU', '',
              f"crop {s['crop']}, {s['backbone']} OS{s['output_stride']}, {s['images_per_gpu']}, {s['steps']} steps, {s['classes']} classes", '',
              '| variant | rc | img/s | peak GB (CUDA max_memory_allocated; CPU ru_maxrss) | wall s |', '|---|---|---|---|---|']
        for v, x in res['scale']['variants'].items():
            peak = max(x['peak_mem_gb']) if x.get('peak_mem_gb') else None
            L.append(f"| {v} | {x['rc']} | {x['img_per_s']} | {peak if peak is None else round(peak, 2)} | {x['wall_s']} |")
        L.append('')
    if 'sigterm' in res:
        x = res['sigterm']; L += ['## SIGTERM and resume', '', f"expected exit status {x['expected_rc']}", '']
        for k in ('ael_train', 'torchrun'):
            y = x.get(k, {}); L.append(f"- {k}: {json.dumps({kk: vv for kk, vv in y.items() if kk != 'cmd'})}")
        L.append(f"- resume: {json.dumps({kk: vv for kk, vv in x.get('resume', {}).items() if kk != 'cmd'})}")
    return '\n'.join(L) + '\n'


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', required=True, help='results folder')
    p.add_argument('--runs', default=None, help='run directories (default: a temporary folder)')
    p.add_argument('--device', default=env_default('DEVICE', 'cuda'))
    p.add_argument('--size', type=int, default=int(env_default('SIZE', 769)), help='crop of the scale part')
    p.add_argument('--steps', type=int, default=int(env_default('STEPS', 20)), help='steps per scale variant')
    p.add_argument('--launch-steps', type=int, default=int(env_default('LAUNCH_STEPS', 40)))
    p.add_argument('--sig-step', type=int, default=int(env_default('SIG_STEP', 10)), help='SIGTERM after this logged step')
    p.add_argument('--backbone', default=env_default('BACKBONE', 'resnet101'))
    p.add_argument('--os', type=int, default=int(env_default('OS', 8)))
    p.add_argument('--workers', type=int, default=int(env_default('WORKERS', 6)), help='DataLoader workers per loader')
    p.add_argument('--variants', nargs='+', default=env_default('VARIANTS', 'fp32 bf16 fp32+ckpt').split(), choices=list(VARIANTS))
    p.add_argument('--parts', nargs='+', default=env_default('PARTS', 'launch scale sigterm').split(), choices=['launch', 'scale', 'sigterm'])
    p.add_argument('--timeout', type=float, default=float(env_default('TIMEOUT', 150)), help='seconds per run')
    p.add_argument('--tiny', action='store_true', default=env_default('TINY', '0') == '1', help='tiny scenes and ResNet-18 (plumbing test)')
    a = p.parse_args(argv)
    import tempfile, torch
    out = Path(a.out); out.mkdir(parents=True, exist_ok=True)
    R = Path(a.runs or tempfile.mkdtemp(prefix='ael_ps_'))
    if a.device.startswith('cuda') and not torch.cuda.is_available(): sys.exit('paper_scale: --device cuda but torch sees no GPU')
    res = dict(device=torch.cuda.get_device_name() if a.device.startswith('cuda') else 'cpu', torch=torch.__version__,
               started=time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()), args=vars(a), runs=str(R))
    t0 = time.time()
    for part, fn in [('launch', part_launch), ('scale', part_scale), ('sigterm', part_sigterm)]:
        if part not in a.parts: continue
        try: res[part] = fn(a, R, out / f'paper_scale_{part}.log')
        except Exception as e: res[part] = dict(error=f'{type(e).__name__}: {e}')
        print(f"{part}: done at {time.time() - t0:.0f} s", flush=True)
        res['total_s'] = round(time.time() - t0, 1)
        (out / 'paper_scale.json').write_text(json.dumps(res, indent=1, default=str))   # after every part: a timeout keeps what finished
    try: (out / 'paper_scale.md').write_text(markdown(res))
    except Exception as e: (out / 'paper_scale.md').write_text(f"markdown failed ({e}); see paper_scale.json\n")
    print((out / 'paper_scale.md').read_text())
    return 0


if __name__ == '__main__': sys.exit(main())
