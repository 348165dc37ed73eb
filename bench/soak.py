"""A soak that reconciles: changes flow for minutes while the pipeline is killed at random.

A producer writes Debezium-shaped changes continuously (creates, updates, deletes with
tombstones, a poison message now and then, a schema change half-way: the machinery is
zync_assets_tests/support/soak.py, shared with test_soak.py)
while `zync run SPEC --follow` ingests, transforms and sends them; it is killed with
SIGKILL every 15–45 s and started again at once. At the end the producer stops, one last
run catches up, and everything is counted:

- every source offset is in the raw pool exactly once (poison ones as dead letters);
- the output topic holds one record per change (no more, no less), and an upserting
  sink's table built from it equals the source table.

Throughput (changes produced and records delivered per second) and the pipeline's memory
are sampled every 5 s and plotted to docs/img/soak.png.

    python -m bench.soak --minutes 10       # the figures in docs/RELIABILITY.md
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import bench_stack, machine, publish
from zync_assets_tests.support.soak import Soak, run_soak

PLOT = Path(__file__).resolve().parent.parent / "docs" / "img" / "soak.png"


def plot(soak: Soak, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    samples = soak.samples
    times = [s.at / 60 for s in samples]

    def rate(values: list[int]) -> list[float]:
        out = [0.0]
        for i in range(1, len(samples)):
            span = samples[i].at - samples[i - 1].at
            out.append((values[i] - values[i - 1]) / span if span > 0 else 0.0)
        return out

    figure, (flow, memory) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    flow.plot(times, rate([s.produced for s in samples]), label="changes produced / s")
    flow.plot(times, rate([s.delivered for s in samples]), label="records delivered / s")
    flow.set_ylabel("per second")
    flow.legend(loc="upper left")
    memory.plot(times, [s.rss_mib for s in samples], color="tab:purple")
    memory.set_ylabel("pipeline RSS (MiB)")
    memory.set_xlabel("minutes")
    for axis in (flow, memory):
        for kill in soak.kills:
            axis.axvline(kill / 60, color="tab:red", alpha=0.3, linewidth=1)
    flow.set_title(f"soak: {len(soak.kills)} kill -9 (red lines), schema change at half time")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="zync-soak-"))
    with bench_stack() as (kafka, registry):
        soak, figures = run_soak(kafka, registry, args.minutes, workdir)
    plot(soak, PLOT)
    rows = "\n".join(f"| {name} | {value} |" for name, value in figures.items())
    table = (
        f"\n## Soak ({time.strftime('%Y-%m-%d')}, {machine()})\n\n"
        f"`python -m bench.soak --minutes {args.minutes:g}`; plot: docs/img/soak.png\n\n"
        f"| figure | value |\n|---|---:|\n{rows}\n"
    )
    publish("soak", table, dict[str, object](figures))


if __name__ == "__main__":
    main()
