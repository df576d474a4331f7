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
    snapshot_rows     bigint,
    created_at        timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE kafgres.captures IS
    'Tables whose changes Kafgres publishes (kafgres.capture, kafgres.uncapture): topic, format, columns, '
    'dead-letter topic, and the rows of the initial snapshot if one was taken.';
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
    WHEN 1184 THEN  -- timestamptz: io.debezium.time.ZonedTimestamp, ISO-8601 in UTC
        IF t IN ('infinity', '-infinity') THEN RETURN v; END IF;
        ts := t::timestamptz AT TIME ZONE 'UTC';
        micros := extract(microseconds FROM ts)::bigint % 1000000;
        RETURN to_jsonb(to_char(ts, 'YYYY-MM-DD"T"HH24:MI:SS')
                        || CASE WHEN micros = 0 THEN '' ELSE '.' || rtrim(lpad(micros::text, 6, '0'), '0') END
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
    WHEN 1186 THEN  -- interval: io.debezium.time.MicroDuration
        RETURN to_jsonb(floor(extract(epoch FROM t::interval) * 1000000)::bigint);
    WHEN 1560 THEN  -- bit: bit(1) is a boolean; longer ones stay strings of 0 and 1
        IF type_mod = 1 THEN RETURN to_jsonb(t = '1'); END IF;
        RETURN v;
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

-- A row (as to_jsonb wrote it) with Debezium's value mapping; only the
-- named columns when `columns` is given. NULL stays NULL. PL/pgSQL, as the
-- key helper below, because it keeps its plans for the session: an SQL
-- function called from PL/pgSQL is planned again at every call (twice the
-- cost of a captured row).
CREATE FUNCTION kafgres._cdc_row(relation oid, row_value jsonb, columns name[]) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF row_value IS NULL THEN
        RETURN NULL;
    END IF;
    RETURN (SELECT coalesce(pg_catalog.jsonb_object_agg(a.attname,
                                kafgres._cdc_value(row_value -> a.attname::text, a.atttypid, a.atttypmod)), '{}')
            FROM pg_catalog.pg_attribute a
            WHERE a.attrelid = relation AND a.attnum > 0 AND NOT a.attisdropped
              AND (columns IS NULL OR a.attname = ANY (columns)));
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

-- Sends one change of `relation` as its capture's settings say (the
-- triggers' arguments: topic, format, columns, dead-letter topic,
-- tombstones). `op` is Debezium's: c, u, d, r (a snapshot row) or t.
CREATE FUNCTION kafgres._capture_emit(relation oid, op text, before jsonb, after jsonb, settings text[],
                                      snapshot text DEFAULT 'false') RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    topic text := settings[1];
    format text := settings[2];
    columns name[] := nullif(settings[3], '')::name[];
    dead_letter text := nullif(settings[4], '');
    key_columns name[];
    key jsonb;
    key_text text;
    value jsonb;
    headers jsonb;
    schema_name name;
    table_name name;
    xid bigint := (pg_current_xact_id()::text::bigint) & 4294967295;
    now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    limit_bytes bigint;
    size_bytes bigint;
BEGIN
    SELECT n.nspname, c.relname INTO schema_name, table_name
    FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = relation;
    IF op <> 't' THEN
        key_columns := kafgres._capture_key_columns(relation);
        IF key_columns IS NOT NULL THEN
            key := kafgres._cdc_row(relation, coalesce(after, before), key_columns);
            key_text := key::text;
        END IF;
    END IF;
    headers := jsonb_build_array(
        jsonb_build_array('kafgres.op', op),
        jsonb_build_array('kafgres.table', quote_ident(schema_name) || '.' || quote_ident(table_name)),
        jsonb_build_array('kafgres.xid', xid::text),
        jsonb_build_array('kafgres.commit_lsn', NULL),
        jsonb_build_array('kafgres.commit_ts_ms', NULL));
    IF format = 'debezium' THEN
        value := jsonb_build_object(
            'before', kafgres._cdc_row(relation, before, columns),
            'after', kafgres._cdc_row(relation, after, columns),
            'source', jsonb_build_object(
                'version', (SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'kafgres'),
                'connector', 'postgresql', 'name', 'kafgres', 'ts_ms', now_ms, 'snapshot', snapshot,
                'db', current_database(), 'sequence', NULL, 'schema', schema_name, 'table', table_name,
                'txId', xid, 'lsn', (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::bigint, 'xmin', NULL),
            'op', op, 'ts_ms', now_ms, 'transaction', NULL);
    ELSIF op IN ('c', 'u', 'r') THEN  -- row: the row as it is now; a delete is a tombstone
        value := CASE WHEN columns IS NULL THEN after
                      ELSE (SELECT coalesce(jsonb_object_agg(e.key, e.value), '{}')
                            FROM jsonb_each(after) e WHERE e.key = ANY (columns)) END;
    END IF;
    -- Too large for the topic: to the dead-letter topic with the reason, or
    -- the statement fails. (kafgres.send checks exactly; this leaves room
    -- for the headers and the batch's framing.)
    limit_bytes := coalesce((SELECT (t.configs->>'max.message.bytes')::bigint
                             FROM kafgres.topics t WHERE t.name = topic), kafgres._message_bytes_max_default());
    size_bytes := coalesce(octet_length(value::text), 0) + coalesce(octet_length(key_text), 0) + 512;
    IF size_bytes > limit_bytes THEN
        IF dead_letter IS NULL THEN
            RAISE EXCEPTION 'kafgres: a change of % (about % bytes) does not fit topic "%" (max.message.bytes %)',
                relation::regclass, size_bytes, topic, limit_bytes
                USING ERRCODE = 'program_limit_exceeded',
                      HINT = 'raise the topic''s max.message.bytes, or capture with a dead_letter_topic';
        END IF;
        PERFORM kafgres.send(dead_letter, jsonb_build_object(
            'reason', format('about %s bytes, more than max.message.bytes %s of topic "%s"', size_bytes,
                             limit_bytes, topic),
            'topic', topic, 'table', schema_name || '.' || table_name, 'op', op, 'key', key, 'bytes', size_bytes),
            key_text, headers);
        RETURN;
    END IF;
    PERFORM kafgres.send(topic, value, key_text, headers);
    IF op = 'd' AND format = 'debezium' AND settings[5]::boolean AND key_text IS NOT NULL THEN
        PERFORM kafgres.send(topic, NULL::jsonb, key_text, headers);
    END IF;
END
$$;

-- The capture triggers' function. SECURITY DEFINER: whoever may write the
-- table publishes its changes, without rights on Kafgres of their own.
CREATE FUNCTION kafgres._capture_trigger() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET bytea_output = 'hex' AS $$
DECLARE
    -- The trigger's arguments, numbered from 1 (TG_ARGV counts from 0).
    settings text[] := TG_ARGV[0:4];
    old_row jsonb;
    new_row jsonb;
    key_columns name[];
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        PERFORM kafgres._capture_emit(TG_RELID, 't', NULL, NULL, settings);
        RETURN NULL;
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN old_row := to_jsonb(OLD); END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN new_row := to_jsonb(NEW); END IF;
    IF TG_OP = 'INSERT' THEN
        PERFORM kafgres._capture_emit(TG_RELID, 'c', NULL, new_row, settings);
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM kafgres._capture_emit(TG_RELID, 'd', old_row, NULL, settings);
    ELSE
        key_columns := kafgres._capture_key_columns(TG_RELID);
        IF key_columns IS NOT NULL AND EXISTS (
            SELECT 1 FROM unnest(key_columns) k WHERE old_row -> k::text IS DISTINCT FROM new_row -> k::text) THEN
            -- The key changed: as Debezium, a delete of the old key (and its
            -- tombstone), then a create under the new one.
            PERFORM kafgres._capture_emit(TG_RELID, 'd', old_row, NULL, settings);
            PERFORM kafgres._capture_emit(TG_RELID, 'c', NULL, new_row, settings);
        ELSE
            PERFORM kafgres._capture_emit(TG_RELID, 'u', old_row, new_row, settings);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION kafgres.capture(
    "table" regclass,
    topic text DEFAULT NULL,
    format text DEFAULT 'debezium',
    columns name[] DEFAULT NULL,
    snapshot boolean DEFAULT false,
    dead_letter_topic text DEFAULT NULL,
    tombstones boolean DEFAULT true,
    partitions integer DEFAULT 1
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET bytea_output = 'hex'
SET client_min_messages = warning AS $$
DECLARE
    kind "char";
    owner oid;
    missing name;
    settings text[];
    r record;
    snapshot_count bigint := 0;
BEGIN
    IF "table" IS NULL THEN
        RAISE EXCEPTION 'kafgres.capture: table must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT c.relkind, c.relowner INTO kind, owner FROM pg_class c WHERE c.oid = "table";
    IF kind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'kafgres.capture: % is not a table', "table"
            USING ERRCODE = 'wrong_object_type', HINT = 'capture an ordinary or partitioned table';
    END IF;
    -- What CREATE TRIGGER asks of whoever called (this function runs as its owner).
    IF NOT (pg_has_role(session_user, owner, 'USAGE') OR has_table_privilege(session_user, "table", 'TRIGGER')) THEN
        RAISE EXCEPTION 'kafgres.capture: permission denied for table %', "table"
            USING ERRCODE = 'insufficient_privilege', HINT = 'capture a table you own or have the TRIGGER privilege on';
    END IF;
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
                      coalesce(tombstones, true)::text];
    -- CREATE TRIGGER locks the table against writes until this transaction
    -- ends: every change committed before is in the snapshot below, every one
    -- after fires the trigger.
    EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS kafgres_capture ON %s', "table");
    EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS kafgres_capture_truncate ON %s', "table");
    EXECUTE pg_catalog.format('CREATE TRIGGER kafgres_capture AFTER INSERT OR UPDATE OR DELETE ON %s '
                              'FOR EACH ROW EXECUTE FUNCTION kafgres._capture_trigger(%s)',
                              "table", (SELECT string_agg(quote_literal(s), ', ') FROM unnest(settings) s));
    EXECUTE pg_catalog.format('CREATE TRIGGER kafgres_capture_truncate AFTER TRUNCATE ON %s '
                              'FOR EACH STATEMENT EXECUTE FUNCTION kafgres._capture_trigger(%s)',
                              "table", (SELECT string_agg(quote_literal(s), ', ') FROM unnest(settings) s));
    IF snapshot THEN
        FOR r IN EXECUTE pg_catalog.format('SELECT to_jsonb(t) AS row_value FROM %s AS t', "table") LOOP
            PERFORM kafgres._capture_emit("table", 'r', NULL, r.row_value, settings, 'true');
            snapshot_count := snapshot_count + 1;
        END LOOP;
    END IF;
    INSERT INTO kafgres.captures AS c (relation, topic, format, columns, dead_letter_topic, tombstones, snapshot_rows)
    VALUES ("table", topic, format, columns, dead_letter_topic, coalesce(tombstones, true),
            CASE WHEN snapshot THEN snapshot_count END)
    ON CONFLICT (relation) DO UPDATE
    SET topic = excluded.topic, format = excluded.format, columns = excluded.columns,
        dead_letter_topic = excluded.dead_letter_topic, tombstones = excluded.tombstones,
        snapshot_rows = coalesce(excluded.snapshot_rows, c.snapshot_rows), created_at = now();
    RETURN topic;
END
$$;
COMMENT ON FUNCTION kafgres.capture(regclass, text, text, name[], boolean, text, boolean, integer) IS
    'Publishes the table''s changes to a topic (created if missing; default <database>.<schema>.<table>) from this '
    'transaction''s commit on, exactly once and in commit order; snapshot => true sends its rows first.';

CREATE FUNCTION kafgres.uncapture("table" regclass) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres SET client_min_messages = warning AS $$
DECLARE
    owner oid;
BEGIN
    SELECT c.relowner INTO owner FROM pg_class c WHERE c.oid = "table";
    IF owner IS NOT NULL AND NOT (pg_has_role(session_user, owner, 'USAGE')
                                  OR has_table_privilege(session_user, "table", 'TRIGGER')) THEN
        RAISE EXCEPTION 'kafgres.uncapture: permission denied for table %', "table"
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF owner IS NOT NULL THEN
        EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS kafgres_capture ON %s', "table");
        EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS kafgres_capture_truncate ON %s', "table");
    END IF;
    DELETE FROM kafgres.captures WHERE relation = "table";
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION kafgres.uncapture(regclass) IS
    'Stops publishing the table''s changes (from this transaction''s commit on); false if it was not captured.';

-- A dropped table ends its capture: its row goes with it.
CREATE FUNCTION kafgres._capture_dropped() RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, kafgres AS $$
BEGIN
    IF to_regclass('kafgres.captures') IS NOT NULL THEN
        DELETE FROM kafgres.captures c
        USING pg_event_trigger_dropped_objects() d
        WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0 AND d.objid = c.relation::oid;
    END IF;
END
$$;
CREATE EVENT TRIGGER kafgres_capture_dropped ON sql_drop EXECUTE FUNCTION kafgres._capture_dropped();
