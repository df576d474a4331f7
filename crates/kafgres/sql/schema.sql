-- Kafgres metadata. Record data never lives here: it is in segment files under
-- kafgres.log_dir. These tables hold what must survive a restart and what SQL
-- users query: the cluster identity and the topics.

CREATE TABLE kafgres.cluster (
    singleton  boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    -- Kafka's cluster id format: a random UUID in URL-safe base64 without padding.
    cluster_id text NOT NULL,
    -- The first producer id not yet reserved (InitProducerId). The broker
    -- reserves blocks of ids by advancing it; an id is never handed out twice.
    next_producer_id bigint NOT NULL DEFAULT 0 CHECK (next_producer_id >= 0)
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
