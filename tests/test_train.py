"Training engine: every method runs, losses fall, resume is exact, checkpoints are atomic, bad input fails early."
import json, os
from pathlib import Path
import pytest
import torch
from ael_nb.core import DataError, make_generator, seed_everything
from ael_nb.config import get_config, load_config
from ael_nb.datasets import make_fixture
from ael_nb.plan import build_data, Augmented, collate, PlanSampler, plan_batch, TINY
from ael_nb.state import build_state, save_checkpoint, read_checkpoint, weights_digest
from ael_nb.methods import METHODS
from ael_nb.runlog import read_metrics
from ael_nb.train import train

torch.set_num_threads(1)

def tiny(out, *extra):
    return get_config('cpu', overrides=TINY + [f'run.out={out}', *extra])


@pytest.mark.parametrize('method', ['supervised', 'meanteacher', 'cutmix', 'ael'])
def test_each_method_trains_and_evaluates(tmp_path, method):
    s = train(tiny(tmp_path, f'method.name={method}'))
    assert s['it'] == 2 and s['method'] == method
    models = {'student'} if method == 'supervised' else {'teacher', 'student'}
    assert set(s['last']) == models
    for m in s['last'].values(): assert 0 <= m['miou'] <= 1 and set(m['per_class']) and 'tail_miou' in m
    recs = read_metrics(tmp_path)
    assert [r['it'] for r in recs if 'loss' in r] == [1, 2]
    if method != 'supervised': assert all('loss_u' in r for r in recs if 'loss' in r)
    if method == 'ael': assert all(0 <= r['aes_kept'] <= 1 and r['dr_weight'] >= 0 for r in recs if 'loss' in r)
    assert (tmp_path / 'latest.pth').exists() and (tmp_path / 'per_class.md').read_text().startswith('| class |')
    assert load_config(tmp_path / 'config.yaml').method.name == method


def test_val_set_size_changes_what_is_measured_not_what_is_learned(tmp_path):
    "Two AEL runs evaluated every step on 2 and on 6 val scenes (data.synthetic_val_n): the same weights, other figures."
    s = [train(tiny(tmp_path / f'v{n}', 'optim.iters=3', 'eval.interval=1', 'eval.max_images=null', f'data.synthetic_val_n={n}'))
         for n in (2, 6)]
    assert (s[0]['weights'], s[0]['teacher_weights']) == (s[1]['weights'], s[1]['teacher_weights'])
    assert s[0]['last']['teacher']['per_class'] != s[1]['last']['teacher']['per_class']
    assert [r['it'] for r in read_metrics(tmp_path / 'v6') if 'eval' in r] == [1, 2, 3]   # evaluated between the steps


@pytest.mark.parametrize('method', ['supervised', 'ael'])
def test_loss_decreases_on_a_fixed_batch(tmp_path, method):
    cfg = tiny(tmp_path, f'method.name={method}', 'optim.lr=0.01', 'model.dropout=0')
    data = build_data(cfg); seed_everything(0)
    state = build_state(cfg, data, torch.device('cpu'))
    lb = collate([Augmented(data.labeled, (32, 32))[(i % len(data.labeled), i)] for i in range(2)])
    ub = collate([Augmented(data.unlabeled, (32, 32), labeled=False)[(i, i)] for i in range(2)])
    losses = []
    for _ in range(12):
        state.optimizer.zero_grad()
        loss = METHODS[method](state, lb, ub, make_generator(0))[0]     # same batch, same mixing every time
        loss.backward(); state.optimizer.step(); losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0], losses


def test_resume_is_exact(tmp_path):
    over = ['optim.iters=4', 'eval.interval=2', 'method.name=ael']
    full = train(tiny(tmp_path / 'full', *over))
    part = train(tiny(tmp_path / 'part', *over, 'run.stop_at=3'))
    assert part['it'] == 3
    assert read_checkpoint(tmp_path / 'part' / 'latest.pth')['it'] == 3
    rest = train(tiny(tmp_path / 'part', *over, 'run.resume=true'))
    assert rest['it'] == 4
    for k in ('weights', 'teacher_weights', 'conf', 'last', 'best'):
        assert json.dumps(rest[k], sort_keys=True) == json.dumps(full[k], sort_keys=True), k   # NaN-safe equality
    # the log of the resumed run is the uninterrupted one's (throughput aside)
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ('img_per_s', 'peak_mem_gb')} for r in rs]   # timings and memory vary
    assert strip(read_metrics(tmp_path / 'part')) == strip(read_metrics(tmp_path / 'full'))


def test_resume_needs_a_checkpoint(tmp_path):
    with pytest.raises(DataError, match='cannot resume'): train(tiny(tmp_path, 'run.resume=true'))


def test_failed_save_leaves_latest_intact(tmp_path, monkeypatch):
    train(tiny(tmp_path, 'method.name=supervised'))
    p = tmp_path / 'latest.pth'
    before = read_checkpoint(p)
    cfg = tiny(tmp_path, 'method.name=supervised')
    data = build_data(cfg); state = build_state(cfg, data, torch.device('cpu')); state.it = 99
    def boom(obj, f, *a, **k): f.write(b'half a checkpoint'); raise OSError('disk full')
    monkeypatch.setattr(torch, 'save', boom)
    with pytest.raises(OSError, match='disk full'): save_checkpoint(state, p)
    monkeypatch.undo()
    after = read_checkpoint(p)
    assert after['it'] == before['it'] == 2
    assert [f.name for f in tmp_path.iterdir() if f.name.endswith('.tmp')] == []


def test_bad_config_keys_and_values(tmp_path):
    with pytest.raises(KeyError, match='Did you mean method.gamma'): get_config('cpu', overrides=['method.gama=1'])
    with pytest.raises(KeyError, match='Valid keys: data.dataset'): get_config('cpu', overrides=['nothing=1'])
    with pytest.raises(ValueError, match='method.k'): get_config('cpu', overrides=['method.k=two'])
    with pytest.raises(ValueError, match='not one of'): get_config('cpu', overrides=['method.name=mixmatch'])
    (tmp_path / 'c.yaml').write_text('optim:\n  lr: 0.1\n  momentun: 0.5\n')
    with pytest.raises(KeyError, match='optim.momentum'): get_config('cpu', tmp_path / 'c.yaml')
    with pytest.raises(ValueError, match='not divisible'): train(tiny(tmp_path / 'run', 'data.batch_size=3', 'optim.accum_steps=2'))


def test_accumulation_and_bf16_run(tmp_path):
    s = train(tiny(tmp_path, 'data.batch_size=4', 'optim.accum_steps=2', 'optim.amp=bf16', 'optim.iters=1'))
    assert s['it'] == 1 and s['last']['teacher']['miou'] >= 0


def test_bad_files_fail_before_training(tmp_path):
    root = make_fixture('camvid', tmp_path / 'camvid', n=6, size=(24, 32))
    bad = sorted((root / 'train').glob('*.png'))[2]
    bad.write_bytes(b'not a png')
    cfg = tiny(tmp_path / 'run', 'data.dataset=camvid', f'data.root={root}', 'data.check=true', 'data.fraction=0.5')
    with pytest.raises(DataError, match=bad.name): train(cfg)
    assert not (tmp_path / 'run' / 'latest.pth').exists()


def test_manifest_for_another_dataset_is_refused(tmp_path):
    from ael_nb.manifests import make_manifest, save_manifest
    p = save_manifest(make_manifest('camvid', [f'a{i}' for i in range(8)], fraction='1/4'), tmp_path / 'm.json')
    with pytest.raises(DataError, match='data.dataset=camvid'): train(tiny(tmp_path / 'run', f'data.manifest={p}'))


def test_sampler_same_batches_with_workers(tmp_path):
    cfg = tiny(tmp_path)
    data = build_data(cfg)
    aug = Augmented(data.labeled, (32, 32))
    def batches(workers):
        dl = torch.utils.data.DataLoader(aug, batch_sampler=PlanSampler(len(aug), 2, seed=0, start=3, stop=6),
                                         collate_fn=collate, num_workers=workers)
        return [b['image'] for b in dl]
    a, b = batches(0), batches(2)
    assert len(a) == 3 and all(torch.equal(x, y) for x, y in zip(a, b))
    # micro-step 3 is the same whether the loader starts at 0 or at 3 (resume)
    assert plan_batch(len(aug), 2, 3, 0) == list(PlanSampler(len(aug), 2, 0, start=0, stop=6))[3]


def test_resume_with_changed_config_is_refused_unless_allowed(tmp_path):
    train(tiny(tmp_path, 'method.name=supervised', 'optim.iters=1'))
    with pytest.raises(ValueError, match=r'optim.iters: 1 -> 2; .*--allow-changes'):
        train(tiny(tmp_path, 'method.name=supervised', 'optim.iters=2', 'run.resume=true'))
    with pytest.warns(UserWarning, match='optim.iters: 1 -> 2'):
        s = train(tiny(tmp_path, 'method.name=supervised', 'optim.iters=2', 'run.resume=true', 'run.allow_changes=true'))
    assert s['it'] == 2 and [r['config_changes'] for r in read_metrics(tmp_path) if 'config_changes' in r] == [['optim.iters: 1 -> 2']]


def test_accumulation_updates_the_bank_once_per_optimiser_step(tmp_path):
    s = train(tiny(tmp_path, 'data.batch_size=4', 'optim.accum_steps=2', 'optim.iters=2', 'method.acp=false'))
    seen = read_checkpoint(tmp_path / 'latest.pth')['bank']['seen']
    assert s['it'] == 2 and int(seen.max()) == 2        # two optimiser steps, two EMA steps (four micro-batches)


def test_micro_batch_of_one_is_refused_not_silently_unmixed(tmp_path):
    with pytest.raises(ValueError, match='adaptive Copy-Paste'): train(tiny(tmp_path, 'data.batch_size=2', 'optim.accum_steps=2'))
    with pytest.raises(ValueError, match='CutMix mixes'): train(tiny(tmp_path, 'data.batch_size=2', 'optim.accum_steps=2', 'method.name=cutmix'))
