"""What the notebook cannot show: the confidence bank across several processes (ranks add their
sums and counts, so every rank ends with the bank of the global batch) and on a GPU."""
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ael_nb.conf_bank import ConfidenceBank


def _batch(seed=0, B=4, C=5, H=6, W=7):
    g = torch.Generator().manual_seed(seed)
    probs = torch.randn(B, C, H, W, generator=g).softmax(1)
    labels = torch.randint(0, C, (B, H, W), generator=g)
    labels[0] = 2                      # one image holds a single class
    labels[1, :2] = 255                # some ignored pixels
    labels[labels == 4] = 3            # class 4 absent from the whole batch
    return probs, labels


CONFIGS = [dict(momentum=0.5), dict(momentum=0.5, reduction='pixel'),
           dict(momentum=0.5, absent_as_zero=True, indicator='margin')]


def _run(probs, labels, kwargs, steps=3):
    bank = ConfidenceBank(5, **kwargs)
    for _ in range(steps): bank.update(probs, labels)
    return bank


def _worker(rank, world, init_file, expected):
    dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank, world_size=world)
    try:
        probs, labels = _batch()
        per = len(probs) // world       # each rank sees its own slice of the global batch
        mine = slice(rank * per, (rank + 1) * per)
        for kwargs, (conf, seen) in zip(CONFIGS, expected):
            bank = _run(probs[mine], labels[mine], kwargs)
            torch.testing.assert_close(bank.conf, conf)
            torch.testing.assert_close(bank.seen, seen)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_ranks_hold_the_global_bank(tmp_path):
    probs, labels = _batch()
    refs = [_run(probs, labels, kw) for kw in CONFIGS]
    # the slices differ from the whole batch, so a bank that skipped the all-reduce would fail below
    assert not torch.allclose(_run(probs[:2], labels[:2], CONFIGS[0]).conf, refs[0].conf)
    torch.testing.assert_close(refs[0].seen, torch.tensor([3, 3, 3, 3, 0]))   # class 4 never moved...
    torch.testing.assert_close(refs[2].seen, torch.full((5,), 3))           # ...unless absent counts as 0
    mp.spawn(_worker, args=(2, str(tmp_path / 'init'), [(r.conf, r.seen) for r in refs]), nprocs=2, join=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='needs a GPU')
def test_cuda_bank_matches_cpu():
    probs, labels = _batch()
    for kw in (dict(), dict(reduction='pixel'), dict(indicator='entropy'), dict(absent_as_zero=True)):
        cpu, gpu = ConfidenceBank(5, 0.9, **kw), ConfidenceBank(5, 0.9, device='cuda', **kw)
        for _ in range(3): cpu.update(probs, labels); gpu.update(probs.cuda(), labels.cuda())
        assert gpu.conf.device.type == 'cuda'
        torch.testing.assert_close(gpu.conf.cpu(), cpu.conf)
        state = gpu.state_dict()
        torch.testing.assert_close(ConfidenceBank(5).load_state_dict(state).conf, cpu.conf)  # a GPU checkpoint loads on CPU
