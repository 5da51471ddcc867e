-- name: Enqueue :one
INSERT INTO "skipjack"."demo" ("payload", "run_at", "priority")
VALUES (sqlc.arg(payload), COALESCE(sqlc.narg(run_at)::timestamptz, now() + sqlc.arg(delay)::interval), sqlc.arg(priority))
RETURNING "id";

-- name: EnqueueCopy :copyfrom
INSERT INTO "skipjack"."demo" ("payload", "priority") VALUES ($1, $2);

-- name: EnqueueCopyAt :copyfrom
INSERT INTO "skipjack"."demo" ("payload", "priority", "run_at") VALUES ($1, $2, $3);

-- name: Now :one
SELECT (now() + sqlc.arg(delay)::interval)::timestamptz AS at;

-- name: Claim :many
WITH picked AS (
    SELECT "id" FROM "skipjack"."demo"
    WHERE "state" = 'pending' AND "run_at" <= now()
    ORDER BY "run_at", "id"
    LIMIT sqlc.arg(max)
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE "skipjack"."demo" AS j
SET "state" = 'running',
    "attempt" = j."attempt" + 1,
    "claim" = j."claim" + 1,
    "lease_expires_at" = now() + sqlc.arg(lease)::interval,
    "worker" = sqlc.arg(worker)::text
WHERE j."id" = ANY(ARRAY(SELECT "id" FROM picked))
RETURNING j."id", j."attempt", j."claim", j."max_attempts", j."priority", j."payload", j."run_at", j."created_at", j."rescues", j."errors";

-- name: Complete :many
WITH done AS (
    SELECT unnest(sqlc.arg(ids)::bigint[]) AS id, unnest(sqlc.arg(claims)::integer[]) AS claim
), locked AS (
    SELECT j."id"
    FROM (SELECT * FROM done ORDER BY id) AS x
    CROSS JOIN LATERAL (
        SELECT "id", "state" FROM "skipjack"."demo"
        WHERE "id" = x.id AND "claim" = x.claim
        LIMIT 1
        FOR UPDATE
    ) AS j
    WHERE j."state" = 'running'
)
DELETE FROM "skipjack"."demo"
WHERE "id" = ANY(ARRAY(SELECT "id" FROM locked))
RETURNING "id";

-- name: CompleteOne :execrows
DELETE FROM "skipjack"."demo"
WHERE "id" = sqlc.arg(id) AND "claim" = sqlc.arg(claim) AND "state" = 'running';

-- name: Resolve :many
WITH r AS (
    SELECT unnest(sqlc.arg(ids)::bigint[]) AS id,
           unnest(sqlc.arg(claims)::integer[]) AS claim,
           unnest(sqlc.arg(outcomes)::text[]) AS outcome,
           unnest(sqlc.arg(delays)::interval[]) AS delay,
           unnest(sqlc.arg(messages)::text[]) AS message
), locked AS (
    SELECT j."id", x.outcome, x.delay, x.message,
           CASE
               WHEN x.outcome = 'snooze' THEN 'pending'
               WHEN x.outcome = 'retry' AND j."attempt" < j."max_attempts" THEN 'pending'
               ELSE 'failed'
           END AS next_state
    FROM (SELECT * FROM r ORDER BY id) AS x
    CROSS JOIN LATERAL (
        SELECT "id", "state", "attempt", "max_attempts" FROM "skipjack"."demo"
        WHERE "id" = x.id AND "claim" = x.claim
        LIMIT 1
        FOR UPDATE
    ) AS j
    WHERE j."state" = 'running'
)
UPDATE "skipjack"."demo" AS t
SET "state" = locked.next_state,
    "attempt" = CASE WHEN locked.outcome = 'snooze' THEN t."attempt" - 1 ELSE t."attempt" END,
    "run_at" = CASE WHEN locked.next_state = 'pending' THEN now() + locked.delay ELSE t."run_at" END,
    "finished_at" = CASE WHEN locked.next_state = 'failed' THEN now() END,
    "lease_expires_at" = NULL,
    "errors" = CASE WHEN locked.outcome = 'snooze' THEN t."errors" ELSE (
        SELECT coalesce(jsonb_agg(e.value ORDER BY e.ordinality), '[]'::jsonb)
        FROM jsonb_array_elements(t."errors" || jsonb_build_array(jsonb_build_object(
            'attempt', t."attempt", 'at', now(), 'error', locked.message, 'worker', t."worker"))) WITH ORDINALITY AS e
        WHERE e.ordinality > jsonb_array_length(t."errors") + 1 - 10
    ) END
FROM locked
WHERE t."id" = ANY(ARRAY(SELECT "id" FROM locked)) AND t."id" = locked."id"
RETURNING t."id";

-- name: Heartbeat :many
WITH h AS (
    SELECT unnest(sqlc.arg(ids)::bigint[]) AS id, unnest(sqlc.arg(claims)::integer[]) AS claim
), locked AS (
    SELECT j."id"
    FROM (SELECT * FROM h ORDER BY id) AS x
    CROSS JOIN LATERAL (
        SELECT "id", "state" FROM "skipjack"."demo"
        WHERE "id" = x.id AND "claim" = x.claim
        LIMIT 1
        FOR NO KEY UPDATE
    ) AS j
    WHERE j."state" = 'running'
)
UPDATE "skipjack"."demo" AS t
SET "lease_expires_at" = now() + sqlc.arg(lease)::interval
WHERE t."id" = ANY(ARRAY(SELECT "id" FROM locked))
RETURNING t."id";

-- name: Release :execrows
WITH h AS (
    SELECT unnest(sqlc.arg(ids)::bigint[]) AS id, unnest(sqlc.arg(claims)::integer[]) AS claim
), locked AS (
    SELECT j."id"
    FROM (SELECT * FROM h ORDER BY id) AS x
    CROSS JOIN LATERAL (
        SELECT "id", "state" FROM "skipjack"."demo"
        WHERE "id" = x.id AND "claim" = x.claim
        LIMIT 1
        FOR NO KEY UPDATE
    ) AS j
    WHERE j."state" = 'running'
)
UPDATE "skipjack"."demo" AS t
SET "state" = 'pending', "attempt" = t."attempt" - 1, "lease_expires_at" = NULL
WHERE t."id" = ANY(ARRAY(SELECT "id" FROM locked));

-- name: Rescue :execrows
WITH lapsed AS (
    SELECT "id" FROM "skipjack"."demo"
    WHERE "state" = 'running' AND "lease_expires_at" < now()
    ORDER BY "lease_expires_at"
    LIMIT sqlc.arg(max)
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE "skipjack"."demo" AS t
SET "state" = CASE WHEN t."rescues" >= 5 THEN 'failed' ELSE 'pending' END,
    "attempt" = CASE WHEN t."rescues" >= 5 THEN t."attempt" ELSE t."attempt" - 1 END,
    "rescues" = t."rescues" + 1,
    "run_at" = now(),
    "finished_at" = CASE WHEN t."rescues" >= 5 THEN now() END,
    "lease_expires_at" = NULL,
    "errors" = (
        SELECT coalesce(jsonb_agg(e.value ORDER BY e.ordinality), '[]'::jsonb)
        FROM jsonb_array_elements(t."errors" || jsonb_build_array(jsonb_build_object(
            'attempt', t."attempt", 'at', now(), 'error', 'lease lost', 'worker', t."worker"))) WITH ORDINALITY AS e
        WHERE e.ordinality > jsonb_array_length(t."errors") + 1 - 10
    )
WHERE t."id" = ANY(ARRAY(SELECT "id" FROM lapsed));

-- name: PruneCompleted :execrows
DELETE FROM "skipjack"."demo"
WHERE "id" = ANY(ARRAY(
    SELECT "id" FROM "skipjack"."demo"
    WHERE "state" = 'completed' AND "finished_at" < now() - sqlc.arg(age)::interval
    ORDER BY "finished_at"
    LIMIT sqlc.arg(max)
    FOR UPDATE SKIP LOCKED
));

-- name: PruneFailed :execrows
DELETE FROM "skipjack"."demo"
WHERE "id" = ANY(ARRAY(
    SELECT "id" FROM "skipjack"."demo"
    WHERE "state" = 'failed' AND "finished_at" < now() - sqlc.arg(age)::interval
    ORDER BY "finished_at"
    LIMIT sqlc.arg(max)
    FOR UPDATE SKIP LOCKED
));

-- name: Stats :one
SELECT
    count(*) FILTER (WHERE "state" = 'pending' AND "run_at" <= now()) AS pending,
    count(*) FILTER (WHERE "state" = 'pending' AND "run_at" > now()) AS scheduled,
    count(*) FILTER (WHERE "state" = 'running') AS running,
    count(*) FILTER (WHERE "state" = 'completed') AS completed,
    count(*) FILTER (WHERE "state" = 'failed') AS failed,
    (now() - coalesce(min("run_at") FILTER (WHERE "state" = 'pending' AND "run_at" <= now()), now()))::interval AS oldest_pending
FROM "skipjack"."demo";
