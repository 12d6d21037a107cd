"""Paper-scale checks on one GPU: the paper-scale notebook's commands, run for real (`bench/paper_scale_gpu.sh`).

Parts, in this order (each through the kit's own console scripts or bench/floor.py, each run under `--timeout`):
  default  the README's first run on this device: `ael-train` with no settings (the `cpu` preset): wall time, the step
           time it announces after 20 steps, its result (the README's Results table gives the times per CPU);
  floor    bench/floor.py: supervised / CutMix / AEL `Run.step()` vs its floor (the network's fwd+bwd + teacher fwd on
           the same images), at paper scale (below) and with the `cpu` preset (small scale; loaders 'auto', then
           without workers): step / floor, the data share of a GPU step, each section's share (ACP's included);
  scale    a Cityscapes-sized input: the `cityscapes` preset (R101 OS8, 769x769 crops, 2 labeled + 2 unlabeled images
           per GPU) on synthetic street scenes (10 classes; the dataset has no 19-class variant), ~20 steps per
           variant (fp32, bf16, activation checkpointing in both): img/s and peak memory per GPU;
  signals  SIGTERM, SIGUSR1 and SIGKILL to a running `ael-train` and to a running `torchrun`, all under
           `run.deterministic=true`: exit status (75 expected; a kill: none) and the step latest.pth holds once every
           rank has ended (torchrun can end before its ranks); then `--resume` to a common step, and one uninterrupted
           run to that step: the resumed weights must be bit-identical (digests);
  spread   two uninterrupted runs to that step without `run.deterministic`: their digests, and how far their weights
           and last losses lie apart;
  switches bench/floor.py --switches at paper scale: AEL's step under fp32 / channels_last / bf16 / cudnn.benchmark /
           torch.compile (first step = compile time), each beside its floor;
  detcost  bench/floor.py --switches at paper and small scale: AEL's step with and without `run.deterministic` (fp32,
           and bf16 + channels_last), same process, each beside its floor: what reproducibility costs;
  launch   built-in synthetic scenes, `cpu` preset, 1 GPU through `ael-launch` (torchrun): it trains, img/s, peak memory.
Results: OUT/paper_scale.json (everything), OUT/paper_scale.md (tables), OUT/paper_scale_<part>.log (the runs' output),
OUT/floor_*.{json,md} (bench/floor.py's own reports).

    python bench/paper_scale.py --out /tmp/ps                                  # on the GPU machine (defaults: paper sizes)
    python bench/paper_scale.py --out /tmp/ps --device cpu --size 64 --steps 2 --backbone resnet18 --os 16 --tiny   # plumbing test
"""
import argparse, json, os, shlex, shutil, signal, subprocess, sys, tempfile, time
from pathlib import Path


def env_default(name, default): return os.environ.get(f'AEL_PS_{name}', default)


def read_jsonl(path) -> list[dict]:
    p = Path(path)
    return [json.loads(l) for l in p.read_text().splitlines() if l.strip()] if p.is_file() else []


DEADLINE = float('inf')   # time.time() by which every run ends (`--budget`): a remote command's time limit


def run_cmd(cmd, log, timeout, env=None) -> dict:
    "Run `cmd` (logged to `log`), at most `timeout` s (and not past `DEADLINE`); returns rc (None on timeout) and wall seconds."
    t = time.time()
    timeout = max(1.0, min(timeout, DEADLINE - t))
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


def common(args) -> list[str]:
    return [f'run.device={args.device}', 'run.progress=false', 'run.tensorboard=false', 'run.plots=false', 'data.check=false']


from ael_nb.plan import TINY as _TINY      # the kit's tiny setting, less what a part sets itself (steps, evaluation, logging)
TINY = [o for o in _TINY if o.split('=')[0] not in ('optim.iters', 'eval.interval', 'run.log_interval', 'run.progress', 'run.tensorboard', 'run.plots', 'data.check')]


def part_launch(args, R, log) -> dict:
    "The built-in data on one GPU through ael-launch -> torchrun -> ael-train."
    ov = common(args) + [f'optim.iters={args.launch_steps}', 'eval.interval=0', 'run.log_interval=10'] + (TINY if args.tiny else [])
    r = run_cmd(['ael-launch', '--preset', 'cpu', '--gpus', '1', '--out-root', R / 'launch'] + ov, log, args.timeout)
    return dict(r, **run_stats(R / 'launch' / 'cpu' / 'drawn_seed0'))


def part_default(args, R, log) -> dict:
    "The README's first run, `ael-train` with no settings but its folder and device: wall time, the step time it announces, its result."
    d = R / 'default'
    r = run_cmd(['ael-train', '--out', d, f'run.device={args.device}', 'run.progress=false'] + (TINY + ['optim.iters=4'] if args.tiny else []),
                log, max(args.timeout, 300))
    sm = summary_of(d)
    said = [l.strip() for l in Path(log).read_text().splitlines() if 'a step here' in l]
    return dict(r, it=sm.get('it'), time_s=round(sm['time_s'], 1) if sm.get('time_s') is not None else None, amp=sm.get('amp'), announced=said[-1] if said else None,
                last={k: {m: round(100 * v[m], 1) for m in ('miou', 'head_miou', 'tail_miou')} for k, v in (sm.get('last') or {}).items()})


VARIANTS = {'fp32': [], 'bf16': ['optim.amp=bf16'], 'fp32+ckpt': ['model.checkpointing=true'],
            'bf16+ckpt': ['optim.amp=bf16', 'model.checkpointing=true']}


def paper_overrides(args) -> list[str]:
    "The cityscapes preset on synthetic scenes at its crop, 2 + 2 images per GPU, from scratch (the network and batch of the paper)."
    half = (args.size + 1) // 2        # scenes drawn at half size and scaled x2 (rendering a 769^2 scene costs ~0.5 s of CPU)
    return ['data.dataset=synthetic', f'data.synthetic_size={half},{half}', 'data.scale=2,2', f'data.crop_size={args.size}',
            'data.synthetic_n=64', 'data.batch_size=2', f'data.num_workers={args.workers}', 'model.pretrained=none',
            'method.cp_exclude=0,1,2,3,4',   # the preset's Cityscapes ids (road ... sky) are synthetic's 0-4
            f'model.backbone={args.backbone}', f'model.output_stride={args.os}']


def floor_run(args, out, log, tag, preset, ov, extra=()) -> dict:
    "bench/floor.py in a subprocess (its report lands in `out`); its JSON, or the reason there is none."
    cmd = [sys.executable, Path(__file__).resolve().parent / 'floor.py', '--device', args.device, '--preset', preset,
           '--reps', args.reps, '--tag', tag, '--out', out, *extra, '--set', *ov]
    r = run_cmd(cmd, log, args.floor_timeout)
    f = Path(out) / f'floor_{tag}.json'
    return dict(r, **(json.loads(f.read_text()) if r['rc'] == 0 and f.is_file() else dict(error='no report; see the log')))


def part_floor(args, R, log) -> dict:
    "Step vs floor at paper scale and with the `cpu` preset (loaders 'auto', then in the main process)."
    paper = [o for o in paper_overrides(args) if not o.startswith('data.num_workers')]
    small = ['--tiny'] if args.tiny else []
    return dict(paper=floor_run(args, args.out, log, f'{args.dev_tag}_paper', 'cityscapes', common(args) + paper),
                small=floor_run(args, args.out, log, f'{args.dev_tag}_small', 'cpu', common(args), small),
                small_no_workers=floor_run(args, args.out, log, f'{args.dev_tag}_small_w0', 'cpu',
                                           common(args) + ['data.num_workers=0', 'data.pin_memory=false'], small))


def part_switches(args, R, log) -> dict:
    "AEL's step at paper scale under each speed switch, beside its floor (compile last: its first step is the compile time)."
    paper = [o for o in paper_overrides(args) if not o.startswith('data.num_workers')]
    names = [n for n in args.switches if 'compile' not in n and 'deterministic' not in n]
    if not names: return dict(skipped='no switch set without compile in --switches')
    return floor_run(args, args.out, log, f'{args.dev_tag}_paper_switches', 'cityscapes', common(args) + paper, ['--switches', *names])


DET_SWITCHES = ['fp32', 'fp32 + deterministic', 'bf16 + channels_last', 'bf16 + channels_last + deterministic']


def has_deterministic() -> bool:
    from floor import has_deterministic as has
    return has()


def part_detcost(args, R, log) -> dict:
    "AEL's step with and without `run.deterministic` (fp32; bf16 + channels_last), same process, at paper and small scale."
    from floor import DETERMINISTIC_MISSING
    if not has_deterministic(): return dict(skipped=DETERMINISTIC_MISSING)
    paper = [o for o in paper_overrides(args) if not o.startswith('data.num_workers')]
    small = ['--tiny'] if args.tiny else []
    return dict(paper=floor_run(args, args.out, log, f'{args.dev_tag}_paper_det', 'cityscapes', common(args) + paper, ['--switches', *DET_SWITCHES]),
                small=floor_run(args, args.out, log, f'{args.dev_tag}_small_det', 'cpu', common(args), small + ['--switches', *DET_SWITCHES]))


def part_compile(args, R, log) -> dict:
    "torch.compile at paper scale: its first step (the compile time) and steady step beside the same switches without it."
    paper = [o for o in paper_overrides(args) if not o.startswith('data.num_workers')]
    names = [n.replace(' + compile', '') for n in args.switches if 'compile' in n]
    names = [m for n in names for m in (n, n + ' + compile')]
    if not names: return dict(skipped='no compile switch set in --switches')
    return floor_run(args, args.out, log, f'{args.dev_tag}_paper_compile', 'cityscapes', common(args) + paper, ['--switches', *names])


def part_scale(args, R, log) -> dict:
    "The cityscapes preset at its crop on synthetic scenes, one GPU, 2 + 2 images: one run per variant."
    ov = common(args) + paper_overrides(args) + [f'optim.iters={args.steps}', 'eval.interval=0', 'eval.max_images=1', 'eval.models=teacher',
                                           'eval.num_workers=0', 'eval.mode=whole', f'run.log_interval={max(1, args.steps // 4)}']
    half = (args.size + 1) // 2
    out = {}
    for v in args.variants:
        root = R / f'scale_{v.replace("+", "_")}'
        r = run_cmd(['ael-launch', '--preset', 'cityscapes', '--gpus', '1', '--out-root', root] + ov + VARIANTS[v], log, args.timeout)
        out[v] = dict(r, **run_stats(root / 'cityscapes' / 'drawn_seed0'))
        print(f"scale {v}: {json.dumps(out[v])}", flush=True)
    return dict(setting=dict(crop=args.size, scenes=f'{half}x{half} scaled x2', backbone=args.backbone, output_stride=args.os,
                             images_per_gpu='2 labeled + 2 unlabeled (+2 ACM sources through the teacher)', steps=args.steps,
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


def wait_for_ranks(pids, timeout: float = 120) -> float:
    "Wait until none of `pids` runs (the ranks of a launcher that may have ended first); seconds waited."
    from ael_nb.faults import running
    t = time.time()
    while any(running(q) for q in pids) and time.time() - t < timeout: time.sleep(0.2)
    return round(time.time() - t, 1)


def saved_step(run_dir):
    p = Path(run_dir) / 'latest.pth'
    if not p.is_file(): return None
    import torch
    return int(torch.load(p, map_location='cpu', weights_only=False)['it'])


def signal_run(cmd, run_dir, log, args, sig: str = 'SIGTERM') -> dict:
    "Start `cmd`, send `sig` after `a.sig_step` logged steps, report its exit status and the step latest.pth holds."
    from ael_nb.faults import descendants
    with open(log, 'a') as f:
        f.write(f"\n$ {shlex.join(map(str, cmd))}   ({sig} after step {args.sig_step})\n"); f.flush()
        p = subprocess.Popen(list(map(str, cmd)), stdout=f, stderr=subprocess.STDOUT)
        logged = wait_for_step(run_dir, p, args.sig_step, args.timeout)
        if p.poll() is not None: return dict(cmd=shlex.join(map(str, cmd)), error=f'ended by itself with {p.returncode} before the signal')
        ranks = descendants(p.pid)                  # torchrun's training processes (and their loader workers)
        t = time.time(); p.send_signal(getattr(signal, sig))
        try: rc = p.wait(timeout=120)
        except subprocess.TimeoutExpired: p.kill(); rc = f'no exit within 120 s of {sig} (killed)'
        exit_s = round(time.time() - t, 1)
        ranks_s = wait_for_ranks(ranks)          # latest.pth is read once every rank has ended
    return dict(cmd=shlex.join(map(str, cmd)), logged_before_signal=logged, rc=rc, exit_s=exit_s, ranks_after_exit_s=ranks_s,
                latest_it=saved_step(run_dir))


def summary_of(run_dir) -> dict:
    p = Path(run_dir) / 'summary.json'
    return json.loads(p.read_text()) if p.is_file() else {}


def signal_overrides(args, deterministic: bool) -> list[str]:
    "The `cpu` preset's runs of the signals and spread parts: a checkpoint every 5 steps (a kill resumes from one)."
    det = [f'run.deterministic={str(deterministic).lower()}'] if has_deterministic() else []
    return (common(args) + ['optim.iters=100000', 'eval.interval=0', 'run.log_interval=5',
                         'run.checkpoint_interval=5'] + det
            + (TINY if args.tiny else []))


def uninterrupted(args, d, ov, log) -> dict:
    "One `ael-train` run to `--resume-to`: its status, step and weights digests."
    r = run_cmd(['ael-train', '--preset', 'cpu', '--out', d] + ov + [f'run.stop_at={args.resume_to}'], log, args.timeout)
    sm = summary_of(d)
    return dict(r, weights=sm.get('weights'), teacher_weights=sm.get('teacher_weights'), it=sm.get('it'))


def part_signals(args, R, log) -> dict:
    "Stop signals and a kill to ael-train and to torchrun (expect 75), `--resume` of each to a common step, and a reference."
    from ael_nb.launch import torchrun_argv, train_argv
    from ael_nb.core import EXIT_REQUEUE
    from floor import DETERMINISTIC_MISSING
    ov = signal_overrides(args, True)
    upto = [f'run.stop_at={args.resume_to}']
    direct = lambda d, *x: ['ael-train', '--preset', 'cpu', '--out', d, *x] + ov
    via_torchrun = lambda d: torchrun_argv(train_argv('cpu', out=str(d), overrides=ov), gpus=1)
    out = dict(expected_rc=EXIT_REQUEUE, resume_to=args.resume_to, runs={}, deterministic=has_deterministic())
    if not has_deterministic(): out['note'] = f"{DETERMINISTIC_MISSING}; on CUDA the comparison says nothing without it"
    out['reference'] = uninterrupted(args, R / 'sig_reference', ov, log)
    for who, argv in (('ael-train', direct), ('torchrun', via_torchrun)):
        for sig in args.signals:
            d = R / f"sig_{who}_{sig}"
            x = signal_run(argv(d), d, log, args, sig)
            it = x.get('latest_it')
            if it is None: x['resume'] = dict(skipped='no latest.pth after the signal: nothing to resume from')
            elif it >= args.resume_to: x['resume'] = dict(skipped=f'saved step {it} is past --resume-to {args.resume_to}')
            else:
                cmd = direct(d, '--resume') + upto if who == 'ael-train' else torchrun_argv(
                    train_argv('cpu', out=str(d), resume=True, overrides=ov + upto), gpus=1)
                s = dict(run_cmd(cmd, log, args.timeout)); sm = summary_of(d)
                same = [sm.get(k) == out['reference'][k] for k in ('weights', 'teacher_weights')]
                s.update(from_it=it, it=sm.get('it'), identical=sm.get('weights') is not None and all(same))
                x['resume'] = s
            out['runs'][f'{who} {sig}'] = x
            print(f"signals {who} {sig}: {json.dumps({k: v for k, v in x.items() if k != 'cmd'}, default=str)}", flush=True)
    return out


def weights_apart(p, q) -> dict:
    "How far the student weights of two checkpoints lie apart: the largest difference and the relative L2 distance."
    import torch
    from ael_nb.state import read_checkpoint
    a, b = (read_checkpoint(Path(x) / 'latest.pth')['student'] for x in (p, q))
    keys = [k for k in a if a[k].is_floating_point()]
    d = torch.cat([(a[k].double() - b[k].double()).flatten() for k in keys])
    ref = torch.cat([a[k].double().flatten() for k in keys])
    return dict(max_abs=float(d.abs().max()), rel_l2=float(d.norm() / ref.norm()))


def part_spread(args, R, log) -> dict:
    "Two uninterrupted runs without `run.deterministic`: their digests, how far their weights and last losses lie apart."
    ov = signal_overrides(args, False)
    runs = {f'run {i}': dict(uninterrupted(args, R / f'spread_{i}', ov, log), **run_stats(R / f'spread_{i}')) for i in (1, 2)}
    x, y = runs.values()
    out = dict(runs=runs, identical=x['weights'] is not None and (x['weights'], x['teacher_weights']) == (y['weights'], y['teacher_weights']))
    try: out['student_apart'] = weights_apart(R / 'spread_1', R / 'spread_2')
    except Exception as e: out['student_apart'] = dict(error=f'{type(e).__name__}: {e}')
    if x.get('loss_last') is not None and y.get('loss_last') is not None: out['loss_last_apart'] = abs(x['loss_last'] - y['loss_last'])
    print(f"spread: {json.dumps(out, default=str)}", flush=True)
    return out


def markdown(res: dict) -> str:
    L = [f"# Paper-scale checks ({res['device']})", '', f"torch {res['torch']}; {res['started']}; total {res['total_s']} s", '']
    if 'default' in res:
        x = res['default']; L += ['## The default run (`ael-train`, no settings)', '', f"`{x['cmd']}`", '',
                                  f"rc {x['rc']}, {x['wall_s']} s wall (start, {x.get('it')} steps, evaluations, files), "
                                  f"{x.get('time_s')} s by its summary, {x.get('amp')}; it said: {x.get('announced')}; last: {x.get('last')}", '']
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
    for key, title in (('paper', 'paper scale'), ('small', "the `cpu` preset, loaders 'auto'"),
                       ('small_no_workers', '`cpu` preset, loading in the main process')):
        x = res.get('floor', {}).get(key)
        if x is None: continue
        L += [f'## Step vs floor: {title}', '']
        L += [floor_line(n, v) for n, v in x['variants'].items()] if 'variants' in x else [failed(x)]
        L.append('')
    sections = [('switches', 'Speed switches at paper scale (AEL)', res.get('switches')),
                ('compile', 'torch.compile at paper scale (AEL)', res.get('compile'))]
    det = res.get('detcost')
    if det is not None and 'paper' not in det: sections.append(('detcost', 'run.deterministic: its cost', det))
    elif det is not None:
        sections += [('detcost', f'run.deterministic: its cost at {w}', det[k]) for k, w in (('paper', 'paper scale'), ('small', 'small scale'))]
    for key, title, x in sections:
        if x is None: continue
        L += [f'## {title}', '']
        L += ([floor_line(n, v) + f", step / first variant's {x['vs_first'][n]:.2f}" for n, v in x['variants'].items()]
              if 'variants' in x else [failed(x)])
        L.append('')
    if 'signals' in res:
        x = res['signals']; ref = x.get('reference', {})
        L += ['## Signals and resume', '', f"run.deterministic: {x.get('deterministic', 'not in the measured code')}" + (f" ({x['note']})" if x.get('note') else '')
              + f"; expected exit status {x.get('expected_rc')}; every run resumed to step "
              f"{x.get('resume_to')}, compared with one uninterrupted run to that step (rc {ref.get('rc')}, step {ref.get('it')}, "
              f"weights {ref.get('weights')})", '',
              '| run | signal after step | exit status | s to exit | s more until its ranks ended | latest.pth step | resume rc | resumed to | weights identical |',
              '|---|---|---|---|---|---|---|---|---|']
        for k, y in x.get('runs', {}).items():
            r = y.get('resume', {})
            L.append(f"| {k} | {y.get('logged_before_signal', y.get('error'))} | {y.get('rc')} | {y.get('exit_s')} | "
                     f"{y.get('ranks_after_exit_s')} | {y.get('latest_it')} | "
                     f"{r.get('rc', r.get('skipped'))} | {r.get('it')} | {r.get('identical')} |")
        L.append('')
    if 'spread' in res:
        x = res['spread']; L += ['## Two uninterrupted runs without run.deterministic', '']
        if 'runs' not in x: L.append(failed(x))
        else:
            L += [f"- {k}: rc {y.get('rc')}, step {y.get('it')}, weights {y.get('weights')}, last loss {y.get('loss_last')}"
                  for k, y in x['runs'].items()]
            L.append(f"- identical: {x['identical']}; student weights apart: {x.get('student_apart')}; "
                     f"last losses apart: {x.get('loss_last_apart')}")
    return '\n'.join(L) + '\n'


def failed(x: dict) -> str: return f"failed: rc {x.get('rc')}, {x.get('error') or x.get('skipped')}"


def floor_line(name: str, v: dict) -> str:
    "One bench/floor.py variant in words: step, floor, their ratio, the data share, ACP's share, img/s, first step."
    acp = v.get('section_share', {}).get('ACP')
    return (f"- {name}: step {v['step']['median_s']:.3f} s, floor {v['floor']['median_s']:.3f} s, "
            f"floor / step {v['floor_over_step']:.2f}, "
            f"data {100 * v['data_share']:.1f}% of the step" + ('' if acp is None else f", ACP {100 * acp:.1f}%") +
            f", {v['images_per_step'] / v['step']['median_s']:.1f} img/s, first step {v['first_step_s']:.1f} s, loader {v['loader']}")


PARTS = dict(default=part_default, floor=part_floor, scale=part_scale, signals=part_signals, spread=part_spread, switches=part_switches,
             detcost=part_detcost, compile=part_compile, launch=part_launch)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from floor import SWITCHES                 # bench/floor.py, beside this script


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', required=True, help='results folder')
    p.add_argument('--runs', default=None, help='run directories (default: a temporary folder, removed at the end)')
    p.add_argument('--device', default=env_default('DEVICE', 'cuda'))
    p.add_argument('--size', type=int, default=int(env_default('SIZE', 769)), help='crop of the scale part')
    p.add_argument('--steps', type=int, default=int(env_default('STEPS', 20)), help='steps per scale variant')
    p.add_argument('--launch-steps', type=int, default=int(env_default('LAUNCH_STEPS', 40)))
    p.add_argument('--sig-step', type=int, default=int(env_default('SIG_STEP', 10)), help='signal after this logged step')
    p.add_argument('--resume-to', type=int, default=int(env_default('RESUME_TO', 60)), help='resume signalled runs to this step')
    p.add_argument('--signals', nargs='+', default=env_default('SIGNALS', 'SIGTERM SIGUSR1 SIGKILL').split(),
                   choices=['SIGTERM', 'SIGUSR1', 'SIGINT', 'SIGKILL'])
    p.add_argument('--reps', type=int, default=int(env_default('REPS', 5)), help='bench/floor.py rounds')
    p.add_argument('--switches', nargs='+', default=env_default('SWITCHES', '|'.join(SWITCHES)).split('|'), choices=list(SWITCHES),
                   help="bench/floor.py's switch sets (AEL_PS_SWITCHES: names joined by '|')")
    p.add_argument('--backbone', default=env_default('BACKBONE', 'resnet101'))
    p.add_argument('--os', type=int, default=int(env_default('OS', 8)))
    p.add_argument('--workers', default=env_default('WORKERS', 'auto'), help="DataLoader workers per loader of the scale part")
    p.add_argument('--variants', nargs='+', default=env_default('VARIANTS', 'fp32 bf16 fp32+ckpt bf16+ckpt').split(),
                   choices=list(VARIANTS))
    p.add_argument('--parts', nargs='+', default=env_default('PARTS', ' '.join(PARTS)).split(), choices=list(PARTS))
    p.add_argument('--timeout', type=float, default=float(env_default('TIMEOUT', 150)), help='seconds per training run')
    p.add_argument('--floor-timeout', type=float, default=float(env_default('FLOOR_TIMEOUT', 300)),
                   help='seconds per bench/floor.py run')
    p.add_argument('--budget', type=float, default=float(env_default('BUDGET', 540)),
                   help='seconds for everything: later parts are skipped, runs stopped (for a remote machine that allows 600 s a command)')
    p.add_argument('--tiny', action='store_true', default=env_default('TINY', '0') == '1', help='tiny scenes and ResNet-18 (plumbing test)')
    args = p.parse_args(argv)
    out = Path(args.out); out.mkdir(parents=True, exist_ok=True)
    args.dev_tag = 'cuda' if args.device.startswith('cuda') else 'cpu_dry'
    R = Path(args.runs or tempfile.mkdtemp(prefix='ael_ps_'))
    try: return run_parts(args, out, R)
    finally:
        if args.runs is None: shutil.rmtree(R, ignore_errors=True)   # checkpoints of every part: gigabytes a run


def run_parts(args, out: Path, R: Path) -> int:
    "Every part of `args.parts` in order, each run's folder under `R`, the reports in `out` after each part."
    import torch
    if args.device.startswith('cuda') and not torch.cuda.is_available(): sys.exit('paper_scale: --device cuda but torch sees no GPU')
    res = dict(device=torch.cuda.get_device_name() if args.device.startswith('cuda') else 'cpu', torch=torch.__version__,
               started=time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()), args=vars(args), runs=str(R))
    t0 = time.time()
    global DEADLINE
    DEADLINE = t0 + args.budget
    for part, fn in PARTS.items():
        if part not in args.parts: continue
        if time.time() > DEADLINE - 10: res[part] = dict(skipped=f'--budget {args.budget} s spent'); continue
        try: res[part] = fn(args, R, out / f'paper_scale_{part}.log')
        except Exception as e: res[part] = dict(error=f'{type(e).__name__}: {e}')
        print(f"{part}: done at {time.time() - t0:.0f} s", flush=True)
        res['total_s'] = round(time.time() - t0, 1)
        (out / 'paper_scale.json').write_text(json.dumps(res, indent=1, default=str))   # after every part: a timeout keeps what finished
    try: (out / 'paper_scale.md').write_text(markdown(res))
    except Exception as e: (out / 'paper_scale.md').write_text(f"markdown failed ({e}); see paper_scale.json\n")
    print((out / 'paper_scale.md').read_text())
    return 0


if __name__ == '__main__': sys.exit(main())
