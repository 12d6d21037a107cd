"""The package whole without its checkout: the wheel built from this checkout, installed into a fresh venv outside it,
reads the stored draws it ships (`ael_nb.draws.STORED`), and a tiny `ael-train` there ends with the same closing
summary's draw lines as the editable install; a stored default-setting run is placed among the same draws both ways."""
import json, os, re, subprocess, sys, sysconfig
from pathlib import Path
import pytest
from ael_nb.plan import TINY

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow   # a wheel built and installed, two tiny runs: about a minute
DRAW_LINE = re.compile(r'^(this run|its twin|no stored|stored draws|  \w+ +\d+ thr|.*tail is above|paired gain)')

def draw_lines(text: str, *names) -> list[str]:
    "The closing summary's lines that place a run among the stored draws, its own folders named as placeholders."
    for path, tag in names: text = text.replace(str(path), tag)
    return [l for l in text.splitlines() if DRAW_LINE.match(l)]

@pytest.fixture(scope='module')
def wheel_venv(tmp_path_factory):
    "A venv outside the checkout with only the wheel of this checkout installed (its dependencies seen through a .pth)."
    tmp = tmp_path_factory.mktemp('wheel')
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')} | dict(OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
    r = subprocess.run([sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation', '-q', str(REPO), '-w', str(tmp / 'dist')],
                       capture_output=True, text=True, cwd=tmp, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    whl, = (tmp / 'dist').glob('ael_nb-*.whl')
    venv = tmp / 'venv'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(venv)], check=True, env=env, timeout=300)
    py = venv / 'bin' / 'python'
    site = Path(subprocess.run([str(py), '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                               capture_output=True, text=True, env=env, check=True).stdout.strip())
    # torch, numpy, ... from this environment; its editable ael_nb is not seen (a path line adds no .pth of that folder)
    (site / 'outer_env.pth').write_text(sysconfig.get_paths()['purelib'] + '\n')
    r = subprocess.run([sys.executable, '-m', 'pip', '--python', str(py), 'install', '--no-deps', '--no-index', '-q', str(whl)],
                       capture_output=True, text=True, cwd=tmp, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return tmp, whl, venv, env

def test_the_wheel_ships_what_the_package_reads(wheel_venv):
    "The wheel holds the stored draws, step times and GPU reports (and no bench/); installed, ael_nb reads them from itself."
    import zipfile
    from ael_nb.draws import STORED
    tmp, whl, venv, env = wheel_venv
    names = zipfile.ZipFile(whl).namelist()
    shipped = {n.removeprefix('ael_nb/stored/') for n in names if n.startswith('ael_nb/stored/')}
    assert shipped == {p.relative_to(STORED).as_posix() for p in STORED.rglob('*') if p.is_file()} and not any(n.startswith('bench/') for n in names)
    code = ('import ael_nb, json; from ael_nb.draws import STORED; from ael_nb.arithmetic import measured_speed; '
            'print(json.dumps(dict(pkg=ael_nb.__file__, stored=str(STORED), speeds=len(measured_speed()), '
            'steps=sorted(p.name for p in STORED.glob("*_step_*.json")))))')
    got = json.loads(subprocess.run([str(venv / 'bin' / 'python'), '-c', code], capture_output=True, text=True, env=env, cwd=tmp,
                                    check=True, timeout=300).stdout)
    assert Path(got['pkg']).is_relative_to(venv) and Path(got['stored']).is_relative_to(venv), got   # the wheel's, not the checkout's
    from ael_nb.arithmetic import measured_speed
    assert got['speeds'] == len(measured_speed()) > 0 and got['steps'] == sorted(p.name for p in STORED.glob('*_step_*.json'))
    assert got['steps']

def test_a_tiny_run_from_the_wheel_summarises_as_the_checkout(wheel_venv):
    "A tiny `ael-train` from the wheel finishes, and its closing summary's draw lines are the editable install's; the "
    "stored AMX draw as a run folder is placed among the stored AMX draws identically from the wheel and the checkout."
    from ael_nb.config import from_dict, save_config, upgrade_config
    from ael_nb.draws import STORED, closing_summary
    tmp, whl, venv, env = wheel_venv
    out = {}
    for who, cmd, e in (('wheel', [str(venv / 'bin' / 'ael-train')], env),
                        ('checkout', [sys.executable, '-c', 'import sys; from ael_nb.cli import ael_train; sys.exit(ael_train())'],
                         env | dict(PYTHONPATH=str(REPO)))):
        run = tmp / f'run_{who}'
        r = subprocess.run(cmd + ['--out', str(run), '--seed', '1', *TINY], capture_output=True, text=True, env=e, cwd=tmp, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        out[who] = draw_lines(r.stdout, (run, '<run>'))
    assert out['wheel'] == out['checkout'] and any(l.startswith('this run is one draw') for l in out['wheel']), out
    cell = json.loads((STORED / 'sixteenth-val400-amxbf16-xeon' / 'ael_s0_2threads.json').read_text())
    run = tmp / 'amx'; run.mkdir()
    save_config(from_dict(upgrade_config(cell['config'])), run / 'config.yaml')
    (run / 'summary.json').write_text(json.dumps(dict(cell, last=cell['metrics'], run_dir=str(run))))
    (run / 'metrics.jsonl').write_text(json.dumps(dict(it=cell['it'], eval=cell['metrics'])) + '\n')
    code = 'import sys; from ael_nb.draws import STORED, closing_summary; print(STORED); print(closing_summary(sys.argv[1]))'
    r = subprocess.run([str(venv / 'bin' / 'python'), '-c', code, str(run)], capture_output=True, text=True, env=env, cwd=tmp, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    stored_there, text = r.stdout.split('\n', 1)
    wheel, here = draw_lines(text, (stored_there, '<STORED>')), draw_lines(closing_summary(run), (STORED, '<STORED>'))
    assert wheel == here, (wheel, here)
    assert 'stored draws of this setting on amx-bf16, tail mIoU (%) by seed, 10 to 40:' in wheel, wheel
    assert "this run's tail is above 1 of 1 supervised draws and above 0 of 0 stored ael draws at 2 threads" in wheel, wheel
