"""Short runs of every method end with exactly the weights they ended with when `digests.json` was recorded:
moving code around must not change one bit (two ranks: `test_ddp.py`). Record on a commit known to be right:
`python tests/test_digests.py`. Float results depend on the processor's kernels: on a platform with no stored
digests, the recorded commit's code (`git archive`) is run on this machine and its digests are the reference
(`python tests/test_digests.py --add-platform` stores them, computed that way, beside the others)."""
import functools, json, os, subprocess, sys, tarfile, tempfile
from pathlib import Path
import pytest
import torch
from ael_nb.config import get_config
from ael_nb.plan import TINY
from ael_nb.train import train

DIGESTS = Path(__file__).with_name('digests.json')
CASES = {'supervised': ['method.name=supervised'],
         'meanteacher': ['method.name=meanteacher'],
         'cutmix': ['method.name=cutmix'],
         'ael': ['method.name=ael'],                                            # ACM sources loaded in a thread
         'ael-paper-sources': ['method.name=ael', 'method.cp_source=batch', 'method.acm_fallback=box'],   # the paper's
         'ael-no-prefetch': ['method.name=ael', 'data.acm_prefetch=false'],
         'supervised-accum': ['method.name=supervised', 'data.batch_size=4', 'optim.accum_steps=2'],
         'meanteacher-accum': ['method.name=meanteacher', 'data.batch_size=4', 'optim.accum_steps=2'],
         'cutmix-accum': ['method.name=cutmix', 'data.batch_size=4', 'optim.accum_steps=2'],
         'ael-accum': ['method.name=ael', 'data.batch_size=4', 'optim.accum_steps=2']}

def platform() -> str:
    "What decides the float arithmetic of a one-thread CPU run: torch's version and the CPU kernels it picks."
    amx = ' + AMX' if torch.cpu._is_amx_tile_supported() else ''
    return f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}{amx}"

def run(case: str, out, preset: str = 'cpu') -> dict:
    torch.set_num_threads(1)
    s = train(get_config(preset, overrides=TINY + CASES[case] + [f'run.out={out}']))
    return dict(student=s['weights'], teacher=s['teacher_weights'])

def stored(case: str, record: str|None = None) -> dict:
    "The digests `case` ended with when recorded on this platform, else with the recorded commit's code on it."
    recorded = json.loads(DIGESTS.read_text())
    if record is not None: recorded = recorded[record]      # e.g. 'earlier_cpu', a record kept beside the current one
    if platform() in recorded['platforms']: return recorded['platforms'][platform()][case]
    return reference(recorded['commit'])[case]

@functools.cache
def reference(commit: str) -> dict:
    "Every case's digests from the code at `commit`, run here with these tests' harness (`python test_digests.py`)."
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as d:
        archive = subprocess.run(['git', '-C', str(root), 'archive', commit, 'ael_nb'], capture_output=True)
        assert archive.returncode == 0, f"{DIGESTS}: cannot read commit {commit} from git: {archive.stderr.decode()}"
        Path(d, 'code.tar').write_bytes(archive.stdout)
        with tarfile.open(Path(d, 'code.tar')) as t: t.extractall(d, filter='data')
        env = os.environ | {'PYTHONPATH': d, 'AEL_DIGESTS_OUT': str(Path(d, 'digests.json'))}
        done = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, cwd=d)
        assert done.returncode == 0, f"digests of commit {commit} could not be computed:\n{done.stderr[-3000:]}"
        return json.loads(Path(d, 'digests.json').read_text())

@pytest.mark.parametrize('case', CASES)
def test_weights_unchanged(tmp_path, case): assert run(case, tmp_path) == stored(case)

@pytest.mark.slow
@pytest.mark.parametrize('case', ['supervised', 'ael'])
def test_cpu96_is_the_earlier_cpu(tmp_path, case):
    "`cpu96` ends where the `cpu` preset ended before issue 31 (digests.json's 'earlier_cpu', commit b1947d9)."
    assert run(case, tmp_path, 'cpu96') == stored(case, 'earlier_cpu')


def record(out) -> dict:
    "Every case's digests with the `ael_nb` that is imported (the two-rank run included)."
    from test_ddp import two_ranks
    from ael_nb.config import valid_keys
    known = valid_keys(get_config('cpu'))     # a recorded commit's code may predate a case's keys (e.g. the labeled memory)
    new = {c: run(c, Path(out) / c) for c, over in CASES.items() if all(o.split('=')[0] in known for o in over)}
    r0, r1 = two_ranks(Path(out) / 'ddp')
    assert r0 == r1
    return new | {'ddp-ael': dict(student=r0['weights'], teacher=r0['teacher'])}


def add_platform():
    """Store each record's digests on this platform, computed from the record's own commit (`reference`): the same
    figures the tests would compute, kept, so this platform's tests stop recomputing them."""
    recorded = json.loads(DIGESTS.read_text())
    for rec in [recorded] + [v for v in recorded.values() if isinstance(v, dict) and 'commit' in v]:
        rec['platforms'].setdefault(platform(), reference(rec['commit']))
    DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + '\n')
    print(f"{DIGESTS}: added {platform()}", file=sys.stderr)


if __name__ == '__main__':  # record HEAD's digests on this platform (other platforms then run HEAD's code), write them
                            # to AEL_DIGESTS_OUT, or (--add-platform) keep the recorded commits' digests on this one
    sys.path.insert(0, str(Path(__file__).parent))
    if sys.argv[1:] == ['--add-platform']: add_platform(); sys.exit()
    with tempfile.TemporaryDirectory() as d: new = record(d)
    if 'AEL_DIGESTS_OUT' in os.environ: Path(os.environ['AEL_DIGESTS_OUT']).write_text(json.dumps(new)); sys.exit()
    head = subprocess.run(['git', 'rev-parse', 'HEAD'], capture_output=True, text=True, check=True).stdout.strip()
    kept = {k: v for k, v in json.loads(DIGESTS.read_text()).items() if k not in ('commit', 'platforms')}   # e.g. 'earlier_cpu'
    DIGESTS.write_text(json.dumps(kept | {'commit': head, 'platforms': {platform(): new}}, indent=1, sort_keys=True) + '\n')
    print(f"{DIGESTS}: {platform()}", json.dumps(new, indent=1), file=sys.stderr)
