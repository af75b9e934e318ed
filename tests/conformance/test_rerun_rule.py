"""Which failed conformance cases get a second run (harness._failed_cases): only those that wait."""

from __future__ import annotations

import json

from .harness import _failed_cases


def test_only_failed_cases_that_wait_get_a_second_run(tmp_path):
    cases = {
        "L1-WAITS": [{"action": "POST"}, {"action": "POST", "delay_ms": 1200}],
        "L2-WAIT-STEP": [{"action": "WAIT", "duration_ms": 500}],
        "L0-NO-WAIT": [{"action": "POST"}],
        "L0-OK": [{"action": "POST", "delay_ms": 100}],
    }
    for test_id, steps in cases.items():
        (tmp_path / f"{test_id}.json").write_text(json.dumps({"test_id": test_id, "steps": steps}))
    statuses = {"L1-WAITS": "fail", "L2-WAIT-STEP": "error", "L0-NO-WAIT": "fail", "L0-OK": "pass"}
    report = tmp_path / "report-0-4.json"
    report.write_text(json.dumps({"tests": [
        {"test_id": test_id, "status": status, "file_path": f"{test_id}.json"} for test_id, status in statuses.items()
    ]}))
    timed, untimed = _failed_cases(tmp_path, [report])

    assert timed == ["L1-WAITS", "L2-WAIT-STEP"]
    assert untimed == ["L0-NO-WAIT"]
