"""Print each tox environment's command output from ``tox --result-json``'s report, in order.

``tox run-parallel`` keeps a passing environment's output to itself; CI's log wants it
all the same (the slowest tests, the conformance summaries).
"""

from __future__ import annotations

import json
import sys


def main(report: str) -> None:
    with open(report) as file:
        environments = json.load(file)["testenvs"]
    for name, environment in environments.items():
        result = environment.get("result", {})
        print(f"\n== {name}: exit {result.get('exit_code')}, {result.get('duration', 0) / 60:.1f} min")
        for command in environment.get("test", []):
            print(f"{name}> {' '.join(command['command'])} (exit {command['retcode']}, {command['elapsed']:.0f} s)")
            sys.stdout.write(command["output"] + command["err"])


if __name__ == "__main__":
    main(sys.argv[1])
