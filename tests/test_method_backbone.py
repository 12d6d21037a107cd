"""Every method on every backbone family either trains a tiny run or is refused before step 1 in one line that names
the backbone to set. The kit's networks are two: DeepLabv3+ on a ResNet (`model.backbone=resnet18/34/50/101`) and a
DPT on DINOv2 (`dinov2_tiny/s/b/l`); the step code tells them apart by family only, so ResNet-18 and the tiny DINOv2
stand for their families here (tiny runs: `tests/tiny_presets.py`)."""
import ast
import pytest
import torch
from ael_nb.config import RANGES
from ael_nb.dpt import DINOV2
from ael_nb.model import RESNETS
from ael_nb.train import train
from tiny_presets import METHODS, tiny_config

torch.set_num_threads(1)
# every method, and AEL on each framework it builds on (method.base)
RUNS = {m: [f'method.name={m}'] for m in METHODS} | {f'ael/{b}': ['method.name=ael', f'method.base={b}']
                                                     for b in ('fixmatch', 'unimatch', 'unimatch_v2')}
BACKBONES = {'resnet18': [], 'dinov2_tiny': ['data.crop_size=28,42', 'data.synthetic_size=28,42']}
# a method's perturbation lives in one network: UniMatch's fp in DeepLabv3+'s decoder, V2's dropout in the DPT's
REFUSED = {('unimatch', 'dinov2_tiny'): 'model.backbone=resnet50', ('ael/unimatch', 'dinov2_tiny'): 'model.backbone=resnet50',
           ('unimatch_v2', 'resnet18'): 'model.backbone=dinov2_s', ('ael/unimatch_v2', 'resnet18'): 'model.backbone=dinov2_s'}


def test_the_two_families_are_every_backbone():
    ok, desc = RANGES['model.backbone']
    accepted = ast.literal_eval(desc.removeprefix('one of '))
    assert sorted(accepted) == sorted([*RESNETS, *DINOV2]) and all(map(ok, accepted)) and not ok('xception')


def test_ael_train_refuses_unimatch_v2_on_the_cpu_preset_in_one_line(capsys, tmp_path):
    "As a new user tries it: `ael-train --method unimatch_v2` on the cpu preset (ResNet-18), refused before step 1."
    from ael_nb.cli import ael_train
    rc, err = ael_train(['--method', 'unimatch_v2', '--out', str(tmp_path)]), capsys.readouterr().err
    assert rc == 2 and err.count('\n') == 1 and 'model.backbone=dinov2_s (dinov2_tiny on a CPU)' in err, err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize('backbone', list(BACKBONES))
@pytest.mark.parametrize('run', list(RUNS))
def test_each_method_and_backbone_trains_or_is_refused_in_one_line(run, backbone, tmp_path):
    over = [*RUNS[run], f'model.backbone={backbone}', *BACKBONES[backbone]]
    if (run, backbone) in REFUSED:
        with pytest.raises(ValueError) as e: tiny_config('cpu', None, tmp_path, *over)
        msg = str(e.value)
        assert '\n' not in msg and msg.startswith('invalid configuration: ') and REFUSED[run, backbone] in msg, msg
        assert f'model.backbone={backbone}' in msg
        return
    s = train(tiny_config('cpu', None, tmp_path, *over))
    assert s['it'] == 3 and s['last'], s
