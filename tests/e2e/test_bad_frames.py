"""Framing and request-header handling, over raw sockets.

Hostile or broken input must cost at most the connection that sent it:
- length prefixes that are huge (2 GiB), negative, over the 100 MiB frame
  limit, or too short for a header close the connection without a response;
- a request whose array count claims 0x7fffffff elements but whose body ends
  right after the count closes the connection without a response (nothing is
  allocated from the count), for every served API;
- 200 seeded random garbage frames, each on its own connection, and truncated
  frames, leave the broker serving;
- an API key the broker does not serve, or a version it does not serve of a
  non-ApiVersions API, closes the connection, as Apache Kafka does.

And the exact shape of the ApiVersions answers:
- an unknown ApiVersions version (v99) gets the KIP-511 fallback: a v0-layout
  body with error 35 UNSUPPORTED_VERSION and an API list that gives the
  ApiVersions range (v0-v4);
- v0, v3 and v4 requests get error 0, the correlation id echoed, a v0
  response header (no tagged-field byte, even for the flexible versions) and
  the served API table, parsed to the last byte;
- requests split over many small writes, and pipelined requests, are answered
  (the latter in order).

After each test the broker must answer a fresh ApiVersions from the same
worker process: a crash that the postmaster quietly restarted would otherwise
pass for survival.
"""

import random
import socket
import struct
import time

import pytest

import kafka_wire
from kafka_wire import Writer, frame, request_header

CLOSE_TIMEOUT_S = 5.0
MAX_FRAME_BYTES = 100 * 1024 * 1024
GARBAGE_SEED = 0x6B616667  # "kafg"
GARBAGE_FRAMES = 200
GARBAGE_CLOSE_WAIT_S = 0.25

# The API table the interface promises: key -> (highest version a minimum may
# be, exact maximum). A broker may advertise a lower minimum than it accepts
# (Kafka does so for Produce, whose v0-v2 it refuses), never a different maximum.
SERVED_APIS = {
    kafka_wire.API_KEY_PRODUCE: (3, 13),
    kafka_wire.API_KEY_FETCH: (4, 18),
    kafka_wire.API_KEY_LIST_OFFSETS: (1, 11),
    kafka_wire.API_KEY_METADATA: (0, 13),
    kafka_wire.API_KEY_API_VERSIONS: (0, 5),
    kafka_wire.API_KEY_CREATE_TOPICS: (2, 7),
}


@pytest.fixture
def broker_survives(bootstrap, psql):
    """check(context): the broker answers ApiVersions and its worker pid is the one from before the test."""
    pid = psql.broker_pid()

    def check(context: str = "") -> None:
        assert kafka_wire.broker_answers(bootstrap, timeout_s=5), f"broker stopped answering ApiVersions {context}"
        assert psql.broker_pids() == [pid], f"broker worker {pid} was replaced {context}: it crashed"

    return check


def assert_closed_without_response(bootstrap, data: bytes, what: str) -> None:
    with kafka_wire.connect(bootstrap) as sock:
        kafka_wire.send_quietly(sock, data)
        closed, received = kafka_wire.wait_for_close(sock, CLOSE_TIMEOUT_S)
    assert received == b"", f"{what}: broker answered {received[:64].hex()} instead of closing"
    assert closed, f"{what}: connection still open after {CLOSE_TIMEOUT_S:.0f}s"


def assert_served_api_table(apis: dict[int, tuple[int, int]]) -> None:
    for key, (min_at_most, max_version) in SERVED_APIS.items():
        assert key in apis, f"API key {key} not advertised; got {sorted(apis)}"
        lo, hi = apis[key]
        assert hi == max_version, f"API key {key}: max version {hi}, expected {max_version}"
        assert 0 <= lo <= min_at_most, f"API key {key}: min version {lo}, expected <= {min_at_most}"
    assert apis[kafka_wire.API_KEY_API_VERSIONS] == (0, 5)


# --------------------------------------------------------------------------
# Length prefixes


@pytest.mark.parametrize(
    "length",
    [0x7FFFFFFF, -0x80000000, -1, MAX_FRAME_BYTES + 1, 0, 4],
    ids=["2GiB", "most-negative", "minus-one", "100MiB-plus-1", "zero", "shorter-than-header"],
)
def test_bad_length_prefix_closes_connection(bootstrap, broker_survives, length):
    # The prefix, then a few bytes that could be the start of a body.
    assert_closed_without_response(bootstrap, struct.pack(">i", length) + bytes(8), f"length prefix {length}")
    broker_survives(f"after a length prefix of {length}")


# --------------------------------------------------------------------------
# Array counts that would allocate gigabytes


HUGE_COUNT = 0x7FFFFFFF


def huge_array_requests():
    """One request per served API whose first array claims HUGE_COUNT elements, the body ending right there."""
    corr = 4242

    def v1(key: int, version: int) -> bytes:
        return request_header(key, version, corr, 1)

    return {
        "metadata-v1": frame(v1(kafka_wire.API_KEY_METADATA, 1) + Writer().int32(HUGE_COUNT).getvalue()),
        "metadata-v12-compact": frame(
            request_header(kafka_wire.API_KEY_METADATA, 12, corr, 2) + Writer().uvarint(HUGE_COUNT + 1).getvalue()
        ),
        "produce-v3": frame(
            v1(kafka_wire.API_KEY_PRODUCE, 3)
            + Writer().string(None).int16(-1).int32(30000).int32(HUGE_COUNT).getvalue()
        ),
        "fetch-v4": frame(
            v1(kafka_wire.API_KEY_FETCH, 4)
            + Writer().int32(-1).int32(500).int32(1).int32(1 << 20).int8(0).int32(HUGE_COUNT).getvalue()
        ),
        "list-offsets-v1": frame(v1(kafka_wire.API_KEY_LIST_OFFSETS, 1) + Writer().int32(-1).int32(HUGE_COUNT).getvalue()),
        "create-topics-v2": frame(v1(kafka_wire.API_KEY_CREATE_TOPICS, 2) + Writer().int32(HUGE_COUNT).getvalue()),
    }


@pytest.mark.parametrize("request_name", list(huge_array_requests()))
def test_huge_array_count_closes_connection(bootstrap, broker_survives, request_name):
    request = huge_array_requests()[request_name]
    assert_closed_without_response(bootstrap, request, f"{request_name} with array count {HUGE_COUNT:#x}")
    broker_survives(f"after {request_name} with array count {HUGE_COUNT:#x}")


# --------------------------------------------------------------------------
# Garbage and truncation


def garbage_frames(seed: int, count: int):
    """Yields (description, bytes): seeded garbage in five shapes, cycling."""
    rng = random.Random(seed)
    # CreateTopics is left out of the header-shaped garbage so that no random
    # body can ever create a topic.
    served = [(0, 3, 13), (1, 4, 18), (2, 1, 11), (3, 0, 13), (18, 0, 5)]
    valid = [
        kafka_wire.api_versions_request(0, 1),
        kafka_wire.api_versions_request(3, 2),
        kafka_wire.metadata_v1_request(3, None),
        kafka_wire.metadata_v12_request(4, None, allow_auto_topic_creation=False),
    ]
    for i in range(count):
        shape = i % 5
        if shape == 0:
            # Pure noise: its first four bytes are an arbitrary length prefix.
            desc, data = "noise", rng.randbytes(rng.randint(1, 64))
        elif shape == 1:
            desc, data = "framed noise", frame(rng.randbytes(rng.randint(0, 300)))
        elif shape == 2:
            # A served API key at a version near its range, a client id whose
            # length may lie, maybe header tagged fields, then a noise body.
            key, lo, hi = rng.choice(served)
            version = rng.randint(lo - 1, hi + 1)
            w = Writer().int16(key).int16(version).int32(rng.randint(-(2**31), 2**31 - 1))
            client_id = rng.randbytes(rng.randint(0, 20))
            w.int16(rng.choice([len(client_id), -1, rng.randint(-5, 400)])).raw(client_id)
            if rng.random() < 0.5:
                w.raw(rng.randbytes(rng.randint(1, 4)))  # tagged fields, probably malformed
            w.raw(rng.randbytes(rng.randint(0, 200)))
            desc, data = f"api {key} v{version} header + noise", frame(w.getvalue())
        elif shape == 3:
            base = bytearray(rng.choice(valid))
            for _ in range(rng.randint(1, 4)):
                base[rng.randrange(4, len(base))] = rng.randrange(256)
            desc, data = "valid request with flipped bytes", bytes(base)
        else:
            base = rng.choice(valid)
            if rng.random() < 0.5:
                desc, data = "valid request cut short", base[: rng.randrange(1, len(base))]
            else:
                body = base[4:]
                wrong = max(0, len(body) + rng.choice([-3, -2, -1, 1, 2, 8, 1000]))
                desc, data = f"valid request with length {wrong} instead of {len(body)}", struct.pack(">i", wrong) + body
        yield desc, data


def send_and_hang_up(bootstrap, data: bytes) -> None:
    """Sends data, half-closes, gives the broker a moment to react, then closes."""
    with kafka_wire.connect(bootstrap) as sock:
        if kafka_wire.send_quietly(sock, data):
            try:
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            kafka_wire.wait_for_close(sock, GARBAGE_CLOSE_WAIT_S)


def test_random_garbage_never_takes_the_broker_down(bootstrap, broker_survives):
    for i, (desc, data) in enumerate(garbage_frames(GARBAGE_SEED, GARBAGE_FRAMES)):
        send_and_hang_up(bootstrap, data)
        context = f"after garbage frame {i} (seed {GARBAGE_SEED:#x}, {desc}): {data[:48].hex()}"
        if i % 25 == 24:
            broker_survives(context)  # also checks the worker pid (a psql round trip)
        else:
            assert kafka_wire.broker_answers(bootstrap, timeout_s=5), f"broker stopped answering {context}"
    broker_survives(f"after {GARBAGE_FRAMES} garbage frames")


def test_truncated_frame_is_harmless(bootstrap, broker_survives):
    with kafka_wire.connect(bootstrap) as sock:
        sock.sendall(struct.pack(">i", 100) + bytes(range(10)))
    broker_survives("after a frame cut off at 10 of 100 bytes")


def test_request_split_across_many_writes_is_answered(bootstrap, broker_survives):
    request = kafka_wire.api_versions_request(3, 777)
    with kafka_wire.connect(bootstrap) as sock:
        for i in range(0, len(request), 3):
            sock.sendall(request[i:i + 3])
            time.sleep(0.01)
        response = kafka_wire.parse_api_versions_response(kafka_wire.read_response(sock), 3)
    assert (response.correlation_id, response.error_code) == (777, kafka_wire.ERROR_NONE)
    broker_survives()


# --------------------------------------------------------------------------
# What is not served


@pytest.mark.parametrize(
    "api_key, version, header_version",
    [
        (kafka_wire.API_KEY_LEADER_AND_ISR, 0, 1),  # a broker-to-broker API Kafgres will never serve
        (32000, 0, 1),  # no such API
        (kafka_wire.API_KEY_METADATA, 99, 2),  # a version of a served API that does not exist
    ],
    ids=["leader-and-isr", "unknown-key", "metadata-v99"],
)
def test_unserved_api_or_version_closes_connection(bootstrap, broker_survives, api_key, version, header_version):
    request = frame(request_header(api_key, version, 99, header_version) + bytes(16))
    assert_closed_without_response(bootstrap, request, f"api key {api_key} v{version}")
    broker_survives(f"after api key {api_key} v{version}")


# --------------------------------------------------------------------------
# ApiVersions, byte by byte


def test_unknown_api_versions_version_gets_v0_fallback(bootstrap, broker_survives):
    payload = kafka_wire.roundtrip(bootstrap, kafka_wire.api_versions_request(99, 0x5EED))
    # KIP-511: answered in the v0 layout (header v0, error, int32-counted
    # array of key/min/max, nothing else) so any client can read it.
    response = kafka_wire.parse_api_versions_response(payload, layout_version=0)
    assert response.correlation_id == 0x5EED
    assert response.error_code == kafka_wire.ERROR_UNSUPPORTED_VERSION
    # The list must at least say which ApiVersions versions to retry with;
    # Apache Kafka lists only ApiVersions here, listing everything is also fine.
    assert response.apis, "the fallback answer must still list the APIs"
    assert response.apis[kafka_wire.API_KEY_API_VERSIONS] == (0, 5)
    broker_survives()


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_answer_is_exact(bootstrap, broker_survives, version):
    correlation_id = 0x7ABC0000 + version
    payload = kafka_wire.roundtrip(bootstrap, kafka_wire.api_versions_request(version, correlation_id))

    # Read the first fields by hand: the response header is v0 for every
    # ApiVersions version, so the error code follows the correlation id
    # directly, with no tagged-field byte in between.
    (echoed, error_code) = struct.unpack_from(">ih", payload)
    assert (echoed, error_code) == (correlation_id, kafka_wire.ERROR_NONE)
    if version >= 3:
        # Then the compact array: its uvarint length is count+1, so a stray
        # header tag byte (0x00) would have read as a null array here.
        assert payload[6] != 0, "api_keys array is null: is there a tagged-field byte in the response header?"

    # The whole payload, to the last byte.
    response = kafka_wire.parse_api_versions_response(payload, layout_version=version)
    assert response.correlation_id == correlation_id
    assert response.error_code == kafka_wire.ERROR_NONE
    assert_served_api_table(response.apis)
    if version >= 1:
        assert response.throttle_time_ms == 0
    if version >= 3:
        # The features, as Kafka sends them (tags 0-2); never ZkMigrationReady (tag 3).
        assert sorted(response.tagged_fields) == [0, 1, 2], response.tagged_fields
    broker_survives()


def test_pipelined_requests_are_answered_in_order(bootstrap, broker_survives):
    with kafka_wire.connect(bootstrap) as sock:
        sock.sendall(
            kafka_wire.api_versions_request(0, 11)
            + kafka_wire.api_versions_request(3, 12)
            + kafka_wire.metadata_v12_request(13, None, allow_auto_topic_creation=False)
        )
        first = kafka_wire.parse_api_versions_response(kafka_wire.read_response(sock), 0)
        second = kafka_wire.parse_api_versions_response(kafka_wire.read_response(sock), 3)
        third = kafka_wire.parse_metadata_v12_response(kafka_wire.read_response(sock))
    assert [first.correlation_id, second.correlation_id, third.correlation_id] == [11, 12, 13]
    assert first.error_code == second.error_code == kafka_wire.ERROR_NONE
    broker_survives()
