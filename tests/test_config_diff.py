"""One comparison of two configurations (`ael_nb.config.config_diff`) and its named ignore-sets, as each of its four
users asks it: a resumed run (`RESUME_FREE`), a resumed checkpoint (`RUN_KEYS`), a checkpoint's weights
(`WEIGHTS_FREE`) and a supervised reference cell (`ael_nb.draws.SETTING_IGNORED`)."""
import pytest
from ael_nb.draws import SETTING_IGNORED, setting_of
import yaml
from ael_nb.config import (RESUME_FREE, RUN_KEYS, WEIGHTS_FREE, AllBut, Config, config_diff, flat_items, flat_settings,
                           get_config, load_config, save_config, to_dict, upgrade_config, valid_keys)
from ael_nb.faults import config_changes

@pytest.mark.parametrize('name', ['RESUME_FREE', 'RUN_KEYS', 'WEIGHTS_FREE', 'SETTING_IGNORED'])
def test_every_set_names_keys_or_sections(name):
    "A typo in a set would silently compare a key it meant to leave out: each entry is a key, or a section ending in '.'."
    keys, sets = set(valid_keys()), dict(RESUME_FREE=RESUME_FREE, RUN_KEYS=RUN_KEYS, WEIGHTS_FREE=WEIGHTS_FREE,
                                         SETTING_IGNORED=SETTING_IGNORED)
    for k in sets[name]:
        assert k in keys or (k.endswith('.') and any(v.startswith(k) for v in keys)), f"{name}: {k!r} names no key"

def test_config_diff_reports_both_values_and_leaves_out_the_set():
    a, b = get_config('cpu'), get_config('cpu', overrides=['optim.lr=0.1', 'run.stop_at=3', 'model.aux=true'])
    assert config_diff(a, a) == {}
    assert config_diff(a, b) == {'model.aux': (False, True), 'optim.lr': (0.02, 0.1), 'run.stop_at': (None, 3)}
    assert config_diff(a, b, RESUME_FREE) == {'model.aux': (False, True), 'optim.lr': (0.02, 0.1)}
    assert config_diff(a, b, RUN_KEYS) == config_diff(a, b, RESUME_FREE)
    assert config_diff(a, b, WEIGHTS_FREE) == {'model.aux': (False, True)}
    assert config_diff(to_dict(a), b, AllBut(['optim.lr'])) == {'optim.lr': (0.02, 0.1)}    # a nested dict as a Config

def test_a_stored_config_that_predates_a_key_reads_its_default():
    old = to_dict(Config()); del old['model']['head_channels']
    assert 'model.head_channels' not in config_diff(old, Config())
    assert config_diff(old, get_config('cpu'), WEIGHTS_FREE)['model.head_channels'] == (Config().model.head_channels, 64)

def test_an_old_config_upgrades_to_todays_form_and_loads_as_before(tmp_path):
    "A config.yaml written before 37bf2ad (no model.head_channels): compared in today's form; as a partial file it takes "
    "the preset's value, as a run's own file the key's default (256, the head it trained), so resuming it under today's "
    "`cpu` preset (64) is a change the check names."
    cfg = get_config('cpu'); old = to_dict(cfg); del old['model']['head_channels']
    now = upgrade_config(old)
    assert [k for k, _ in flat_items(now)] == valid_keys() and now['model']['head_channels'] == Config().model.head_channels
    assert {k: v for k, v in now.items() if k != 'model'} == {k: v for k, v in old.items() if k != 'model'}
    assert flat_settings(old) == dict(flat_items(now))
    (tmp_path / 'config.yaml').write_text(yaml.safe_dump(old, sort_keys=False))
    assert load_config(tmp_path / 'config.yaml') == cfg                  # the preset's value, as from_dict reads it
    assert load_config(tmp_path / 'config.yaml', stored=True).model.head_channels == Config().model.head_channels
    assert config_changes(cfg, tmp_path) == [f'model.head_channels: {Config().model.head_channels} -> {cfg.model.head_channels}']


def test_resume_check_and_reference_match_use_it(tmp_path):
    save_config(get_config('cpu', overrides=['optim.lr=0.05']), tmp_path / 'config.yaml')
    now = get_config('cpu', overrides=['run.stop_at=5', 'data.num_workers=2'])
    assert config_changes(now, tmp_path) == ['optim.lr: 0.05 -> 0.02']
    sup = to_dict(get_config('cpu', overrides=['method.name=supervised']))
    for over in (['optim.lr=0.1'], ['run.seed=3', 'method.gamma=2'], ['eval.interval=7']):
        other = to_dict(get_config('cpu', overrides=['method.name=supervised', *over]))
        assert (setting_of(sup) == setting_of(other)) == (not config_diff(sup, other, SETTING_IGNORED)), over
    assert setting_of(sup) == flat_settings(sup, SETTING_IGNORED) and 'optim.lr' in setting_of(sup)
