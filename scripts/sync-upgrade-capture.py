#!/usr/bin/env python3
"""Copies crates/kafgres/sql/capture.sql into the unreleased upgrade script
(kafgres--0.1.0--0.2.0.sql), which carries it whole between two marker
comments, so that an updated install and a fresh one stay object for object
the same (tests/e2e/test_upgrade.py checks it). Run it after editing
capture.sql; it exits 1 when the markers are missing."""

import sys
from pathlib import Path

SQL = Path(__file__).resolve().parents[1] / "crates" / "kafgres" / "sql"
BEGIN = "-- BEGIN capture.sql (scripts/sync-upgrade-capture.py copies it here)\n"
END = "-- END capture.sql\n"


def main() -> int:
    upgrade = SQL / "kafgres--0.1.0--0.2.0.sql"
    text = upgrade.read_text()
    if BEGIN not in text or END not in text:
        print(f"{upgrade}: the capture.sql markers are missing", file=sys.stderr)
        return 1
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    upgrade.write_text(head + BEGIN + (SQL / "capture.sql").read_text() + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
