-- 0006: the erasure check of 0005 names agentd_erase_chat exactly.
--
-- agentd_erasing told the DELETEs of agentd_erase_chat from others by the
-- PL/pgSQL call stack, with a LIKE pattern that any function whose name
-- ends in agentd_erase_chat also matched (not_agentd_erase_chat, or one of
-- that name in another schema): such a function could erase any chat's
-- events. The call stack names a function as format_procedure does,
-- schema-qualified when it is not the one the search_path finds; so the
-- line must now equal what regprocedure's text is, this very session, for
-- the agentd_erase_chat of the schema these migrations run in (fixed here
-- when the function is made): the same function, whatever the search_path.
DO $migration$
BEGIN
    EXECUTE format($f$
CREATE OR REPLACE FUNCTION agentd_erasing() RETURNS boolean
LANGUAGE plpgsql AS $body$
DECLARE
    stack text;
    caller text;
    proc text := to_regprocedure(%L)::text;
BEGIN
    GET DIAGNOSTICS stack = PG_CONTEXT;
    -- Line 1 is this function, line 2 the trigger function, line 3 the
    -- statement, line 4 the function that ran it:
    -- "PL/pgSQL function <name>(<argument types>) line N at SQL statement".
    caller := split_part(stack, E'\n', 4);
    RETURN proc IS NOT NULL
        AND starts_with(caller, 'PL/pgSQL function ' || proc || ' line ')
        AND right(caller, length(' at SQL statement')) = ' at SQL statement';
END;
$body$
$f$, format('%I.agentd_erase_chat(uuid,text,timestamptz)', current_schema()));
END;
$migration$;
