"""Host synchronisations of one training step (`ael_nb.core.count_syncs`), held to an exact number per method and
preset. Each one stalls a GPU until its queue drains; the step proper is counted (its batches are rendered beforehand,
as a GPU run's loader workers do; ACM's sources load in their thread), on a step that writes no log line. A failure
prints where each sync came from."""
import pytest
import torch
from ael_nb.core import count_syncs
from ael_nb.train import setup
from tiny_presets import tiny_config

# What remains, and why each cannot go (a failure prints each site):
# - every method, 1 `tolist`: the trainer reads whether the step's loss is finite (`Run._read`), because a non-finite
#   loss must stop the run or skip the update before the optimiser touches the weights; AEL's next ACM images (their
#   indices and seeds, drawn in this step for the loading thread) come to the host in that same copy.
# - AEL, 1 `_local_scalar_dense`: Copy-Paste reads how many images get a paste, which decides how many random numbers
#   the jitter draws and so every later draw: drawing for every image would change every run's numbers
#   (`tests/test_digests.py`). ACM's region search reads nothing: `component_ids` runs a fixed number of rounds.
# - Mean Teacher, 1 `index (bool mask)` and its backward's `index_put`: its consistency loss averages over the valid
#   pixels by a boolean index (`18_steps`), kept as it is: a masked sum would add in another order.
# - FixMatch 1 `tolist`, UniMatch and UniMatch V2 2: `strong_view` reads its uniforms to choose each image's photometric ops
#   (torchvision's functional ops take Python numbers), once per strong view.
READ = {'tolist (to host)': 1}
AEL = {'tolist (to host)': 1, '_local_scalar_dense': 1}
STRONG = lambda views: {'tolist (to host)': 1 + views}
EXPECTED = {('cpu', 'supervised'): READ, ('cpu', 'cutmix'): READ, ('cpu', 'ael'): AEL,
            ('cpu', 'meanteacher'): {**READ, 'index (bool mask)': 1, 'index_put (bool mask)': 1},
            ('cpu', 'fixmatch'): STRONG(1), ('cpu', 'unimatch'): STRONG(2), ('cpu', 'unimatch_v2'): STRONG(2),
            **{(f'{d}-unimatch_v2', None): STRONG(2) for d in ('voc', 'cityscapes', 'ade20k')},
            **{(p, None): AEL for p in ('cityscapes', 'voc', 'ade20k', 'cpu96', 'folder', 'cityscapes-authors',
                                        'voc-authors')},
            **{(f'{d}-{m}', None): STRONG(1 if m == 'fixmatch' else 2) for d in ('cityscapes', 'voc')
               for m in ('fixmatch', 'unimatch')}}

def step_syncs(preset: str, method: str | None, out) -> 'SyncCount':
    "The host synchronisations of the second step of a tiny run (the first fills ACM's queue)."
    torch.set_num_threads(1)
    with setup(tiny_config(preset, method, out)) as run:
        run.step()
        run.loaders.labeled = iter([next(run.loaders.labeled)])         # rendered outside the count
        if run.loaders.unlabeled is not None: run.loaders.unlabeled = iter([next(run.loaders.unlabeled)])
        with count_syncs(depth=3) as n: run.step()
    return n

@pytest.mark.parametrize('preset,method', EXPECTED)
def test_step_syncs(tmp_path, preset, method):
    n = step_syncs(preset, method, tmp_path)
    assert dict(n.ops) == EXPECTED[preset, method], f"{preset} {method}: {n}"

if __name__ == '__main__':                                             # the breakdown of every case
    import tempfile
    for p, m in EXPECTED:
        with tempfile.TemporaryDirectory() as d: print(f"{p} {m}: {step_syncs(p, m, d)}\n")
