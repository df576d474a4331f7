"""Fixtures of the reference diff: the Apache Kafka reference broker and the Kafgres under test.

The session starts Apache Kafka (reference.py) once, and stops it at the end
whatever happens, SIGTERM included (turned into an exception so the `with`
block unwinds). Kafgres is the running cluster at KAFGRES_BOOTSTRAP (default
127.0.0.1:${KAFGRES_KAFKA_PORT:-9092}); the session stops at once, saying
why, if it does not answer or the Java tools are not built. The secured pair
(secured.py) is started once, when the first secured scenario needs it.
"""

from __future__ import annotations

import signal

import pytest

import kafka_raw
from framework import ensure_java_tools
from run import kafgres_bootstrap
from reference import ReferenceKafka
from secured import SecuredPair

BROKER_READY_TIMEOUT_S = 20.0


def _raise_on_sigterm(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session")
def kafgres() -> str:
    bootstrap = kafgres_bootstrap()
    if not kafka_raw.kafka_wire.wait_until_broker_answers(bootstrap, BROKER_READY_TIMEOUT_S):
        pytest.exit(f"Kafgres does not answer on {bootstrap}: run `./kafgres start` (or set KAFGRES_BOOTSTRAP)", 2)
    ensure_java_tools()
    return bootstrap


def _held_through_sigterm(context):
    """Yields what `context` gives, turning a SIGTERM into an exception so its exit stops what it started."""
    previous = signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        with context as value:
            yield value
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def kafka(kafgres) -> str:
    yield from _held_through_sigterm(ReferenceKafka())


@pytest.fixture(scope="session")
def secured_pair() -> tuple[str, str]:
    """(Apache Kafka, Kafgres) with SASL/SCRAM and an ACL authorizer, both stopped at the end of the session."""
    yield from _held_through_sigterm(SecuredPair())
