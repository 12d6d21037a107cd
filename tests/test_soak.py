"""The fault soak in short (bench/soak.py): a few random faults (SIGKILL, SIGTERM, Ctrl-C, a second Ctrl-C, SIGUSR1, a
full disk on a tmpfs) sent to one tiny run under ael-launch while it starts or trains, resumed after each; the run that
finishes has the weights and the metrics.jsonl of the same run trained without a stop, and every file reads whole."""
import importlib.util, os, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location('soak', ROOT / 'bench' / 'soak.py')
soak = importlib.util.module_from_spec(spec); spec.loader.exec_module(soak)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith('linux') or os.geteuid() != 0, reason='the full-disk fault mounts a tmpfs: Linux, as root')
def test_a_short_soak_ends_with_the_uninterrupted_weights_and_metrics(tmp_path):
    rep = soak.soak(tmp_path, procs=1, faults=6, seed=3, iters=10, say=lambda *a: None)
    assert rep['faults_sent'] >= 6 and rep['in_training'] >= 1, rep['faults']
    assert rep['rounds'] and rep['digests_equal'] and rep['metrics_equal'], rep['rounds']
    assert rep['problems'] == [], rep['problems']
