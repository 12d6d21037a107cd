"""Two CPU processes (gloo) train AEL together: both ranks end with the same weights, teacher and confidence bank,
and with the weights recorded in `digests.json`."""
import json, os, socket
from pathlib import Path
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from ael_nb.plan import TINY
from test_digests import stored
DDP = ['data.batch_size=4', 'optim.iters=3', 'eval.max_images=3', 'method.name=ael']

def _free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _worker(rank, world, port, out):
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), OMP_NUM_THREADS='1')
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world)
    from ael_nb.config import get_config
    from ael_nb.train import train
    s = train(get_config('cpu', overrides=TINY + DDP + [f'run.out={out}/run', 'run.device=cpu']))
    Path(out, f'rank{rank}.json').write_text(json.dumps(dict(weights=s['weights'], teacher=s['teacher_weights'], conf=s['conf'],
                                                              last=s['last'], it=s['it'])))
    dist.destroy_process_group()

def two_ranks(out) -> list[dict]:
    "What each of two ranks training `DDP` together ended with."
    mp.spawn(_worker, args=(2, _free_port(), str(out)), nprocs=2, join=True)
    return [json.loads((Path(out) / f'rank{r}.json').read_text()) for r in (0, 1)]

def test_two_ranks_stay_identical(tmp_path):
    r0, r1 = two_ranks(tmp_path)
    assert r0['it'] == r1['it'] == 3
    assert r0['weights'] == r1['weights'] and r0['teacher'] == r1['teacher']
    assert dict(student=r0['weights'], teacher=r0['teacher']) == stored('ddp-ael')
    assert r0['conf'] == r1['conf'] and r0['conf'] != [r0['conf'][0]] * len(r0['conf'])   # the bank moved, identically
    assert r0['last'] == r1['last']                                                       # merged confusion matrices
    assert (tmp_path / 'run' / 'latest.pth').exists()
    saved = torch.load(tmp_path / 'run' / 'latest.pth', weights_only=False)
    assert saved['config']['data']['batch_size'] == 4 and saved['it'] == 3
