"""What the notebook cannot show: `ClassTable.sync` across two gloo processes (ranks that refreshed
different images end with identical tables, each image holding the column of its last refresh), and
the augmentations on a GPU when one is present."""
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from ael_nb.cutmix import ClassTable, adaptive_cutmix, cutmix
from ael_nb.copy_paste import adaptive_copy_paste
from ael_nb.transforms import weak_augment


def _lab(*cls): return torch.tensor(cls).view(-1, 1, 1).expand(-1, 4, 4)

# per rank, per step: (image indices, class of each image's pseudo-label)
UPDATES = {0: [([0, 1], [1, 0]), ([0], [2])],
           1: [([2, 1], [2, 1]), ([3], [0])]}


def _table(rank):
    t = ClassTable(3, 6)
    for idx, cls in UPDATES[rank]: t.update(torch.tensor(idx), _lab(*cls))
    return t


def _worker(rank, world, init_file, out):
    dist.init_process_group('gloo', init_method=f'file://{init_file}', rank=rank, world_size=world)
    try:
        t = _table(rank).sync()
        torch.save(t.state_dict(), f'{out}.{rank}')
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
def test_sync_over_two_ranks(tmp_path):
    out = str(tmp_path / 'state')
    mp.spawn(_worker, args=(2, str(tmp_path / 'init'), out), nprocs=2, join=True)
    s0, s1 = torch.load(f'{out}.0'), torch.load(f'{out}.1')
    assert torch.equal(s0['table'], s1['table']) and torch.equal(s0['stamp'], s1['stamp'])
    # image 0: rank 0's newest column only; 1: union of the tie at step 1; 2, 3: rank 1's; 4, 5: unseen
    assert s0['table'].T.int().tolist() == [[0, 0, 1], [1, 1, 0], [0, 0, 1], [1, 0, 0], [0, 0, 0], [0, 0, 0]]
    assert s0['stamp'].tolist() == [2, 1, 1, 2, -1, -1]
    # and it is what merge_ computes in one process
    ref = ClassTable(3, 6).merge_(_table(0)).merge_(_table(1))
    assert torch.equal(ref.table, s0['table'])


def test_unsynced_ranks_differ():
    "Without sync the two ranks disagree, so the test above checks something."
    assert not torch.equal(_table(0).table, _table(1).table)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='no GPU')
def test_gpu_matches_cpu():
    "With a CPU generator the GPU gives exactly the CPU's augmentations."
    g = lambda: torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 32, 40); p = torch.randn(4, 5, 32, 40).softmax(1)
    y = p.argmax(1); cls = torch.tensor([0, 1, 2, 3])
    for f in (lambda d: cutmix(x.to(d), p.to(d), g()),
              lambda d: adaptive_copy_paste(x.to(d), y.to(d), torch.full((5,), 0.2, device=d), generator=g()),
              lambda d: adaptive_cutmix(x.to(d), p.to(d), x.flip(0).to(d), p.flip(0).to(d), cls.to(d), g())):
        for a, b in zip(f('cpu'), f('cuda')): assert torch.equal(a, b.cpu())
    s = dict(image=torch.randint(0, 256, (3, 50, 60), dtype=torch.uint8), label=torch.randint(0, 5, (50, 60)), id='a')
    a = weak_augment(s, 48, generator=g())
    b = weak_augment({k: v.cuda() if torch.is_tensor(v) else v for k, v in s.items()}, 48, generator=g())
    torch.testing.assert_close(a['image'], b['image'].cpu(), atol=1e-5, rtol=0)
    assert torch.equal(a['label'], b['label'].cpu())


# The region search against scikit-image's 8-connected labelling (`connectivity=2`, the authors' `measure.label`) on
# crafted 20 x 20 maps, min_area 0.02 = 8 pixels, a component eligible when its area is strictly larger (authors'
# `np.sum(pred == value) > area_thresh * area_all`).
def _crafted() -> torch.Tensor:
    m = torch.zeros(3, 20, 20, dtype=torch.bool)
    m[0, 1:3, 1:5] = True                                        # 8 pixels: at the threshold, not eligible
    for i in range(9): m[0, 5 + i, 10 + i] = True                # a diagonal line of 9: one component only 8-connected
    m[1, 1:4, 1:4] = m[1, 4:7, 4:7] = True                       # two 3x3 blocks touching at a corner: 18, or 9 + 9
    m[1, 12:15, 12] = True; m[1, 14, 13:19] = True               # a 4-connected L of 9
    m[2, 2:4, 2:6] = True; m[2, 10, 10] = True                   # 8 and 1: nothing eligible
    return m

def _skimage_boxes(mask, min_pixels) -> set:
    from skimage.measure import label, regionprops
    return {tuple(r.bbox) for r in regionprops(label(mask.numpy(), connectivity=2)) if r.area > min_pixels}

def test_region_search_is_skimages_8_connected():
    "Every box the search picks is an eligible scikit-image component's, and every such component gets picked."
    from ael_nb.cutmix import component_ids, region_boxes
    m = _crafted()
    want = [_skimage_boxes(m[i], 8) for i in range(len(m))]
    assert [len(w) for w in want] == [1, 2, 0]                   # the line; the corner-touching pair and the L
    seen = [set() for _ in m]
    for seed in range(16):
        boxes, found = region_boxes(m, torch.Generator().manual_seed(seed), min_area=0.02, stride=1)
        for i in range(len(m)):
            assert bool(found[i]) == bool(want[i]), (i, seed)
            if found[i]: seen[i].add(tuple(boxes[i].tolist()))
    assert seen == want
    from skimage.measure import label
    for i in range(len(m)):                                      # the partition itself, pixel for pixel
        a, b = component_ids(m[i:i + 1])[0].numpy().ravel(), label(m[i].numpy(), connectivity=2).ravel()
        assert len(set(zip(a, b))) == len(set(a)) == len(set(b)), i
