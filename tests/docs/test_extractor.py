"""The samples' extractor (tests/docs/samples.py): directives, preludes, shell commands."""

from __future__ import annotations

import pytest

from .samples import SampleError, commands, samples_of
from .shell_checks import check

PAGE = '''# A page

<!-- sample: continues
from tests.docs.standins import *
-->
```python
order.save()
```

- a list item:

  <!-- sample: skip -- needs a cluster -->
  ```sh
  kubectl apply -f worker.yaml
  ```

```text
output
```
'''


def test_directives_preludes_and_indented_blocks(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    python, shell, text = samples_of(page)
    assert (python.lang, python.kind, python.flags, python.prelude) == (
        "python", "run", {"continues"}, "from tests.docs.standins import *"
    )
    assert python.code == "order.save()\n"
    assert (shell.kind, shell.reason, shell.code) == ("skip", "needs a cluster", "kubectl apply -f worker.yaml\n")
    assert text.kind == "text"


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("```\nx\n```\n", "names its language"),
        ("<!-- sample: skip -->\n```sh\nls\n```\n", "says why"),
        ("<!-- sample: sometimes -->\n```python\nx\n```\n", "no kind of python sample"),
    ],
)
def test_a_block_that_cannot_be_placed_is_an_error(tmp_path, block, message):
    page = tmp_path / "page.md"
    page.write_text(block)
    with pytest.raises(SampleError, match=message):
        list(samples_of(page))


def test_shell_commands_are_split_as_bash_would():
    script = """KEY=$(python manage.py ojs_create_api_key demo --quiet)   # printed once
curl -X POST "$OJS/ojs/v1/jobs" -d '{"type": "a.b",
   "args": []}' && echo done   # it's a comment, with a quote
python3 -m venv venv && . venv/bin/activate
manage.py ojs jobs \\
    --json
"""
    assert commands(script) == [
        ["python", "manage.py", "ojs_create_api_key", "demo", "--quiet"],
        ["curl", "-X", "POST", "$OJS/ojs/v1/jobs", "-d", '{"type": "a.b",\n   "args": []}'],
        ["echo", "done"],
        ["python3", "-m", "venv", "venv"],
        [".", "venv/bin/activate"],
        ["manage.py", "ojs", "jobs", "--json"],
    ]


@pytest.mark.parametrize(("words", "problem"), [
    (["gunicorn", "mysite.wsgi", "--workers", "4", "--threads", "4"], None),
    (["gunicorn", "mysite.wsgi", "--wrokers", "4"], "unrecognized arguments: --wrokers"),
    (["gunicorn", "-c", "no/such.conf.py"], "no such file in the repository"),
])
def test_a_gunicorn_command_is_parsed_by_gunicorn(words, problem):
    found = check(words)
    assert (found == []) if problem is None else (len(found) == 1 and problem in found[0]), found
