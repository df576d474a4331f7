-- Everything the kafgres extension defines, one line per object, for
-- test_upgrade.py to compare an updated install with a fresh one.
SELECT 'relation ' || c.relname || ' ' || c.relkind::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'kafgres'
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = 'kafgres' AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'v', 'p')
UNION ALL
SELECT 'constraint ' || c.relname || ' ' || pg_get_constraintdef(k.oid)
FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'kafgres'
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'kafgres'
UNION ALL
SELECT 'view ' || c.relname || ' ' || pg_get_viewdef(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'kafgres' AND c.relkind = 'v'
UNION ALL
SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') returns '
       || pg_get_function_result(p.oid) || ' ' || l.lanname || ' ' || p.provolatile::text || ' ' || p.proparallel::text
       || CASE WHEN p.prosecdef THEN ' security definer' ELSE '' END
       || CASE WHEN p.proisstrict THEN ' strict' ELSE '' END
       || ' config ' || coalesce(array_to_string(p.proconfig, ','), '')
       || ' source ' || CASE WHEN l.lanname = 'c' THEN p.prosrc ELSE md5(p.prosrc) END
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace JOIN pg_language l ON l.oid = p.prolang
WHERE n.nspname = 'kafgres'
UNION ALL
SELECT 'type ' || t.typname || ' ' || t.typtype::text
       || coalesce(' ' || (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                           FROM pg_enum e WHERE e.enumtypid = t.oid), '')
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname = 'kafgres' AND t.typtype IN ('e', 'd', 'c') AND t.typrelid = 0
UNION ALL
SELECT 'trigger ' || c.relname || ' ' || pg_get_triggerdef(g.oid)
FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'kafgres' AND NOT g.tgisinternal
UNION ALL
SELECT 'event trigger ' || e.evtname || ' ' || e.evtevent || ' ' || e.evtfoid::regproc::text || ' ' || e.evtenabled::text
FROM pg_event_trigger e JOIN pg_proc p ON p.oid = e.evtfoid
WHERE p.pronamespace = 'kafgres'::regnamespace
UNION ALL
SELECT 'comment ' || coalesce(c.relname, p.proname, '?') || ' ' || md5(d.description)
FROM pg_description d
LEFT JOIN pg_class c ON d.classoid = 'pg_class'::regclass AND c.oid = d.objoid
LEFT JOIN pg_proc p ON d.classoid = 'pg_proc'::regclass AND p.oid = d.objoid
WHERE coalesce(c.relnamespace, p.pronamespace) = 'kafgres'::regnamespace AND d.objsubid = 0
UNION ALL
SELECT 'grant ' || coalesce(c.relname, p.proname) || ' ' || coalesce(array_to_string(coalesce(c.relacl, p.proacl), ','), 'default')
FROM pg_class c FULL JOIN pg_proc p ON false
WHERE coalesce(c.relnamespace, p.pronamespace) = 'kafgres'::regnamespace
UNION ALL
SELECT 'dumped ' || (SELECT relname FROM pg_class WHERE oid = cfg.oid) || ' ' || coalesce(cfg.cond, '')
FROM pg_extension x,
     unnest(x.extconfig, x.extcondition) AS cfg(oid, cond)
WHERE x.extname = 'kafgres'
ORDER BY 1;
