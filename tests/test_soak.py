"""The soak (bench/soak.py) in short: one tiny run under ael-launch, one fault of each kind at random moments (SIGKILL
of every process, SIGTERM, Ctrl-C, a second Ctrl-C, SIGUSR1, a full disk), resumed after each; the final weights and
metrics.jsonl equal an uninterrupted run's, and nothing was left half-written. bench/RESULTS.md has the 50-fault runs."""
import importlib.util, os, shutil, subprocess
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location('soak', REPO / 'bench' / 'soak.py')
soak = importlib.util.module_from_spec(spec); spec.loader.exec_module(soak)


def tmpfs_mountable(d: Path) -> str | None:
    "None where a tmpfs mounts at `d` (the full-disk fault needs one), else why not."
    if os.geteuid() != 0: return 'mounting the tmpfs of the full-disk fault needs root'
    d.mkdir()
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', str(d)], capture_output=True, text=True)
    if r.returncode: return f'cannot mount a tmpfs: {r.stderr.strip()}'
    subprocess.run(['umount', str(d)]); return None


@pytest.mark.slow
def test_short_soak_ends_bit_identical(tmp_path):
    why = tmpfs_mountable(tmp_path / 'probe')
    if why:
        if os.environ.get('CI') == 'true': pytest.fail(f'CI runs the soak: {why}')
        pytest.skip(why)
    rep = soak.soak(tmp_path / 'work', procs=1, faults=len(soak.KINDS), seed=3, iters=12)
    assert rep['by_kind'] == {k: 1 for k in soak.KINDS}
    assert rep['faults_sent'] == len(soak.KINDS), rep['faults']          # each hit a running run
    assert rep['problems'] == [], rep['problems']
    assert rep['final_status'] == 0 and rep['final_it'] == 12
    assert rep['final_digest'] == rep['reference_digest'] and rep['metrics_equal']
