"""The pure parts of tools/browser_check.py (no browser, no JupyterLab): the command line, the port, the URL, the
server command, the settings it writes, the wait loop. The browser itself is checked by running the script by hand."""
import importlib.util, json, socket, sys
from pathlib import Path
import pytest

_p = Path(__file__).resolve().parents[1] / 'tools' / 'browser_check.py'
_spec = importlib.util.spec_from_file_location('browser_check', _p)
bc = importlib.util.module_from_spec(_spec); _spec.loader.exec_module(bc)


@pytest.fixture
def nb(tmp_path):
    p = tmp_path / 'demo.ipynb'; p.write_text('{}')
    return p


def test_parse_args_defaults(nb):
    args = bc.parse_args([str(nb)])
    assert (args.notebook, args.click, args.times, args.port, args.window_size) == (nb, None, 1, 0, (1400, 1800))
    assert args.watch == ['.jp-OutputArea-output img'] and args.screenshot == Path('browser_check.png')


def test_parse_args_click_watch(nb):
    args = bc.parse_args([str(nb), '--click', 'step', '--times', '3', '--watch', '.widget-readout', '--watch', 'img', '--window', '800X600'])
    assert (args.click, args.times, args.watch, args.window_size) == ('step', 3, ['.widget-readout', 'img'], (800, 600))


@pytest.mark.parametrize('args, msg', [
    (['missing.ipynb'], 'missing.ipynb: no such notebook'),
    (['{nb}', '--times', '0', '--click', 'step'], '--times 0: must be at least 1'),
    (['{nb}', '--times', '2'], '--times needs --click'),
    (['{nb}', '--window', 'big'], '--window big: expected WIDTHxHEIGHT'),
    (['{nb}', '--port', '70000'], '--port 70000: not a port number'),
])
def test_parse_args_errors(nb, capsys, args, msg):
    with pytest.raises(SystemExit) as e: bc.parse_args([x.format(nb=nb) for x in args])
    assert e.value.code == 2 and msg in capsys.readouterr().err


def test_parse_args_not_a_notebook(tmp_path, capsys):
    (tmp_path / 'x.py').write_text('')
    with pytest.raises(SystemExit): bc.parse_args([str(tmp_path / 'x.py')])
    assert 'x.py: no such notebook (.ipynb)' in capsys.readouterr().err


def test_free_port_is_free_on_localhost():
    port = bc.free_port()
    assert 1024 <= port < 65536
    with socket.socket() as s: s.bind(('127.0.0.1', port))   # raises if something holds it


def test_lab_url():
    assert bc.lab_url(8888, 'abc123', '24_compare.ipynb') == 'http://127.0.0.1:8888/lab/tree/24_compare.ipynb?token=abc123'
    assert bc.lab_url(9000, 't', 'a b/c.ipynb') == 'http://127.0.0.1:9000/lab/tree/a%20b/c.ipynb?token=t'
    assert bc.lab_url(9000, 't') == 'http://127.0.0.1:9000/lab?token=t'


def test_lab_command_localhost_only(tmp_path):
    cmd = bc.lab_command(8123, 'tok', tmp_path, tmp_path / 's', tmp_path / 'w')
    assert cmd[:3] == [sys.executable, '-m', 'jupyterlab']
    for arg in ('--no-browser', '--ServerApp.ip=127.0.0.1', '--ServerApp.port=8123', '--ServerApp.port_retries=0',
                '--IdentityProvider.token=tok', f'--ServerApp.root_dir={tmp_path}', f'--LabApp.user_settings_dir={tmp_path / "s"}',
                '--ServerApp.terminals_enabled=False'):
        assert arg in cmd
    assert not any('0.0.0.0' in c for c in cmd)


def test_write_settings(tmp_path):
    bc.write_settings(tmp_path)
    read = lambda name: json.loads((tmp_path / '@jupyterlab' / name).read_text())
    assert read('notebook-extension/tracker.jupyterlab-settings') == {'windowingMode': 'none'}
    assert read('docmanager-extension/plugin.jupyterlab-settings') == {'autosave': False}
    assert read('apputils-extension/notification.jupyterlab-settings')['fetchNews'] == 'false'


def test_wait_for_returns_the_value_and_names_what_timed_out():
    calls = iter([None, 0, ['ready']])
    assert bc.wait_for('x', lambda: next(calls), timeout=5, every=0) == ['ready']
    def boom(): raise ConnectionRefusedError('refused')
    with pytest.raises(bc.CheckFailed, match=r"timed out after 0 s waiting for the server \(last error: refused\)"):
        bc.wait_for('the server', boom, timeout=0, every=0)
    def fail(): raise bc.CheckFailed('JupyterLab exited with status 1')
    with pytest.raises(bc.CheckFailed, match='exited with status 1'):
        bc.wait_for('anything', fail, timeout=60, every=0)   # a failure inside the wait ends it at once


def test_log_count():
    assert bc.log_count('') == 0 and bc.log_count('  ') == 0
    assert bc.log_count('3') == 3 and bc.log_count('2 1') == 3             # one status item per source
