package config

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/skipjack-dev/skipjack/runtime/skipjackimpl"
	"go.yaml.in/yaml/v3"
)

// Defaults applied to keys the YAML leaves out. The queue settings the
// engine also needs (attempts, backoff, timeout, lease) are the runtime's,
// defined once in skipjackimpl.
const (
	DefaultSchema                         = "skipjack"
	DefaultMigrationsDir                  = "./migrations"
	DefaultMigrationsFormat               = "plain"
	DefaultMaxAttempts                    = skipjackimpl.DefaultMaxAttempts
	DefaultBackoffMin                     = skipjackimpl.DefaultBackoffMin
	DefaultBackoffMax                     = skipjackimpl.DefaultBackoffMax
	DefaultTimeout                        = skipjackimpl.DefaultTimeout
	DefaultLease                          = skipjackimpl.DefaultLease
	DefaultRetainCompleted  time.Duration = 0
	DefaultRetainFailed                   = 720 * time.Hour
)

// MinLease is the shortest lease a queue may have: workers heartbeat every
// lease/3, and a heartbeat must fit in that interval.
const MinLease = time.Second

// MigrationFormats are the values migrations.format accepts.
var MigrationFormats = []string{"plain", "goose", "golang-migrate", "tern"}

var (
	topKeys        = []string{"version", "name", "out", "migrations", "schema", "types", "queues", "workflows"}
	migrationsKeys = []string{"dir", "format"}
	queueKeys      = []string{"payload", "max_attempts", "backoff", "timeout", "lease", "priority", "notify", "retention", "table", "dropped", "unique", "schedule", "max_payload_bytes", "limits", "serial", "output"}
	backoffKeys    = []string{"min", "max"}
	retentionKeys  = []string{"completed", "failed"}
)

// config walks the root mapping into cfg.
func (w *walker) config(root *yaml.Node, cfg *Config) {
	top, ok := w.section(root, "the config", topKeys)
	if !ok {
		return
	}
	if e, ok := top["version"]; !ok {
		w.errorAt(pos(root), `missing required key "version" (add "version: 1")`)
	} else if v, ok := w.integer(e); ok {
		if v != 1 {
			w.errorf(e.value, "unsupported version %d (this skipjack reads version 1)", v)
		}
		cfg.Version = v
	}

	cfg.Schema = DefaultSchema
	cfg.SchemaPos = pos(root)
	if e, ok := top["schema"]; ok {
		cfg.SchemaPos = pos(e.value)
		if s, ok := w.str(e); ok && w.checkSchema(e.value, s) {
			cfg.Schema = s
		}
	}

	cfg.Name = cfg.Schema
	if e, ok := top["name"]; ok {
		if s, ok := w.str(e); ok {
			if len(s) > 63 || !configName.MatchString(s) {
				w.errorf(e.value, "invalid name %q: use letters, digits, '_', '.' and '-', at most 63 bytes", s)
			}
			cfg.Name = s
		}
	}

	cfg.OutPos = pos(root)
	if e, ok := top["out"]; !ok {
		w.errorAt(pos(root), `missing required key "out" (the folder of the generated Go packages)`)
	} else {
		cfg.OutPos = pos(e.value)
		if s, ok := w.str(e); ok && w.checkPath(e.value, "out", s) {
			cfg.Out = s
		}
	}

	cfg.Migrations = Migrations{Dir: DefaultMigrationsDir, Format: DefaultMigrationsFormat}
	if e, ok := top["migrations"]; ok {
		w.migrations(e.value, &cfg.Migrations)
	}

	var structEntries []entry
	if e, ok := top["types"]; ok {
		structEntries = w.structNames(e.value)
	}
	names := make([]string, len(structEntries))
	for i, e := range structEntries {
		names[i] = e.key
	}
	scope := newTypeScope(names)
	for _, e := range structEntries {
		cfg.Types = append(cfg.Types, Struct{
			Name:   e.key,
			Fields: w.fields(e.value, fmt.Sprintf("type %q", e.key), scope),
			Pos:    pos(e.keyNode),
		})
	}
	w.checkCycles(cfg.Types)

	cfg.QueuesPos = pos(root)
	if e, ok := top["queues"]; !ok {
		w.errorAt(pos(root), `missing required key "queues" (declare at least one queue)`)
	} else {
		cfg.QueuesPos = pos(e.keyNode)
		cfg.Queues = w.queues(e, scope, cfg.Types)
	}
	if e, ok := top["workflows"]; ok {
		cfg.Workflows = w.workflows(e, cfg.LiveQueues())
	}
}

// checkSchema reports a schema name Postgres would not take unquoted.
func (w *walker) checkSchema(n *yaml.Node, s string) bool {
	switch {
	case !sqlIdent.MatchString(s) || len(s) > 63:
		w.errorf(n, "invalid schema %q: use lowercase letters, digits and underscores, not starting with a digit, at most 63 bytes", s)
	case strings.HasPrefix(s, "pg_"):
		w.errorf(n, "invalid schema %q: the pg_ prefix is reserved for Postgres's own schemas", s)
	default:
		return true
	}
	return false
}

// checkPath reports a path that is not a relative, slash-separated path.
func (w *walker) checkPath(n *yaml.Node, key, p string) bool {
	switch {
	case strings.TrimSpace(p) == "":
		w.errorf(n, "%s must not be empty", key)
	case strings.Contains(p, `\`):
		w.errorf(n, "%s %q: use forward slashes", key, p)
	case path.IsAbs(p) || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
		w.errorf(n, "%s %q must be relative to the config file", key, p)
	default:
		return true
	}
	return false
}

// migrations walks the migrations: section into m.
func (w *walker) migrations(n *yaml.Node, m *Migrations) {
	s, _ := w.section(n, "migrations", migrationsKeys)
	if e, ok := s["dir"]; ok {
		if dir, ok := w.str(e); ok && w.checkPath(e.value, "migrations.dir", dir) {
			m.Dir = dir
		}
	}
	if e, ok := s["format"]; ok {
		if f, ok := w.str(e); ok {
			if !contains(MigrationFormats, f) {
				w.errorf(e.value, "unknown migrations format %q: use %s%s", f, strings.Join(MigrationFormats, ", "), didYouMean(f, MigrationFormats))
			} else {
				m.Format = f
			}
		}
	}
}

// queues walks the queues: section.
// types are the shared structs, for checking schedule payloads.
func (w *walker) queues(e entry, scope *typeScope, types []Struct) []Queue {
	ps, ok := w.pairs(e.value, "queues", "queue")
	if ok && len(ps) == 0 {
		w.errorf(e.keyNode, "queues must declare at least one queue")
	}
	var out []Queue
	packages := make(map[string]entry)
	for _, p := range ps {
		q := w.queue(p, scope, types)
		if !queueName.MatchString(p.key) {
			w.errorf(p.keyNode, "invalid queue name %q: use lowercase letters, digits and underscores, starting with a letter, at most 40 bytes", p.key)
			continue
		}
		if why := packageProblem(q.Package); why != "" {
			if q.Package == q.Name {
				w.errorf(p.keyNode, "queue name %q %s", p.key, why)
			} else {
				w.errorf(p.keyNode, "queue %q: package name %q %s", p.key, q.Package, why)
			}
			continue
		}
		if prev, dup := packages[q.Package]; dup {
			w.errorf(p.keyNode, "queue %q and queue %q (line %d) both become package %s", p.key, prev.key, prev.keyNode.Line, q.Package)
			continue
		}
		packages[q.Package] = p
		out = append(out, q)
	}
	return out
}

// queue walks one queue's settings, applying defaults.
func (w *walker) queue(p entry, scope *typeScope, types []Struct) Queue {
	q := Queue{
		Name:         p.key,
		Package:      strings.ReplaceAll(p.key, "_", ""),
		MaxAttempts:  DefaultMaxAttempts,
		BackoffMin:   DefaultBackoffMin,
		BackoffMax:   DefaultBackoffMax,
		Timeout:      DefaultTimeout,
		Lease:        DefaultLease,
		Notify:       true,
		RetainFailed: DefaultRetainFailed,
		Pos:          pos(p.keyNode),
	}
	s, _ := w.section(p.value, fmt.Sprintf("queue %q", p.key), queueKeys)
	if e, ok := s["payload"]; ok {
		q.Payload = w.fields(e.value, "payload", scope)
	}
	if e, ok := s["output"]; ok {
		q.Output = w.fields(e.value, "output", scope)
		if len(q.Output) == 0 {
			w.errorf(e.keyNode, "output must declare at least one field such as {tracking_id: string}")
		}
	}
	if e, ok := s["max_attempts"]; ok {
		if n, ok := w.integer(e); ok {
			if n < 1 {
				w.errorf(e.value, "max_attempts must be at least 1")
			}
			q.MaxAttempts = n
		}
	}
	if e, ok := s["backoff"]; ok {
		b, _ := w.section(e.value, "backoff", backoffKeys)
		w.positive(b, "min", &q.BackoffMin)
		w.positive(b, "max", &q.BackoffMax)
		if q.BackoffMin > q.BackoffMax {
			at := e.value
			if m, ok := b["min"]; ok {
				at = m.value
			}
			w.errorf(at, "backoff min (%s) must not exceed max (%s)", q.BackoffMin, q.BackoffMax)
		}
	}
	w.positive(s, "timeout", &q.Timeout)
	if e, ok := s["lease"]; ok {
		if w.positive(s, "lease", &q.Lease) && q.Lease < MinLease {
			w.errorf(e.value, "lease must be at least %s (workers renew it every lease/3)", MinLease)
		}
	}
	w.flag(s, "priority", &q.Priority)
	w.flag(s, "notify", &q.Notify)
	w.flag(s, "dropped", &q.Dropped)
	if e, ok := s["retention"]; ok {
		r, _ := w.section(e.value, "retention", retentionKeys)
		if e, ok := r["completed"]; ok {
			if d, ok := w.duration(e); ok {
				q.RetainCompleted = d
			}
		}
		if e, ok := r["failed"]; ok {
			if d, ok := w.duration(e); ok {
				q.RetainFailed = d
			}
		}
	}
	if e, ok := s["table"]; ok {
		q.Table = w.table(e.value)
	}
	if e, ok := s["max_payload_bytes"]; ok {
		if n, ok := w.integer(e); ok {
			if n < 1 {
				w.errorf(e.value, "max_payload_bytes must be greater than 0 (leave it out for no limit)")
			} else {
				q.MaxPayloadBytes = n
			}
		}
	}
	// unique and schedule refer to the payload and the retention above.
	if e, ok := s["unique"]; ok {
		q.Unique = w.unique(e, &q)
	}
	if e, ok := s["schedule"]; ok {
		q.Schedule = w.schedules(e, &q, types)
	}
	// limits (per_key.by) and serial refer to the payload; serial also to
	// the schedules above.
	if e, ok := s["limits"]; ok {
		q.Limits = w.limits(e, &q)
	}
	// serial refers to the payload and the schedules above.
	if e, ok := s["serial"]; ok {
		q.Serial = w.serial(e, &q)
	}
	return q
}

// positive sets *d from key of s when it is present and a positive
// duration, and reports whether it did.
func (w *walker) positive(s map[string]entry, key string, d *time.Duration) bool {
	e, ok := s[key]
	if !ok {
		return false
	}
	v, ok := w.duration(e)
	if !ok {
		return false
	}
	if v == 0 {
		w.errorf(e.value, "%s must be greater than 0", key)
		return false
	}
	*d = v
	return true
}

// flag sets *b from key of s when it is present and a boolean.
func (w *walker) flag(s map[string]entry, key string, b *bool) {
	if e, ok := s[key]; ok {
		if v, ok := w.boolean(e); ok {
			*b = v
		}
	}
}
