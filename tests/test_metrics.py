"Multi-process checks of ael_nb.metrics that a notebook cannot run: ConfusionMatrix.all_reduce over 2 gloo ranks."
import torch, torch.distributed as dist, torch.multiprocessing as mp
from ael_nb.metrics import ConfusionMatrix


def _data():
    g = torch.Generator().manual_seed(0)
    target = torch.randint(0, 6, (4, 12, 12), generator=g)
    target[target == 5] = 255
    return torch.randint(0, 5, (4, 12, 12), generator=g), target


def _worker(rank, world, store, out):
    dist.init_process_group('gloo', init_method=f'file://{store}', rank=rank, world_size=world)
    try:
        pred, target = _data()
        cm = ConfusionMatrix(5).update(pred[rank::world], target[rank::world]).all_reduce()
        torch.save(cm.mat, f'{out}.{rank}')
    finally:
        dist.destroy_process_group()


def test_all_reduce_two_ranks(tmp_path):
    out = tmp_path / 'mat'
    mp.spawn(_worker, args=(2, str(tmp_path / 'store'), str(out)), nprocs=2, join=True)
    whole = ConfusionMatrix(5).update(*_data()).mat
    for r in range(2):
        assert torch.equal(torch.load(f'{out}.{r}'), whole)   # every rank holds the dataset's matrix
