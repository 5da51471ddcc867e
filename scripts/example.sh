#!/usr/bin/env bash
# The main job: regenerate the shop example from its skipjack.yaml (via its
# //go:generate line) and run it against PostgreSQL: it applies the
# generated migrations, enqueues 6,500 jobs on three typed queues and works
# them until every queue is drained. PostgreSQL is found like the tests find
# it: $DATABASE_URL, else 127.0.0.1:5432 as postgres, else a throwaway
# cluster started with initdb/pg_ctl.
set -euo pipefail
cd "$(dirname "$0")/../examples/shop"
go generate ./...
go run .
