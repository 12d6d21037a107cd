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

def result(tmp_path) -> dict:
    "A paper_scale.json of every part, as bench/paper_scale.py writes it."
    fake_run(tmp_path / 'r')
    x = dict(ps.run_stats(tmp_path / 'r'), cmd='ael-launch ...', rc=0, wall_s=12.0)
    res = dict(device='NVIDIA H100', torch='2.x', started='now', total_s=99, launch=x,
               scale=dict(setting=dict(crop=769, backbone='resnet101', output_stride=8, images_per_gpu='2 + 2', steps=20, classes=10),
                          variants={'fp32': x, 'bf16': dict(x, rc=1, img_per_s=None, peak_mem_gb=None)}),
               signals=dict(expected_rc=75, resume_to=60, reference=dict(rc=0, it=60, weights='abc'),
                            deterministic=True, runs={'ael-train SIGTERM': dict(logged_before_signal=10, rc=75, exit_s=0.4, ranks_after_exit_s=0.0, latest_it=12,
                                                            resume=dict(rc=0, it=60, identical=True)),
                                  'torchrun SIGUSR1': dict(error='ended by itself with 1 before the signal')}),
               floor=dict(paper=dict(variants={'ael': FLOOR}), small=dict(rc=1, error='no report; see the log')),
               spread=dict(runs={'run 1': dict(rc=0, it=60, weights='abc', loss_last=1.25), 'run 2': dict(rc=0, it=60, weights='abd', loss_last=1.5)},
                           identical=False, student_apart=dict(max_abs=0.01, rel_l2=0.002), loss_last_apart=0.25),
               detcost=dict(skipped='run.deterministic is not a configuration key'))
    return res

def test_markdown_report(tmp_path):
    res = result(tmp_path)
    md = ps.markdown(res)
    assert '| fp32 | 0 | 5.0 | 3.6 | 12.0 |' in md and '| bf16 | 1 | None | None | 12.0 |' in md
    assert '| ael-train SIGTERM | 10 | 75 | 0.4 | 0.0 | 12 | 0 | 60 | True |' in md and 'NVIDIA H100' in md
    assert 'run.deterministic: True; expected exit status 75' in md
    assert '| torchrun SIGUSR1 | ended by itself with 1 before the signal |' in md
    assert '- ael: step 0.500 s, floor 0.450 s, floor / step 0.90, data 2.0% of the step, ACP 1.5%, 8.0 img/s' in md
    assert 'failed: rc 1, no report; see the log' in md
    assert "- identical: False; student weights apart: {'max_abs': 0.01, 'rel_l2': 0.002}; last losses apart: 0.25" in md
    assert '## run.deterministic: its cost\n\nfailed: rc None, run.deterministic is not a configuration key' in md

def test_fold_gpu_merges_stages(tmp_path):
    "bench/fold_gpu.py: two stages' reports become one, with the provenance line; 26_arithmetic reads its memory figures."
    import subprocess, sys
    from ael_nb.arithmetic import measured_speed
    res = result(tmp_path / 'm')
    a = {k: v for k, v in res.items() if k not in ('signals', 'spread', 'detcost')}
    b = dict(device=res['device'], torch=res['torch'], started='later', total_s=11, **{k: res[k] for k in ('signals', 'spread', 'detcost')})
    for d, r in (('a', a), ('b', b)): (tmp_path / d).mkdir(); (tmp_path / d / 'paper_scale.json').write_text(json.dumps(r))
    (tmp_path / 'res').mkdir()
    r = subprocess.run([sys.executable, str(REPO / 'bench' / 'fold_gpu.py'), str(tmp_path / 'a'), str(tmp_path / 'b'), '--device', 'h100',
                        '--date', '2026-12-01', '--commit', 'abc1234', '--how', 'two stages', '--results', str(tmp_path / 'res')],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    out = json.loads((tmp_path / 'res' / 'paper_scale_cuda_h100_2026-12-01.json').read_text())
    assert out['provenance'] == 'NVIDIA H100, torch 2.x, project commit abc1234, 2026-12-01; two stages'
    assert {'scale', 'floor', 'signals', 'spread', 'detcost'} <= set(out) and out['total_s'] == 110 and out['started'] == 'now, later'
    md = (tmp_path / 'res' / 'paper_scale_cuda_h100_2026-12-01.md').read_text()
    assert md.startswith('Provenance: NVIDIA H100') and '## Signals and resume' in md and '| fp32 | 0 | 5.0 | 3.6 | 12.0 |' in md
    assert [(x['variant'], x['peak_gb']) for x in measured_speed(tmp_path / 'res')] == [('fp32', 3.6)]
