"""Figures of the benchmark suite: ratios, targets, the table and the JSON lines (pure, no database).

Every figure is ours beside its floor (what PostgreSQL or a bare Django view
allows) and its peer (pgqueuer), each the median of the run's repeats. A
ratio is always ours divided by the other, whatever the unit: for jobs/s
higher is better, for milliseconds lower is, and the target says which.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any, Literal

Against = Literal["floor", "peer", "absolute"]


@dataclass(frozen=True)
class Target:
    """``ours / floor >= 0.6``, ``ours / peer >= 1.0`` or ``ours <= 20`` (absolute, in the figure's unit)."""

    against: Against
    op: Literal[">=", "<="]
    value: float

    def describe(self, unit: str) -> str:
        sign = "≥" if self.op == ">=" else "≤"
        if self.against == "absolute":
            return f"{sign} {self.value:g} {unit}"
        times = f"{self.value:.1f}" if round(self.value, 1) == self.value else f"{self.value:g}"
        return f"{sign} {times}× {'pgqueuer' if self.against == 'peer' else 'floor'}"

    def met(self, figure: Figure) -> bool | None:
        """None when what it compares with was not measured."""
        measured = {"floor": figure.ratio_floor, "peer": figure.ratio_peer, "absolute": figure.ours}[self.against]
        if measured is None:
            return None
        return measured >= self.value if self.op == ">=" else measured <= self.value


@dataclass
class Figure:
    key: str  # stable: "worker.2x10"
    name: str  # for people: "ojs_worker 2 × 10"
    unit: str
    ours: float
    floor: float | None = None
    floor_name: str = ""
    peer: float | None = None
    # Why the peer column is empty: "no counterpart", "not run (--no-peer)".
    peer_note: str = ""
    targets: tuple[Target, ...] = ()
    samples: list[float] = field(default_factory=list)  # ours, one per repeat
    floor_samples: list[float] = field(default_factory=list)
    peer_samples: list[float] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio_floor(self) -> float | None:
        return _ratio(self.ours, self.floor)

    @property
    def ratio_peer(self) -> float | None:
        return _ratio(self.ours, self.peer)

    @property
    def met(self) -> bool | None:
        """True when every target is met, False when one is missed, None when none could be judged."""
        verdicts = [target.met(self) for target in self.targets]
        if any(verdict is False for verdict in verdicts):
            return False
        if verdicts and all(verdict is True for verdict in verdicts):
            return True
        return None

    def as_json(self) -> dict[str, Any]:
        return {
            "figure": self.key,
            "name": self.name,
            "unit": self.unit,
            "ours": _round(self.ours),
            "floor": _round(self.floor),
            "floor_name": self.floor_name or None,
            "ratio_floor": _round(self.ratio_floor, 3),
            "pgqueuer": _round(self.peer),
            "pgqueuer_note": self.peer_note or None,
            "ratio_pgqueuer": _round(self.ratio_peer, 3),
            "targets": [
                {"target": target.describe(self.unit), "met": target.met(self)} for target in self.targets
            ],
            "met": self.met,
            "samples": [_round(sample) for sample in self.samples],
            "floor_samples": [_round(sample) for sample in self.floor_samples],
            "pgqueuer_samples": [_round(sample) for sample in self.peer_samples],
            **({"detail": self.detail} if self.detail else {}),
        }


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], pct: int) -> float:
    """The ``pct``-th percentile (inclusive method: stays within the samples)."""
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[pct - 1]


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


COLUMNS = ("figure", "ours", "floor", "×floor", "pgqueuer", "×pgq", "target", "met?")


def table(figures: list[Figure], *, markdown: bool = False) -> str:
    """One row per figure, plain text or Markdown, with the floors named under it."""
    lines = _layout([COLUMNS, *(_row(figure) for figure in figures)], markdown=markdown)
    floors: dict[str, list[str]] = {}
    for figure in figures:
        if figure.floor_name:
            floors.setdefault(figure.floor_name, []).append(figure.key)
    named = [f"{name}: {', '.join(keys)}" for name, keys in floors.items()]
    if named and markdown:
        lines += ["", "Floors:", "", *(f"- {line}" for line in named)]
    elif named:
        lines += ["", "floors:", *(f"  {line}" for line in named)]
    costs = [line for line in map(_cpu_per_job, figures) if line]
    if costs and markdown:
        lines += ["", "CPU per job:", "", *(f"- {line}" for line in costs)]
    elif costs:
        lines += ["", "CPU per job:", *(f"  {line}" for line in costs)]
    return "\n".join(lines)


def _cpu_per_job(figure: Figure) -> str:
    """``name: the workers' N µs, PostgreSQL's M µs`` where the figure read them; else ``""``."""
    parts = [f"{who} {figure.detail[key]:,} µs" for who, key in
             (("the workers'", "worker_cpu_us_per_job"), ("PostgreSQL's", "postgres_cpu_us_per_job"))
             if key in figure.detail]
    return f"{figure.name}: {', '.join(parts)}" if parts else ""


def _row(figure: Figure) -> tuple[str, ...]:
    return (
        f"{figure.name} ({figure.unit})",
        _number(figure.ours),
        _number(figure.floor),
        _times(figure.ratio_floor),
        _number(figure.peer) if figure.peer is not None else (figure.peer_note or "–"),
        _times(figure.ratio_peer),
        ", ".join(target.describe(figure.unit) for target in figure.targets) or "–",
        {True: "yes", False: "NO", None: "–"}[figure.met],
    )


OBSERVED = ("metrics", "tracing", "sampled")


def observability_table(figures: list[Figure], *, markdown: bool = False) -> str:
    """The worker's throughput off, metrics on, metrics and tracing on, side by side, per shape.

    Each ratio twice: of the medians, and the median of the round-by-round
    ratios (``paired_ratio_median``); then the workers' CPU per job (median of
    the interleaved runs, once under way: start-up left out) and its ratio to
    off, of the medians and paired round by round. On a shared machine the CPU per job is the steadier of the two: what
    observability costs a worker is CPU.
    """
    by_key = {figure.key: figure for figure in figures}
    header = ["ojs_worker (jobs/s)", "off", "CPU µs/job"]
    for name in ("metrics", "metrics+tracing", "tracing 10 %"):
        header += [name, "×off", "×off paired", "CPU µs/job", "CPU ×off", "CPU ×off paired"]
    rows = [tuple(header)]
    for figure in figures:
        on = [by_key.get(f"{figure.key}.{mode}") for mode in OBSERVED]
        if not figure.key.startswith("worker.") or not any(on):
            continue
        cpu_off = next((observed.detail.get("cpu_us_per_job_off") for observed in on if observed is not None), None)
        row = [figure.name.removeprefix("ojs_worker "), _number(figure.ours), _number(cpu_off)]
        for observed in on:
            if observed is None:
                row += ["–"] * 6
                continue
            paired = observed.detail.get("paired_ratio_median")
            cpu = observed.detail.get("cpu_us_per_job")
            row += [_number(observed.ours), _times(observed.ratio_floor), _times(paired), _number(cpu),
                    _times(_ratio(cpu, cpu_off) if cpu is not None else None),
                    _times(observed.detail.get("cpu_paired_ratio_median"))]
        rows.append(tuple(row))
    return "\n".join(_layout(rows, markdown=markdown))


def _layout(rows: list[tuple[str, ...]], *, markdown: bool) -> list[str]:
    """Rows (the first is the header) as Markdown, or as aligned text: the first column left, numbers right."""
    if markdown:
        lines = [f"| {' | '.join(row)} |" for row in rows]
        lines.insert(1, "| --- " * len(rows[0]) + "|")
        return lines
    widths = [max(len(row[index]) for row in rows) for index in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) if index == 0 else cell.rjust(width)
                       for index, (cell, width) in enumerate(zip(row, widths))).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return lines


def json_lines(figures: list[Figure]) -> str:
    return "\n".join(json.dumps(figure.as_json(), ensure_ascii=False) for figure in figures)


def _ratio(ours: float, other: float | None) -> float | None:
    if other is None or other == 0:
        return None
    return ours / other


def _round(value: float | None, digits: int = 5) -> float | None:
    """To ``digits`` significant digits: enough for a measurement, short in JSON."""
    return None if value is None else float(f"{value:.{digits}g}")


def _number(value: float | None) -> str:
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _times(ratio: float | None) -> str:
    return "–" if ratio is None else f"{ratio:.2f}×"
