"""A tiny Kafka wire codec for the tests that speak the protocol by hand.

Client libraries hide what a broker actually sent (they retry, reconnect and
tolerate sloppy framing), so the framing and header checks use raw sockets and
this module. It covers only what those tests need, written from the Kafka
protocol guide and the message JSON schemas:

- request headers v1 (client id) and v2 (client id + tagged fields);
- ApiVersions requests at any version and exact parsing of the responses, in
  the v0 layout and the flexible v3+ layout (response header always v0);
- Metadata v12 requests and exact parsing of the v12 response (topic ids);
- Fetch v4 requests for one partition and exact parsing of the response;
- socket helpers that tell "the broker closed the connection" apart from
  "the broker is silent", each bounded by a timeout.

Every parser consumes the whole payload and raises `WireError` on leftover or
missing bytes, so a stray byte in a response fails the test instead of being
silently skipped.
"""

from __future__ import annotations

import socket
import struct
import time
import uuid
from dataclasses import dataclass, field

API_KEY_PRODUCE = 0
API_KEY_FETCH = 1
API_KEY_LIST_OFFSETS = 2
API_KEY_METADATA = 3
API_KEY_LEADER_AND_ISR = 4
API_KEY_API_VERSIONS = 18
API_KEY_CREATE_TOPICS = 19

ERROR_NONE = 0
ERROR_UNKNOWN_TOPIC_OR_PARTITION = 3
ERROR_LEADER_NOT_AVAILABLE = 5
ERROR_UNSUPPORTED_VERSION = 35

CLIENT_ID = "kafgres-e2e"
ZERO_UUID = uuid.UUID(int=0)

# A response larger than this is treated as a framing error on our side.
RESPONSE_BYTES_MAX = 64 * 1024 * 1024
# Unsigned varints in the Kafka protocol are at most 5 bytes (32 bits).
UVARINT_BYTES_MAX = 5


class WireError(Exception):
    """A response did not have the exact shape the protocol prescribes."""


def parse_address(bootstrap: str) -> tuple[str, int]:
    """'127.0.0.1:9092' -> ('127.0.0.1', 9092)."""
    host, sep, port = bootstrap.rpartition(":")
    if not sep or not host:
        raise ValueError(f"bootstrap address {bootstrap!r} is not host:port")
    return host, int(port)


# --------------------------------------------------------------------------
# Encoding


class Writer:
    """Appends big-endian Kafka primitive types to a buffer."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def int8(self, v: int) -> "Writer":
        self._buf += struct.pack(">b", v)
        return self

    def int16(self, v: int) -> "Writer":
        self._buf += struct.pack(">h", v)
        return self

    def int32(self, v: int) -> "Writer":
        self._buf += struct.pack(">i", v)
        return self

    def int64(self, v: int) -> "Writer":
        self._buf += struct.pack(">q", v)
        return self

    def boolean(self, v: bool) -> "Writer":
        self._buf.append(1 if v else 0)
        return self

    def raw(self, b: bytes) -> "Writer":
        self._buf += b
        return self

    def uvarint(self, v: int) -> "Writer":
        if v < 0:
            raise ValueError("unsigned varint must be >= 0")
        while True:
            byte = v & 0x7F
            v >>= 7
            if v:
                self._buf.append(byte | 0x80)
            else:
                self._buf.append(byte)
                return self

    def string(self, s: str | None) -> "Writer":
        """STRING / NULLABLE_STRING: int16 length (-1 for null) + UTF-8."""
        if s is None:
            return self.int16(-1)
        b = s.encode()
        return self.int16(len(b)).raw(b)

    def compact_string(self, s: str | None) -> "Writer":
        """COMPACT_(NULLABLE_)STRING: uvarint length+1 (0 for null) + UTF-8."""
        if s is None:
            return self.uvarint(0)
        b = s.encode()
        return self.uvarint(len(b) + 1).raw(b)

    def uuid(self, u: uuid.UUID) -> "Writer":
        return self.raw(u.bytes)

    def empty_tagged_fields(self) -> "Writer":
        return self.uvarint(0)

    def getvalue(self) -> bytes:
        return bytes(self._buf)


def frame(payload: bytes) -> bytes:
    """Prefixes a request with its 4-byte big-endian length."""
    return struct.pack(">i", len(payload)) + payload


def request_header(
    api_key: int,
    api_version: int,
    correlation_id: int,
    header_version: int,
    client_id: str | None = CLIENT_ID,
) -> bytes:
    """Request header v1 (key, version, correlation id, client id) or v2 (v1 + tagged fields)."""
    if header_version not in (1, 2):
        raise ValueError("only request header v1 and v2 are used by these tests")
    w = Writer().int16(api_key).int16(api_version).int32(correlation_id).string(client_id)
    if header_version == 2:
        w.empty_tagged_fields()
    return w.getvalue()


def api_versions_request(version: int, correlation_id: int) -> bytes:
    """A framed ApiVersions request.

    v0-v2 use header v1 and an empty body. v3 and later (including versions
    the broker does not know, like v99, as KIP-511 clients send them) use
    header v2 and the v3 body: client software name and version as compact
    strings, then empty tagged fields.
    """
    if version >= 3:
        header = request_header(API_KEY_API_VERSIONS, version, correlation_id, 2)
        body = Writer().compact_string("kafgres-e2e").compact_string("1.0").empty_tagged_fields().getvalue()
    else:
        header = request_header(API_KEY_API_VERSIONS, version, correlation_id, 1)
        body = b""
    return frame(header + body)


def metadata_v1_request(correlation_id: int, topics: list[str] | None) -> bytes:
    """A framed Metadata v1 request (header v1; topics as int32-counted array, -1 for all)."""
    w = Writer()
    if topics is None:
        w.int32(-1)
    else:
        w.int32(len(topics))
        for name in topics:
            w.string(name)
    return frame(request_header(API_KEY_METADATA, 1, correlation_id, 1) + w.getvalue())


def metadata_v12_request(
    correlation_id: int,
    topics: list[str] | None,
    allow_auto_topic_creation: bool,
) -> bytes:
    """A framed Metadata v12 request (flexible: header v2, compact arrays, tagged fields).

    Topics are requested by name, with the all-zero topic id; `None` asks for all topics.
    """
    w = Writer()
    if topics is None:
        w.uvarint(0)  # null compact array: all topics
    else:
        w.uvarint(len(topics) + 1)
        for name in topics:
            w.uuid(ZERO_UUID).compact_string(name).empty_tagged_fields()
    w.boolean(allow_auto_topic_creation)
    w.boolean(False)  # include_topic_authorized_operations
    w.empty_tagged_fields()
    return frame(request_header(API_KEY_METADATA, 12, correlation_id, 2) + w.getvalue())


def fetch_v4_request(
    correlation_id: int,
    topic: str,
    partition: int,
    fetch_offset: int,
    max_wait_ms: int,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
) -> bytes:
    """A framed Fetch v4 request for one partition (header v1, read_uncommitted)."""
    w = Writer().int32(-1).int32(max_wait_ms).int32(min_bytes).int32(max_bytes).int8(0)
    w.int32(1).string(topic).int32(1).int32(partition).int64(fetch_offset).int32(max_bytes)
    return frame(request_header(API_KEY_FETCH, 4, correlation_id, 1) + w.getvalue())


# --------------------------------------------------------------------------
# Decoding


class Reader:
    """Reads Kafka primitive types from a complete payload, refusing to run past its end."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise WireError(f"truncated: need {n} bytes at offset {self.pos} of a {len(self.data)}-byte payload")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def int8(self) -> int:
        return struct.unpack(">b", self._take(1))[0]

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def string(self) -> str | None:
        n = self.int16()
        if n < -1:
            raise WireError(f"string length {n}")
        return None if n == -1 else self._take(n).decode()

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        if n < -1:
            raise WireError(f"bytes length {n}")
        return None if n == -1 else self._take(n)

    def boolean(self) -> bool:
        v = self._take(1)[0]
        if v not in (0, 1):
            raise WireError(f"boolean byte {v} at offset {self.pos - 1}")
        return v == 1

    def uvarint(self) -> int:
        value = 0
        for i in range(UVARINT_BYTES_MAX):
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                return value
        raise WireError(f"unsigned varint longer than {UVARINT_BYTES_MAX} bytes at offset {self.pos}")

    def compact_string(self) -> str | None:
        n = self.uvarint()
        if n == 0:
            return None
        return self._take(n - 1).decode()

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def array_len(self) -> int | None:
        n = self.int32()
        if n < -1:
            raise WireError(f"array length {n}")
        return None if n == -1 else n

    def compact_array_len(self) -> int | None:
        n = self.uvarint()
        return None if n == 0 else n - 1

    def compact_int32_array(self) -> list[int]:
        n = self.compact_array_len()
        if n is None:
            raise WireError(f"null int32 array before offset {self.pos}")
        return [self.int32() for _ in range(n)]

    def tagged_fields(self) -> dict[int, bytes]:
        fields: dict[int, bytes] = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            size = self.uvarint()
            if tag in fields:
                raise WireError(f"tagged field {tag} repeated")
            fields[tag] = self._take(size)
        return fields

    def expect_end(self) -> None:
        if self.pos != len(self.data):
            raise WireError(
                f"{len(self.data) - self.pos} unexpected trailing bytes at offset {self.pos}: "
                f"{self.data[self.pos:self.pos + 32].hex()}"
            )


@dataclass
class ApiVersionsResponse:
    correlation_id: int
    error_code: int
    apis: dict[int, tuple[int, int]]  # api key -> (min version, max version)
    throttle_time_ms: int | None
    tagged_fields: dict[int, bytes] = field(default_factory=dict)


def parse_api_versions_response(payload: bytes, layout_version: int) -> ApiVersionsResponse:
    """Parses a whole ApiVersions response payload (after the length prefix).

    The response header is v0 (correlation id only, no tagged fields) at every
    version: ApiVersions is the one API whose response header never becomes
    flexible, so a client can read it before it knows what the broker speaks.
    `layout_version` selects the body layout: 0 (and the KIP-511 fallback),
    1-2 (adds throttle time), 3+ (compact array, per-entry tagged fields,
    throttle time, top-level tagged fields).
    """
    r = Reader(payload)
    correlation_id = r.int32()
    error_code = r.int16()
    apis: dict[int, tuple[int, int]] = {}
    if layout_version >= 3:
        count = r.compact_array_len()
    else:
        count = r.array_len()
    if count is None:
        raise WireError("api_keys array is null")
    for _ in range(count):
        key, lo, hi = r.int16(), r.int16(), r.int16()
        if layout_version >= 3:
            r.tagged_fields()
        if key in apis:
            raise WireError(f"api key {key} listed twice")
        apis[key] = (lo, hi)
    throttle_time_ms = r.int32() if layout_version >= 1 else None
    tagged = r.tagged_fields() if layout_version >= 3 else {}
    r.expect_end()
    return ApiVersionsResponse(correlation_id, error_code, apis, throttle_time_ms, tagged)


@dataclass
class MetadataPartition:
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: list[int]
    isr_nodes: list[int]
    offline_replicas: list[int]


@dataclass
class MetadataTopic:
    error_code: int
    name: str | None
    topic_id: uuid.UUID
    is_internal: bool
    partitions: list[MetadataPartition]


@dataclass
class MetadataResponse:
    correlation_id: int
    throttle_time_ms: int
    brokers: dict[int, tuple[str, int]]  # node id -> (host, port)
    cluster_id: str | None
    controller_id: int
    topics: dict[str, MetadataTopic]


def parse_metadata_v12_response(payload: bytes) -> MetadataResponse:
    """Parses a whole Metadata v12 response payload (response header v1)."""
    r = Reader(payload)
    correlation_id = r.int32()
    r.tagged_fields()  # response header v1
    throttle_time_ms = r.int32()
    brokers: dict[int, tuple[str, int]] = {}
    for _ in range(r.compact_array_len() or 0):
        node_id = r.int32()
        host = r.compact_string()
        port = r.int32()
        r.compact_string()  # rack
        r.tagged_fields()
        if host is None:
            raise WireError(f"broker {node_id} has a null host")
        brokers[node_id] = (host, port)
    cluster_id = r.compact_string()
    controller_id = r.int32()
    topics: dict[str, MetadataTopic] = {}
    for _ in range(r.compact_array_len() or 0):
        error_code = r.int16()
        name = r.compact_string()
        topic_id = r.uuid()
        is_internal = r.boolean()
        partitions = []
        for _ in range(r.compact_array_len() or 0):
            partitions.append(
                MetadataPartition(
                    error_code=r.int16(),
                    partition_index=r.int32(),
                    leader_id=r.int32(),
                    leader_epoch=r.int32(),
                    replica_nodes=r.compact_int32_array(),
                    isr_nodes=r.compact_int32_array(),
                    offline_replicas=r.compact_int32_array(),
                )
            )
            r.tagged_fields()
        r.int32()  # topic_authorized_operations
        r.tagged_fields()
        topics[name if name is not None else str(topic_id)] = MetadataTopic(
            error_code, name, topic_id, is_internal, partitions
        )
    r.tagged_fields()
    r.expect_end()
    return MetadataResponse(correlation_id, throttle_time_ms, brokers, cluster_id, controller_id, topics)


@dataclass
class FetchPartition:
    error_code: int
    high_watermark: int
    last_stable_offset: int
    records: bytes | None


@dataclass
class FetchResponse:
    correlation_id: int
    throttle_time_ms: int
    partitions: dict[tuple[str, int], FetchPartition]


def parse_fetch_v4_response(payload: bytes) -> FetchResponse:
    """Parses a whole Fetch v4 response payload (response header v0); records stay raw bytes."""
    r = Reader(payload)
    correlation_id = r.int32()
    throttle_time_ms = r.int32()
    partitions: dict[tuple[str, int], FetchPartition] = {}
    for _ in range(r.array_len() or 0):
        topic = r.string()
        for _ in range(r.array_len() or 0):
            index = r.int32()
            error_code = r.int16()
            high_watermark = r.int64()
            last_stable_offset = r.int64()
            for _ in range(r.array_len() or 0):  # aborted transactions
                r.int64()
                r.int64()
            records = r.nullable_bytes()
            partitions[(topic, index)] = FetchPartition(error_code, high_watermark, last_stable_offset, records)
    r.expect_end()
    return FetchResponse(correlation_id, throttle_time_ms, partitions)


# --------------------------------------------------------------------------
# Sockets


def connect(bootstrap: str, timeout_s: float = 5.0) -> socket.socket:
    sock = socket.create_connection(parse_address(bootstrap), timeout=timeout_s)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """Reads exactly n bytes; EOFError if the peer closes first (socket timeout applies)."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_response(sock: socket.socket) -> bytes:
    """Reads one length-prefixed response and returns its payload."""
    (size,) = struct.unpack(">i", recv_exactly(sock, 4))
    if size < 4 or size > RESPONSE_BYTES_MAX:
        raise WireError(f"response length prefix {size}")
    return recv_exactly(sock, size)


def send_quietly(sock: socket.socket, data: bytes) -> bool:
    """Sends data; False if the broker had already closed or reset the connection."""
    try:
        sock.sendall(data)
        return True
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
        return False


def wait_for_close(sock: socket.socket, timeout_s: float) -> tuple[bool, bytes]:
    """Reads until the peer closes the connection or `timeout_s` passes.

    Returns (closed, bytes received meanwhile). A reset counts as closed: a
    peer that closes with unread input in its buffer sends RST rather than FIN.
    """
    deadline = time.monotonic() + timeout_s
    received = bytearray()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False, bytes(received)
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            return False, bytes(received)
        except (ConnectionResetError, ConnectionAbortedError):
            return True, bytes(received)
        if not chunk:
            return True, bytes(received)
        received += chunk


def roundtrip(bootstrap: str, request: bytes, timeout_s: float = 5.0) -> bytes:
    """Sends one framed request on a fresh connection and returns the response payload."""
    with connect(bootstrap, timeout_s) as sock:
        sock.sendall(request)
        return read_response(sock)


def api_versions(bootstrap: str, version: int = 3, correlation_id: int = 1, timeout_s: float = 5.0) -> ApiVersionsResponse:
    payload = roundtrip(bootstrap, api_versions_request(version, correlation_id), timeout_s)
    return parse_api_versions_response(payload, version)


def metadata_v12(
    bootstrap: str,
    topics: list[str] | None,
    allow_auto_topic_creation: bool = False,
    correlation_id: int = 1,
    timeout_s: float = 10.0,
) -> MetadataResponse:
    payload = roundtrip(bootstrap, metadata_v12_request(correlation_id, topics, allow_auto_topic_creation), timeout_s)
    return parse_metadata_v12_response(payload)


def broker_answers(bootstrap: str, timeout_s: float = 2.0) -> bool:
    """True if a fresh connection gets a well-formed, error-free ApiVersions v3 answer."""
    try:
        response = api_versions(bootstrap, version=3, correlation_id=7, timeout_s=timeout_s)
    except (OSError, EOFError, WireError):
        return False
    return response.error_code == ERROR_NONE and response.correlation_id == 7


def wait_until_broker_answers(bootstrap: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        if broker_answers(bootstrap):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
