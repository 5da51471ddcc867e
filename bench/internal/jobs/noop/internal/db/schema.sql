CREATE SCHEMA IF NOT EXISTS "skipjack";

CREATE TABLE "skipjack"."noop" (
    "id" bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    "state" text NOT NULL DEFAULT 'pending' CHECK ("state" IN ('pending', 'running', 'completed', 'failed')),
    "payload" jsonb NOT NULL CHECK (jsonb_typeof("payload") = 'object'),
    "run_at" timestamptz NOT NULL DEFAULT now(),
    "priority" smallint NOT NULL DEFAULT 0 CHECK ("priority" BETWEEN 0 AND 9),
    "attempt" integer NOT NULL DEFAULT 0,
    "max_attempts" integer NOT NULL DEFAULT 25 CHECK ("max_attempts" > 0),
    "created_at" timestamptz NOT NULL DEFAULT now(),
    "claim" integer NOT NULL DEFAULT 0,
    "rescues" integer NOT NULL DEFAULT 0,
    "lease_expires_at" timestamptz,
    "worker" text,
    "finished_at" timestamptz,
    "errors" jsonb NOT NULL DEFAULT '[]'
);
