"""Two CPU processes (gloo) train AEL together: both ranks end with the same weights, teacher and confidence bank,
and with the weights recorded in `digests.json`."""
import json, os, socket
from pathlib import Path
import pytest
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

@pytest.mark.slow
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


def _layout_worker(rank, world, port, out):
    "One rank: the kit's network, contiguous and channels-last from the same weights, one step on this rank's images, alone and under DDP."
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port), OMP_NUM_THREADS='1')
    torch.set_num_threads(1)
    dist.init_process_group('gloo', rank=rank, world_size=world)
    import copy
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from ael_nb.model import build_model
    torch.manual_seed(0)
    base = build_model(10, 'resnet18', 16, aux=True)
    for m in base.modules():                                            # dropout draws its mask in memory order: none here
        if isinstance(m, (torch.nn.Dropout, torch.nn.Dropout2d)): m.p = 0.0
    g = torch.Generator().manual_seed(100 + rank)                       # each rank its own images, as in training
    x, y = torch.randn(2, 3, 65, 65, generator=g), torch.randint(0, 10, (2, 65, 65), generator=g)
    def step(net, xx):
        o = net(xx); loss = F.cross_entropy(o['out'], y) + 0.4 * F.cross_entropy(o['aux'], y); loss.backward()
        return loss.detach(), torch.cat([p.grad.flatten() for p in net.parameters()])
    res = {}
    for layout in ('contiguous', 'channels_last'):
        net = copy.deepcopy(base)
        xx = x
        if layout == 'channels_last': net, xx = net.to(memory_format=torch.channels_last), x.contiguous(memory_format=torch.channels_last)
        _, local = step(copy.deepcopy(net), xx)                         # this rank alone
        mean = local.clone(); dist.all_reduce(mean); mean /= world      # what DDP should hand back
        loss, ddp = step(DDP(net), xx)
        res[layout] = dict(loss=loss, local=local, mean=mean, ddp=ddp, stats=torch.cat([b.float().flatten() for b in net.buffers()]))
    x = x.double(); _, ref = step(copy.deepcopy(base).double(), x)      # float64: the exact gradient, near enough
    rel = lambda u, v: float((u.double() - v.double()).norm() / v.double().norm())
    c, cl = res['contiguous'], res['channels_last']
    rec = dict(ddp_is_mean=max(rel(r['ddp'], r['mean']) for r in res.values()), loss=rel(c['loss'], cl['loss']),
               bn_stats=rel(cl['stats'], c['stats']), error_contiguous=rel(c['local'], ref), error_channels_last=rel(cl['local'], ref))
    try:                                                                # SyncBatchNorm on the CPU
        sync = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(base).to(memory_format=torch.channels_last))
        DDP(sync)(x.contiguous(memory_format=torch.channels_last)); rec['syncbn'] = 'ran'
    except (ValueError, RuntimeError, NotImplementedError) as e: rec['syncbn'] = str(e)
    Path(out, f'layout{rank}.json').write_text(json.dumps(rec))
    dist.destroy_process_group()

def test_channels_last_under_ddp_matches_contiguous(tmp_path):
    """Two gloo ranks, the kit's network (ResNet-18 OS16, aux head, dropout off): under DDP, channels-last weights and
    images give the contiguous loss and BatchNorm statistics, DDP hands back the mean of the ranks' own gradients in
    either layout, and the channels-last gradients are as close to a float64 computation as the contiguous ones (same order). SyncBatchNorm itself cannot run here:
    torch refuses it on the CPU (its kernels, e.g. aten::batch_norm_stats, are CUDA-only), as the last assertion records."""
    mp.spawn(_layout_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    for r in (0, 1):
        rec = json.loads((tmp_path / f'layout{r}.json').read_text())
        assert rec['ddp_is_mean'] < 1e-5 and rec['loss'] < 1e-5 and rec['bn_stats'] < 1e-4, rec
        # float32 rounding, amplified through 20 BatchNorm layers at random init (1e-4 to 6e-3 here in both layouts); a layout
        # error (wrong strides, a stale copy) would be of order 1
        assert rec['error_channels_last'] < min(10 * rec['error_contiguous'], 2e-2), rec
        assert 'SyncBatchNorm layers only work with GPU modules' in rec['syncbn'], rec
