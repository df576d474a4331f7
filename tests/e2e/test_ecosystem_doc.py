"""docs/ecosystem.md is what tests/ecosystem.py generates: every client and tool the suite runs, at the
versions the repository pins, with tests that exist. No cluster needed."""

from __future__ import annotations

import sys

from support import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tests"))
import ecosystem  # noqa: E402


def test_the_ecosystem_page_is_current():
    page = (REPO_ROOT / "docs" / "ecosystem.md").read_text()
    assert page == ecosystem.render(), "docs/ecosystem.md is stale: run `python3 tests/ecosystem.py > docs/ecosystem.md`"
