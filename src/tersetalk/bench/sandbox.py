"""The sandbox's cost per HumanEval example, isolations side by side in one run.

``python -m tersetalk.bench.sandbox --n 40`` scores the canonical solutions of the first
``n`` problems under each isolation (``bubblewrap`` and the weaker ``process``), one
problem at a time and interleaved round by round, so both see the same machine load,
and prints the median and mean seconds per example and the ratio to the first isolation.
``--src DIR`` adds another checkout's sandbox (its ``src`` folder, e.g. a worktree of an
older commit) as a third column, run in a child interpreter with the same problems, for
a before/after pair. Every canonical solution must pass, or the timing is refused.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

_OTHER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from tersetalk.tasks import humaneval
from tersetalk.tasks.loading import load_records
recs = load_records("humaneval", data_dir=sys.argv[2])[: int(sys.argv[3])]
out = []
for r in recs:
    t = time.perf_counter()
    res = humaneval.run(r["canonical_solution"], humaneval.gold_of(r))
    out.append(time.perf_counter() - t)
    assert res.passed, (r["id"], res)
print(json.dumps(out))
"""


def _time_here(isolation: str, records: list[dict]) -> list[float]:
    from tersetalk.tasks import humaneval

    times = []
    for rec in records:
        start = time.perf_counter()
        res = humaneval.run(rec["canonical_solution"], humaneval.gold_of(rec), None, isolation)
        times.append(time.perf_counter() - start)
        if not res.passed:
            raise SystemExit(f"error: {rec['id']} did not pass under {isolation}: {res.reason}")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tersetalk.bench.sandbox", description=__doc__)
    parser.add_argument("--n", type=int, default=40, help="problems per round (default 40)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--isolation", nargs="+", default=["bubblewrap", "process"],
        help="isolations to time (default: bubblewrap process)",
    )  # fmt: skip
    parser.add_argument("--src", type=Path, help="another checkout's src/ to time beside them")
    parser.add_argument("--data-dir", type=Path, default=Path("data"), help="default: data")
    args = parser.parse_args(argv)
    if args.n < 1 or args.rounds < 1:
        parser.error("--n and --rounds must be positive")
    from tersetalk.tasks.humaneval.sandbox import require
    from tersetalk.tasks.loading import load_records

    for isolation in args.isolation:
        require(isolation)
    records = load_records("humaneval", data_dir=args.data_dir)[: args.n]
    names = [*args.isolation, *([f"src={args.src}"] if args.src else [])]
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for isolation in args.isolation:
            times[isolation] += _time_here(isolation, records)
        if args.src:
            done = subprocess.run(
                [sys.executable, "-c", _OTHER, str(args.src.resolve()), str(args.data_dir),
                 str(args.n)],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            times[names[-1]] += json.loads(done.stdout)
    first = statistics.median(times[names[0]])
    print(f"{'sandbox':<40} {'median s':>9} {'mean s':>9} {'vs ' + names[0]:>16}")
    for name in names:
        med = statistics.median(times[name])
        mean = statistics.mean(times[name])
        print(f"{name:<40} {med:>9.4f} {mean:>9.4f} {med / first:>15.2f}x")
    print(f"({args.rounds} rounds x {args.n} HumanEval canonical solutions, one at a time)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
