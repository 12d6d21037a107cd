"""bench/paper_scale.py's bookkeeping, without running anything: throughput and memory read back from a run directory,
and the markdown report of a result (the script itself runs on a lent GPU: bench/paper_scale_gpu.sh)."""
import importlib.util, json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location('paper_scale', REPO / 'bench' / 'paper_scale.py')
ps = importlib.util.module_from_spec(spec); spec.loader.exec_module(ps)

def fake_run(d: Path):
    d.mkdir(parents=True)
    recs = [dict(it=5, loss=2.0, img_per_s=1.0, peak_mem_gb=[3.0]), dict(it=10, loss=1.5, img_per_s=4.0, peak_mem_gb=[3.5]),
            dict(it=15, loss=1.2, img_per_s=6.0, peak_mem_gb=[3.5]), dict(it=15, eval={'teacher': {'miou': 0.25}})]
    (d / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    (d / 'summary.json').write_text(json.dumps(dict(it=15, peak_mem_gb=[3.6], last={'teacher': {'miou': 0.25}})))

def test_run_stats_skips_the_warm_up_line(tmp_path):
    fake_run(tmp_path / 'r')
    s = ps.run_stats(tmp_path / 'r')
    assert s == dict(steps=15, img_per_s=5.0, peak_mem_gb=[3.6], loss_last=1.2, miou={'teacher': 25.0})
    assert ps.run_stats(tmp_path / 'missing')['img_per_s'] is None          # a failed run reports nothing, not an error

FLOOR = dict(step=dict(median_s=0.5), floor=dict(median_s=0.45), floor_over_step=0.9, data_share=0.02,
             section_share={'ACP': 0.015}, images_per_step=4, first_step_s=3.0, loader=dict(num_workers=6, pin_memory=True, prefetch_factor=4))

def test_markdown_report(tmp_path):
    fake_run(tmp_path / 'r')
    x = dict(ps.run_stats(tmp_path / 'r'), cmd='ael-launch ...', rc=0, wall_s=12.0)
    res = dict(device='NVIDIA H100', torch='2.x', started='now', total_s=99, launch=x,
               scale=dict(setting=dict(crop=769, backbone='resnet101', output_stride=8, images_per_gpu='2 + 2', steps=20, classes=10),
                          variants={'fp32': x, 'bf16': dict(x, rc=1, img_per_s=None, peak_mem_gb=None)}),
               signals=dict(expected_rc=75, resume_to=60, reference=dict(rc=0, it=60, weights='abc'),
                            runs={'ael-train SIGTERM': dict(logged_before_signal=10, rc=75, exit_s=0.4, latest_it=12,
                                                            resume=dict(rc=0, it=60, identical=True)),
                                  'torchrun SIGUSR1': dict(error='ended by itself with 1 before the signal')}),
               floor=dict(paper=dict(variants={'ael': FLOOR}), small=dict(rc=1, error='no report; see the log')))
    md = ps.markdown(res)
    assert '| fp32 | 0 | 5.0 | 3.6 | 12.0 |' in md and '| bf16 | 1 | None | None | 12.0 |' in md
    assert '| ael-train SIGTERM | 10 | 75 | 0.4 | 12 | 0 | 60 | True |' in md and 'NVIDIA H100' in md
    assert '| torchrun SIGUSR1 | ended by itself with 1 before the signal |' in md
    assert '- ael: step 0.500 s, floor 0.450 s, floor / step 0.90, data 2.0% of the step, ACP 1.5%, 8.0 img/s' in md
    assert 'failed: rc 1, no report; see the log' in md
