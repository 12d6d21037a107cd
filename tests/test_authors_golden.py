"""The kit against the authors' code (SemiSeg-AEL): `tests/golden/authors.json` holds what the authors' functions
returned on seeded inputs (written by `tools/authors_golden.py`, which runs their checkout); here the kit recomputes
each case from the same seeds under the `-authors` presets and must agree within the stated tolerance. With
`AEL_AUTHORS_REPO` set to a checkout, the figures are also regenerated from their code and compared with the stored.
`tests/test_authors_step.py` holds the training step to every switch these presets set."""
import importlib.util, json, os, sys
from pathlib import Path
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location('authors_golden', ROOT/'tools'/'authors_golden.py')
ag = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(ag)
GOLDEN = json.loads(ag.GOLDEN.read_text())
AUTHORS_REPO = os.environ.get('AEL_AUTHORS_REPO')

def test_golden_file_covers_every_case():
    "The figures name the authors' commit and its date, and the day they were made; the kit's numbers are compared below."
    assert GOLDEN['authors_commit'].startswith('747c797'), GOLDEN['authors_commit']
    assert GOLDEN['authors_commit_date'] == '2021-10-12T12:39:15+08:00' and GOLDEN['made_on'], GOLDEN.get('made_on')
    assert list(GOLDEN['cases']) == [name for name, *_ in ag.CASES]
    for name, fn, inputs, tol, _ in ag.CASES:
        c = GOLDEN['cases'][name]
        assert (c['function'], c['inputs'], c['tolerance']) == (fn, inputs, tol), name

@pytest.mark.parametrize('name', [name for name, *_ in ag.CASES])
def test_kit_matches_authors(name):
    torch.set_num_threads(1)
    c = GOLDEN['cases'][name]
    diff = ag.compare(ag.KIT[c['function']](**c['inputs']), c['authors'], c['tolerance'])
    assert not diff, f"{name} ({c['what']}): " + '; '.join(diff[:5])

@pytest.mark.parametrize('name', ['table', 'region_whole', 'fallback_box', 'bank'])
def test_paper_presets_differ_where_a_switch_says_so(name):
    "The figures can tell the switches apart: the paper preset's side of each switch misses the authors' figures."
    c = GOLDEN['cases'][name]
    assert ag.compare(ag.KIT[c['function']](**c['inputs'], preset='cityscapes'), c['authors'], c['tolerance'])

@pytest.mark.parametrize('name,switch', [('loss_cityscapes_aes', dict(aes_draw='pixel')),
                                         ('loss_cityscapes_aes', dict(unsup_per_image=True)),
                                         ('loss_voc_aes', dict(unsup_denominator='labeled')),
                                         ('loss_voc_aes', dict(aes_draw='pixel'))])
def test_loss_switches_matter(name, switch):
    "The kit's own side of each loss switch moves the loss away from the authors' figure."
    c = GOLDEN['cases'][name]
    assert ag.compare(ag.kit_unsup_loss(**c['inputs'], **switch), c['authors'], c['tolerance'])

@pytest.mark.skipif(not AUTHORS_REPO, reason='set AEL_AUTHORS_REPO to a SemiSeg-AEL checkout to regenerate the figures')
def test_regenerated_figures_match_stored(tmp_path):
    out = tmp_path/'authors.json'
    assert ag.main(['--authors-repo', AUTHORS_REPO, '--out', str(out)]) == 0
    new = json.loads(out.read_text())
    assert new['authors_commit'] == GOLDEN['authors_commit']
    for name, c in GOLDEN['cases'].items():
        assert not ag.compare(new['cases'][name]['authors'], c['authors'], c['tolerance']), name

def test_split_importer_cli_reproduces_authors_draw(tmp_path, capsys):
    "`ael-splits import authors LIST --n-sup N --seed S` labels exactly the images the authors' loader labels."
    from ael_nb.manifests import ael_splits, load_manifest
    c = GOLDEN['cases']['split_city']
    lst = ag.split_list(tmp_path/'fine_train.txt', c['inputs']['n_lines'])
    out = tmp_path/'m.json'
    assert ael_splits(['import', 'authors', str(lst), '--dataset', 'cityscapes', '--n-sup', str(c['inputs']['n_sup']),
                       '--seed', str(c['inputs']['seed']), '--out', str(out)]) == 0
    m = load_manifest(out)
    assert ag.split_figures(m.labeled, len(m.unlabeled)) == c['authors']
    assert (len(m.labeled), len(m.unlabeled), m.seed, m.count) == (186, 2789, 0, 186)
    p = m.provenance
    assert p['format'] == 'authors' and p['n_sup'] == 186 and '--n-sup 186 --seed 0' in p['command']
    assert ael_splits(['import', 'authors', str(lst), '--dataset', 'cityscapes', '--out', str(out)]) == 2   # no --n-sup
    assert '--n-sup' in capsys.readouterr().err

@pytest.mark.parametrize('switch', ['method.aes_bank=before', 'method.aes_draw=pixel'])
def test_whole_step_tells_the_aes_switches_apart(switch):
    "Three whole steps with the kit's side of an AES switch miss the authors' figures."
    torch.set_num_threads(1)
    c = GOLDEN['cases']['ael_steps']
    assert ag.compare(ag.kit_steps(**c['inputs'], overrides=[switch]), c['authors'], c['tolerance'])

def test_supervised_loss_with_every_label_ignored_is_zero():
    "The step's L_s (OHEM + auxiliary OHEM) on a batch with no label: 0 and a zero gradient, where the authors' mean CE is NaN."
    from ael_nb.steps import supervised_loss
    c = GOLDEN['cases']['ohem']
    main, aux, target = ag.ohem_inputs(c['inputs']['seed'])
    main.requires_grad_(); target[:] = 255
    loss = supervised_loss(dict(out=main, aux=aux), target, ag.get_preset('cityscapes-authors'))
    loss.backward()
    assert loss.item() == 0 and main.grad.abs().sum().item() == 0
    assert torch.nn.functional.cross_entropy(main, target, ignore_index=255).isnan()   # the authors' fallback: mean CE
