"""Runs scenarios against Apache Kafka and Kafgres and diffs their transcripts.

    .kafgres/venv/bin/python tests/conformance/run.py                  # every scenario, reference started here
    .kafgres/venv/bin/python tests/conformance/run.py metadata groups_cli   # some of them
    .kafgres/venv/bin/python tests/conformance/run.py --only kafgres metadata  # print one broker's transcript

The pytest module (test_reference_diff.py) is the same with one test per
scenario. Transcripts are written to .kafgres/conformance/<scenario>.<broker>.txt.
Secured scenarios (scenarios_acls.py) run against the secured pair of
secured.py, started here when one is selected.
Each scenario runs on both brokers at once (two threads): the brokers are
independent and most of a scenario's time is waiting (group rebalances).
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import intended_differences
import scenarios_acls  # noqa: F401  (registers its scenarios)
import scenarios_admin_tools  # noqa: F401  (registers its scenarios)
import scenarios_delegation_tokens  # noqa: F401  (registers its scenarios)
import scenarios_groups  # noqa: F401  (registers its scenarios)
import scenarios_protocol  # noqa: F401  (registers its scenarios)
import scenarios_share_groups  # noqa: F401  (registers its scenarios)
import scenarios_streams_groups  # noqa: F401  (registers its scenarios)
from framework import SCENARIOS, Context, ensure_java_tools
from reference import STATE_DIR, ReferenceKafka
from secured import SecuredPair

# A scenario that has not finished in this long is reported as such (its clients' waits are bounded too).
SCENARIO_TIMEOUT_S = 240


def kafgres_bootstrap() -> str:
    return os.environ.get("KAFGRES_BOOTSTRAP") or f"127.0.0.1:{os.environ.get('KAFGRES_KAFKA_PORT', '9092')}"


def transcript(name: str, bootstrap: str, run_id: str) -> list[str]:
    """The scenario's normalized transcript on one broker; an exception ends it with its last line."""
    ctx = None
    try:
        ctx = Context(bootstrap, name, run_id, secured=SCENARIOS[name].secured)
        SCENARIOS[name].func(ctx)
    except Exception as e:  # noqa: BLE001  (a crash is an observable outcome, diffed like any other)
        lines = ctx.lines if ctx else []
        where = traceback.extract_tb(e.__traceback__)[-1]
        text = f"EXCEPTION {type(e).__name__}: {e} (at {os.path.basename(where.filename)}:{where.lineno})"
        return [*lines, ctx.norm.line(text) if ctx else text]
    finally:
        if ctx is not None:
            ctx.close()
    return ctx.lines


def run_pair(name: str, kafka: str, kafgres: str) -> tuple[list[str], list[str]]:
    run_id = uuid.uuid4().hex[:8]
    with ThreadPoolExecutor(max_workers=2) as pool:
        on_kafka = pool.submit(transcript, name, kafka, run_id)
        on_kafgres = pool.submit(transcript, name, kafgres, run_id)
        pair = on_kafka.result(timeout=SCENARIO_TIMEOUT_S), on_kafgres.result(timeout=SCENARIO_TIMEOUT_S)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    for broker, lines in zip(("kafka", "kafgres"), pair):
        (STATE_DIR / f"{name}.{broker}.txt").write_text("\n".join(lines) + "\n")
    return pair


def compare(name: str, kafka_lines: list[str], kafgres_lines: list[str]) -> str | None:
    """None when the transcripts agree once the intended differences are applied, else the report."""
    kafka_view, kafgres_view, unused = intended_differences.apply(name, kafka_lines, kafgres_lines)
    problems = []
    if kafka_view != kafgres_view:
        diff = difflib.unified_diff(kafka_view, kafgres_view, "Apache Kafka", "Kafgres", lineterm="", n=3)
        problems.append(f"scenario {name}: transcripts differ (intended differences applied, as `~ …`):\n"
                        + "\n".join(diff))
    for d in unused:
        problems.append(f"scenario {name}: intended difference {d.key!r} did not occur: Kafgres may now "
                        f"behave as Kafka does; remove it from intended_differences.py and docs/conformance.md")
    return "\n\n".join(problems) or None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scenarios", nargs="*", help=f"default: all of {', '.join(SCENARIOS)}")
    parser.add_argument("--only", choices=("kafka", "kafgres"), help="run on one broker and print its transcript")
    args = parser.parse_args()
    names = args.scenarios or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {', '.join(SCENARIOS)}")
    plain = [n for n in names if not SCENARIOS[n].secured]
    secured = [n for n in names if SCENARIOS[n].secured]
    failed = 0
    started = time.monotonic()
    ensure_java_tools()
    with ExitStack() as stack:
        kafka = kafgres = secured_kafka = secured_kafgres = ""
        if plain and args.only != "kafgres":
            kafka = stack.enter_context(ReferenceKafka())
            print(f"Apache Kafka on {kafka} (started in {time.monotonic() - started:.1f}s)")
        if plain:
            kafgres = kafgres_bootstrap()
            print(f"Kafgres on {kafgres}")
        if secured:
            t0 = time.monotonic()
            secured_kafka, secured_kafgres = stack.enter_context(SecuredPair())
            print(f"secured pair: Apache Kafka on {secured_kafka}, Kafgres on {secured_kafgres} "
                  f"(started in {time.monotonic() - t0:.1f}s)")
        for name in names:
            t0 = time.monotonic()
            on_kafka, on_kafgres = (secured_kafka, secured_kafgres) if SCENARIOS[name].secured else (kafka, kafgres)
            if args.only:
                bootstrap = on_kafka if args.only == "kafka" else on_kafgres
                print(f"--- {name}", *transcript(name, bootstrap, uuid.uuid4().hex[:8]), sep="\n")
                continue
            report = compare(name, *run_pair(name, on_kafka, on_kafgres))
            print(f"{'ok  ' if report is None else 'DIFF'} {name} ({time.monotonic() - t0:.1f}s)")
            if report:
                failed += 1
                print(report, end="\n\n")
    print(f"{len(names) - failed} of {len(names)} scenarios agree ({time.monotonic() - started:.0f}s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
