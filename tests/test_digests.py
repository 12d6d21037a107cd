"""Short runs of every method end with exactly the weights they ended with when `digests.json` was recorded:
moving code around must not change one bit. Record on a commit known to be right: `python tests/test_digests.py`."""
import json, os, socket, sys
from pathlib import Path
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
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
DDP = ['method.name=ael', 'data.batch_size=4']                                  # 2 ranks x 2 images

def platform() -> str:
    "What decides the float arithmetic of a one-thread CPU run: torch's version and the CPU kernels it picks."
    amx = ' + AMX' if torch.cpu._is_amx_tile_supported() else ''
    return f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}{amx}"

def digests(s: dict) -> dict: return dict(student=s['weights'], teacher=s['teacher_weights'])

def run(case: str, out) -> dict:
    torch.set_num_threads(1)
    return digests(train(get_config('cpu', overrides=TINY + CASES[case] + [f'run.out={out}'])))

def _free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _ddp_worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), OMP_NUM_THREADS='1')
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world)
    s = train(get_config('cpu', overrides=TINY + DDP + [f'run.out={out}/run', 'run.device=cpu']))
    Path(out, f'rank{rank}.json').write_text(json.dumps(digests(s)))
    dist.destroy_process_group()

def run_ddp(out) -> dict:
    mp.spawn(_ddp_worker, args=(2, _free_port(), str(out)), nprocs=2, join=True)
    r0, r1 = (json.loads(Path(out, f'rank{r}.json').read_text()) for r in (0, 1))
    assert r0 == r1
    return r0

def stored(case: str) -> dict:
    recorded = json.loads(DIGESTS.read_text())
    assert platform() in recorded, (f"{DIGESTS}: no digests recorded for {platform()!r} (recorded: {sorted(recorded)}); "
                                    "record them on a commit known to be right: python tests/test_digests.py")
    return recorded[platform()][case]


@pytest.mark.parametrize('case', CASES)
def test_weights_unchanged(tmp_path, case): assert run(case, tmp_path) == stored(case)

def test_ddp_weights_unchanged(tmp_path): assert run_ddp(tmp_path) == stored('ddp-ael')


if __name__ == '__main__':                                                      # record this platform's digests
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        new = {c: run(c, Path(d) / c) for c in CASES} | {'ddp-ael': run_ddp(Path(d) / 'ddp')}
    recorded = json.loads(DIGESTS.read_text()) if DIGESTS.is_file() else {}
    DIGESTS.write_text(json.dumps(recorded | {platform(): new}, indent=1, sort_keys=True) + '\n')
    print(f"{DIGESTS}: {platform()}", json.dumps(new, indent=1), file=sys.stderr)
