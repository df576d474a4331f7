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
       read_lsn::pg_lsn AS read_lsn, last_applied_at, transactions_applied, records_applied, records_dropped,
       incomplete_transactions, errors, message,
       (SELECT count(*) FROM kafgres.sql_bridge_gaps) AS gaps
FROM kafgres._sql_bridge_status();
COMMENT ON VIEW kafgres.sql_bridge_status IS
    'The SQL bridge (records sent from SQL on their way to the broker): state and since when, the WAL applied '
    '(every send committed before applied_lsn is in its topic), retained (restart_lsn) and read, counters, the last '
    'error, and how many gaps kafgres.sql_bridge_gaps lists.';
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
    started_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kafgres.leader_epochs IS
    'Every start of a primary''s broker: its leader epoch, node id, advertised address and timeline; written by the broker.';
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
-- --entity-type users / clients): bytes per second (request_percentage: percent
-- of one thread's time) for a user (a role), a
-- client id, or both. '<default>' is the default entity of its kind, NULL a
-- kind the quota does not name. Written by the broker; an operator's own
-- change takes effect at the next SELECT pg_reload_conf().
CREATE TABLE kafgres.client_quotas (
    user_name   text CHECK (user_name <> ''),
    client_id   text,
    quota_key   text NOT NULL CHECK (quota_key IN ('producer_byte_rate', 'consumer_byte_rate', 'request_percentage')),
    -- Byte rates are whole bytes per second; request_percentage is a percentage of one thread.
    quota_value float8 NOT NULL CHECK (quota_value > 0
                                       AND (quota_key = 'request_percentage' OR quota_value = trunc(quota_value))),
    CHECK (user_name IS NOT NULL OR client_id IS NOT NULL),
    UNIQUE NULLS NOT DISTINCT (user_name, client_id, quota_key)
);
COMMENT ON TABLE kafgres.client_quotas IS
    'Kafka client quotas (kafka-configs.sh --entity-type users/clients): bytes per second, request_percentage in percent of a thread; ''<default>'' is the default entity.';
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

-- Wake the broker and the bridge, which wait for this schema.
SELECT kafgres._wake_broker();
