-- Kafgres metadata. Record data never lives here: it is in segment files under
-- kafgres.log_dir. These tables hold what must survive a restart and what SQL
-- users query: the cluster identity and the topics.

CREATE TABLE kafgres.cluster (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    -- Kafka's cluster id format: a random UUID in URL-safe base64 without padding.
    cluster_id text NOT NULL,
    -- The first producer id not yet reserved (InitProducerId). The broker
    -- reserves blocks of ids by advancing it; an id is never handed out twice.
    next_producer_id bigint NOT NULL DEFAULT 0 CHECK (next_producer_id >= 0),
    -- What Kafgres's own clients (the SQL functions, the SQL bridge) log in
    -- to the broker with (SASL KAFGRES-INTERNAL): 244 random bits, readable
    -- by superusers only, carried to standbys by the WAL. Changing it (then
    -- restarting) cuts off no Kafka client, only Kafgres's own until they reconnect.
    internal_secret text NOT NULL
        DEFAULT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '')
        CHECK (length(internal_secret) >= 32)
);
INSERT INTO kafgres.cluster (cluster_id)
VALUES (translate(rtrim(encode(uuid_send(gen_random_uuid()), 'base64'), '='), '+/', '-_'));

CREATE TABLE kafgres.topics (
    topic_id        uuid PRIMARY KEY,
    name            text NOT NULL UNIQUE
                    CHECK (name ~ '^[a-zA-Z0-9._-]{1,249}$' AND name NOT IN ('.', '..')),
    partition_count integer NOT NULL CHECK (partition_count > 0),
    configs         jsonb NOT NULL DEFAULT '{}' CHECK (jsonb_typeof(configs) = 'object'),
    created_at      timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kafgres.topics IS
    'Topics served by the Kafgres broker. Written by the broker (CreateTopics, auto-creation); '
    'edit only through Kafka admin APIs so the broker''s log directories stay in step.';

-- pg_dump keeps the rows of extension tables only when asked to.
SELECT pg_catalog.pg_extension_config_dump('kafgres.cluster', '');
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
SELECT pg_catalog.pg_extension_config_dump('kafgres.topics', '');

REVOKE ALL ON ALL TABLES IN SCHEMA kafgres FROM PUBLIC;

-- Committed consumer-group offsets (OffsetCommit), one row per group and
-- partition. The broker writes them in batched transactions and answers a
-- commit only after its transaction is durable.
CREATE TABLE kafgres.consumer_offsets (
    group_id         text NOT NULL,
    topic            text NOT NULL,
    partition        integer NOT NULL CHECK (partition >= 0),
    committed_offset bigint NOT NULL CHECK (committed_offset >= -1),
    leader_epoch     integer NOT NULL DEFAULT -1,
    metadata         text,
    committed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (group_id, topic, partition)
);
COMMENT ON TABLE kafgres.consumer_offsets IS
    'Offsets committed by Kafka consumer groups (OffsetCommit). Deleted with their topic or group.';
SELECT pg_catalog.pg_extension_config_dump('kafgres.consumer_offsets', '');
REVOKE ALL ON kafgres.consumer_offsets FROM PUBLIC;

-- The transaction coordinator's state, one row per transactional id (Kafka's
-- __transaction_state). The broker writes a row before answering any request
-- that changed it; a commit's consumer offsets are stored in the same
-- transaction as its CompleteCommit state.
CREATE TABLE kafgres.transactions (
    transactional_id text PRIMARY KEY,
    producer_id      bigint NOT NULL,
    producer_epoch   smallint NOT NULL,
    timeout_ms       integer NOT NULL CHECK (timeout_ms > 0),
    state            text NOT NULL CHECK (state IN ('Empty', 'Ongoing', 'PrepareCommit', 'PrepareAbort',
                                                    'CompleteCommit', 'CompleteAbort')),
    partitions       jsonb NOT NULL DEFAULT '[]',
    groups           text[] NOT NULL DEFAULT '{}',
    pending_offsets  jsonb NOT NULL DEFAULT '[]',
    started_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kafgres.transactions IS
    'Kafka transactional ids: producer id and epoch, state, and the partitions, groups and offsets of the open transaction.';
SELECT pg_catalog.pg_extension_config_dump('kafgres.transactions', '');
REVOKE ALL ON kafgres.transactions FROM PUBLIC;

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
INSERT INTO kafgres.sql_bridge (applied_lsn, restart_lsn)
VALUES (pg_current_wal_insert_lsn(), pg_current_wal_insert_lsn());
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
