"""FixMatch and UniMatch in the engine: they train, AEL's components switch on over them, a run resumes exactly and keeps
traces; the paper's AEL (AEL on the CutMix framework) trains bit for bit as before they joined."""
import io, json, os, subprocess, sys, tarfile
from pathlib import Path
import pytest
import torch
from ael_nb.config import get_config
from ael_nb.plan import TINY
from ael_nb.runlog import read_metrics, read_traces
from ael_nb.state import read_checkpoint
from ael_nb.train import train

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[1]

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
    r = subprocess.run([sys.executable, '-c', script, '--method', 'unimatch', 'method.acp=true', '--out', str(tmp_path), *TINY],
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS='1'), timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / 'summary.json').read_text())
    assert s['method'] == 'unimatch' and s['it'] == 2
    cfg = read_checkpoint(tmp_path / 'latest.pth')['config']['method']
    assert (cfg['acp'], cfg['acm'], cfg['aes'], cfg['dr']) == (True, False, False, False)


# ---------------------------------------------------------------- the paper's AEL, pinned to the code before this change
PAPER_AEL_COMMIT = 'b1947d9a3fba891d30ce1a374b8195b9b1b9e7ad'   # the last commit before FixMatch and UniMatch joined the engine
PINNED = {'ael': ['method.name=ael'], 'ael acm half': ['method.name=ael', 'method.acm_targets=half', 'data.batch_size=4'],
          'cutmix': ['method.name=cutmix'], 'ael no components': ['method.name=ael', 'method.acp=false', 'method.acm=false',
                                                                  'method.aes=false', 'method.dr=false']}
DIGESTS = ("import json, sys; from ael_nb.config import get_config; from ael_nb.train import train; "
           "s = train(get_config('cpu', overrides=sys.argv[1:])); print(json.dumps([s['weights'], s['teacher_weights'], s['conf']]))")

@pytest.fixture(scope='module')
def pinned_code(tmp_path_factory):
    d = tmp_path_factory.mktemp('pinned')
    r = subprocess.run(['git', '-C', str(REPO), 'archive', PAPER_AEL_COMMIT, 'ael_nb'], capture_output=True)
    assert r.returncode == 0, f"commit {PAPER_AEL_COMMIT} is not in this checkout's history (a shallow clone?): {r.stderr.decode()}"
    tarfile.open(fileobj=io.BytesIO(r.stdout)).extractall(d)
    return d

def _digests(code: Path, out: Path, over: list[str]) -> list:
    r = subprocess.run([sys.executable, '-c', DIGESTS, *TINY, 'optim.iters=3', f'run.out={out}', *over], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(code), OMP_NUM_THREADS='1'), timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])

@pytest.mark.parametrize('name', list(PINNED))
def test_paper_ael_is_unchanged_bit_for_bit(tmp_path, pinned_code, name):
    before = _digests(pinned_code, tmp_path / 'before', PINNED[name])
    now = _digests(REPO, tmp_path / 'now', PINNED[name])
    assert now == before, f"{name}: weights (student, teacher) and bank {now} differ from commit {PAPER_AEL_COMMIT[:8]}'s {before}"
