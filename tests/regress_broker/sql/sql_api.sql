-- The SQL API in the database the broker serves: send in transactions,
-- read, consume with offsets in the caller's transaction, admin and views.
-- Topics are recreated at the start so reruns on one cluster print the same.
\set VERBOSITY terse
SET client_min_messages = warning;
DO $$ BEGIN
  PERFORM kafgres.delete_topic(name) FROM kafgres.topics WHERE name IN ('regress-orders', 'regress-one', 'regress-ryw');
END $$;
DELETE FROM kafgres.consumer_offsets WHERE group_id LIKE 'regress-%';
SELECT kafgres.create_topic('regress-orders', 3) IS NOT NULL AS created;
SELECT kafgres.create_topic('regress-one', 1, '{"max.message.bytes": "2000"}') IS NOT NULL AS created;
SELECT name, partition_count, configs FROM kafgres.topics WHERE name LIKE 'regress-%' ORDER BY name;

-- Keyed records go where Kafka's murmur2 partitioner puts them.
BEGIN;
SELECT key, kafgres.send('regress-orders', 'order ' || key, key) AS partition
FROM unnest(ARRAY['a', 'b', 'c', 'd', 'e', 'f']) AS key;
COMMIT;

-- A rolled-back transaction sends nothing; a rolled-back savepoint drops
-- only what was sent after it.
BEGIN;
SELECT kafgres.send('regress-one', 'never', partition => 0);
ROLLBACK;
BEGIN;
SELECT kafgres.send('regress-one', 'kept 1', partition => 0);
SAVEPOINT s;
SELECT kafgres.send('regress-one', 'dropped', partition => 0);
ROLLBACK TO SAVEPOINT s;
SELECT kafgres.send('regress-one', '{"kept": 2}'::jsonb, headers => '{"source": "regress"}');
SELECT kafgres.send('regress-one', '\x00ff'::bytea, key => '\x01'::bytea, headers => '[["h", "1"], ["h", null]]');
COMMIT;
SELECT kafgres.send_batch('regress-one', ARRAY['batch 1', 'batch 2'], ARRAY['k1', NULL]);

SELECT kafgres.wait_for_sends('30 seconds');
SELECT "offset", key, value, headers FROM kafgres.read_text('regress-one', 0);
SELECT "offset", key, value FROM kafgres.read('regress-one', 0, 2, 1);
SELECT partition, "offset", key, value FROM kafgres.read_text('regress-orders', 0)
UNION ALL SELECT partition, "offset", key, value FROM kafgres.read_text('regress-orders', 1)
UNION ALL SELECT partition, "offset", key, value FROM kafgres.read_text('regress-orders', 2)
ORDER BY partition, "offset";
-- By time: everything sent in the last hour.
SELECT count(*) FROM kafgres.read('regress-one', 0, now() - interval '1 hour');
SELECT topic, partition, log_start_offset, log_end_offset, size_bytes > 0 AS has_bytes
FROM kafgres.partition_status WHERE topic LIKE 'regress-%' ORDER BY topic, partition;

-- consume: rollback gives the records again, commit moves the offsets.
BEGIN;
SELECT partition, "offset", value FROM kafgres.consume_text('regress-g', 'regress-orders', 4);
ROLLBACK;
SELECT group_id, topic, partition, committed_offset, lag FROM kafgres.consumer_lag
WHERE group_id = 'regress-g' ORDER BY partition;
BEGIN;
SELECT partition, "offset", value FROM kafgres.consume_text('regress-g', 'regress-orders', 4);
COMMIT;
SELECT partition, "offset", value FROM kafgres.consume_text('regress-g', 'regress-orders', 100);
SELECT partition, "offset", value FROM kafgres.consume_text('regress-g', 'regress-orders', 100);
SELECT group_id, topic, partition, committed_offset, log_end_offset, lag FROM kafgres.consumer_lag
WHERE group_id = 'regress-g' ORDER BY partition;
-- A wait that times out returns nothing.
SELECT count(*) FROM kafgres.consume('regress-g', 'regress-orders', 10, wait => '50 milliseconds');

-- Bad input: clear errors with hints, never a crash.
SELECT kafgres.send('no-such-topic', 'x');
SELECT kafgres.send('regress-orders', 'x', partition => 3);
SELECT kafgres.send('regress-one', repeat('x', 5000));
SELECT kafgres.send('regress-one', 'x', headers => '"not headers"');
SELECT kafgres.send('regress-one', 'x', headers => '[["only a name"]]');
SELECT kafgres.send_batch('regress-one', ARRAY['a', 'b'], ARRAY['k']);
SELECT * FROM kafgres.read('regress-one', 0, -1);
SELECT * FROM kafgres.read('regress-one', 0, 0, 0);
SELECT * FROM kafgres.read('regress-one', 7, 0);
SELECT * FROM kafgres.consume('regress-g', 'no-such-topic');
SELECT * FROM kafgres.consume('regress-g', 'regress-one', 10, wait => '-1 second');
SELECT kafgres.create_topic('regress-one', 1);
SELECT kafgres.create_topic('bad name', 1);
SELECT kafgres.create_topic('regress-x', 1, '{"no.such.config": "1"}');
SELECT kafgres.create_topic('regress-x', 1, '[]');

-- Admin: alter configs (null deletes an override), more partitions, then delete.
SELECT kafgres.alter_topic('regress-one', '{"retention.ms": "86400000", "max.message.bytes": null}');
SELECT configs FROM kafgres.topics WHERE name = 'regress-one';
SELECT kafgres.alter_topic('regress-one', '{"retention.ms": "soon"}');
SELECT kafgres.alter_topic('regress-x', '{"retention.ms": "1"}');
SELECT kafgres.alter_topic('regress-one', '[]');
SELECT kafgres.add_partitions('regress-one', 2);
SELECT partition_count FROM kafgres.topics WHERE name = 'regress-one';
SELECT kafgres.delete_topic('regress-one');
SELECT kafgres.delete_topic('regress-one');
SELECT kafgres.delete_topic('regress-orders');
SELECT count(*) FROM kafgres.consumer_offsets WHERE group_id = 'regress-g';

-- Read your own writes: right after COMMIT, this session's read and consume
-- see its sends, with no wait_for_sends (the README's example, as written).
SELECT kafgres.create_topic('regress-ryw', 1) IS NOT NULL AS created;
BEGIN;
SELECT kafgres.send('regress-ryw', 'mine ' || g) FROM generate_series(1, 3) g;
COMMIT;
SELECT "offset", value FROM kafgres.read_text('regress-ryw', 0);
BEGIN;
SELECT kafgres.send('regress-ryw', 'mine 4');
COMMIT;
SELECT "offset", value FROM kafgres.consume_text('regress-ryw-g', 'regress-ryw', 10);
SELECT state FROM kafgres.sql_bridge_status;
SELECT kafgres.delete_topic('regress-ryw');
