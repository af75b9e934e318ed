"""With METRICS and TRACING off (the defaults), neither prometheus_client nor opentelemetry is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import sys, django
django.setup()
import django_ojs.producer, django_ojs.api.urls, django_ojs.worker.runtime, django_ojs.observe.signals
from django_ojs.worker.execution import Runner
from django_ojs.handlers.registry import registry
Runner(registry, [], omit_backtraces=False)
print(sorted({m.split('.')[0] for m in sys.modules if m.startswith(('opentelemetry', 'prometheus_client'))}))
"""


def test_the_extras_are_not_imported_when_off():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "OJS_METRICS": "false", "OJS_TRACING": "false"}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stderr
