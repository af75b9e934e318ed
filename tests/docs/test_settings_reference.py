"""The settings reference is generated from the settings' definitions, and the committed page is fresh."""

from __future__ import annotations

import re

import pytest

from django_ojs.conf import DEFAULTS

from .settings_reference import PAGE, UndocumentedSetting, render, settings_entries


def test_the_committed_page_is_what_the_generator_writes():
    assert PAGE.read_text() == render(), "docs/reference/settings.md is stale: run python -m tests.docs.settings_reference"


def test_every_setting_and_retention_key_has_a_row():
    page = PAGE.read_text()
    rows = set(re.findall(r"^\| `([A-Z_]+)` \|", page, flags=re.MULTILINE))
    assert rows == set(DEFAULTS)
    assert set(re.findall(r"^\| `([a-z_]+)` \|", page, flags=re.MULTILINE)) == set(DEFAULTS["RETENTION"])


def test_a_row_is_the_comment_above_the_setting_its_rules_type_and_its_default():
    page = PAGE.read_text()
    assert (
        "| `HEARTBEAT_TIMEOUT` | seconds > 0 | `30` | Silence after which the reaper declares a worker dead"
        in page
    )
    assert "| `MAX_BATCH_BYTES` | int ≥ 1 | `33554432` (32 MiB) |" in page
    assert "| `dead_letter` | seconds ≥ 0 | `15552000` (180 days) |" in page


def test_sections_and_comments_are_read_from_the_source():
    source = '''
DEFAULTS = {
    # -- First ----------
    # What A does,
    # on two lines.
    "A": 1,
    # -- Second ---------
    # B, with `code`.
    "B": {
        # The key's meaning.
        "key": 2,
    },
}
'''
    [a, b] = settings_entries(source)
    assert (a.name, a.section, a.comment) == ("A", "First", "What A does, on two lines.")
    assert (b.section, b.comment, [(key.name, key.comment) for key in b.keys]) == (
        "Second", "B, with `code`.", [("key", "The key's meaning.")]
    )


def test_a_setting_without_a_comment_cannot_be_documented():
    with pytest.raises(UndocumentedSetting, match=r"DEFAULTS\['B'\] \(line 5\) has no comment"):
        settings_entries('DEFAULTS = {\n    # A.\n    "A": 1,\n\n    "B": 2,\n}\n')
