"""Open a notebook in JupyterLab in headless Chromium, run all its cells, optionally click a button, check that
pictures or widgets change, and save a screenshot.

Opt-in, run by hand (not in CI: it starts a browser and a kernel). It needs Debian's Chromium and its driver and
selenium from PyPI, in the environment that has the kit's dev extra (JupyterLab, ipywidgets):

    apt-get update && apt-get install -y chromium chromium-driver
    pip install selenium

    python tools/browser_check.py nbs/24_compare.ipynb --screenshot compare.png
    python tools/browser_check.py my.ipynb --click step --times 3 --watch '.widget-readout' --screenshot step.png

What it does: starts `jupyter lab` headless on a free port of 127.0.0.1 with a token it draws (never another
interface), with fresh settings and workspace folders (no news pop-up, every cell in the DOM); opens the notebook;
waits for the kernel; runs Run > Run All Cells; waits until no cell is running and the kernel is idle; fails if
a cell raised; fails if opening the notebook marked it modified (its stored metadata differs from what JupyterLab
writes, so an autosave would rewrite a file the user only opened). With `--click TEXT` it clicks the widget button whose label is TEXT, `--times` times, and after
each click waits until what the `--watch` CSS selectors match (default: the pictures in the outputs; an image's
`src`, an input's value, else its text) differs from before the click. At the end it fails if any output went to
JupyterLab's Log Console (outputs that belong to no cell, e.g. printed or displayed by a widget callback) or if
the notebook's file changed on disk. It saves the screenshot in every case,
also on failure, and always shuts JupyterLab down. Exit status 0 = every check passed; 1 = a check failed or
timed out, with one line saying which.
"""
from __future__ import annotations
import argparse, hashlib, json, os, re, secrets, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path
from urllib.parse import quote

DEFAULT_WATCH = ['.jp-OutputArea-output img']
# JupyterLab settings for a reproducible headless session: no news/update requests, every cell attached to the DOM,
# no autosave (the check never writes the notebook it runs)
LAB_SETTINGS = {'@jupyterlab/apputils-extension/notification.jupyterlab-settings': {'fetchNews': 'false', 'checkForUpdates': False},
                '@jupyterlab/docmanager-extension/plugin.jupyterlab-settings': {'autosave': False},
                '@jupyterlab/notebook-extension/tracker.jupyterlab-settings': {'windowingMode': 'none'}}


class CheckFailed(Exception):
    "A check that did not pass: the message is the one line printed."


def parse_args(argv=None) -> argparse.Namespace:
    "The command line, with the notebook checked to exist."
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument('notebook', type=Path, help='the .ipynb to open (its folder becomes JupyterLab\'s root and the kernel\'s cwd)')
    ap.add_argument('--click', default=None, metavar='TEXT', help='label of the ipywidgets button to click')
    ap.add_argument('--times', type=int, default=1, help='how many times to click it (default 1)')
    ap.add_argument('--watch', action='append', default=None, metavar='CSS',
                    help=f'what must change after each click (repeatable; default {DEFAULT_WATCH[0]!r})')
    ap.add_argument('--show', default=None, metavar='TEXT', help='scroll to the first cell whose source contains TEXT before the screenshot')
    ap.add_argument('--screenshot', type=Path, default=Path('browser_check.png'), help='PNG to write (default browser_check.png)')
    ap.add_argument('--timeout', type=float, default=300, help='seconds for each wait: server, kernel, run all, one click (default 300)')
    ap.add_argument('--port', type=int, default=0, help='port on 127.0.0.1 (default 0: a free one)')
    ap.add_argument('--window', default='1400x1800', help='browser window WIDTHxHEIGHT (default 1400x1800)')
    args = ap.parse_args(argv)
    if args.notebook.suffix != '.ipynb' or not args.notebook.is_file(): ap.error(f'{args.notebook}: no such notebook (.ipynb)')
    if args.times < 1: ap.error(f'--times {args.times}: must be at least 1')
    if args.times != 1 and not args.click: ap.error('--times needs --click')
    if not 0 <= args.port < 65536: ap.error(f'--port {args.port}: not a port number')
    try: args.window_size = tuple(int(v) for v in args.window.lower().split('x'))
    except ValueError: args.window_size = ()
    if len(args.window_size) != 2 or min(args.window_size) < 200: ap.error(f'--window {args.window}: expected WIDTHxHEIGHT, e.g. 1400x1800')
    args.watch = args.watch or DEFAULT_WATCH
    return args


def free_port(host: str = '127.0.0.1') -> int:
    "A TCP port on `host` that nothing listens on now (the OS picks it)."
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def lab_url(port: int, token: str, path: str = '') -> str:
    "JupyterLab's URL for `path` (relative to its root; '' = the lab itself) on 127.0.0.1, with the token."
    return f"http://127.0.0.1:{port}/lab" + (f"/tree/{quote(path)}" if path else '') + f"?token={quote(token)}"


def lab_command(port: int, token: str, root: Path, settings: Path, workspaces: Path) -> list[str]:
    "The `jupyter lab` command line: localhost only, this port or fail, this token, fresh settings, no browser."
    return [sys.executable, '-m', 'jupyterlab', '--no-browser', '--ServerApp.ip=127.0.0.1', f'--ServerApp.port={port}',
            '--ServerApp.port_retries=0', f'--IdentityProvider.token={token}', f'--ServerApp.root_dir={root}',
            f'--LabApp.user_settings_dir={settings}', f'--LabApp.workspaces_dir={workspaces}', '--ServerApp.terminals_enabled=False'
            ] + (['--allow-root'] if hasattr(os, 'geteuid') and os.geteuid() == 0 else [])   # in a container as root


def write_settings(folder: Path):
    "JupyterLab user settings (`LAB_SETTINGS`) as the files JupyterLab reads from its user settings folder."
    for name, value in LAB_SETTINGS.items():
        p = folder / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(value))


def api(port: int, token: str, path: str):
    "GET a JupyterLab REST endpoint (JSON)."
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/{path}", headers={'Authorization': f'token {token}'})
    with urllib.request.urlopen(req, timeout=10) as r: return json.loads(r.read())


def wait_for(what: str, cond, timeout: float, every: float = 0.5):
    "Poll `cond()` until it returns something truthy (returned) or raise `CheckFailed` naming `what` after `timeout` s."
    t0 = time.time()
    while True:
        try: v = cond()
        except CheckFailed: raise
        except Exception as e: v, last = None, e           # e.g. server not up yet
        else: last = None
        if v: return v
        if time.time() - t0 > timeout:
            raise CheckFailed(f"timed out after {timeout:.0f} s waiting for {what}" + (f" (last error: {last})" if last else ''))
        time.sleep(every)


def kernel_idle(port: int, token: str, name: str) -> bool:
    "True when the notebook `name` has a session whose kernel is idle."
    ss = [s for s in api(port, token, 'sessions') if Path(s.get('path', '')).name == name]
    return bool(ss) and all(s['kernel']['execution_state'] == 'idle' for s in ss)


def modified(driver) -> bool:
    "True when JupyterLab marks an open document modified (the dirty mark on its tab)."
    return bool(driver.execute_script("return document.querySelectorAll('.lm-TabBar-tab.jp-mod-dirty').length"))


def log_count(text: str) -> int:
    "The number of new messages the Log Console's status bar item shows ('' when it shows none)."
    return sum(int(n) for n in re.findall(r'\d+', text))


def log_console(driver) -> int:
    "How many outputs went to JupyterLab's Log Console (at its default level, those of no cell and errors), from the status bar."
    return log_count(driver.execute_script(
        "return Array.from(document.querySelectorAll('.jp-LogConsoleStatusItem')).map(e => e.textContent.trim()).join(' ');"))


def snapshot(driver, selectors: list[str]) -> list[str]:
    "Short hashes of what the CSS `selectors` match now: an image's src, an input's value, else the element's text."
    js = """return arguments[0].flatMap(sel => Array.from(document.querySelectorAll(sel)).map(e =>
               e.tagName === 'IMG' ? e.src : ('value' in e && e.value !== undefined ? String(e.value) : e.textContent)));"""
    return [hashlib.sha1(v.encode()).hexdigest()[:10] for v in driver.execute_script(js, selectors)]


def start_browser(window_size):
    "Headless Chromium (Debian's `chromium` + `chromium-driver`) driven by selenium."
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError: raise CheckFailed("selenium is not installed: pip install selenium")
    chrome, driver = shutil.which('chromium') or shutil.which('chromium-browser'), shutil.which('chromedriver')
    if not (chrome and driver): raise CheckFailed("chromium or chromedriver not found: apt-get install chromium chromium-driver")
    o = webdriver.ChromeOptions()
    o.binary_location = chrome
    for arg in ('--headless=new', '--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', f'--window-size={window_size[0]},{window_size[1]}'):
        o.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=o)


def toggle_sidebar(driver):
    "View > Show Left Sidebar (Ctrl+B): closes the file browser JupyterLab opens with."
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    ActionChains(driver).key_down(Keys.CONTROL).send_keys('b').key_up(Keys.CONTROL).perform()


def scroll_to_cell(driver, text: str):
    "Scroll the notebook so that the first cell whose source contains `text` is at the top."
    from selenium.webdriver.common.by import By
    cells = [c for c in driver.find_elements(By.CSS_SELECTOR, '.jp-Notebook .jp-Cell')
             if text in ''.join(e.text for e in c.find_elements(By.CSS_SELECTOR, '.jp-InputArea-editor'))]
    if not cells: raise CheckFailed(f"no cell whose source contains {text!r} (--show)")
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", cells[0])


def run_all(driver, port, token, name, timeout):
    "Run > Run All Cells, then wait until no cell is queued or running and the kernel is idle; fail on an error output."
    from selenium.webdriver.common.by import By
    menu = [e for e in driver.find_elements(By.CSS_SELECTOR, '.lm-MenuBar-item') if e.text.strip() == 'Run']
    if not menu: raise CheckFailed("no 'Run' menu in JupyterLab's menu bar")
    menu[0].click()
    item = wait_for("'Run All Cells' in the Run menu", lambda: [e for e in driver.find_elements(By.CSS_SELECTOR, '.lm-Menu-item')
                                                               if e.text.split('\n')[0].strip() == 'Run All Cells'], 10)
    item[0].click()
    time.sleep(1)
    js = """return Array.from(document.querySelectorAll('.jp-Notebook .jp-CodeCell'))
                .filter(c => c.querySelector('.jp-InputArea-editor').textContent.trim())
                .map(c => c.querySelector('.jp-InputPrompt').textContent.trim());"""   # empty cells get no number
    n_code = len(driver.execute_script(js))
    def done():
        prompts = driver.execute_script(js)
        return (len(prompts) == n_code and all(re.fullmatch(r'\[\d+\]:', p) for p in prompts) and kernel_idle(port, token, name)
                or raised(driver))
    wait_for(f'all {n_code} code cells to run', done, timeout)
    if raised(driver): raise CheckFailed(f"a cell raised: {raised(driver)}")
    return n_code


def raised(driver) -> str | None:
    "The last line of the first exception shown in an output (warnings on stderr do not count), or None."
    from selenium.webdriver.common.by import By
    stderr = [e.text for e in driver.find_elements(By.CSS_SELECTOR, '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
    tb = [t for t in stderr if 'Traceback' in t]
    return tb[0].strip().splitlines()[-1] if tb else None


def click_and_check(driver, port, token, name, label, times, watch, timeout) -> list[tuple[int, int]]:
    "Click the button labelled `label` `times` times; after each, wait until the `watch` snapshot changes."
    from selenium.webdriver.common.by import By
    buttons = [b for b in driver.find_elements(By.CSS_SELECTOR, 'button.jupyter-widgets') if b.text.strip() == label]
    if not buttons: raise CheckFailed(f"no widget button labelled {label!r} (found {[b.text for b in driver.find_elements(By.CSS_SELECTOR, 'button.jupyter-widgets')]})")
    b = buttons[0]
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", b)
    sizes = []
    for i in range(1, times + 1):
        before = snapshot(driver, watch)
        if not before: raise CheckFailed(f"nothing matches {watch} to watch")
        t0 = time.time()
        b.click()
        try: wait_for(f"click {i} of {label!r} to change {watch}", lambda: (snapshot(driver, watch) != before) and kernel_idle(port, token, name), timeout)
        except CheckFailed as e: raise CheckFailed(f"{e}; the click raised: {raised(driver)}" if raised(driver) else str(e)) from None
        after = snapshot(driver, watch)
        sizes.append((sum(x != y for x, y in zip(before, after)) + abs(len(after) - len(before)), len(after)))
        print(f"click {i}: {sizes[-1][0]} of {sizes[-1][1]} watched elements changed, {time.time() - t0:.1f} s after the click", flush=True)
    return sizes


def check(args) -> None:
    "The whole check; raises `CheckFailed` with one line on the first failure. Always stops the browser and JupyterLab."
    from selenium.webdriver.common.by import By
    nb = args.notebook.resolve()
    stored = nb.read_bytes()
    port, token = args.port or free_port(), secrets.token_hex(16)
    tmp = Path(tempfile.mkdtemp(prefix='browser_check_'))
    write_settings(tmp / 'settings')
    log = open(tmp / 'jupyterlab.log', 'w')
    lab = subprocess.Popen(lab_command(port, token, nb.parent, tmp / 'settings', tmp / 'workspaces'), stdout=log, stderr=subprocess.STDOUT,
                           cwd=nb.parent, start_new_session=True)
    driver, ok = None, False
    try:
        def up():
            if lab.poll() is not None:
                last = (tmp / 'jupyterlab.log').read_text().strip().splitlines()[-1:] or ['']
                raise CheckFailed(f"JupyterLab exited with status {lab.returncode}: {last[0]} (log: {tmp}/jupyterlab.log)")
            return api(port, token, 'status')
        wait_for(f'JupyterLab on 127.0.0.1:{port} (log: {tmp}/jupyterlab.log)', up, args.timeout)
        driver = start_browser(args.window_size)
        driver.set_page_load_timeout(args.timeout)
        driver.get(lab_url(port, token, nb.name))
        wait_for('the notebook to open', lambda: driver.find_elements(By.CSS_SELECTOR, '.jp-NotebookPanel .jp-Cell'), args.timeout)
        wait_for('the kernel to start and be idle', lambda: kernel_idle(port, token, nb.name), args.timeout)
        time.sleep(2)                                        # JupyterLab writes the kernel's metadata into the model now
        if modified(driver): raise CheckFailed("opening the notebook marked it modified: store its metadata as JupyterLab writes it "
                                               "(kernelspec and language_info; see nbdev's allowed_metadata_keys)")
        print("opened: the notebook is not modified by opening it", flush=True)
        toggle_sidebar(driver)                               # the notebook gets the whole width in the screenshot
        t0 = time.time()
        n = run_all(driver, port, token, nb.name, args.timeout)
        print(f"ran {n} code cells in {time.time() - t0:.0f} s, no error output", flush=True)
        print(f"{len(driver.find_elements(By.CSS_SELECTOR, '.jp-OutputArea-output img'))} pictures in the outputs", flush=True)
        if args.click: click_and_check(driver, port, token, nb.name, args.click, args.times, args.watch, args.timeout)
        n_log = log_console(driver)
        if n_log: raise CheckFailed(f"{n_log} output(s) went to JupyterLab's Log Console (outputs of no cell, e.g. from a widget callback)")
        print("no output in the Log Console", flush=True)
        if nb.read_bytes() != stored: raise CheckFailed(f"{nb} changed on disk during the check")
        if args.show: scroll_to_cell(driver, args.show)
        ok = True
    finally:
        if driver is not None:
            try:
                time.sleep(1)
                args.screenshot.parent.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(args.screenshot)); print(f"screenshot: {args.screenshot}", flush=True)
            finally: driver.quit()
        if lab.poll() is None:
            os.killpg(lab.pid, signal.SIGTERM)
            try: lab.wait(30)
            except subprocess.TimeoutExpired: os.killpg(lab.pid, signal.SIGKILL); lab.wait()
        log.close()
        if ok: shutil.rmtree(tmp, ignore_errors=True)            # on failure the log stays, named in the message


def main(argv=None) -> int:
    args = parse_args(argv)
    try: check(args)
    except CheckFailed as e:
        print(f"browser check FAILED: {e}", file=sys.stderr); return 1
    print("browser check passed", flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
