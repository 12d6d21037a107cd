"""FixMatch and UniMatch in the engine: they train, AEL's components switch on over them, a run resumes exactly and keeps
traces. (That the paper's AEL, AEL on the CutMix framework, trains bit for bit as before: tests/test_digests.py.)"""
import json, os, subprocess, sys
import pytest
import torch
from ael_nb.config import get_config
from ael_nb.plan import TINY
from ael_nb.runlog import read_metrics, read_traces
from ael_nb.state import read_checkpoint
from ael_nb.train import train

torch.set_num_threads(1)

def tiny(out, *extra):
    return get_config('cpu', overrides=TINY + [f'run.out={out}', *extra])


@pytest.mark.parametrize('over', [['method.name=fixmatch'], ['method.name=unimatch'], ['method.name=unimatch', 'method.teacher=student'],
                                  ['method.name=ael', 'method.base=fixmatch'], ['method.name=ael', 'method.base=unimatch']])
def test_weak_to_strong_methods_train_and_evaluate(tmp_path, over):
    s = train(tiny(tmp_path, *over, 'method.conf_thresh=0'))
    assert s['it'] == 2 and set(s['last']) == {'teacher', 'student'}
    recs = [r for r in read_metrics(tmp_path) if 'loss' in r]
    assert len(recs) == 2 and all(0 <= r['pass_rate'] <= 1 and r['loss_u'] >= 0 for r in recs)
    if 'method.name=ael' in over: assert all('aes_kept' not in r for r in recs) and read_checkpoint(tmp_path / 'latest.pth')['table'] is not None


def test_unimatch_with_acp_resumes_exactly_and_is_traced(tmp_path):
    over = ['optim.iters=4', 'eval.interval=2', 'method.name=unimatch', 'method.acp=true', 'run.trace_interval=1', 'method.conf_thresh=0']
    full = train(tiny(tmp_path / 'full', *over))
    part = train(tiny(tmp_path / 'part', *over, 'run.stop_at=3'))
    assert part['it'] == 3
    rest = train(tiny(tmp_path / 'part', *over, 'run.resume=true'))
    assert rest['it'] == 4
    for k in ('weights', 'teacher_weights', 'conf', 'last', 'best'):
        assert json.dumps(rest[k], sort_keys=True) == json.dumps(full[k], sort_keys=True), k
    strip = lambda rs: [{k: v for k, v in r.items() if k not in ('img_per_s', 'peak_mem_gb')} for r in rs]
    assert strip(read_metrics(tmp_path / 'part')) == strip(read_metrics(tmp_path / 'full'))
    traces = read_traces(tmp_path / 'full')
    assert [t['it'] for t in traces] == [1, 2, 3, 4]
    t = traces[-1]
    assert {'x_u', 'x_u2', 'cut_mask', 'cut_mask2', 'passed', 'pred_fp', 'p_t_max', 'r_cp', 'cp_mask'} <= set(t)
    assert t['x_u'].dtype == t['x_u2'].dtype == torch.uint8 and t['passed'].dtype == torch.bool
    for a, b in zip(read_traces(tmp_path / 'part'), traces):            # the resumed run's traces are the uninterrupted one's
        assert all(torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k] for k in a)


def test_ael_train_cli_runs_unimatch_with_acp(tmp_path):
    script = 'import sys; from ael_nb.cli import ael_train; sys.exit(ael_train())'
    tiny = [o for o in TINY if not o.startswith('method.acm_targets=')]   # ACM is off: ael-train refuses its setting
    r = subprocess.run([sys.executable, '-c', script, '--method', 'unimatch', 'method.acp=true', '--out', str(tmp_path), *tiny],
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'), timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / 'summary.json').read_text())
    assert s['method'] == 'unimatch' and s['it'] == 2
    cfg = read_checkpoint(tmp_path / 'latest.pth')['config']['method']
    assert (cfg['acp'], cfg['acm'], cfg['aes'], cfg['dr']) == (True, False, False, False)


@pytest.mark.parametrize('over', [[], ['method.base=fixmatch', 'method.conf_thresh=0']])
def test_spare_unseen_takes_unseen_classes_out_of_the_unlabeled_loss(tmp_path, over):
    "Every class below Conf 1 spared: each pixel's softmax holds its pseudo-label alone, so L_u is 0; off, it is not."
    for spare in ('1', '0'):
        train(tiny(tmp_path / spare, 'method.name=ael', *over, f'method.spare_unseen={spare}', 'run.log_interval=1'))
        recs = [r for r in read_metrics(tmp_path / spare) if 'loss' in r]
        assert len(recs) == 2 and all((r['loss_u'] == 0) == (spare == '1') for r in recs), recs


V2 = ['method.name=unimatch_v2', 'model.backbone=dinov2_tiny', 'data.crop_size=28', 'optim.optimizer=adamw',
      'optim.lr=1e-4', 'optim.weight_decay=0.01', 'method.conf_thresh=0']

def test_unimatch_v2_with_acp_resumes_exactly_and_keeps_both_views(tmp_path):
    "V2's step on the tiny DINOv2 + DPT in the engine: it trains and evaluates, resumes bit for bit (the dropout masks "
    "come from the checkpointed random state), and its traces hold both dropped views and their predictions."
    over = [*V2, 'optim.iters=4', 'eval.interval=2', 'method.acp=true', 'run.trace_interval=2']
    full = train(tiny(tmp_path / 'full', *over))
    assert full['it'] == 4 and set(full['last']) == {'teacher', 'student'}
    train(tiny(tmp_path / 'part', *over, 'run.stop_at=3'))
    rest = train(tiny(tmp_path / 'part', *over, 'run.resume=true'))
    for k in ('weights', 'teacher_weights', 'conf', 'last'):
        assert json.dumps(rest[k], sort_keys=True) == json.dumps(full[k], sort_keys=True), k
    recs = [r for r in read_metrics(tmp_path / 'full') if 'loss' in r]
    assert all(abs(r['loss_u'] - (r['loss_s1'] + r['loss_s2']) / 2) < 1e-5 for r in recs)
    t = read_traces(tmp_path / 'full')[-1]
    assert {'x_u', 'x_u2', 'cut_mask', 'cut_mask2', 'pred_u', 'pred_u2', 'cp_mask'} <= set(t) and t['comp_drop'] is True
    from ael_nb.show import show_views
    from ael_nb.state import load_model
    info = load_model(tmp_path / 'full' / 'latest.pth')[1]
    assert len(show_views(t, info).axes) == 4 * len(t['x_u'])


def test_ael_train_cli_runs_unimatch_v2(tmp_path):
    "`ael-train --preset cpu --method unimatch_v2 model.backbone=dinov2_tiny ...`: the command of the guide, 2 steps."
    script = 'import sys; from ael_nb.cli import ael_train; sys.exit(ael_train())'
    tiny = [o for o in TINY if not o.startswith('method.acm_targets=')]   # ACM is off: ael-train refuses its setting
    args = ['--method', 'unimatch_v2', '--out', str(tmp_path), *tiny, *[o for o in V2 if not o.startswith('method.name=')]]
    r = subprocess.run([sys.executable, '-c', script, *args], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS='1'), timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / 'summary.json').read_text())
    assert s['method'] == 'unimatch_v2' and s['it'] == 2


@pytest.mark.parametrize('over', [[], ['method.base=fixmatch', 'method.conf_thresh=0']])
def test_labeled_memory_feeds_acp_and_acm_and_resumes_exactly(tmp_path, over):
    "`method.cp_source=memory` and `method.acm_fallback=labeled`: the memory is filled and checkpointed, ACP's sources "
    "come from it, ACM's source is a labeled image where the untrained teacher's pseudo-labels miss its class, and a "
    "stopped run resumes bit for bit (the memory travels in the checkpoint)."
    mem = ['method.name=ael', *over, 'method.cp_source=memory', 'method.acm_fallback=labeled', 'method.memory_slots=2',
           'optim.iters=4', 'eval.interval=2', 'run.trace_interval=1', 'method.cp_prob=1']
    full = train(tiny(tmp_path / 'full', *mem))
    train(tiny(tmp_path / 'part', *mem, 'run.stop_at=3'))
    ck = read_checkpoint(tmp_path / 'part' / 'latest.pth')
    assert ck['it'] == 3 and int(ck['ranks'][0]['memory']['count'].sum()) > 0
    rest = train(tiny(tmp_path / 'part', *mem, 'run.resume=true'))
    for k in ('weights', 'teacher_weights', 'conf', 'last'):
        assert json.dumps(rest[k], sort_keys=True) == json.dumps(full[k], sort_keys=True), k
    traces = read_traces(tmp_path / 'full')
    assert all(t['cp_src'].eq(-1).all() and 'cp_memory_class' in t and 'acm_labeled' in t for t in traces)
    assert any(t['acm_labeled'].any() for t in traces)
    # switched off (the paper's sources), neither a memory nor its records
    train(tiny(tmp_path / 'off', 'method.name=ael', *over, 'method.cp_source=batch', 'method.acm_fallback=box',
               'optim.iters=1', 'run.trace_interval=1'))
    t = read_traces(tmp_path / 'off')[-1]
    assert 'memory' not in read_checkpoint(tmp_path / 'off' / 'latest.pth')['ranks'][0] and 'acm_labeled' not in t
