"""One resolution (issue 41): `ael_nb.config.resolved` decides every setting once and marks the configuration;
the engine refuses one it has not resolved; `config.yaml` keeps the configuration resolved for any device."""
from unittest import mock
import pytest
import torch
import ael_nb.config
from ael_nb.config import ANY_DEVICE, asked_preset, get_config, get_preset, load_config, resolved
from ael_nb.methods import step_function
from ael_nb.plan import TINY, micro_batch, unlabeled_micro_batch
from ael_nb.train import setup

NO_BF16 = dict(_is_amx_tile_supported=lambda: False, _is_avx512_bf16_supported=lambda: False)  # fp32 on any CPU

def test_get_config_and_get_preset_resolve_once_for_any_device():
    c, p = get_config('cpu'), get_preset('cpu')
    assert (c.resolved_for, p.resolved_for, asked_preset('cpu').resolved_for) == (ANY_DEVICE, ANY_DEVICE, None)
    assert c.method.acp is True and c.optim.amp == 'auto'             # AEL's components decided; 'auto' left to a device
    assert resolved(c) is c                                           # resolving it again decides nothing

def test_setup_decides_no_setting_twice(tmp_path, monkeypatch):
    "`setup` on `get_config`'s result decides only what needs the device: AEL's components are not decided again."
    cfg = get_config('cpu', overrides=TINY + [f'run.out={tmp_path}'])
    decided = []
    monkeypatch.setattr(ael_nb.config, 'framework', lambda m: decided.append(m.name) or m.name)
    with setup(cfg) as run:
        assert (decided, run.cfg.resolved_for, run.cfg.micro_batches) == ([], 'cpu', (2, 2))
        assert resolved(run.cfg, 'cpu') is run.cfg
        with pytest.raises(ValueError, match='resolved for cpu, not cuda:0'): resolved(run.cfg, 'cuda:0')

def test_the_engine_refuses_an_unresolved_configuration():
    asked = asked_preset('cpu')
    for read in (micro_batch, unlabeled_micro_batch):
        with pytest.raises(ValueError, match=r'^the configuration is not resolved: `ael_nb.config.resolved`'): read(asked)
    with pytest.raises(ValueError, match="method 'ael' is not resolved"): step_function(asked.method)

def test_config_yaml_keeps_the_configuration_resolved_for_any_device(tmp_path):
    "The run uses what its device decides; config.yaml keeps 'auto' (the machine that resumes decides again)."
    over = TINY + [f'run.out={tmp_path}', 'optim.amp=auto', 'model.channels_last=auto', 'method.name=cutmix']
    with mock.patch.multiple(torch.cpu, **NO_BF16), setup(get_config('cpu', overrides=over)) as run:
        used = run.cfg
    saved = load_config(tmp_path / 'config.yaml')
    assert (used.optim.amp, used.model.channels_last) == ('none', False)
    assert (saved.optim.amp, saved.model.channels_last) == ('auto', 'auto')
    assert [getattr(saved.method, p) for p in ael_nb.config.AEL_PARTS] == [False] * 4   # decided: off under cutmix
    assert saved == used.for_any_device and resolved(saved) == used.for_any_device
