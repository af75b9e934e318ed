"""The suite's figures: ratios, targets and what the table and JSON say when a figure is missing (pure)."""

from __future__ import annotations

import json

from .report import Figure, Target, json_lines, percentile, table


def worker_figure(**overrides) -> Figure:
    values = dict(key="worker.2x10", name="ojs_worker 2 × 10", unit="jobs/s", ours=900.0, floor=1500.0,
                  floor_name="raw SQL", peer=1000.0,
                  targets=(Target("peer", ">=", 1.0), Target("floor", ">=", 0.6)))
    return Figure(**{**values, **overrides})


def test_ratios_are_ours_over_the_other_and_every_target_must_hold():
    figure = worker_figure()
    assert (figure.ratio_floor, figure.ratio_peer) == (0.6, 0.9)
    assert [target.met(figure) for target in figure.targets] == [False, True]
    assert figure.met is False
    assert worker_figure(ours=1000.0).met is True


def test_lower_is_better_targets_and_absolute_ones():
    cpu = Figure("http.push.cpu", "POST", "ms/req", 2.2, floor=1.1, targets=(Target("floor", "<=", 2.0),))
    assert cpu.met is True
    assert Figure("pickup.p50", "pickup", "ms", 20.5, targets=(Target("absolute", "<=", 20),)).met is False
    assert Target("absolute", "<=", 20).describe("ms") == "≤ 20 ms"
    assert Target("peer", ">=", 1).describe("jobs/s") == "≥ 1.0× pgqueuer"


def test_a_target_against_a_figure_not_measured_is_not_judged_and_says_why():
    figure = worker_figure(peer=None, peer_note="not run (--no-peer)", floor=1000.0)
    assert figure.ratio_peer is None
    assert figure.met is None  # one target unjudged, the other met: not a "yes"
    row = table([figure]).splitlines()[2]
    assert "not run (--no-peer)" in row and row.endswith("–")
    line = json.loads(json_lines([figure]))
    assert line["pgqueuer"] is None and line["ratio_pgqueuer"] is None
    assert line["targets"] == [{"target": "≥ 1.0× pgqueuer", "met": None}, {"target": "≥ 0.6× floor", "met": True}]


def test_the_table_names_each_floor_once_with_its_figures():
    figures = [worker_figure(), worker_figure(key="worker.1x10", name="ojs_worker 1 × 10", targets=())]
    text = table(figures)
    assert "  raw SQL: worker.2x10, worker.1x10" in text
    assert len(text.splitlines()[0].split()) >= 8  # the header names every column


def test_the_table_gives_each_sides_cpu_per_job_where_it_was_read():
    figures = [worker_figure(detail={"worker_cpu_us_per_job": 66, "postgres_cpu_us_per_job": 1234}),
               worker_figure(key="worker.1x10", name="ojs_worker 1 × 10", detail={"worker_cpu_us_per_job": 70}),
               worker_figure(key="worker.1x50", name="ojs_worker 1 × 50")]
    text = table(figures, markdown=True)
    assert "- ojs_worker 2 × 10: the workers' 66 µs, PostgreSQL's 1,234 µs" in text.splitlines()
    assert "- ojs_worker 1 × 10: the workers' 70 µs" in text.splitlines()
    assert "ojs_worker 1 × 50:" not in text  # nothing read, nothing said
    assert "CPU per job" not in table([worker_figure()])


def test_percentiles_stay_within_the_samples():
    samples = [float(value) for value in range(1, 101)]
    assert percentile(samples, 50) == 50.5
    assert 99 <= percentile(samples, 99) <= 100
    assert percentile([7.0], 99) == 7.0


def test_the_markdown_table_has_a_row_per_figure_under_its_header():
    lines = table([worker_figure(), worker_figure(key="worker.1x10", name="ojs_worker 1 × 10")],
                  markdown=True).splitlines()
    assert lines[0].startswith("| figure | ours | floor |") and lines[1].startswith("| --- |")
    assert lines[2].startswith("| ojs_worker 2 × 10 (jobs/s) | 900 | 1,500 | 0.60× | 1,000 | 0.90× |")
    assert "- raw SQL: worker.2x10, worker.1x10" in lines


def test_the_observability_table_puts_off_and_on_side_by_side_per_shape():
    from .report import observability_table

    off = Figure("worker.1x10", "ojs_worker 1 × concurrency 10", "jobs/s", 400.0, floor=800.0)
    metrics = Figure("worker.1x10.metrics", "ojs_worker 1 × concurrency 10, metrics on", "jobs/s", 390.0,
                     floor=400.0, detail={"paired_ratio_median": 0.97, "cpu_us_per_job": 840.0,
                                          "cpu_us_per_job_off": 800.0, "cpu_paired_ratio_median": 1.04})
    tracing = Figure("worker.1x10.tracing", "ojs_worker 1 × concurrency 10, metrics + tracing on", "jobs/s",
                     300.0, floor=400.0, detail={"paired_ratio_median": 0.74})
    unobserved = Figure("worker.2x10", "ojs_worker 2 × concurrency 10", "jobs/s", 700.0)
    header, _rule, row = observability_table([off, unobserved, metrics, tracing]).splitlines()
    assert header.split()[:3] == ["ojs_worker", "(jobs/s)", "off"]
    assert row.split() == ["1", "×", "concurrency", "10", "400", "800", "390", "0.97×", "0.97×", "840", "1.05×", "1.04×",
                           "300", "0.75×", "0.74×", "–", "–", "–", *["–"] * 6]
