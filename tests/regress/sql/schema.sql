-- The extension's SQL surface: what CREATE EXTENSION installs, the checks on
-- the catalog tables, their privileges, and the settings it registers.
-- Error details would print random ids and timestamps.
\set VERBOSITY terse
CREATE EXTENSION kafgres;

SELECT e.extname, n.nspname AS schema
FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'kafgres';

-- Kafka's cluster id format: 22 characters of URL-safe base64.
SELECT cluster_id ~ '^[A-Za-z0-9_-]{22}$' AS kafka_style_cluster_id FROM kafgres.cluster;
-- Exactly one cluster row: a second one replaces a fresh install's (as a
-- restore's copy does), never one in use.
UPDATE kafgres.cluster SET next_producer_id = 1;
INSERT INTO kafgres.cluster (cluster_id) VALUES ('another');
SELECT count(*) AS rows, bool_and(cluster_id <> 'another') AS kept FROM kafgres.cluster;

-- Topic names follow Kafka's rules; partition counts and configs are checked.
INSERT INTO kafgres.topics (topic_id, name, partition_count) VALUES (gen_random_uuid(), 'bad name', 1);
INSERT INTO kafgres.topics (topic_id, name, partition_count) VALUES (gen_random_uuid(), '..', 1);
INSERT INTO kafgres.topics (topic_id, name, partition_count) VALUES (gen_random_uuid(), repeat('a', 250), 1);
INSERT INTO kafgres.topics (topic_id, name, partition_count) VALUES (gen_random_uuid(), 'orders', 0);
INSERT INTO kafgres.topics (topic_id, name, partition_count, configs) VALUES (gen_random_uuid(), 'orders', 1, '[]');
BEGIN;
INSERT INTO kafgres.topics (topic_id, name, partition_count) VALUES (gen_random_uuid(), 'orders.v1_x-2', 3);
INSERT INTO kafgres.topics (topic_id, name, partition_count) VALUES (gen_random_uuid(), 'orders.v1_x-2', 3);
ROLLBACK;
-- ACL bindings: the table refuses what Kafka's CreateAcls refuses.
INSERT INTO kafgres.acls (resource_type, pattern_type, resource_name, principal, operation, permission)
VALUES ('TOPIC', 'MATCH', 'orders', 'User:app', 'READ', 'ALLOW');
INSERT INTO kafgres.acls (resource_type, pattern_type, resource_name, principal, operation, permission)
VALUES ('TOPIC', 'LITERAL', 'orders', 'app', 'READ', 'ALLOW');
INSERT INTO kafgres.acls (resource_type, pattern_type, resource_name, principal, operation, permission)
VALUES ('TOPIC', 'LITERAL', 'orders', 'User:app', 'ANY', 'ALLOW');
BEGIN;
INSERT INTO kafgres.acls (resource_type, pattern_type, resource_name, principal, operation, permission)
VALUES ('TOPIC', 'PREFIXED', 'orders.', 'User:app', 'READ', 'ALLOW');
SELECT resource_type, pattern_type, resource_name, principal, host, operation, permission FROM kafgres.acls;
ROLLBACK;

-- Nothing is granted to PUBLIC.
CREATE ROLE kafgres_regress_nobody;
SELECT t AS table_name, has_table_privilege('kafgres_regress_nobody', t, 'SELECT') AS can_select
FROM unnest(ARRAY['kafgres.topics', 'kafgres.cluster', 'kafgres.consumer_offsets', 'kafgres.transactions',
                  'kafgres.partition_status', 'kafgres.consumer_groups', 'kafgres.consumer_lag',
                  'kafgres.broker_metrics', 'kafgres.flush_latency', 'kafgres.request_latency',
                  'kafgres.connections', 'kafgres.acls', 'kafgres.share_partitions',
                  'kafgres.group_configs', 'kafgres.share_group_partitions', 'kafgres.delegation_tokens']) AS t;
-- Every function, each SECURITY DEFINER with a pinned search_path (but the
-- install-time helper, and the capture helpers, which run only under the
-- capture trigger's or kafgres.capture's own), none executable by PUBLIC.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS arguments, p.prosecdef AS security_definer,
       p.proconfig AS settings, has_function_privilege('kafgres_regress_nobody', p.oid, 'EXECUTE') AS public_can_execute
FROM pg_proc p WHERE p.pronamespace = 'kafgres'::regnamespace ORDER BY 1, 2;
DROP ROLE kafgres_regress_nobody;

-- The SQL API refuses to run outside the database the broker serves (its
-- slot decodes only that database's WAL).
SELECT kafgres.send('orders', 'x');
SELECT * FROM kafgres.read('orders', 0);

-- The settings, all needing a restart.
SELECT name, vartype, context FROM pg_settings WHERE name LIKE 'kafgres.%' ORDER BY name;
SELECT enumvals FROM pg_settings WHERE name = 'kafgres.flush_policy';

-- The broker's counters are in shared memory, readable from any database.
SELECT array_agg(name ORDER BY name) AS counters FROM kafgres.broker_metrics;
SELECT count(*) AS buckets FROM kafgres.flush_latency;
SELECT span, count(*) AS buckets, count(below_micros) AS bounded FROM kafgres.request_latency GROUP BY span ORDER BY span;

-- The broker worker runs (in the database named by kafgres.database).
SELECT count(*) AS broker_workers FROM pg_stat_activity WHERE backend_type = 'kafgres broker';

DROP EXTENSION kafgres;
