"""What feeds a tail class in AEL's components, measured: the labeled sampler, ACP, ACM, the teacher, the bank.

    python bench/pedestrian.py --seeds 0 1 2 3 4 --tag sixteenth-avx2-zen4                 # the sampler alone (no training)
    python bench/pedestrian.py RUN_DIR [RUN_DIR ...] --tag sixteenth-avx2-zen4             # + finished runs

Writes `results/pedestrian-<tag>/pedestrian.{json,md}`. A class (`--cls`, default pedestrian) reaches AEL's
losses through four doors, each measured here:

- **the labeled batch** (and ACP, which copies from it): for each seed's shipped split, how many labeled scenes
  hold the class, and over every step of the run, the share of labeled batches holding it. The sampler is a
  pure function of the seed (`ael_nb.plan.plan_batch`), and the default run's weak views are whole flipped
  scenes, so this needs no training (checked: the run's scale is 1 and its crop the scene);
- **ACP** in a run's traces (every `run.trace_interval` steps, the first `run.trace_images` labeled images):
  the share of traced images with the class pasted;
- **ACM**: the share of its traced draws that ask for the class, and of those, how many found a region of it
  in the source's pseudo-labels (else a random box, or with `method.acm_fallback=labeled` a labeled image);
  the class table at the end: unlabeled scenes whose pseudo-labels hold the class;
- **the teacher**: the final teacher on every unlabeled scene of the split (the synthetic scenes have labels):
  where the class stands, what it predicts; and the class's pseudo-labeled pixels in the traces' unlabeled loss;
- **the bank** (`conf` in metrics.jsonl, every `run.log_interval` steps): the class's value over the run.

Run it under the path the runs trained on (capped to AVX2 for the default's draws) for the teacher's
figures to be that path's."""
from __future__ import annotations
import argparse, json, sys
from pathlib import Path
import torch

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(REPO))
from ael_nb.config import from_dict, read_yaml, upgrade_config, get_config
from ael_nb.core import atomic_write_text
from ael_nb.plan import build_data, plan_batch
from ael_nb.runlog import read_traces
from ael_nb.state import load_model, read_checkpoint
from ael_nb.evaluate import evaluate


def split_figures(cfg, cls: int) -> dict:
    "The labeled split of `cfg`: scenes holding `cls`, their pixels, and the share of the run's labeled batches holding it."
    d = build_data(cfg)
    if tuple(cfg.data.scale) != (1.0, 1.0) or tuple(cfg.data.crop_size) != tuple(cfg.data.synthetic_size):
        raise SystemExit(f"pedestrian.py: the sampler figures assume whole scenes at scale 1 (got crop {cfg.data.crop_size}, "
                         f"scale {cfg.data.scale})")
    px = [int((d.labeled[i]['label'] == cls).sum()) for i in range(len(d.labeled))]
    holds = torch.tensor([p > 0 for p in px])
    n, b, steps = len(px), cfg.data.batch_size, cfg.optim.iters
    per_step = torch.tensor([[i for i, _ in plan_batch(n, b, s, cfg.run.seed, 0)] for s in range(steps)])
    in_batch = holds[per_step]                                           # [steps, B]
    return dict(seed=cfg.run.seed, manifest=d.manifest_name, labeled=n, scenes_with=int(holds.sum()),
                pixels=sum(px), steps=steps, batch=b,
                batches_with=float(in_batch.any(1).float().mean()),      # a batch holds >= 1 scene of the class
                images_per_batch=float(in_batch.float().sum(1).mean()))

def run_figures(run: Path, cls: int, names: list[str]) -> dict:
    "A finished run's ACP, ACM, teacher and bank figures for class `cls`."
    cfg = from_dict(upgrade_config(read_yaml(run / 'config.yaml')))
    tr = [t for t in read_traces(run) if 'y_l' in t]
    out = dict(run=run.name, seed=cfg.run.seed, cp_source=cfg.method.cp_source, acm_fallback=cfg.method.acm_fallback,
               traces=len(tr))
    if tr and 'cp_classes' in tr[0]:
        cp = torch.cat([t['cp_classes'][:, cls] for t in tr])
        out.update(acp_traced_images=len(cp), acp_pasted=float(cp.float().mean()),
                   labeled_with=float(torch.cat([(t['lb_label'] == cls).flatten(1).any(1) for t in tr]).float().mean()))
    if tr and 'acm_class' in tr[0]:
        asked = torch.cat([t['acm_class'] == cls for t in tr]); found = torch.cat([t['acm_found'] for t in tr])
        out.update(acm_draws=len(asked), acm_asked=float(asked.float().mean()), acm_asked_found=int((asked & found).sum()),
                   acm_asked_n=int(asked.sum()), r_cm_mean=float(torch.stack([t['r_cm'][cls] for t in tr]).mean()))
        if 'acm_labeled' in tr[0]:
            lab = torch.cat([t['acm_labeled'] for t in tr]); out.update(acm_asked_labeled=int((asked & lab).sum()))
    if tr and 'y_hat' in tr[0]:
        yh = torch.cat([t['y_hat'].flatten() for t in tr]); kept = torch.cat([(t['y_hat'] == cls)[t['keep'].bool()] for t in tr])
        out.update(pseudo_pixels=int((yh == cls).sum()), pseudo_share=float((yh == cls).float().mean()),
                   pseudo_kept=int(kept.sum()))
    recs = [json.loads(l) for l in (run / 'metrics.jsonl').read_text().splitlines() if l.strip()]
    out['evals'] = [dict(it=r['it'], **{k: round(100 * v, 1) for k, v in r['eval']['teacher']['per_class'].items()},
                         tail=round(100 * r['eval']['teacher']['tail_miou'], 1), miou=round(100 * r['eval']['teacher']['miou'], 1))
                    for r in recs if 'eval' in r and 'teacher' in r['eval']]
    conf = [(r['it'], r['conf'][cls]) for r in recs if 'conf' in r]
    if conf:
        v = torch.tensor([c for _, c in conf])
        out.update(bank_min=float(v.min()), bank_median=float(v.median()), bank_max=float(v.max()),
                   bank_at={str(it): round(c, 4) for it, c in conf if it % (cfg.optim.iters // 4) == 0})
    ck = read_checkpoint(run / 'latest.pth')
    out['checkpoint_step'] = ck['it']                        # a stopped run: its figures up to this step
    if ck.get('table') is not None: out['table_images'] = int(ck['table']['table'][cls].sum())
    torch.set_num_threads(cfg.run.threads)
    d = build_data(cfg)
    unl = _with_labels(cfg, d)
    model, info, _, _ = load_model(run / 'latest.pth', 'teacher' if ck.get('teacher') is not None else 'student')
    if cfg.model.channels_last: model = model.to(memory_format=torch.channels_last)
    cm = evaluate(model, unl, info, 'whole', amp=cfg.optim.amp if cfg.optim.amp != 'auto' else 'none')
    row = cm.mat[cls].double()
    top = row.argsort(descending=True)[:3].tolist()
    out.update(unlabeled_pixels=int(row.sum()), teacher_predicts={names[k]: round(float(row[k] / row.sum()), 3) for k in top},
               teacher_recall=float(row[cls] / row.sum()), teacher_predicted_pixels=int(cm.mat[:, cls].sum()))
    return out

def _with_labels(cfg, d):
    "The unlabeled scenes of the split with their labels (the synthetic scenes have them)."
    from ael_nb.plan import make_dataset
    return make_dataset(cfg, d.manifest.split).subset(d.manifest.unlabeled)

def markdown(res: dict, cls_name: str) -> str:
    lines = [f"# What feeds `{cls_name}`: the sampler, ACP, ACM, the teacher, the bank", '',
             '## The labeled split and its batches (no training)', '',
             f'| seed | split | labeled scenes | with {cls_name} | its pixels | batches with it | scenes with it per batch |',
             '|---|---|---|---|---|---|---|']
    for s in res['splits']:
        lines.append(f"| {s['seed']} | {s['manifest']} | {s['labeled']} | {s['scenes_with']} | {s['pixels']} | "
                     f"{100 * s['batches_with']:.1f} % of {s['steps']} | {s['images_per_batch']:.2f} of {s['batch']} |")
    if res['runs']:
        lines += ['', '## Runs', '', f'| run | seed | ACP source / ACM fallback | ACP: traced labeled images with {cls_name} pasted '
                  f'| ACM draws for it (found / labeled; mean r) | its pseudo-labeled pixels in the traces (kept by AES) | class table: '
                  f'unlabeled scenes holding it | the teacher where it stands, unlabeled scenes (recall; top 3) | bank: min / median / max | '
                  'steps |', '|---|---|---|---|---|---|---|---|---|---|']
        for r in res['runs']:
            lab = f" / {r['acm_asked_labeled']}" if 'acm_asked_labeled' in r else ''
            top = ', '.join(f'{k} {100 * v:.0f} %' for k, v in r['teacher_predicts'].items())
            lines.append(f"| {r['run']} | {r['seed']} | {r['cp_source']} / {r['acm_fallback']} | "
                         f"{100 * r.get('acp_pasted', 0):.0f} % of {r.get('acp_traced_images', 0)} | "
                         f"{r.get('acm_asked_n', 0)} of {r.get('acm_draws', 0)} ({r.get('acm_asked_found', 0)}{lab}; {r.get('r_cm_mean', 0):.3f}) | "
                         f"{r.get('pseudo_pixels', 0)} ({r.get('pseudo_kept', 0)}) | {r.get('table_images', '-')} | "
                         f"{100 * r['teacher_recall']:.1f} %; {top} | "
                         f"{r['bank_min']:.3f} / {r['bank_median']:.3f} / {r['bank_max']:.3f} | {r['checkpoint_step']} |")
        lines += ['', f"## The teacher on the run's own val scenes at each evaluation (IoU %)", '',
                  '| run | step | pole | sign | pedestrian | bicycle | tail | mIoU |', '|---|---|---|---|---|---|---|---|']
        for r in res['runs']:
            lines += [f"| {r['run']} | {e['it']} | {e['pole']} | {e['sign']} | {e['pedestrian']} | {e['bicycle']} | {e['tail']} | {e['miou']} |"
                      for e in r['evals']]
    return '\n'.join(lines) + '\n'

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('runs', nargs='*', type=Path, help='finished run directories (config.yaml, metrics.jsonl, traces, latest.pth)')
    ap.add_argument('--seeds', nargs='*', type=int, default=[], help="the sampler's figures for these seeds' shipped 1/16 splits")
    ap.add_argument('--cls', default='pedestrian')
    ap.add_argument('--tag', required=True)
    ap.add_argument('--results', type=Path, default=BENCH / 'results')
    args = ap.parse_args(argv)
    names = None
    splits = []
    for k in args.seeds:
        cfg = get_config('cpu', overrides=[f'run.seed={k}', f'data.manifest={REPO}/data_manifests/synthetic/1-16_fold{k}.json'])
        names = names or build_data(cfg).info.class_names
        splits.append(split_figures(cfg, names.index(args.cls)))
    runs = []
    for run in args.runs:
        cfg = from_dict(upgrade_config(read_yaml(run / 'config.yaml')))
        names = names or build_data(cfg).info.class_names
        runs.append(run_figures(run, names.index(args.cls), list(names)))
    res = dict(cls=args.cls, splits=splits, runs=runs)
    out = args.results / f'pedestrian-{args.tag}'
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / 'pedestrian.json', json.dumps(res, indent=1) + '\n')
    atomic_write_text(out / 'pedestrian.md', markdown(res, args.cls))
    print(markdown(res, args.cls))


if __name__ == '__main__': main()
