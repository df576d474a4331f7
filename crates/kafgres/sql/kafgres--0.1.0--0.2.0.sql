-- kafgres 0.1.0 -> 0.2.0: the SQL bridge, and replication to standbys.
--
-- Records sent from SQL now reach the broker through a background worker of
-- their own (kafgres sql bridge), which reads the WAL without logical
-- decoding and keeps its checkpoint in these tables. Everything else (topics,
-- offsets, transactions, records in the log) is unchanged and kept.
\echo Use "ALTER EXTENSION kafgres UPDATE" to load this file. \quit

-- The SQL bridge's checkpoint (docs/sql.md): every transaction that sent from
-- SQL and committed before applied_lsn has its records in the log; reading
-- the WAL resumes at restart_lsn (the first message of the oldest transaction
-- still open then). One row, written by the bridge worker after each round;
-- a standby receives it with the rest of the catalog, so its bridge continues
-- exactly there after a promotion. Not dumped: positions mean nothing in
-- another cluster.
CREATE TABLE kafgres.sql_bridge (
    singleton      boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    -- NULL only after an upgrade from a release that kept this in a file.
    applied_lsn    pg_lsn,
    restart_lsn    pg_lsn NOT NULL,
    -- The bridge's idempotent producer (-1 until it has reserved one).
    producer_id    bigint NOT NULL DEFAULT -1,
    producer_epoch smallint NOT NULL DEFAULT 0,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
-- The previous release's applier kept its checkpoint in a file of the log
-- directory: applied_lsn NULL makes the bridge import it once. Reading starts
-- where the previous release's logical slot retains WAL.
INSERT INTO kafgres.sql_bridge (applied_lsn, restart_lsn)
VALUES (NULL, coalesce((SELECT restart_lsn FROM pg_catalog.pg_replication_slots
                        WHERE slot_name = 'kafgres' AND slot_type = 'logical'),
                       pg_current_wal_insert_lsn()));
COMMENT ON TABLE kafgres.sql_bridge IS
    'The SQL bridge''s progress: records sent from SQL are in their topics up to applied_lsn; written by the bridge.';
REVOKE ALL ON kafgres.sql_bridge FROM PUBLIC;

-- The next sequence number of the bridge's producer per partition: the
-- records of a partition are numbered in commit order, so a replay after a
-- crash or a failover sends the same numbers and nothing twice.
CREATE TABLE kafgres.sql_bridge_sequences (
    topic         text NOT NULL,
    partition     integer NOT NULL CHECK (partition >= 0),
    next_sequence integer NOT NULL CHECK (next_sequence >= 0),
    PRIMARY KEY (topic, partition)
);
REVOKE ALL ON kafgres.sql_bridge_sequences FROM PUBLIC;

-- What the bridge could not deliver, and why: WAL removed before it was read
-- (the commits between from_lsn and to_lsn may be missing), or a transaction
-- found only in part (xid, committed at to_lsn, none of its records delivered).
CREATE TABLE kafgres.sql_bridge_gaps (
    id          bigserial PRIMARY KEY,
    detected_at timestamptz NOT NULL DEFAULT now(),
    from_lsn    pg_lsn NOT NULL,
    to_lsn      pg_lsn NOT NULL,
    xid         bigint,
    reason      text NOT NULL
);
COMMENT ON TABLE kafgres.sql_bridge_gaps IS
    'Sends from SQL that the bridge could not deliver, and why (removed WAL, a transaction read only in part).';
REVOKE ALL ON kafgres.sql_bridge_gaps FROM PUBLIC;


-- kafgres::bridge::status::_sql_bridge_status
CREATE  FUNCTION "_sql_bridge_status"() RETURNS TABLE (
	"state" TEXT,  /* String */
	"pid" INT,  /* Option < i32 > */
	"since" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"applied_lsn" TEXT,  /* Option < String > */
	"restart_lsn" TEXT,  /* Option < String > */
	"read_lsn" TEXT,  /* Option < String > */
	"last_applied_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_commit_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"pending_commit_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"transactions_applied" bigint,  /* i64 */
	"records_applied" bigint,  /* i64 */
	"records_dropped" bigint,  /* i64 */
	"incomplete_transactions" bigint,  /* i64 */
	"errors" bigint,  /* i64 */
	"message" TEXT  /* Option < String > */
)
STRICT STABLE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_sql_bridge_status_wrapper';
REVOKE EXECUTE ON FUNCTION kafgres._sql_bridge_status() FROM PUBLIC;

CREATE VIEW kafgres.sql_bridge_status AS
SELECT state, pid, since, applied_lsn::pg_lsn AS applied_lsn, restart_lsn::pg_lsn AS restart_lsn,
       read_lsn::pg_lsn AS read_lsn, last_applied_at, last_commit_at, pending_commit_at,
       CASE WHEN pending_commit_at IS NOT NULL THEN greatest(clock_timestamp() - pending_commit_at, interval '0')
            ELSE interval '0' END AS lag,
       transactions_applied, records_applied, records_dropped, incomplete_transactions, errors, message,
       (SELECT count(*) FROM kafgres.sql_bridge_gaps) AS gaps
FROM kafgres._sql_bridge_status();
COMMENT ON VIEW kafgres.sql_bridge_status IS
    'The SQL bridge (records sent from SQL on their way to the broker): state and since when, the WAL applied '
    '(every send committed before applied_lsn is in its topic), retained (restart_lsn) and read; the commit time of '
    'the newest transaction applied and of the oldest one read but not applied yet, and lag: how long that one has '
    'waited since its commit (0 when none waits); counters, the last error, and how many gaps '
    'kafgres.sql_bridge_gaps lists.';
REVOKE ALL ON kafgres.sql_bridge_status FROM PUBLIC;

-- Replication of topic data to standbys (docs/replication.md).
-- One row per start of a primary's broker (docs/replication.md): the leader
-- epoch its batches carry, and where clients and standbys find it. A
-- standby's broker follows the latest row; a promoted standby's broker adds
-- the next one.
CREATE TABLE kafgres.leader_epochs (
    epoch      integer PRIMARY KEY CHECK (epoch >= 0),
    node_id    integer NOT NULL CHECK (node_id >= 0),
    host       text NOT NULL,
    port       integer NOT NULL CHECK (port BETWEEN 1 AND 65535),
    timeline   bigint NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    -- Its advertised.listeners (PROTOCOL://host:port,...): a standby sends
    -- each client to the leader's listener of the client's protocol.
    listeners  text NOT NULL DEFAULT ''
);
COMMENT ON TABLE kafgres.leader_epochs IS
    'Every start of a primary''s broker: its leader epoch, node id, advertised address and listeners, and timeline; written by the broker.';
REVOKE ALL ON kafgres.leader_epochs FROM PUBLIC;

-- The login of Kafgres's own clients to the broker (SASL KAFGRES-INTERNAL).
ALTER TABLE kafgres.cluster ADD COLUMN internal_secret text NOT NULL
    DEFAULT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')
    CHECK (length(internal_secret) >= 32);

-- Kafka ACLs (DescribeAcls, CreateAcls, DeleteAcls), enforced while
-- kafgres.authorizer = acl. A principal User:<role> is a Postgres role; a
-- binding for a group role applies to the roles that inherit from it.
-- Written by the broker; an operator's own INSERT or DELETE takes effect at
-- the next SELECT pg_reload_conf().
CREATE TABLE kafgres.acls (
    resource_type text NOT NULL
        CHECK (resource_type IN ('TOPIC', 'GROUP', 'CLUSTER', 'TRANSACTIONAL_ID', 'DELEGATION_TOKEN', 'USER')),
    pattern_type  text NOT NULL CHECK (pattern_type IN ('LITERAL', 'PREFIXED')),
    resource_name text NOT NULL CHECK (resource_name <> ''),
    principal     text NOT NULL CHECK (principal ~ '^User:.+'),
    host          text NOT NULL DEFAULT '*' CHECK (host <> ''),
    operation     text NOT NULL CHECK (operation IN ('ALL', 'READ', 'WRITE', 'CREATE', 'DELETE', 'ALTER', 'DESCRIBE',
        'CLUSTER_ACTION', 'DESCRIBE_CONFIGS', 'ALTER_CONFIGS', 'IDEMPOTENT_WRITE', 'CREATE_TOKENS', 'DESCRIBE_TOKENS',
        'TWO_PHASE_COMMIT')),
    permission    text NOT NULL CHECK (permission IN ('ALLOW', 'DENY')),
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (resource_type, pattern_type, resource_name, principal, host, operation, permission)
);
COMMENT ON TABLE kafgres.acls IS
    'Kafka ACL bindings (kafka-acls.sh), enforced while kafgres.authorizer = acl; principals are User:<role>.';
REVOKE ALL ON kafgres.acls FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('kafgres.acls', '');

-- Client quotas (DescribeClientQuotas, AlterClientQuotas; kafka-configs.sh
-- --entity-type users / clients / ips): bytes per second (request_percentage:
-- percent of one thread's time) for a user (a role), a client id, or both; or
-- new connections per second (connection_creation_rate) from a client address
-- (ip, alone). '<default>' is the default entity of its kind, NULL a kind the
-- quota does not name. Written by the broker; an operator's own change takes
-- effect at the next SELECT pg_reload_conf().
CREATE TABLE kafgres.client_quotas (
    user_name   text CHECK (user_name <> ''),
    client_id   text,
    -- One address (written as the client typed it, as Kafka keeps it), or the default ip.
    ip          text CHECK (ip = '<default>' OR (strpos(ip, '/') = 0 AND ip::inet IS NOT NULL)),
    quota_key   text NOT NULL CHECK (quota_key IN ('producer_byte_rate', 'consumer_byte_rate', 'request_percentage',
                                                   'connection_creation_rate')),
    -- Byte rates are whole bytes per second, request_percentage a percentage
    -- of one thread, connection_creation_rate whole connections per second.
    quota_value float8 NOT NULL CHECK (quota_value > 0
                                       AND (quota_key = 'request_percentage' OR quota_value = trunc(quota_value))),
    -- An ip entity stands alone and has only connection_creation_rate (Kafka's rule).
    CHECK (CASE WHEN ip IS NULL THEN (user_name IS NOT NULL OR client_id IS NOT NULL)
                                     AND quota_key <> 'connection_creation_rate'
                ELSE user_name IS NULL AND client_id IS NULL AND quota_key = 'connection_creation_rate'
           END),
    UNIQUE NULLS NOT DISTINCT (user_name, client_id, ip, quota_key)
);
COMMENT ON TABLE kafgres.client_quotas IS
    'Kafka client quotas (kafka-configs.sh --entity-type users/clients/ips): bytes per second, request_percentage in percent of a thread, connection_creation_rate per client address; ''<default>'' is the default entity.';
REVOKE ALL ON kafgres.client_quotas FROM PUBLIC;
SELECT pg_catalog.pg_extension_config_dump('kafgres.client_quotas', '');

-- kafgres::replication::status::_replication
CREATE  FUNCTION "_replication"() RETURNS TABLE (
	"role" TEXT,  /* String */
	"node_id" INT,  /* i32 */
	"leader_epoch" INT,  /* Option < i32 > */
	"connected" bool,  /* Option < bool > */
	"lag_records" bigint,  /* Option < i64 > */
	"last_fetch_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"records_fetched" bigint,  /* Option < i64 > */
	"bytes_fetched" bigint,  /* Option < i64 > */
	"records_truncated" bigint  /* Option < i64 > */
)
STRICT STABLE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_replication_wrapper';
REVOKE EXECUTE ON FUNCTION kafgres._replication() FROM PUBLIC;

-- kafgres::replication::status::_replicas
CREATE  FUNCTION "_replicas"() RETURNS TABLE (
	"name" TEXT,  /* String */
	"node_id" INT,  /* i32 */
	"connected" bool,  /* bool */
	"sync_priority" INT,  /* Option < i32 > */
	"lag_records" bigint,  /* i64 */
	"connected_since" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_fetch_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"caught_up_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT STABLE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_replicas_wrapper';
REVOKE EXECUTE ON FUNCTION kafgres._replicas() FROM PUBLIC;

-- kafgres::replication::partitions::_replica_partitions
CREATE  FUNCTION "_replica_partitions"() RETURNS TABLE (
	"standby" TEXT,  /* String */
	"topic" TEXT,  /* String */
	"partition" INT,  /* i32 */
	"replicated_offset" bigint,  /* i64 */
	"log_end_offset" bigint,  /* i64 */
	"high_watermark" bigint,  /* i64 */
	"lag_records" bigint,  /* i64 */
	"caught_up_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_replica_partitions_wrapper';
REVOKE EXECUTE ON FUNCTION kafgres._replica_partitions() FROM PUBLIC;

CREATE VIEW kafgres.replication AS
SELECT r.role, r.node_id, r.leader_epoch, l.node_id AS leader_node_id, l.host AS leader_host, l.port AS leader_port,
       r.connected, r.lag_records, r.last_fetch_at, r.records_fetched, r.bytes_fetched, r.records_truncated
FROM kafgres._replication() r
LEFT JOIN LATERAL (SELECT * FROM kafgres.leader_epochs ORDER BY epoch DESC LIMIT 1) l ON true;
COMMENT ON VIEW kafgres.replication IS
    'This server''s broker: leader (a primary), standby (copying topic data from the leader) or stopped; its epoch, '
    'the leader as last recorded, and on a standby its copy: connected, records behind the leader, last fetch.';
CREATE VIEW kafgres.replicas AS SELECT * FROM kafgres._replicas();
COMMENT ON VIEW kafgres.replicas IS
    'On a leader: the standbys whose brokers copy its topic data, by walreceiver name; sync_priority: their place in '
    'synchronous_standby_names (NULL: not named, acks=all does not wait for them); lag_records: records not yet copied.';
CREATE VIEW kafgres.replica_partitions AS SELECT * FROM kafgres._replica_partitions();
COMMENT ON VIEW kafgres.replica_partitions IS
    'On a leader: each standby''s copy of each partition: replicated_offset (it holds every record below), the '
    'leader''s log end and high watermark, lag_records, caught_up_at (now() - caught_up_at is its lag in time).';
REVOKE ALL ON kafgres.replication FROM PUBLIC;
REVOKE ALL ON kafgres.replicas FROM PUBLIC;
REVOKE ALL ON kafgres.replica_partitions FROM PUBLIC;

-- Segment archiving's status (kafgres.archive_command, docs/operations.md).
-- kafgres::shared_metrics::_archive_status
CREATE  FUNCTION "_archive_status"() RETURNS TABLE (
	"segments_archived" bigint,  /* i64 */
	"files_archived" bigint,  /* i64 */
	"bytes_archived" bigint,  /* i64 */
	"backlog_segments" bigint,  /* i64 */
	"last_archived" TEXT,  /* Option < String > */
	"last_archived_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"failures" bigint,  /* i64 */
	"last_failure" TEXT,  /* Option < String > */
	"last_failure_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT STABLE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_archive_status_wrapper';
REVOKE EXECUTE ON FUNCTION kafgres._archive_status() FROM PUBLIC;
CREATE VIEW kafgres.archive_status AS SELECT * FROM kafgres._archive_status();
COMMENT ON VIEW kafgres.archive_status IS
    'kafgres.archive_command since the server started: segments, files and bytes archived, closed segments not '
    'archived yet (held from retention), the last file archived, failures (each retried) and the last one.';
REVOKE ALL ON kafgres.archive_status FROM PUBLIC;

-- Change data capture (as crates/kafgres/sql/capture.sql installs it).
-- kafgres::sql_api::send::_topic_message_bytes_max
CREATE  FUNCTION "_topic_message_bytes_max"(
	"topic" TEXT /* &str */
) RETURNS bigint /* i64 */
STRICT STABLE PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_topic_message_bytes_max_wrapper';
-- kafgres::sql_api::capture::_capture_send
CREATE  FUNCTION "_capture_send"(
	"op" TEXT, /* & str */
	"before" jsonb, /* Option < JsonbText > */
	"after" jsonb, /* Option < JsonbText > */
	"raw_after" jsonb, /* Option < JsonbText > */
	"settings" TEXT[], /* Vec < Option < String > > */
	"columns" TEXT[], /* :: std :: option :: Option < Vec < Option < String > > > */
	"shape" jsonb, /* JsonB */
	"schema_name" TEXT, /* & str */
	"table_name" TEXT, /* & str */
	"snapshot" TEXT /* & str */
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_capture_send_wrapper';
-- kafgres::sql_api::row_filter::_capture_check_row_filter
CREATE  FUNCTION "_capture_check_row_filter"(
	"filter" TEXT /* &str */
) RETURNS void
STRICT IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_capture_check_row_filter_wrapper';
-- pg_dump keeps the cluster row (its id, the producer ids reserved, the
-- internal secret), but CREATE EXTENSION has made one by the time a
-- restore copies it in: the copied row replaces the one the install made,
-- instead of failing on the singleton's key. Only a row nothing has used
-- (no producer id reserved from it) is replaced; otherwise the table keeps
-- its one row and the insert fails.
CREATE FUNCTION kafgres._cluster_row_restored() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, kafgres AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM kafgres.cluster) THEN
        IF EXISTS (SELECT 1 FROM kafgres.cluster WHERE next_producer_id > 0) THEN
            RAISE EXCEPTION 'kafgres.cluster holds exactly one row, and this one is in use'
                USING ERRCODE = 'unique_violation',
                      HINT = 'a restore replaces the row of a fresh CREATE EXTENSION only: restore into an empty database';
        END IF;
        UPDATE kafgres.cluster
        SET cluster_id = NEW.cluster_id, next_producer_id = NEW.next_producer_id, internal_secret = NEW.internal_secret;
        RETURN NULL;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER kafgres_cluster_row_restored BEFORE INSERT ON kafgres.cluster
    FOR EACH ROW EXECUTE FUNCTION kafgres._cluster_row_restored();

-- BEGIN capture.sql (scripts/sync-upgrade-capture.py copies it here)
-- Change data capture (docs/cdc.md): a captured table's INSERT, UPDATE,
-- DELETE and TRUNCATE become records of a topic, exactly once and in commit
-- order, because each change is sent the way kafgres.send sends: as a
-- transactional logical message of the writing transaction, which the SQL
-- bridge delivers if and only if that transaction commits. No decoding slot,
-- no output plugin, no second copy of the WAL; wal_level = replica suffices.
--
-- A capture is a row here and two triggers on the table (kafgres_capture,
-- kafgres_capture_truncate) whose arguments carry the row's settings; the
-- row is what kafgres.capture_status shows and pg_dump keeps, the triggers
-- are what fires. Both live in the catalog, so they survive restarts and
-- reach standbys with the WAL.

CREATE TABLE kafgres.captures (
    relation          regclass PRIMARY KEY,
    topic             text NOT NULL,
    format            text NOT NULL CHECK (format IN ('debezium', 'row')),
    -- The columns published (NULL: all of them, as they are at each change).
    columns           name[],
    -- Where a change too large for its topic goes, with the reason (NULL:
    -- the writing statement fails instead; a change is never skipped).
    dead_letter_topic text,
    -- Debezium's tombstone after each delete (a null value under the key),
    -- so that a compacted topic forgets the row.
    tombstones        boolean NOT NULL DEFAULT true,
    -- Kafka Connect schemas with each key and value (Debezium's records as
    -- the JSON converter writes them with schemas.enable = true), for sink
    -- connectors that need them.
    schemas           boolean NOT NULL DEFAULT false,
    -- Only rows for which this boolean expression over the table's columns
    -- is true are published (NULL: every row). Kept as written; the triggers
    -- call kafgres."_capture_filter_<relation oid>", built from it.
    row_filter        text,
    -- What the triggers were given of the table (kafgres._capture_shape):
    -- when an ALTER TABLE or DROP INDEX changes it, they are put back with
    -- the new one.
    shape             jsonb,
    -- The last snapshot (capture's snapshot => true, or kafgres.snapshot in
    -- chunks): 'running' until its last chunk commits, then 'done'. Rows
    -- sent so far and, for a chunked one, heap pages read of the pages the
    -- table had when it began, and where the next chunk starts (the leaf
    -- partition and its page), so that an interrupted one resumes.
    snapshot_state       text CHECK (snapshot_state IN ('running', 'done')),
    snapshot_rows        bigint,
    snapshot_pages_done  bigint,
    snapshot_pages_total bigint,
    snapshot_leaf        oid,
    snapshot_next_page   bigint,
    snapshot_started_at  timestamptz,
    snapshot_updated_at  timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kafgres.captures IS
    'Tables whose changes Kafgres publishes (kafgres.capture, kafgres.uncapture): topic, format, columns, '
    'row filter, dead-letter topic, and the progress of the last snapshot.';
SELECT pg_catalog.pg_extension_config_dump('kafgres.captures', '');
REVOKE ALL ON kafgres.captures FROM PUBLIC;

-- One column value as Debezium's PostgreSQL connector writes it with its
-- default settings but decimal.handling.mode = string (a JSON consumer
-- without Connect schemas cannot read the default's base64 unscaled
-- integers): `v` is the value as to_jsonb wrote it. Never fails: a value it
-- does not know how to map (infinity, a type of its own) stays as to_jsonb
-- wrote it.
CREATE FUNCTION kafgres._cdc_value(v jsonb, type_id oid, type_mod integer) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    t text;
    ts timestamp;
    micros bigint;
    kind "char";
    base oid;
    base_mod integer;
    element oid;
    span interval;
    months numeric;
BEGIN
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN 'null';
    END IF;
    -- bool, int2/4/8, oid, float4/8, name, text, char, varchar, uuid, inet, cidr,
    -- macaddr, xml: what to_jsonb wrote is what Debezium writes.
    IF type_id IN (16, 20, 21, 23, 26, 700, 701, 19, 25, 18, 1042, 1043, 2950, 869, 650, 829, 142) THEN
        RETURN v;
    END IF;
    t := v #>> '{}';
    CASE type_id
    WHEN 1700 THEN  -- numeric
        RETURN to_jsonb(t);
    WHEN 790 THEN  -- money
        RETURN to_jsonb((t::money)::numeric::text);
    WHEN 17 THEN  -- bytea: base64 (Debezium's binary.handling.mode = bytes, as the JSON converter writes bytes)
        RETURN to_jsonb(translate(encode(decode(substr(t, 3), 'hex'), 'base64'), E'\n', ''));
    WHEN 114, 3802 THEN  -- json, jsonb: io.debezium.data.Json, the document as a string
        RETURN to_jsonb(v::text);
    WHEN 1114 THEN  -- timestamp: io.debezium.time.MicroTimestamp (Timestamp, milliseconds, for precision 0-3)
        IF t IN ('infinity', '-infinity') THEN RETURN v; END IF;
        RETURN to_jsonb(CASE WHEN type_mod BETWEEN 0 AND 3
                             THEN floor(extract(epoch FROM t::timestamp) * 1000)
                             ELSE floor(extract(epoch FROM t::timestamp) * 1000000) END::bigint);
    WHEN 1184 THEN  -- timestamptz: io.debezium.time.ZonedTimestamp, ISO-8601 in UTC, as many
                    -- fractional digits as the column's precision (6 without one)
        IF t IN ('infinity', '-infinity') THEN RETURN v; END IF;
        ts := t::timestamptz AT TIME ZONE 'UTC';
        micros := extract(microseconds FROM ts)::bigint % 1000000;
        RETURN to_jsonb(to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS')
                        || CASE WHEN type_mod = 0 THEN ''
                                ELSE '.' || left(lpad(micros::text, 6, '0'), CASE WHEN type_mod BETWEEN 1 AND 6
                                                                                  THEN type_mod ELSE 6 END) END
                        || 'Z');
    WHEN 1082 THEN  -- date: io.debezium.time.Date, days since the epoch
        IF t IN ('infinity', '-infinity') THEN RETURN v; END IF;
        RETURN to_jsonb(t::date - date '1970-01-01');
    WHEN 1083 THEN  -- time: io.debezium.time.MicroTime (Time, milliseconds, for precision 0-3)
        RETURN to_jsonb(CASE WHEN type_mod BETWEEN 0 AND 3
                             THEN floor(extract(epoch FROM t::time) * 1000)
                             ELSE floor(extract(epoch FROM t::time) * 1000000) END::bigint);
    WHEN 1266 THEN  -- timetz: io.debezium.time.ZonedTime, in UTC
        RETURN to_jsonb(((t::timetz AT TIME ZONE 'UTC')::time)::text || 'Z');
    WHEN 1186 THEN  -- interval: io.debezium.time.MicroDuration, a month counted as 365.25 / 12 days
                    -- (Postgres's own epoch counts 30)
        span := t::interval;
        months := extract(year FROM span) * 12 + extract(month FROM span);
        RETURN to_jsonb(trunc((extract(epoch FROM span) - extract(year FROM span) * 365.25 * 86400
                               - extract(month FROM span) * 30 * 86400 + months * 30.4375 * 86400) * 1000000)::bigint);
    WHEN 1560, 1562 THEN  -- bit(1) is a boolean; other bit strings are io.debezium.data.Bits:
                          -- their value's bytes, least significant first, without high zero bytes
        IF type_id = 1560 AND type_mod = 1 THEN RETURN to_jsonb(t = '1'); END IF;
        t := lpad(t, ((length(t) + 7) / 8) * 8, '0');  -- whole bytes, the most significant first
        RETURN to_jsonb(translate(encode(decode(coalesce(
                   (SELECT string_agg(lpad(to_hex(substr(t, 8 * n - 7, 8)::bit(8)::integer), 2, '0'), '' ORDER BY n DESC)
                    FROM generate_series(1, length(t) / 8) n
                    WHERE n >= (SELECT min(z) FROM generate_series(1, length(t) / 8) z
                                WHERE substr(t, 8 * z - 7, 8) <> '00000000')), ''), 'hex'), 'base64'), E'\n', ''));
    ELSE
        NULL;
    END CASE;
    SELECT typtype, typbasetype, typtypmod, CASE WHEN typcategory = 'A' THEN typelem END
    INTO kind, base, base_mod, element
    FROM pg_catalog.pg_type WHERE oid = type_id;
    IF kind = 'd' THEN  -- a domain: as its base type
        RETURN kafgres._cdc_value(v, base, CASE WHEN base_mod >= 0 THEN base_mod ELSE type_mod END);
    END IF;
    IF element IS NOT NULL AND jsonb_typeof(v) = 'array' THEN  -- an array: element by element
        RETURN (SELECT coalesce(jsonb_agg(CASE WHEN jsonb_typeof(e) = 'array'
                                               THEN kafgres._cdc_value(e, type_id, type_mod)
                                               ELSE kafgres._cdc_value(e, element, type_mod) END ORDER BY n), '[]')
                FROM jsonb_array_elements(v) WITH ORDINALITY AS x(e, n));
    END IF;
    RETURN v;  -- enums (their label, as Debezium), ranges, composites, geometry: as to_jsonb wrote them
END
$$;

-- The type a column's values are mapped as: its type, or a domain's base
-- type (with the domain's type modifier if it has one), and whether
-- _cdc_value maps it at all (false: to_jsonb's value is Debezium's). Only
-- built-in types are mapped, whose oids a dump and restore keep, because
-- the result is kept in the triggers' arguments.
CREATE FUNCTION kafgres._cdc_mapped_type(type_id oid, type_mod integer, OUT base oid, OUT base_mod integer,
                                         OUT mapped boolean)
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    kind "char";
    next_base oid;
    next_mod integer;
    element oid;
BEGIN
    base := type_id;
    base_mod := type_mod;
    LOOP
        SELECT typtype, typbasetype, typtypmod INTO kind, next_base, next_mod FROM pg_catalog.pg_type WHERE oid = base;
        EXIT WHEN kind IS DISTINCT FROM 'd';
        base := next_base;
        base_mod := CASE WHEN next_mod >= 0 THEN next_mod ELSE base_mod END;
    END LOOP;
    SELECT CASE WHEN typcategory = 'A' THEN typelem END INTO element FROM pg_catalog.pg_type WHERE oid = base;
    mapped := base < 16384 AND coalesce(element, base) IN
        (1700, 790, 17, 114, 3802, 1114, 1184, 1082, 1083, 1266, 1186, 1560, 1562);
END
$$;

-- The Kafka Connect schema of a column type as Debezium's PostgreSQL
-- connector gives it with the settings _cdc_value follows (numerics as
-- strings): {"type": ..., "name": ..., "version": ..., "parameters": ...,
-- "items": ...}, without the field's name and optionality. A type Debezium
-- has no mapping for is a string (ranges, geometry: their text).
CREATE FUNCTION kafgres._cdc_connect_type(type_id oid, type_mod integer) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
DECLARE
    kind "char";
    base oid;
    base_mod integer;
    element oid;
BEGIN
    CASE type_id
    WHEN 16 THEN RETURN '{"type": "boolean"}';
    WHEN 21 THEN RETURN '{"type": "int16"}';
    WHEN 23 THEN RETURN '{"type": "int32"}';
    WHEN 20, 26 THEN RETURN '{"type": "int64"}';
    WHEN 700 THEN RETURN '{"type": "float"}';
    WHEN 701 THEN RETURN '{"type": "double"}';
    WHEN 17 THEN RETURN '{"type": "bytes"}';
    WHEN 2950 THEN RETURN '{"type": "string", "name": "io.debezium.data.Uuid", "version": 1}';
    WHEN 114, 3802 THEN RETURN '{"type": "string", "name": "io.debezium.data.Json", "version": 1}';
    WHEN 142 THEN RETURN '{"type": "string", "name": "io.debezium.data.Xml", "version": 1}';
    WHEN 1082 THEN RETURN '{"type": "int32", "name": "io.debezium.time.Date", "version": 1}';
    WHEN 1083 THEN
        RETURN CASE WHEN type_mod BETWEEN 0 AND 3
                    THEN '{"type": "int32", "name": "io.debezium.time.Time", "version": 1}'
                    ELSE '{"type": "int64", "name": "io.debezium.time.MicroTime", "version": 1}' END;
    WHEN 1114 THEN
        RETURN CASE WHEN type_mod BETWEEN 0 AND 3
                    THEN '{"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}'
                    ELSE '{"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}' END;
    WHEN 1184 THEN RETURN '{"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}';
    WHEN 1266 THEN RETURN '{"type": "string", "name": "io.debezium.time.ZonedTime", "version": 1}';
    WHEN 1186 THEN RETURN '{"type": "int64", "name": "io.debezium.time.MicroDuration", "version": 1}';
    WHEN 1560, 1562 THEN
        IF type_id = 1560 AND type_mod = 1 THEN
            RETURN '{"type": "boolean"}';
        END IF;
        RETURN jsonb_build_object('type', 'bytes', 'name', 'io.debezium.data.Bits', 'version', 1,
                                  'parameters', jsonb_build_object('length', CASE WHEN type_mod > 0 THEN type_mod
                                                                                  ELSE 2147483647 END::text));
    ELSE
        NULL;
    END CASE;
    SELECT typtype, typbasetype, typtypmod, CASE WHEN typcategory = 'A' THEN typelem END
    INTO kind, base, base_mod, element
    FROM pg_catalog.pg_type WHERE oid = type_id;
    IF kind = 'd' THEN
        RETURN kafgres._cdc_connect_type(base, CASE WHEN base_mod >= 0 THEN base_mod ELSE type_mod END);
    ELSIF kind = 'e' THEN
        RETURN jsonb_build_object('type', 'string', 'name', 'io.debezium.data.Enum', 'version', 1, 'parameters',
                                  jsonb_build_object('allowed', (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                                                                 FROM pg_catalog.pg_enum e WHERE e.enumtypid = type_id)));
    ELSIF element IS NOT NULL THEN
        RETURN jsonb_build_object('type', 'array', 'items', kafgres._cdc_connect_type(element, type_mod)
                                                            || '{"optional": true}');
    END IF;
    RETURN '{"type": "string"}';  -- numeric and money (as strings), text types, inet, ranges ...
END
$$;

-- A column's default in its Connect schema, as Debezium gives it: a default
-- made only of built-in immutable functions and operators (a constant, a
-- cast) is evaluated and mapped as values are (this runs as the extension's
-- owner inside the capture trigger, so nothing the database's users defined
-- is ever called: their functions, or a domain's CHECK, are left out); a sequence's nextval() on a NOT NULL
-- column is 0; anything else (now(), CURRENT_TIMESTAMP, a volatile
-- function, a generated column) has none.
CREATE FUNCTION kafgres._capture_connect_default(relation oid, attnum smallint) RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
DECLARE
    expr pg_node_tree;
    tree text;
    a pg_catalog.pg_attribute;
    m record;
    v jsonb;
BEGIN
    SELECT * INTO a FROM pg_catalog.pg_attribute x WHERE x.attrelid = relation AND x.attnum = _capture_connect_default.attnum;
    SELECT d.adbin INTO expr FROM pg_catalog.pg_attrdef d WHERE d.adrelid = relation AND d.adnum = a.attnum;
    IF expr IS NULL OR a.attgenerated <> '' THEN
        RETURN NULL;
    END IF;
    tree := expr::text;
    IF tree LIKE '%{SQLVALUEFUNCTION%' OR tree LIKE '%{NEXTVALUEEXPR%' OR EXISTS (
            SELECT 1 FROM regexp_matches(tree, ':(funcid|opno) (\d+)', 'g') f(m)
            LEFT JOIN pg_catalog.pg_operator o ON f.m[1] = 'opno' AND o.oid = f.m[2]::oid
            JOIN pg_catalog.pg_proc p ON p.oid = CASE WHEN f.m[1] = 'opno' THEN o.oprcode::oid ELSE f.m[2]::oid END
            WHERE p.provolatile <> 'i' OR p.oid >= 16384)
       -- A cast to a type of the database's own (a domain's CHECK) could run its functions.
       OR (a.atttypid >= 16384 AND (SELECT t.typtype FROM pg_catalog.pg_type t WHERE t.oid = a.atttypid) <> 'e') THEN
        IF a.attnotnull AND a.atttypid IN (20, 21, 23) AND tree ~ ':funcid 1574 ' THEN  -- nextval(): serial columns
            RETURN '0';
        END IF;
        RETURN NULL;
    END IF;
    BEGIN
        EXECUTE format('SELECT to_jsonb((%s)::%s)', pg_catalog.pg_get_expr(expr, relation),
                       pg_catalog.format_type(a.atttypid, a.atttypmod)) INTO v;
    EXCEPTION WHEN OTHERS THEN
        RETURN NULL;
    END;
    IF v IS NULL OR jsonb_typeof(v) = 'null' THEN
        RETURN NULL;
    END IF;
    SELECT * INTO m FROM kafgres._cdc_mapped_type(a.atttypid, a.atttypmod);
    RETURN CASE WHEN m.mapped THEN kafgres._cdc_value(v, m.base, m.base_mod) ELSE v END;
END
$$;

-- The fields of a table's rows in Connect schemas, in column order: name,
-- type (_cdc_connect_type), whether it may be null, and its default. Read
-- by kafgres._capture_send when a capture with schemas meets a table shape
-- it has not seen in this session.
CREATE FUNCTION kafgres._capture_connect_fields(relation regclass)
RETURNS TABLE (field name, field_schema jsonb, optional boolean, default_value jsonb)
LANGUAGE sql STABLE AS $$
    SELECT a.attname, kafgres._cdc_connect_type(a.atttypid, a.atttypmod), NOT a.attnotnull,
           kafgres._capture_connect_default(a.attrelid, a.attnum)
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = relation AND a.attnum > 0 AND NOT a.attisdropped
    ORDER BY a.attnum
$$;

-- What a capture's triggers need to know of its table, computed when they
-- are installed instead of at every change (and installed again by the
-- event triggers below when it changes): the key columns, the columns whose
-- values are mapped ([name, type, type modifier]), the extension's version,
-- and a signature of every column's name, type, modifier and nullability,
-- so that any change of them installs the triggers again (a capture with
-- Connect schemas keys its schemas on it).
CREATE FUNCTION kafgres._capture_shape(relation oid) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN jsonb_build_object(
        'key', to_jsonb(kafgres._capture_key_columns(relation)),
        'mapped', (SELECT coalesce(jsonb_agg(jsonb_build_array(a.attname, t.base, t.base_mod) ORDER BY a.attnum), '[]')
                   FROM pg_catalog.pg_attribute a, LATERAL kafgres._cdc_mapped_type(a.atttypid, a.atttypmod) t
                   WHERE a.attrelid = relation AND a.attnum > 0 AND NOT a.attisdropped AND t.mapped),
        'version', (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'kafgres'),
        'signature', (SELECT md5(string_agg(format('%s:%s:%s:%s', a.attname, a.atttypid, a.atttypmod, a.attnotnull),
                                            ',' ORDER BY a.attnum))
                      FROM pg_catalog.pg_attribute a
                      WHERE a.attrelid = relation AND a.attnum > 0 AND NOT a.attisdropped));
END
$$;

-- The columns of a table's record key: its primary key, else its replica
-- identity index; NULL when it has neither (records have no key, as in Debezium).
CREATE FUNCTION kafgres._capture_key_columns(relation oid) RETURNS name[]
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN (SELECT pg_catalog.array_agg(a.attname ORDER BY k.n)
            FROM (SELECT i.indkey FROM pg_catalog.pg_index i
                  WHERE i.indrelid = relation AND (i.indisprimary OR i.indisreplident)
                  ORDER BY i.indisprimary DESC LIMIT 1) ix,
                 unnest(ix.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
            JOIN pg_catalog.pg_attribute a ON a.attrelid = relation AND a.attnum = k.attnum);
END
$$;

-- Sends one change as its capture's settings say (the triggers' arguments:
-- topic, format, columns, dead-letter topic, tombstones, schemas) and its table's
-- shape (above). `op` is Debezium's: c, u, d, r (a snapshot row) or t.
-- Rows come as to_jsonb wrote them; only the shape's mapped columns are
-- mapped here, so a table of integers and text costs no per-column call.
-- kafgres._capture_send (crates/kafgres/src/sql_api/capture.rs) makes and
-- sends the record: key, envelope, headers, the size check against the
-- topic (a change too large goes to the dead-letter topic, or fails its
-- statement), the tombstone after a delete.
CREATE FUNCTION kafgres._capture_emit(op text, before jsonb, after jsonb, settings text[], shape jsonb,
                                      schema_name name, table_name name, snapshot text DEFAULT 'false')
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    mapped jsonb := shape -> 'mapped';
    mapped_before jsonb := before;
    mapped_after jsonb := after;
BEGIN
    IF jsonb_array_length(mapped) > 0 THEN
        IF before IS NOT NULL THEN
            mapped_before := before || (SELECT jsonb_object_agg(m ->> 0, kafgres._cdc_value(before -> (m ->> 0),
                                                    (m ->> 1)::oid, (m ->> 2)::integer))
                                        FROM jsonb_array_elements(mapped) m);
        END IF;
        IF after IS NOT NULL THEN
            mapped_after := after || (SELECT jsonb_object_agg(m ->> 0, kafgres._cdc_value(after -> (m ->> 0),
                                                  (m ->> 1)::oid, (m ->> 2)::integer))
                                      FROM jsonb_array_elements(mapped) m);
        END IF;
    END IF;
    PERFORM kafgres._capture_send(op, mapped_before, mapped_after,
                                  CASE WHEN settings[2] = 'row' THEN after END, settings,
                                  nullif(settings[3], '')::name[]::text[], shape, schema_name, table_name, snapshot);
END
$$;

-- The capture triggers' function. SECURITY DEFINER: whoever may write the
-- table publishes its changes, without rights on Kafgres of their own.
CREATE FUNCTION kafgres._capture_trigger() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET bytea_output = 'hex' AS $$
DECLARE
    -- The trigger's arguments, numbered from 1 (TG_ARGV counts from 0): the
    -- settings, then the table's shape.
    settings text[] := TG_ARGV[0:5];
    shape jsonb := TG_ARGV[6]::jsonb;
    -- With a row filter, an UPDATE that moves a row into the filter is
    -- published as its insert, one that moves it out as its delete (as
    -- Postgres publications do); the trigger that fires says which.
    update_as text := coalesce(TG_ARGV[7], '');
    old_row jsonb;
    new_row jsonb;
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM kafgres._capture_emit('t', NULL, NULL, settings, shape, TG_TABLE_SCHEMA, TG_TABLE_NAME);
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN old_row := to_jsonb(OLD); END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN new_row := to_jsonb(NEW); END IF;
    IF TG_OP = 'INSERT' OR update_as = 'insert' THEN
        PERFORM kafgres._capture_emit('c', NULL, new_row, settings, shape, TG_TABLE_SCHEMA, TG_TABLE_NAME);
    ELSIF TG_OP = 'DELETE' OR update_as = 'delete' THEN
        PERFORM kafgres._capture_emit('d', old_row, NULL, settings, shape, TG_TABLE_SCHEMA, TG_TABLE_NAME);
    ELSIF jsonb_typeof(shape -> 'key') = 'array' AND EXISTS (
            SELECT 1 FROM jsonb_array_elements_text(shape -> 'key') k
            WHERE old_row -> k IS DISTINCT FROM new_row -> k) THEN
        -- The key changed: as Debezium, a delete of the old key (and its
        -- tombstone), then a create under the new one.
        PERFORM kafgres._capture_emit('d', old_row, NULL, settings, shape, TG_TABLE_SCHEMA, TG_TABLE_NAME);
        PERFORM kafgres._capture_emit('c', NULL, new_row, settings, shape, TG_TABLE_SCHEMA, TG_TABLE_NAME);
    ELSE
        PERFORM kafgres._capture_emit('u', old_row, new_row, settings, shape, TG_TABLE_SCHEMA, TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END
$$;

-- The arguments a capture's triggers carry, numbered from 1: topic, format,
-- columns, dead-letter topic, tombstones, schemas.
CREATE FUNCTION kafgres._capture_settings(c kafgres.captures) RETURNS text[]
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT ARRAY[c.topic, c.format, coalesce(c.columns::text, ''), coalesce(c.dead_letter_topic, ''),
                 c.tombstones::text, c.schemas::text]
$$;

-- The function a capture's row filter becomes: kafgres."_capture_filter_<oid>"(row).
-- Polymorphic, so that it depends on no row type and DROP TABLE needs no CASCADE.
CREATE FUNCTION kafgres._capture_filter_function(relation regclass) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'kafgres.' || pg_catalog.quote_ident('_capture_filter_' || relation::oid)
$$;

-- Whether `row_filter` is a boolean expression over the rows of `relation`,
-- names resolved as the filter function resolves them (pg_catalog, then the
-- table's schema). Parse analysis only (PREPARE, never EXECUTE): nothing of
-- the filter runs here, with this function owner's rights.
CREATE FUNCTION kafgres._capture_check_filter(relation regclass, row_filter text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, kafgres AS $$
DECLARE
    table_schema name := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                          WHERE c.oid = relation);
BEGIN
    -- One expression and nothing more, before it goes into a statement.
    PERFORM kafgres._capture_check_row_filter(row_filter);
    PERFORM set_config('search_path', 'pg_catalog, ' || quote_ident(table_schema), true);
    BEGIN
        EXECUTE format('PREPARE kafgres_row_filter_check(%s) AS SELECT FROM (SELECT ($1).*) AS t WHERE (%s)',
                       relation, row_filter);
    EXCEPTION WHEN OTHERS THEN
        RAISE EXCEPTION 'kafgres: the row filter "%" does not apply to the rows of %: %', row_filter, relation, SQLERRM
            USING ERRCODE = SQLSTATE,
                  HINT = 'a row filter is a boolean expression over the table''s columns, without aggregates, '
                         'window functions, subqueries or system columns; names other than pg_catalog''s and '
                         'the table schema''s must be schema-qualified';
    END;
    DEALLOCATE kafgres_row_filter_check;
END
$$;

CREATE FUNCTION kafgres._capture_drop_triggers(relation regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['kafgres_capture', 'kafgres_capture_delete', 'kafgres_capture_update',
                                'kafgres_capture_update_in', 'kafgres_capture_update_out', 'kafgres_capture_truncate'] LOOP
        EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s', name, relation);
    END LOOP;
END
$$;

-- Puts the capture's triggers on the table (replacing any it had). Without
-- a row filter, one row trigger for every change; with one, a trigger per
-- case, each with the filter as its WHEN condition, so that a row outside
-- the filter costs its writer no trigger call at all.
CREATE FUNCTION kafgres._capture_install_triggers(relation regclass, settings text[], filter_function text,
                                                  shape jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    args text := (SELECT string_agg(quote_literal(s), ', ') FROM unnest(settings || shape::text) s);
    create_trigger text := 'CREATE TRIGGER %I AFTER %s ON %s FOR EACH ROW %s EXECUTE FUNCTION kafgres._capture_trigger(%s)';
    f text := filter_function;
BEGIN
    PERFORM kafgres._capture_drop_triggers(relation);
    IF f IS NULL THEN
        EXECUTE format(create_trigger, 'kafgres_capture', 'INSERT OR UPDATE OR DELETE', relation, '', args);
    ELSE
        EXECUTE format(create_trigger, 'kafgres_capture', 'INSERT', relation, format('WHEN (%s(NEW))', f), args);
        EXECUTE format(create_trigger, 'kafgres_capture_delete', 'DELETE', relation, format('WHEN (%s(OLD))', f), args);
        EXECUTE format(create_trigger, 'kafgres_capture_update', 'UPDATE', relation,
                       format('WHEN (%s(OLD) AND %s(NEW))', f, f), args);
        EXECUTE format(create_trigger, 'kafgres_capture_update_in', 'UPDATE', relation,
                       format('WHEN (NOT %s(OLD) AND %s(NEW))', f, f), args || ', ''insert''');
        EXECUTE format(create_trigger, 'kafgres_capture_update_out', 'UPDATE', relation,
                       format('WHEN (%s(OLD) AND NOT %s(NEW))', f, f), args || ', ''delete''');
    END IF;
    EXECUTE format('CREATE TRIGGER kafgres_capture_truncate AFTER TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION kafgres._capture_trigger(%s)', relation, args);
END
$$;

-- What capturing a table asks of whoever called (the capture functions run
-- as their owner): what CREATE TRIGGER asks, owning the table or TRIGGER on it.
CREATE FUNCTION kafgres._capture_check_rights(relation regclass, caller text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c WHERE c.oid = relation
                   AND (pg_catalog.pg_has_role(session_user, c.relowner, 'USAGE')
                        OR pg_catalog.has_table_privilege(session_user, relation, 'TRIGGER'))) THEN
        RAISE EXCEPTION '%: permission denied for table %', caller, relation
            USING ERRCODE = 'insufficient_privilege', HINT = 'capture a table you own or have the TRIGGER privilege on';
    END IF;
END
$$;

CREATE FUNCTION kafgres.capture(
    "table" regclass,
    topic text DEFAULT NULL,
    format text DEFAULT 'debezium',
    columns name[] DEFAULT NULL,
    row_filter text DEFAULT NULL,
    snapshot boolean DEFAULT false,
    dead_letter_topic text DEFAULT NULL,
    tombstones boolean DEFAULT true,
    partitions integer DEFAULT 1,
    schemas boolean DEFAULT false
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET bytea_output = 'hex'
SET client_min_messages = warning AS $$
DECLARE
    kind "char";
    missing name;
    settings text[];
    filter_function text;
    shape jsonb;
    r record;
    snapshot_count bigint := 0;
BEGIN
    IF "table" IS NULL THEN
        RAISE EXCEPTION 'kafgres.capture: table must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT c.relkind INTO kind FROM pg_class c WHERE c.oid = "table";
    IF kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'kafgres.capture: % is not a table', "table"
            USING ERRCODE = 'wrong_object_type', HINT = 'capture an ordinary or partitioned table';
    END IF;
    PERFORM kafgres._capture_check_rights("table", 'kafgres.capture');
    IF format IS NULL OR format NOT IN ('debezium', 'row') THEN
        RAISE EXCEPTION 'kafgres.capture: unknown format "%"', format
            USING ERRCODE = 'invalid_parameter_value', HINT = 'use ''debezium'' (the Debezium envelope) or ''row''';
    END IF;
    SELECT c INTO missing FROM unnest(columns) c
    WHERE NOT EXISTS (SELECT 1 FROM pg_attribute a
                      WHERE a.attrelid = "table" AND a.attname = c AND a.attnum > 0 AND NOT a.attisdropped);
    IF missing IS NOT NULL THEN
        RAISE EXCEPTION 'kafgres.capture: table % has no column "%"', "table", missing
            USING ERRCODE = 'undefined_column';
    END IF;
    IF row_filter IS NOT NULL THEN
        PERFORM kafgres._capture_check_filter("table", row_filter);
    END IF;
    IF snapshot AND current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'kafgres.capture: a snapshot needs READ COMMITTED'
            USING ERRCODE = 'invalid_transaction_state',
                  HINT = 'a transaction snapshot taken before the capture began could miss changes committed since';
    END IF;
    -- Debezium's topic naming: <prefix>.<schema>.<table>, the database as the prefix.
    topic := coalesce(topic, (SELECT current_database() || '.' || n.nspname || '.' || c.relname
                              FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                              WHERE c.oid = "table"));
    IF NOT EXISTS (SELECT 1 FROM kafgres.topics t WHERE t.name = topic) THEN
        PERFORM kafgres.create_topic(topic, partitions);
    END IF;
    IF dead_letter_topic IS NOT NULL AND NOT EXISTS (SELECT 1 FROM kafgres.topics t WHERE t.name = dead_letter_topic) THEN
        PERFORM kafgres.create_topic(dead_letter_topic, 1);
    END IF;
    settings := ARRAY[topic, format, coalesce(columns::text, ''), coalesce(dead_letter_topic, ''),
                      coalesce(tombstones, true)::text, coalesce(schemas, false)::text];
    -- CREATE TRIGGER locks the table against writes until this transaction
    -- ends: every change committed before is in the snapshot below, every one
    -- after fires the trigger.
    PERFORM kafgres._capture_drop_triggers("table");
    filter_function := kafgres._capture_filter_function("table");
    EXECUTE pg_catalog.format('DROP FUNCTION IF EXISTS %s(anyelement)', filter_function);
    IF row_filter IS NOT NULL THEN
        -- Runs as whoever writes the table (trigger conditions do), with its
        -- names resolved as _capture_check_filter checked them.
        EXECUTE pg_catalog.format(
            'CREATE FUNCTION %s(anyelement) RETURNS boolean LANGUAGE sql STABLE PARALLEL SAFE '
            'SET search_path = pg_catalog, %I AS %L',
            filter_function,
            (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = "table"),
            pg_catalog.format('SELECT coalesce((%s), false) FROM (SELECT ($1).*) AS t', row_filter));
        EXECUTE pg_catalog.format('COMMENT ON FUNCTION %s(anyelement) IS %L', filter_function,
                                  pg_catalog.format('The row filter of the capture of %s (kafgres.capture).', "table"));
    ELSE
        filter_function := NULL;
    END IF;
    shape := kafgres._capture_shape("table");
    PERFORM kafgres._capture_install_triggers("table", settings, filter_function, shape);
    IF snapshot THEN
        FOR r IN EXECUTE pg_catalog.format('SELECT to_jsonb(t) AS row_value, n.nspname, c.relname '
                                           'FROM %s AS t JOIN pg_class c ON c.oid = t.tableoid '
                                           'JOIN pg_namespace n ON n.oid = c.relnamespace %s', "table",
                                           CASE WHEN filter_function IS NOT NULL
                                                THEN pg_catalog.format('WHERE %s(t)', filter_function) ELSE '' END) LOOP
            PERFORM kafgres._capture_emit('r', NULL, r.row_value, settings, shape, r.nspname, r.relname, 'true');
            snapshot_count := snapshot_count + 1;
        END LOOP;
    END IF;
    INSERT INTO kafgres.captures AS c (relation, topic, format, columns, row_filter, shape, dead_letter_topic,
                                       tombstones, schemas, snapshot_state, snapshot_rows, snapshot_started_at,
                                       snapshot_updated_at)
    VALUES ("table", topic, format, columns, row_filter, shape, dead_letter_topic, coalesce(tombstones, true),
            coalesce(schemas, false),
            CASE WHEN snapshot THEN 'done' END, CASE WHEN snapshot THEN snapshot_count END,
            CASE WHEN snapshot THEN now() END, CASE WHEN snapshot THEN clock_timestamp() END)
    ON CONFLICT (relation) DO UPDATE
    SET topic = excluded.topic, format = excluded.format, columns = excluded.columns,
        row_filter = excluded.row_filter, shape = excluded.shape, dead_letter_topic = excluded.dead_letter_topic,
        tombstones = excluded.tombstones, schemas = excluded.schemas, created_at = now(),
        snapshot_state = coalesce(excluded.snapshot_state, c.snapshot_state),
        snapshot_rows = coalesce(excluded.snapshot_rows, c.snapshot_rows),
        snapshot_pages_done = CASE WHEN snapshot THEN NULL ELSE c.snapshot_pages_done END,
        snapshot_pages_total = CASE WHEN snapshot THEN NULL ELSE c.snapshot_pages_total END,
        snapshot_leaf = CASE WHEN snapshot THEN NULL ELSE c.snapshot_leaf END,
        snapshot_next_page = CASE WHEN snapshot THEN NULL ELSE c.snapshot_next_page END,
        snapshot_started_at = coalesce(excluded.snapshot_started_at, c.snapshot_started_at),
        snapshot_updated_at = coalesce(excluded.snapshot_updated_at, c.snapshot_updated_at);
    RETURN topic;
END
$$;
COMMENT ON FUNCTION kafgres.capture(regclass, text, text, name[], text, boolean, text, boolean, integer, boolean) IS
    'Publishes the table''s changes to a topic (created if missing; default <database>.<schema>.<table>) from this '
    'transaction''s commit on, exactly once and in commit order; row_filter keeps only matching rows; '
    'snapshot => true sends its rows first (kafgres.snapshot does it in chunks); schemas => true adds Kafka Connect '
    'schemas to keys and values.';

CREATE FUNCTION kafgres.uncapture("table" regclass) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET client_min_messages = warning AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = "table") THEN
        PERFORM kafgres._capture_check_rights("table", 'kafgres.uncapture');
        PERFORM kafgres._capture_drop_triggers("table");
    END IF;
    EXECUTE pg_catalog.format('DROP FUNCTION IF EXISTS %s(anyelement)', kafgres._capture_filter_function("table"));
    DELETE FROM kafgres.captures WHERE relation = "table";
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION kafgres.uncapture(regclass) IS
    'Stops publishing the table''s changes (from this transaction''s commit on); false if it was not captured.';

-- What kafgres.snapshot's helpers ask of whoever called them (they run as
-- their owner and PUBLIC may call them): EXECUTE on kafgres.snapshot, and
-- the rights capturing the table asks.
CREATE FUNCTION kafgres._capture_check_snapshot_rights(relation regclass) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT pg_catalog.has_function_privilege(session_user, 'kafgres.snapshot(regclass, integer, boolean)', 'EXECUTE') THEN
        RAISE EXCEPTION 'kafgres.snapshot: permission denied for procedure kafgres.snapshot'
            USING ERRCODE = 'insufficient_privilege', HINT = 'GRANT EXECUTE ON PROCEDURE kafgres.snapshot to the role';
    END IF;
    PERFORM kafgres._capture_check_rights(relation, 'kafgres.snapshot');
END
$$;

-- The tables that hold a captured table's rows: itself, or its partitions.
CREATE FUNCTION kafgres._capture_leaves(relation regclass) RETURNS TABLE (leaf regclass)
LANGUAGE sql STABLE AS $$
    SELECT p.relid FROM pg_catalog.pg_partition_tree(relation) p WHERE p.isleaf
    UNION
    SELECT c.oid::regclass FROM pg_catalog.pg_class c WHERE c.oid = relation AND c.relkind = 'r'
$$;

-- A chunked snapshot (kafgres.snapshot) begins, or resumes where an
-- interrupted one stopped: the heap pages of each leaf (the table, or each
-- of its partitions) to read, in order. SECURITY DEFINER, for a procedure
-- that commits (and so cannot be one); executable by PUBLIC, it checks the
-- caller's rights itself.
CREATE FUNCTION kafgres._capture_snapshot_start(relation regclass, resume boolean)
RETURNS TABLE (leaf oid, first_page bigint, pages bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres AS $$
#variable_conflict use_variable
DECLARE
    c kafgres.captures;
    block_bytes bigint := current_setting('block_size')::bigint;
BEGIN
    PERFORM kafgres._capture_check_snapshot_rights(relation);
    SELECT * INTO c FROM kafgres.captures k WHERE k.relation = _capture_snapshot_start.relation FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'kafgres.snapshot: % is not captured', relation
            USING ERRCODE = 'undefined_object', HINT = 'call kafgres.capture first: the snapshot''s consistency rests on it';
    END IF;
    IF NOT (resume AND c.snapshot_state = 'running' AND c.snapshot_pages_total IS NOT NULL) THEN
        UPDATE kafgres.captures k
        SET snapshot_state = 'running', snapshot_rows = 0, snapshot_pages_done = 0, snapshot_leaf = NULL,
            snapshot_next_page = 0, snapshot_started_at = clock_timestamp(), snapshot_updated_at = clock_timestamp(),
            snapshot_pages_total = (SELECT coalesce(sum(pg_relation_size(l.leaf) / block_bytes), 0)
                                    FROM kafgres._capture_leaves(relation) l)
        WHERE k.relation = _capture_snapshot_start.relation
        RETURNING * INTO c;
    END IF;
    RETURN QUERY
        SELECT l.leaf::oid,
               CASE WHEN l.leaf::oid = c.snapshot_leaf THEN c.snapshot_next_page ELSE 0 END,
               pg_relation_size(l.leaf) / block_bytes
        FROM kafgres._capture_leaves(relation) l
        WHERE c.snapshot_leaf IS NULL OR l.leaf::oid >= c.snapshot_leaf
        ORDER BY l.leaf::oid;
END
$$;

-- One chunk of a snapshot: the rows of `leaf`'s heap pages
-- [first_page, first_page + pages), each as an op = 'r' record, and the
-- progress, in one transaction. The rows are read FOR SHARE: a writer that
-- changes one waits for this chunk to commit, so its change comes after the
-- row's snapshot record in commit order, never before it with the older
-- value after. `finish` marks the snapshot done.
CREATE FUNCTION kafgres._capture_snapshot_chunk(relation regclass, leaf oid, first_page bigint, pages bigint,
                                                finish boolean) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET bytea_output = 'hex' AS $$
#variable_conflict use_variable
DECLARE
    c kafgres.captures;
    r record;
    sent bigint := 0;
    filter text;
    shape jsonb;
    settings text[];
    schema_name name;
    table_name name;
BEGIN
    PERFORM kafgres._capture_check_snapshot_rights(relation);
    SELECT * INTO c FROM kafgres.captures k WHERE k.relation = _capture_snapshot_chunk.relation FOR UPDATE;
    IF NOT FOUND OR c.snapshot_state IS DISTINCT FROM 'running' THEN
        RAISE EXCEPTION 'kafgres.snapshot: the snapshot of % ended while it ran', relation
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'the table was captured again or uncaptured meanwhile; call kafgres.snapshot again';
    END IF;
    IF leaf IS NOT NULL AND pages > 0 THEN
        filter := CASE WHEN c.row_filter IS NOT NULL
                       THEN pg_catalog.format(' AND %s(t)', kafgres._capture_filter_function(relation)) ELSE '' END;
        shape := kafgres._capture_shape(leaf);
        settings := kafgres._capture_settings(c);
        SELECT n.nspname, k.relname INTO schema_name, table_name
        FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace WHERE k.oid = leaf;
        FOR r IN EXECUTE pg_catalog.format(
                'SELECT to_jsonb(t) AS row_value FROM %s AS t WHERE t.ctid >= %L::tid AND t.ctid < %L::tid%s '
                'FOR SHARE OF t', leaf::regclass, pg_catalog.format('(%s,0)', first_page),
                pg_catalog.format('(%s,0)', least(first_page + pages, 4294967295)), filter) LOOP
            PERFORM kafgres._capture_emit('r', NULL, r.row_value, settings, shape, schema_name, table_name, 'true');
            sent := sent + 1;
        END LOOP;
    END IF;
    UPDATE kafgres.captures k
    SET snapshot_rows = coalesce(k.snapshot_rows, 0) + sent,
        snapshot_pages_done = coalesce(k.snapshot_pages_done, 0) + greatest(coalesce(pages, 0), 0),
        snapshot_leaf = coalesce(leaf, k.snapshot_leaf),
        snapshot_next_page = CASE WHEN leaf IS NOT NULL THEN first_page + pages ELSE k.snapshot_next_page END,
        snapshot_state = CASE WHEN finish THEN 'done' ELSE 'running' END,
        snapshot_updated_at = clock_timestamp()
    WHERE k.relation = _capture_snapshot_chunk.relation;
    RETURN sent;
END
$$;

-- The snapshot in chunks: each chunk its own transaction, so that a large
-- table never holds one long transaction and writers only ever wait for the
-- rows of one chunk. Call it outside a transaction block, on a captured
-- table; it resumes an interrupted snapshot unless restart => true.
CREATE PROCEDURE kafgres.snapshot("table" regclass, pages_per_chunk integer DEFAULT 128, restart boolean DEFAULT false)
LANGUAGE plpgsql AS $$
DECLARE
    leaves oid[];
    first_pages bigint[];
    leaf_pages bigint[];
    i integer;
    chunk_pages bigint;
    next_page bigint;
    attempts integer;
BEGIN
    IF pages_per_chunk IS NULL OR pages_per_chunk < 1 THEN
        RAISE EXCEPTION 'kafgres.snapshot: pages_per_chunk must be at least 1, not %', pages_per_chunk
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT coalesce(array_agg(s.leaf ORDER BY s.leaf), '{}'), array_agg(s.first_page ORDER BY s.leaf),
           array_agg(s.pages ORDER BY s.leaf)
    INTO leaves, first_pages, leaf_pages
    FROM kafgres._capture_snapshot_start("table", NOT coalesce(restart, false)) s;
    COMMIT;
    FOR i IN 1 .. cardinality(leaves) LOOP
        next_page := first_pages[i];
        WHILE next_page < leaf_pages[i] LOOP
            chunk_pages := least(pages_per_chunk, leaf_pages[i] - next_page);
            attempts := 0;
            LOOP
                BEGIN
                    PERFORM kafgres._capture_snapshot_chunk("table", leaves[i], next_page, chunk_pages, false);
                    EXIT;
                EXCEPTION WHEN deadlock_detected THEN
                    -- A writer held one row of the chunk and waited for another
                    -- the chunk held: the chunk gave way; read it again.
                    attempts := attempts + 1;
                    IF attempts >= 10 THEN
                        RAISE;
                    END IF;
                END;
            END LOOP;
            COMMIT;
            next_page := next_page + chunk_pages;
        END LOOP;
    END LOOP;
    PERFORM kafgres._capture_snapshot_chunk("table", NULL, 0, 0, true);
    COMMIT;
END
$$;
COMMENT ON PROCEDURE kafgres.snapshot(regclass, integer, boolean) IS
    'Sends every row of a captured table as op = r records, in chunks of heap pages, one transaction each, '
    'consistent with the stream of its changes; progress in kafgres.capture_status; resumes an interrupted one.';
REVOKE ALL ON PROCEDURE kafgres.snapshot(regclass, integer, boolean) FROM PUBLIC;

-- Puts a capture's triggers back when its table's shape changed (a column
-- added, dropped or retyped, another key): from the DDL's commit on,
-- changes have the new shape.
CREATE FUNCTION kafgres._capture_refresh(relation regclass) RETURNS void
LANGUAGE plpgsql AS $$
#variable_conflict use_variable
DECLARE
    c kafgres.captures;
    new_shape jsonb;
BEGIN
    SELECT * INTO c FROM kafgres.captures k WHERE k.relation = _capture_refresh.relation;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    new_shape := kafgres._capture_shape(relation);
    IF c.shape IS DISTINCT FROM new_shape THEN
        PERFORM kafgres._capture_install_triggers(
            relation, kafgres._capture_settings(c),
            CASE WHEN c.row_filter IS NOT NULL THEN kafgres._capture_filter_function(relation) END, new_shape);
        UPDATE kafgres.captures k SET shape = new_shape WHERE k.relation = _capture_refresh.relation;
    END IF;
END
$$;

-- A dropped table ends its capture: its row and its row filter go with it.
CREATE FUNCTION kafgres._capture_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres AS $$
DECLARE
    dropped oid;
BEGIN
    IF to_regclass('kafgres.captures') IS NOT NULL THEN
        FOR dropped IN DELETE FROM kafgres.captures c
                       USING pg_event_trigger_dropped_objects() d
                       WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0 AND d.objid = c.relation::oid
                       RETURNING d.objid LOOP
            EXECUTE format('DROP FUNCTION IF EXISTS kafgres.%I(anyelement)', '_capture_filter_' || dropped);
        END LOOP;
        -- A dropped schema ends its schema capture.
        IF to_regclass('kafgres.schema_captures') IS NOT NULL
           AND EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects() d WHERE d.object_type = 'schema') THEN
            DELETE FROM kafgres.schema_captures k
            WHERE NOT EXISTS (SELECT 1 FROM pg_namespace n WHERE n.nspname = k.schema_name);
        END IF;
        -- A dropped index may have been a captured table's key (its replica identity).
        IF EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects() d WHERE d.object_type = 'index') THEN
            PERFORM kafgres._capture_refresh(c.relation) FROM kafgres.captures c;
        END IF;
    END IF;
END
$$;
CREATE EVENT TRIGGER kafgres_capture_dropped ON sql_drop EXECUTE FUNCTION kafgres._capture_dropped();

-- An ALTER TABLE of a captured table gives its triggers the table's new
-- shape. One that its row filter cannot survive (a column it uses dropped,
-- renamed or retyped) fails, as Postgres refuses it for a publication's row
-- filter: after it, every write to the table would fail in the filter instead.
CREATE FUNCTION kafgres._capture_altered() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres AS $$
DECLARE
    c record;
BEGIN
    IF to_regclass('kafgres.captures') IS NULL THEN
        RETURN;
    END IF;
    FOR c IN SELECT DISTINCT k.relation, k.row_filter
             FROM kafgres.captures k JOIN pg_event_trigger_ddl_commands() d
               ON d.classid = 'pg_class'::regclass AND d.objid = k.relation::oid LOOP
        IF c.row_filter IS NOT NULL THEN
            BEGIN
                PERFORM kafgres._capture_check_filter(c.relation, c.row_filter);
            EXCEPTION WHEN OTHERS THEN
                RAISE EXCEPTION 'kafgres: this ALTER TABLE breaks the row filter "%" of the capture of %', c.row_filter,
                                c.relation
                    USING ERRCODE = 'dependent_objects_still_exist', DETAIL = SQLERRM,
                          HINT = 'capture the table again with a row filter that does not use what changes, or uncapture it, first';
            END;
        END IF;
        PERFORM kafgres._capture_refresh(c.relation);
    END LOOP;
END
$$;
CREATE EVENT TRIGGER kafgres_capture_altered ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
    EXECUTE FUNCTION kafgres._capture_altered();

-- Whole schemas (kafgres.capture_schema): every table in the schema is
-- captured with these settings, and so is every table created in it later,
-- by the event trigger below, in the CREATE TABLE's own transaction (as
-- Debezium's schema.include.list picks up new tables).
CREATE TABLE kafgres.schema_captures (
    schema_name       name PRIMARY KEY,
    -- One topic for every table of the schema, or NULL: a topic per table,
    -- named <topic_prefix>.<schema>.<table> as Debezium names them.
    topic             text,
    topic_prefix      text NOT NULL,
    format            text NOT NULL CHECK (format IN ('debezium', 'row')),
    dead_letter_topic text,
    tombstones        boolean NOT NULL DEFAULT true,
    schemas           boolean NOT NULL DEFAULT false,
    partitions        integer NOT NULL DEFAULT 1,
    created_at        timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kafgres.schema_captures IS
    'Schemas whose tables Kafgres captures, present and future (kafgres.capture_schema), with the settings each '
    'table''s capture gets.';
SELECT pg_catalog.pg_extension_config_dump('kafgres.schema_captures', '');
REVOKE ALL ON kafgres.schema_captures FROM PUBLIC;

-- The captures a schema capture makes: its tables that are not partitions
-- (a partition is captured through its parent's triggers).
CREATE FUNCTION kafgres._capture_schema_tables(schema_name name) RETURNS TABLE (relation regclass)
LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = schema_name AND c.relkind IN ('r', 'p') AND NOT c.relispartition
    ORDER BY c.oid
$$;

CREATE FUNCTION kafgres._capture_schema_table(s kafgres.schema_captures, relation regclass) RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
    RETURN kafgres.capture(relation,
                           coalesce(s.topic, (SELECT s.topic_prefix || '.' || s.schema_name || '.' || c.relname
                                              FROM pg_catalog.pg_class c WHERE c.oid = relation)),
                           s.format, dead_letter_topic => s.dead_letter_topic, tombstones => s.tombstones,
                           partitions => s.partitions, schemas => s.schemas);
END
$$;

CREATE FUNCTION kafgres.capture_schema(
    schema_name name,
    topic text DEFAULT NULL,
    topic_prefix text DEFAULT NULL,
    format text DEFAULT 'debezium',
    dead_letter_topic text DEFAULT NULL,
    tombstones boolean DEFAULT true,
    partitions integer DEFAULT 1,
    schemas boolean DEFAULT false
) RETURNS TABLE (relation regclass, topic_name text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET client_min_messages = warning AS $$
#variable_conflict use_variable
DECLARE
    s kafgres.schema_captures;
    t regclass;
BEGIN
    IF schema_name IS NULL OR NOT EXISTS (SELECT 1 FROM pg_namespace n WHERE n.nspname = schema_name) THEN
        RAISE EXCEPTION 'kafgres.capture_schema: schema "%" does not exist', schema_name
            USING ERRCODE = 'invalid_schema_name';
    END IF;
    IF schema_name IN ('kafgres', 'pg_catalog', 'information_schema') OR schema_name LIKE 'pg\_toast%'
       OR schema_name LIKE 'pg\_temp%' THEN
        RAISE EXCEPTION 'kafgres.capture_schema: schema "%" cannot be captured', schema_name
            USING ERRCODE = 'invalid_parameter_value', HINT = 'capture a schema of your own tables';
    END IF;
    IF NOT pg_catalog.pg_has_role(session_user, (SELECT n.nspowner FROM pg_namespace n WHERE n.nspname = schema_name),
                                  'USAGE') THEN
        RAISE EXCEPTION 'kafgres.capture_schema: permission denied for schema %', schema_name
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'capture a schema you own; kafgres.capture takes single tables you own or may put triggers on';
    END IF;
    INSERT INTO kafgres.schema_captures AS k (schema_name, topic, topic_prefix, format, dead_letter_topic, tombstones,
                                              schemas, partitions)
    VALUES (schema_name, topic, coalesce(topic_prefix, current_database()), coalesce(format, 'debezium'),
            dead_letter_topic, coalesce(tombstones, true), coalesce(schemas, false), coalesce(partitions, 1))
    ON CONFLICT ON CONSTRAINT schema_captures_pkey DO UPDATE
    SET topic = excluded.topic, topic_prefix = excluded.topic_prefix, format = excluded.format,
        dead_letter_topic = excluded.dead_letter_topic, tombstones = excluded.tombstones, schemas = excluded.schemas,
        partitions = excluded.partitions, created_at = now()
    RETURNING * INTO s;
    FOR t IN SELECT x.relation FROM kafgres._capture_schema_tables(schema_name) x LOOP
        relation := t;
        topic_name := kafgres._capture_schema_table(s, t);
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION kafgres.capture_schema(name, text, text, text, text, boolean, integer, boolean) IS
    'Captures every table of a schema, and every table created in it later, each to <topic_prefix>.<schema>.<table> '
    '(topic_prefix: the database) or all to one topic; returns the tables captured now and their topics.';

CREATE FUNCTION kafgres.uncapture_schema(schema_name name) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET client_min_messages = warning AS $$
#variable_conflict use_variable
DECLARE
    t regclass;
    n integer := 0;
BEGIN
    DELETE FROM kafgres.schema_captures k WHERE k.schema_name = uncapture_schema.schema_name;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    FOR t IN SELECT c.relation FROM kafgres.captures c JOIN pg_class r ON r.oid = c.relation
             JOIN pg_namespace ns ON ns.oid = r.relnamespace WHERE ns.nspname = uncapture_schema.schema_name LOOP
        IF kafgres.uncapture(t) THEN
            n := n + 1;
        END IF;
    END LOOP;
    RETURN n;
END
$$;
COMMENT ON FUNCTION kafgres.uncapture_schema(name) IS
    'Stops capturing a schema: its tables'' captures end and new tables are no longer captured; returns how many ended.';

-- A table created in a captured schema is captured from its creating
-- transaction on, with the schema capture's settings.
CREATE FUNCTION kafgres._capture_created() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres AS $$
DECLARE
    s kafgres.schema_captures;
    created record;
BEGIN
    IF to_regclass('kafgres.schema_captures') IS NULL THEN
        RETURN;
    END IF;
    FOR created IN SELECT d.objid FROM pg_event_trigger_ddl_commands() d
                   JOIN pg_class c ON c.oid = d.objid
                   WHERE d.classid = 'pg_class'::regclass AND d.object_type = 'table' AND c.relkind IN ('r', 'p')
                     AND NOT c.relispartition LOOP
        SELECT k.* INTO s FROM kafgres.schema_captures k JOIN pg_class c ON c.oid = created.objid
        JOIN pg_namespace n ON n.oid = c.relnamespace WHERE k.schema_name = n.nspname;
        IF FOUND THEN
            PERFORM kafgres._capture_schema_table(s, created.objid::regclass);
        END IF;
    END LOOP;
END
$$;
CREATE EVENT TRIGGER kafgres_capture_created ON ddl_command_end WHEN TAG IN ('CREATE TABLE', 'CREATE TABLE AS', 'SELECT INTO')
    EXECUTE FUNCTION kafgres._capture_created();
-- END capture.sql

CREATE VIEW kafgres.capture_status AS
SELECT c.relation, c.topic, c.format, c.columns, c.row_filter, c.dead_letter_topic, c.tombstones, c.created_at,
       c.snapshot_state, c.snapshot_rows, c.snapshot_pages_done, c.snapshot_pages_total,
       CASE WHEN c.snapshot_pages_total > 0 THEN round(100.0 * least(c.snapshot_pages_done, c.snapshot_pages_total)
                                                       / c.snapshot_pages_total, 1)
            WHEN c.snapshot_state = 'done' THEN 100.0 END AS snapshot_percent,
       c.snapshot_started_at, c.snapshot_updated_at,
       CASE WHEN g.tgenabled IS NULL THEN 'trigger missing'
            WHEN g.tgenabled = 'D' THEN 'trigger disabled'
            ELSE 'capturing' END AS state,
       b.state AS bridge_state, b.applied_lsn, b.last_applied_at, b.last_commit_at, b.lag AS bridge_lag,
       CASE WHEN NOT pg_is_in_recovery() THEN pg_wal_lsn_diff(pg_current_wal_lsn(), b.applied_lsn) END
           AS bridge_lag_bytes
FROM kafgres.captures c
LEFT JOIN pg_trigger g ON g.tgrelid = c.relation AND g.tgname = 'kafgres_capture'
LEFT JOIN kafgres.sql_bridge_status b ON true;
COMMENT ON VIEW kafgres.capture_status IS
    'Each capture (kafgres.capture): its settings, its last snapshot''s progress, whether its trigger fires, and how far the SQL bridge that '
    'delivers its changes is: every change committed before applied_lsn is in its topic; bridge_lag: how long the '
    'oldest committed change not yet delivered has waited since its commit (0: none waits; changes of every capture '
    'and send share one stream in commit order); bridge_lag_bytes of WAL are written after applied_lsn (all of the '
    'server''s WAL, not only changes).';
REVOKE ALL ON kafgres.capture_status FROM PUBLIC;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA kafgres FROM PUBLIC;
GRANT EXECUTE ON FUNCTION kafgres._capture_snapshot_start(regclass, boolean),
                          kafgres._capture_snapshot_chunk(regclass, oid, bigint, bigint, boolean) TO PUBLIC;

-- Share groups (KIP-932): each share-partition's state, one row per group,
-- topic and partition (Kafka's share coordinator's ShareSnapshot). The broker
-- replaces a row with a higher state_version only, storing acknowledgements
-- before it answers them; membership is not stored (members rejoin).
-- state_batches: [[first_offset, last_offset, state, delivery_count], ...]
-- (states 0 available, 1 acquired, 2 acknowledged, 4 archived) for the
-- records in flight from start_offset on. A start_offset of -1 (no batches)
-- is a tombstone: the group's offsets there were deleted
-- (DeleteShareGroupOffsets), it reads from share.auto.offset.reset again,
-- and the row's version keeps an older write from bringing them back.
CREATE TABLE kafgres.share_partitions (
    group_id      text NOT NULL,
    topic_id      uuid NOT NULL REFERENCES kafgres.topics (topic_id) ON DELETE CASCADE,
    partition     integer NOT NULL CHECK (partition >= 0),
    state_version bigint NOT NULL,
    start_offset  bigint NOT NULL CHECK (start_offset >= -1),
    state_batches jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(state_batches) = 'array'),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic_id, partition)
);
COMMENT ON TABLE kafgres.share_partitions IS
    'Share groups (KIP-932): where each group is in each partition (start offset) and the state and delivery count of '
    'its records in flight. Written by the broker; deleted with their topic.';
SELECT pg_catalog.pg_extension_config_dump('kafgres.share_partitions', '');
REVOKE ALL ON kafgres.share_partitions FROM PUBLIC;

-- Group configs set with IncrementalAlterConfigs on a GROUP resource
-- (`kafka-configs.sh --entity-type groups`): Kafka's share.* group configs,
-- one JSON object of names and values per group. Written by the broker
-- before it answers; a group without a row uses the defaults.
CREATE TABLE kafgres.group_configs (
    group_id   text PRIMARY KEY,
    configs    jsonb NOT NULL CHECK (jsonb_typeof(configs) = 'object'),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kafgres.group_configs IS
    'Configs of Kafka groups (share.auto.offset.reset, share.record.lock.duration.ms...), set with IncrementalAlterConfigs.';
SELECT pg_catalog.pg_extension_config_dump('kafgres.group_configs', '');
REVOKE ALL ON kafgres.group_configs FROM PUBLIC;

-- Share groups in SQL: each share-partition's stored state counted, with its
-- lag against the log end (kafgres.partition_status asks the broker).
CREATE VIEW kafgres.share_group_partitions AS
SELECT p.group_id, t.name AS topic, p.partition, p.start_offset, s.log_end_offset,
       c.available + c.acquired AS in_flight, c.available, c.acquired, c.acknowledged, c.archived,
       greatest(s.log_end_offset - p.start_offset - c.acknowledged - c.archived, 0) AS lag,
       p.updated_at
FROM kafgres.share_partitions p
JOIN kafgres.topics t ON t.topic_id = p.topic_id
LEFT JOIN kafgres.partition_status s ON s.topic = t.name AND s.partition = p.partition
CROSS JOIN LATERAL (
    SELECT coalesce(sum(b.n) FILTER (WHERE b.state = 0), 0)::bigint AS available,
           coalesce(sum(b.n) FILTER (WHERE b.state = 1), 0)::bigint AS acquired,
           coalesce(sum(b.n) FILTER (WHERE b.state = 2), 0)::bigint AS acknowledged,
           coalesce(sum(b.n) FILTER (WHERE b.state = 4), 0)::bigint AS archived
    FROM (SELECT (e ->> 2)::int AS state, (e ->> 1)::bigint - (e ->> 0)::bigint + 1 AS n
          FROM jsonb_array_elements(p.state_batches) AS e) b
) c
WHERE p.start_offset >= 0;
COMMENT ON VIEW kafgres.share_group_partitions IS
    'Share groups (KIP-932), per group and partition, as last stored: the start offset, the records in flight after '
    'it (available or acquired) and those already acknowledged or archived, and lag as Kafka 4.2 defines it: the '
    'records below the log end not delivered completely yet (log end - start offset - acknowledged - archived). '
    'Members are not stored: kafka-share-groups.sh --describe --members lists them.';
REVOKE ALL ON kafgres.share_group_partitions FROM PUBLIC;

-- Dynamic broker configs (`kafka-configs.sh --entity-type brokers`): Kafka
-- broker configs set with IncrementalAlterConfigs or AlterConfigs on a BROKER
-- resource, one row per node and name; node_id -1 is the cluster-wide default
-- (`--entity-default`). Written by the broker before it answers; they apply
-- over the kafgres.* settings (a node's own row, else the default, else the
-- setting) and a reload does not undo them (docs/configuration.md, "Dynamic
-- broker configs").
CREATE TABLE kafgres.broker_configs (
    node_id    integer NOT NULL CHECK (node_id >= -1),
    name       text NOT NULL,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (node_id, name)
);
COMMENT ON TABLE kafgres.broker_configs IS
    'Dynamic Kafka broker configs (max.connections, log.retention.ms...), per node, node_id -1 the cluster-wide default; '
    'set with IncrementalAlterConfigs or AlterConfigs on a BROKER resource.';
SELECT pg_catalog.pg_extension_config_dump('kafgres.broker_configs', '');
REVOKE ALL ON kafgres.broker_configs FROM PUBLIC;
CREATE VIEW kafgres.dynamic_broker_configs AS
SELECT CASE WHEN c.node_id = -1 THEN 'cluster default' ELSE 'broker' END AS scope, c.node_id, c.name, c.value,
       (c.node_id = n.node_id OR c.node_id = -1 AND NOT EXISTS (
            SELECT 1 FROM kafgres.broker_configs o WHERE o.node_id = n.node_id AND o.name = c.name)) AS in_force,
       c.updated_at
FROM kafgres.broker_configs c
CROSS JOIN (SELECT coalesce(current_setting('kafgres.node_id', true), '1')::integer AS node_id) n;
COMMENT ON VIEW kafgres.dynamic_broker_configs IS
    'The dynamic broker configs stored, with in_force: whether this server''s broker applies the row (its own node''s '
    'row, or the cluster default where its node sets none).';
REVOKE ALL ON kafgres.dynamic_broker_configs FROM PUBLIC;

-- Share groups consumed from SQL (kafgres::sql_api::share_consume).
CREATE  FUNCTION "share_consume"(
	"group_id" TEXT, /* & str */
	"topic" TEXT, /* & str */
	"max_records" INT DEFAULT 100, /* i32 */
	"wait" interval DEFAULT '0' /* Interval */
) RETURNS TABLE (
	"partition" INT,  /* i32 */
	"offset" bigint,  /* i64 */
	"timestamp" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"key" bytea,  /* :: std :: option :: Option < Vec < u8 > > */
	"value" bytea,  /* :: std :: option :: Option < Vec < u8 > > */
	"headers" jsonb,  /* pgrx :: JsonB */
	"delivery_count" INT  /* i32 */
)
STRICT VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'share_consume_bytes_wrapper';
CREATE  FUNCTION "share_consume_text"(
	"group_id" TEXT, /* & str */
	"topic" TEXT, /* & str */
	"max_records" INT DEFAULT 100, /* i32 */
	"wait" interval DEFAULT '0' /* Interval */
) RETURNS TABLE (
	"partition" INT,  /* i32 */
	"offset" bigint,  /* i64 */
	"timestamp" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"key" TEXT,  /* Option < String > */
	"value" TEXT,  /* Option < String > */
	"headers" jsonb,  /* pgrx :: JsonB */
	"delivery_count" INT  /* i32 */
)
STRICT VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'share_consume_text_wrapper';
REVOKE EXECUTE ON FUNCTION kafgres.share_consume(text, text, integer, interval),
    kafgres.share_consume_text(text, text, integer, interval) FROM PUBLIC;

-- Client telemetry (KIP-714) as the broker keeps it.
-- kafgres::client_metrics::_client_metrics
CREATE  FUNCTION "_client_metrics"() RETURNS TABLE (
	"client_instance_id" uuid,  /* pgrx :: Uuid */
	"client_id" TEXT,  /* String */
	"address" TEXT,  /* String */
	"metric" TEXT,  /* String */
	"value" double precision,  /* f64 */
	"pushed_at" timestamp with time zone  /* Option < TimestampWithTimeZone > */
)
STRICT VOLATILE SECURITY DEFINER PARALLEL UNSAFE
SET search_path TO pg_catalog, kafgres
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', '_client_metrics_wrapper';
REVOKE EXECUTE ON FUNCTION kafgres._client_metrics() FROM PUBLIC;
CREATE VIEW kafgres.client_metrics AS
SELECT client_instance_id, client_id, address::inet AS address, metric, value, pushed_at
FROM kafgres._client_metrics();
COMMENT ON VIEW kafgres.client_metrics IS
    'What Kafka clients pushed (KIP-714 client telemetry, on while kafgres.client_telemetry_metrics is set): per '
    'client instance, the latest value of each metric asked for (a histogram as metric.count and metric.sum), when '
    'and from which client id and address; kept in the broker''s memory, forgotten at a restart or three push '
    'intervals after a client stops.';
REVOKE ALL ON kafgres.client_metrics FROM PUBLIC;

-- Wake the broker and the bridge, which wait for this schema.
SELECT kafgres._wake_broker();

-- Delegation tokens (KIP-48, `kafka-delegation-tokens.sh`): one row per
-- token, written by the broker before it hands a token out or answers its
-- renewal, deleted when it expires. No HMAC: a token's HMAC (its password)
-- is HmacSHA512 of token_id under kafgres.delegation_token_secret_key, so
-- this table alone lets no one log in. Principals are roles. Superusers only.
CREATE TABLE kafgres.delegation_tokens (
    token_id   text PRIMARY KEY,
    owner      text NOT NULL,
    requester  text NOT NULL,
    renewers   text[] NOT NULL DEFAULT '{}',
    issued_at  timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    max_at     timestamptz NOT NULL,
    CHECK (expires_at <= max_at)
);
COMMENT ON TABLE kafgres.delegation_tokens IS
    'Kafka delegation tokens (KIP-48): owner role, requester, renewers, and when each expires (renewable up to '
    'max_at); HMACs are not stored (derived from kafgres.delegation_token_secret_key).';
SELECT pg_catalog.pg_extension_config_dump('kafgres.delegation_tokens', '');
REVOKE ALL ON kafgres.delegation_tokens FROM PUBLIC;
