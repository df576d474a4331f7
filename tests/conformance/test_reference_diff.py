"""The reference diff: every scenario on Apache Kafka 4.x and on Kafgres, transcripts compared.

One test per scenario (scenarios_protocol.py, scenarios_groups.py,
scenarios_admin_tools.py, scenarios_acls.py: the last against the secured
pair of secured.py). A test
fails with a unified diff (Kafka's transcript against Kafgres's) when they
differ in anything that intended_differences.py does not list, or when a
listed difference no longer occurs. test_intended_differences_are_documented
checks that each listed difference has its entry in docs/conformance.md.
"""

from __future__ import annotations

import pytest

import intended_differences
from framework import SCENARIOS
from reference import REPO_ROOT
from run import compare, run_pair


def test_intended_differences_are_documented():
    doc = (REPO_ROOT / "docs" / "conformance.md").read_text()
    missing = [d.key for d in intended_differences.DIFFERENCES if d.doc not in doc]
    assert not missing, f"intended differences without their entry in docs/conformance.md: {missing}"
    unknown = [(d.key, s) for d in intended_differences.DIFFERENCES for s in d.scenarios if s not in SCENARIOS]
    assert not unknown, f"intended differences naming unknown scenarios: {unknown}"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario(name: str, request: pytest.FixtureRequest):
    if SCENARIOS[name].secured:
        kafka, kafgres = request.getfixturevalue("secured_pair")
    else:
        kafka, kafgres = request.getfixturevalue("kafka"), request.getfixturevalue("kafgres")
    report = compare(name, *run_pair(name, kafka, kafgres))
    if report:
        pytest.fail(report, pytrace=False)
