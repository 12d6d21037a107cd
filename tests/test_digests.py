"""Short runs of every method end with exactly the weights they ended with when `digests.json` was recorded:
moving code around must not change one bit (two ranks: `test_ddp.py`). Record on a commit known to be right:
`python tests/test_digests.py`."""
import json, sys
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
         'ael-no-prefetch': ['method.name=ael', 'data.acm_prefetch=false'],
         'supervised-accum': ['method.name=supervised', 'data.batch_size=4', 'optim.accum_steps=2'],
         'meanteacher-accum': ['method.name=meanteacher', 'data.batch_size=4', 'optim.accum_steps=2'],
         'cutmix-accum': ['method.name=cutmix', 'data.batch_size=4', 'optim.accum_steps=2'],
         'ael-accum': ['method.name=ael', 'data.batch_size=4', 'optim.accum_steps=2']}

def platform() -> str:
    "What decides the float arithmetic of a one-thread CPU run: torch's version and the CPU kernels it picks."
    amx = ' + AMX' if torch.cpu._is_amx_tile_supported() else ''
    return f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}{amx}"

def run(case: str, out) -> dict:
    torch.set_num_threads(1)
    s = train(get_config('cpu', overrides=TINY + CASES[case] + [f'run.out={out}']))
    return dict(student=s['weights'], teacher=s['teacher_weights'])

def stored(case: str) -> dict:
    "The digests `case` ended with when recorded on this platform."
    recorded = json.loads(DIGESTS.read_text())
    assert platform() in recorded, (f"{DIGESTS}: no digests recorded for {platform()!r} (recorded: {sorted(recorded)}); "
                                    "record them on a commit known to be right: python tests/test_digests.py")
    return recorded[platform()][case]


@pytest.mark.parametrize('case', CASES)
def test_weights_unchanged(tmp_path, case): assert run(case, tmp_path) == stored(case)


if __name__ == '__main__':                                                      # record this platform's digests
    import tempfile
    from test_ddp import two_ranks
    with tempfile.TemporaryDirectory() as d:
        new = {c: run(c, Path(d) / c) for c in CASES}
        r0, r1 = two_ranks(Path(d) / 'ddp')
        assert r0 == r1
        new['ddp-ael'] = dict(student=r0['weights'], teacher=r0['teacher'])
    recorded = json.loads(DIGESTS.read_text()) if DIGESTS.is_file() else {}
    DIGESTS.write_text(json.dumps(recorded | {platform(): new}, indent=1, sort_keys=True) + '\n')
    print(f"{DIGESTS}: {platform()}", json.dumps(new, indent=1), file=sys.stderr)
