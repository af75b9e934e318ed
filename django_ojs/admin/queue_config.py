"""The queue page's configuration form: limits (key ``queue:<name>``), the bound, the fairness key and its weights.

Saved through the core (``core.queue_config.update``), which validates as
the API does (``PUT /ojs/v1/queues/<name>/config``); workers and producers
see a change within ``QUEUE_CONFIG_TTL``.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms

from ..core import queue_config
from ..models import Queue
from ..protocol.errors import OJSError

PERIOD_HELP = "ISO 8601 duration, e.g. PT1S, PT1M, PT1H."


class QueueConfigForm(forms.Form):
    concurrency = forms.IntegerField(required=False, min_value=0, help_text="Most jobs of this queue active at once, across all workers. Empty: no limit.")
    rate_limit = forms.IntegerField(required=False, min_value=1, label="rate: starts", help_text="Most jobs started per period (sliding window). Empty: no limit.")
    rate_period = forms.CharField(required=False, label="rate: per", help_text=PERIOD_HELP)
    throttle = forms.IntegerField(required=False, min_value=1, label="throttle: starts", help_text="Starts spread evenly over the period. Empty: none.")
    throttle_period = forms.CharField(required=False, label="throttle: per", help_text=PERIOD_HELP)
    max_size = forms.IntegerField(required=False, min_value=1, help_text="Most unfinished jobs the queue holds. Empty: unbounded.")
    overflow_policy = forms.ChoiceField(
        choices=[("reject", "reject: PUSH answers 429 queue_full"), ("drop_oldest", "drop_oldest: discard the oldest waiting job")],
        initial="reject",
    )
    fairness_key = forms.CharField(
        required=False, max_length=128,
        help_text="Take turns across this key's values: meta.<name> (e.g. meta.tenant) or args.<index>[.<name>]. "
                  "Empty: one line, by priority then enqueue order.",
    )
    fairness_weights = forms.CharField(
        required=False, label="fairness weights",
        help_text='Claims per round of each value named, a JSON object: {"acme": 3, "small": 1}. Empty: none named.',
    )
    fairness_default_weight = forms.IntegerField(
        required=False, label="default weight", help_text="Claims per round of every other value. Empty: 1.",
    )

    @classmethod
    def for_queue(cls, queue: Queue, data: Any = None) -> QueueConfigForm:
        initial = {
            "concurrency": queue.concurrency,
            "rate_limit": (queue.rate_limit or {}).get("limit"),
            "rate_period": (queue.rate_limit or {}).get("period", "PT1M"),
            "throttle": (queue.throttle or {}).get("limit"),
            "throttle_period": (queue.throttle or {}).get("period", "PT1S"),
            "max_size": queue.max_size,
            "overflow_policy": queue.overflow_policy,
            "fairness_key": queue.fairness_key,
            "fairness_weights": json.dumps(queue.fairness_weights) if queue.fairness_weights else "",
            "fairness_default_weight": queue.fairness_default_weight,
        }
        return cls(data, initial=initial)

    def save(self, name: str) -> Queue:
        """Validate through the core and store; a refusal becomes a form error."""
        data = self.cleaned_data

        def window(limit: int | None, period: str) -> dict[str, Any] | None:
            return {"limit": limit, "period": period or "PT1M"} if limit is not None else None

        body = {
            "concurrency": data["concurrency"],
            "rate_limit": window(data["rate_limit"], data["rate_period"]),
            "throttle": window(data["throttle"], data["throttle_period"]),
            "max_size": data["max_size"],
            "overflow_policy": data["overflow_policy"],
            "fairness_key": data["fairness_key"] or None,
            "fairness_weights": None,
            "fairness_default_weight": data["fairness_default_weight"],
        }
        try:
            if data["fairness_weights"]:
                body["fairness_weights"] = json.loads(data["fairness_weights"])
        except json.JSONDecodeError:
            raise forms.ValidationError('fairness weights must be a JSON object: {"acme": 3}') from None
        try:
            changes = queue_config.parse_config(body, name)
        except OJSError as exc:
            raise forms.ValidationError(exc.message) from None
        return queue_config.update(name, changes)
