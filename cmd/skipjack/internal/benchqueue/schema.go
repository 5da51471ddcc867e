package benchqueue

import (
	"strings"
)

// GeneratedSchema is the schema that the generated code and migration
// name: the bench renames it, in every statement, to a schema of its own.
const GeneratedSchema = "skipjack_bench"

// Rename returns sql with the generated schema's name replaced by schema.
// The name occurs in the generated SQL only as an identifier (quoted, or in
// the NOTIFY channel schema.queue), never inside another word, so a plain
// replacement renames exactly those.
func Rename(sql, schema string) string {
	return strings.ReplaceAll(sql, GeneratedSchema, schema)
}

// DDL returns the statements that create the probe queue, its schema and
// the schema's shared tables in schema: the generated migrations, renamed.
func DDL(schema string) string {
	ups := make([]string, len(migrations))
	for i, m := range migrations {
		ups[i] = m.Up
	}
	return Rename(strings.Join(ups, ";\n"), schema)
}
