package config

import (
	"encoding/json"
	"go/token"
	"maps"
	"slices"
)

// JSONSchemaID is the $id of the JSON Schema of skipjack.yaml.
const JSONSchemaID = "https://github.com/skipjack-dev/skipjack/raw/main/docs/skipjack.schema.json"

// JSONSchema returns a JSON Schema (draft 2020-12) of skipjack.yaml, for
// editors (yaml-language-server) and CI linters: every key with its type,
// default and description, closed objects so a mistyped key is flagged,
// and the names, enums and ranges that Load checks. It is built from the
// same key lists, patterns and storage parameters that Load uses, so the
// two cannot drift apart. Load checks more (Go types, cron expressions,
// timezones, schedule payloads against the payload, duplicate keys); a
// config the schema accepts may still have positioned errors from Load.
func JSONSchema() []byte {
	duration := func(desc string, def string) obj {
		return obj{
			"description": desc + " Go duration syntax: 500ms, 90s, 5m, 1h30m.",
			"default":     def,
			"anyOf": []obj{
				{"type": "string", "pattern": `^\s*([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h)(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|ms|s|m|h))*\s*$`},
				{"const": 0},
			},
		}
	}
	typeExpr := obj{
		"type":        "string",
		"description": "A Go type: bool, string, int*, uint*, float32/64, []byte, time.Time, time.Duration, json.RawMessage, []T, map[string]T, *T (optional), a name from types:, or import/path.Type.",
		"minLength":   1,
	}
	field := obj{"anyOf": []obj{
		typeExpr,
		{
			"type": "object", "additionalProperties": false, "required": []string{"type"},
			"description": "The long form of a field.",
			"properties": obj{
				"type":       typeExpr,
				"deprecated": obj{"type": "boolean", "default": false, "description": "Kept for jobs already queued; producers should stop setting it."},
				"default": obj{
					"type":        []string{"string", "number", "boolean"},
					"description": "The value a job without this field decodes with (jobs queued by older code or by SQL). For bool, string, numeric and time.Duration (a Go duration such as 90s) fields.",
				},
			},
		},
	}}
	fields := func(desc string) obj {
		return obj{
			"type":                 "object",
			"description":          desc,
			"propertyNames":        obj{"pattern": fieldKey.String()},
			"additionalProperties": field,
		}
	}
	var reserved []string
	for name := range reservedPackages {
		reserved = append(reserved, name)
	}
	for name := range predeclared {
		reserved = append(reserved, name)
	}
	for kw := token.BREAK; kw <= token.VAR; kw++ { // Go's keywords
		reserved = append(reserved, kw.String())
	}
	slices.Sort(reserved)
	reserved = slices.Compact(reserved)

	params := obj{}
	for _, name := range slices.Sorted(maps.Keys(storageParams)) {
		spec := storageParams[name]
		switch spec.kind {
		case paramBool:
			params[name] = obj{"type": "boolean"}
		case paramEnum:
			params[name] = obj{"enum": append(anyList(spec.values), true, false)}
		case paramInt:
			params[name] = obj{"type": "integer", "minimum": spec.min, "maximum": spec.max}
		default:
			params[name] = obj{"type": "number", "minimum": spec.min, "maximum": spec.max}
		}
	}

	queue := obj{
		"type":                 "object",
		"additionalProperties": false,
		"properties": obj{
			"payload":      fields("The payload's fields: snake_case key -> Go type expression; order is kept."),
			"output":       fields("The fields of the result a handler records with SetOutput, which the workflow steps after it read with Outputs."),
			"max_attempts": obj{"type": "integer", "minimum": 1, "maximum": 2147483647, "default": DefaultMaxAttempts, "description": "Attempts before a failing job is marked failed; also the column default for SQL producers."},
			"backoff": obj{
				"type": "object", "additionalProperties": false,
				"description": "Exponential backoff with jitter between min and max.",
				"properties": obj{
					"min": duration("Shortest wait before a retry.", DefaultBackoffMin.String()),
					"max": duration("Longest wait before a retry.", DefaultBackoffMax.String()),
				},
			},
			"timeout":  duration("Handler deadline per attempt.", DefaultTimeout.String()),
			"lease":    duration("How long a claim lasts without a heartbeat.", DefaultLease.String()),
			"priority": obj{"type": "boolean", "default": false, "description": "Per-job priority, 0..9, lower runs first."},
			"notify":   obj{"type": "boolean", "default": true, "description": "NOTIFY workers on insert; false = poll only."},
			"retention": obj{
				"type": "object", "additionalProperties": false,
				"properties": obj{
					"completed": duration("How long completed jobs are kept (0 = deleted at ack).", "0s"),
					"failed":    duration("How long failed jobs are kept.", DefaultRetainFailed.String()),
				},
			},
			"table": obj{
				"type": "object", "additionalProperties": false,
				"description": "Storage parameters of the queue's table.",
				"properties":  params,
			},
			"dropped":           obj{"type": "boolean", "default": false, "description": "true: the next migration drops this queue's table."},
			"max_payload_bytes": obj{"type": "integer", "minimum": 1, "maximum": 2147483647, "description": "Enqueue refuses payloads whose JSON is larger (default: no limit)."},
			"unique": obj{
				"type": "object", "additionalProperties": false,
				"description": "Jobs with the same key (in one of the states) are duplicates, enforced by a unique index.",
				"properties": obj{
					"by":     obj{"type": "array", "uniqueItems": true, "items": obj{"type": "string", "pattern": fieldKey.String()}, "description": "Payload fields of the key; omitted = the whole payload."},
					"states": obj{"type": "array", "uniqueItems": true, "items": obj{"enum": anyList(UniqueStates)}, "default": anyList(DefaultUniqueStates)},
				},
			},
			"limits": obj{
				"type": "object", "additionalProperties": false, "minProperties": 1,
				"description": "Limits enforced by the database across all processes working the queue.",
				"properties": obj{
					"concurrency": obj{"type": "integer", "minimum": 1, "maximum": 2147483647, "description": "At most this many jobs of the queue claimed (running or prefetched) at once, all processes together."},
					"rate": obj{
						"type": "object", "additionalProperties": false, "required": []string{"count"},
						"description": "At most count jobs started in any window of length per, all processes together.",
						"properties": obj{
							"count": obj{"type": "integer", "minimum": 1, "maximum": 2147483647},
							"per":   duration("The window's length, 1s to 24h.", "1s"),
						},
					},
					"per_key": obj{
						"type": "object", "additionalProperties": false, "required": []string{"by", "concurrency"},
						"description": "At most concurrency jobs with equal keys claimed (running or prefetched) at once, all processes together.",
						"properties": obj{
							"by":          obj{"type": "array", "minItems": 1, "uniqueItems": true, "items": obj{"type": "string", "pattern": fieldKey.String()}, "description": "Payload fields of the key."},
							"concurrency": obj{"type": "integer", "minimum": 1, "maximum": 2147483647, "description": "At most this many jobs of one key at once."},
						},
					},
				},
			},
			"serial": obj{
				"type": "object", "additionalProperties": false, "required": []string{"by"},
				"description": "Jobs with equal keys run one at a time, in enqueue (id) order; different keys run in parallel.",
				"properties": obj{
					"by": obj{"type": "array", "minItems": 1, "uniqueItems": true, "items": obj{"type": "string", "pattern": fieldKey.String()}, "description": "Payload fields of the key."},
				},
			},
			"schedule": obj{
				"type":        "array",
				"description": "Periodic jobs, inserted by the queue's running workers, one per slot across all processes.",
				"items": obj{
					"type": "object", "additionalProperties": false, "required": []string{"cron"},
					"properties": obj{
						"cron":     obj{"type": "string", "minLength": 1, "description": `5-field cron, @hourly/@daily/@weekly/..., or "@every 30s" (>= 1s).`},
						"timezone": obj{"type": "string", "default": "UTC", "description": "IANA time zone of the cron expression."},
						"payload":  obj{"type": "object", "description": "The job's payload, checked against the payload's fields."},
						"missed":   obj{"enum": anyList(MissedPolicies), "default": MissedPolicies[0], "description": "After downtime: skip runs only the next slot; once runs one job for the missed slots."},
					},
				},
			},
		},
	}
	schema := obj{
		"$schema":              "https://json-schema.org/draft/2020-12/schema",
		"$id":                  JSONSchemaID,
		"title":                "skipjack.yaml",
		"description":          "Job queues on PostgreSQL for Go: skipjack generates the migrations, sqlc queries and typed packages from this file.",
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"version", "out", "queues"},
		"properties": obj{
			"version": obj{"const": 1},
			"name":    obj{"type": "string", "pattern": configName.String(), "maxLength": 63, "description": "Config id: keys migration tracking (default: the schema)."},
			"out":     obj{"type": "string", "minLength": 1, "description": "Root folder of the generated Go packages, relative to this file."},
			"migrations": obj{
				"type": "object", "additionalProperties": false,
				"properties": obj{
					"dir":    obj{"type": "string", "minLength": 1, "default": DefaultMigrationsDir, "description": "Folder of the migration files, relative to this file."},
					"format": obj{"enum": anyList(MigrationFormats), "default": DefaultMigrationsFormat},
				},
			},
			"schema": obj{"type": "string", "pattern": sqlIdent.String(), "not": obj{"pattern": "^pg_"}, "maxLength": 63, "default": DefaultSchema, "description": "Postgres schema of the queue tables."},
			"types": obj{
				"type":                 "object",
				"description":          "Reusable payload structs, usable by name in any payload.",
				"propertyNames":        obj{"pattern": structName.String()},
				"additionalProperties": fields("The struct's fields: snake_case key -> Go type expression."),
			},
			"queues": obj{
				"type":                 "object",
				"minProperties":        1,
				"propertyNames":        obj{"pattern": queueName.String(), "not": obj{"enum": reserved}},
				"additionalProperties": queue,
			},
			"workflows": obj{
				"type":                 "object",
				"description":          "Typed workflows: each a DAG of steps, every step a job of a declared queue.",
				"propertyNames":        obj{"pattern": queueName.String(), "not": obj{"enum": reserved}},
				"additionalProperties": workflowSchema(),
			},
		},
	}
	b, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		panic(err) // plain maps, slices and strings
	}
	return append(b, '\n')
}

// obj is a JSON object of the schema; encoding/json sorts its keys, so the
// output is deterministic.
type obj = map[string]any

func anyList[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
