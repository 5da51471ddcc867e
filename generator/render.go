package generator

import (
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/templates"
)

// runtimeImport is the import path of the runtime every generated package
// links.
const runtimeImport = "github.com/skipjack-dev/skipjack/runtime"

// gen holds the state of one Generate run.
type gen struct {
	cfg       *config.Config
	out       string
	outImport string
	sharedPkg string
	external  map[string]external
	files     []File
}

func (g *gen) add(p string, data []byte) {
	g.files = append(g.files, File{Path: p, Data: data})
}

// queueFile builds the template model of a queue's queue.go.
func (g *gen) queueFile(qm queueModel) templates.QueueFile {
	q := qm.cfg
	im := newImports(config.QueueIdentifiers...)
	for _, s := range g.cfg.Types {
		im.taken[s.Name] = true
	}
	for _, p := range []string{"context", "time"} {
		im.use(p, p)
	}
	im.use("github.com/jackc/pgx/v5", "pgx")
	im.use("github.com/jackc/pgx/v5/pgxpool", "pgxpool")
	im.taken["skipjack"], im.taken["dbgen"] = true, true
	im.useNamed(runtimeImport, "skipjack")
	im.use(runtimeImport+"/skipjackimpl", "skipjackimpl")
	im.useNamed(path.Join(g.outImport, q.Package, "internal/db"), "dbgen")
	var schedules []string
	for i, s := range q.Schedule {
		payload, missed := strconv.Quote(s.PayloadJSON), strconv.Quote(s.Missed)
		if s.Every > 0 {
			schedules = append(schedules, "skipjackimpl.EverySchedule("+strconv.Itoa(i)+", "+durationExpr(s.Every)+", "+payload+", "+missed+")")
			continue
		}
		cron := im.use("github.com/robfig/cron/v3", "cron")
		if s.Timezone != "UTC" {
			// The time zone must load in containers without a zoneinfo
			// database too.
			im.useNamed("time/tzdata", "_")
		}
		schedules = append(schedules, "skipjackimpl.CronSchedule("+strconv.Itoa(i)+", "+strconv.Quote(s.Cron)+", "+
			strconv.Quote(s.Timezone)+", "+cron+".ParseStandard, "+payload+", "+missed+")")
	}

	w := &typeWriter{im: im, external: g.external, sharedUsed: map[string]bool{}, shared: g.sharedByName()}
	payload := w.structOf("Payload", "Payload is the payload of one "+q.Name+" job.", q.Payload)
	var aliases []templates.Alias
	used := g.sharedClosure(w.sharedUsed)
	if len(used) > 0 {
		shared := im.use(g.outImport, g.sharedPkg)
		for _, s := range g.cfg.Types {
			if used[s.Name] {
				aliases = append(aliases, templates.Alias{Name: s.Name, Target: shared + "." + s.Name})
			}
		}
	}
	var output *templates.Struct
	if len(q.Output) > 0 {
		o := w.structOf("Output", "Output is what a "+q.Name+" handler records with SetOutput for the workflow steps after it.", q.Output)
		output = &o
	}
	std, other := im.split()
	t := qm.table
	return templates.QueueFile{
		Output:       output,
		Package:      q.Package,
		Queue:        q.Name,
		Table:        t.QualifiedName(),
		StdImports:   std,
		OtherImports: other,
		Payload:      payload,
		Aliases:      aliases,
		Settings: settingLines(
			[]setting{{"Name", "Name"}, {"Channel", strconv.Quote(t.Channel())}, {"MaxAttempts", strconv.Itoa(q.MaxAttempts)}, {"Priority", strconv.FormatBool(q.Priority)}},
			[]setting{{"BackoffMin", durationExpr(q.BackoffMin)}, {"BackoffMax", durationExpr(q.BackoffMax)}, {"Timeout", durationExpr(q.Timeout)}, {"Lease", durationExpr(q.Lease)}},
			[]setting{{"RetainCompleted", durationExpr(q.RetainCompleted)}, {"RetainFailed", durationExpr(q.RetainFailed)}, {"Unique", strconv.FormatBool(q.Unique != nil)}, {"MaxPayloadBytes", strconv.Itoa(q.MaxPayloadBytes)}},
			limitSettings(q),
			uniqueSettings(q),
			g.workflowSettings(q, t),
		),
		Unique:    q.Unique != nil,
		Schedules: schedules,
	}
}

// limitSettings returns the Spec fields of q's limits and serial key.
func limitSettings(q *config.Queue) []setting {
	out := []setting{{"Serial", strconv.FormatBool(q.Serial != nil)}}
	if l := q.Limits; l != nil {
		out = append(out, setting{"LimitConcurrency", strconv.Itoa(l.Concurrency)})
		if l.Rate != nil {
			out = append(out, setting{"RateCount", strconv.Itoa(l.Rate.Count)}, setting{"RatePer", durationExpr(l.Rate.Per)})
		}
		if l.PerKey != nil {
			out = append(out, setting{"PerKeyConcurrency", strconv.Itoa(l.PerKey.Concurrency)}, setting{"PerKeyBy", stringsExpr(l.PerKey.By)})
		}
	}
	return out
}

// uniqueSettings returns the Spec fields that name q's unique key fields
// and states, with which a List filtered by payload finds the jobs of a key
// through the unique index.
func uniqueSettings(q *config.Queue) []setting {
	if q.Unique == nil || len(q.Unique.By) == 0 {
		return nil
	}
	return []setting{{"UniqueKeys", stringsExpr(q.Unique.By)}, {"UniqueStates", stringsExpr(q.Unique.States)}}
}

// stringsExpr writes ss as a Go []string literal.
func stringsExpr(ss []string) string {
	quoted := make([]string, len(ss))
	for i, s := range ss {
		quoted[i] = strconv.Quote(s)
	}
	return "[]string{" + strings.Join(quoted, ", ") + "}"
}

// setting is one field of a queue's Spec literal: its name and its value as
// a Go expression.
type setting struct{ name, value string }

// settingLines returns one line of "Name: value," pairs per group, leaving
// out zero values (the runtime's QueueSpec documents what zero means) and
// groups left empty.
func settingLines(groups ...[]setting) []string {
	var lines []string
	for _, g := range groups {
		var parts []string
		for _, s := range g {
			if s.value != `""` && s.value != "0" && s.value != "false" {
				parts = append(parts, s.name+": "+s.value+",")
			}
		}
		if len(parts) > 0 {
			lines = append(lines, strings.Join(parts, " "))
		}
	}
	return lines
}

// sharedByName returns the structs of types: by name.
func (g *gen) sharedByName() map[string]config.Struct {
	byName := make(map[string]config.Struct, len(g.cfg.Types))
	for _, s := range g.cfg.Types {
		byName[s.Name] = s
	}
	return byName
}

// sharedClosure returns the shared structs named in direct, plus every
// shared struct those use, transitively.
func (g *gen) sharedClosure(direct map[string]bool) map[string]bool {
	byName := g.sharedByName()
	seen := map[string]bool{}
	var visit func(name string)
	visit = func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		for _, f := range byName[name].Fields {
			for t := f.Type; t != nil; t = t.Elem {
				if t.Kind == config.KindShared {
					visit(t.Name)
				}
			}
		}
	}
	for name := range direct {
		visit(name)
	}
	return seen
}

// typesFile builds the model of the shared package's types.go.
func (g *gen) typesFile() templates.TypesFile {
	ids := []string{g.sharedPkg, "Migrate", "migrations"}
	for _, s := range g.cfg.Types {
		ids = append(ids, s.Name)
	}
	w := &typeWriter{im: newImports(ids...), external: g.external, shared: g.sharedByName()}
	structs := make([]templates.Struct, len(g.cfg.Types))
	for i, s := range g.cfg.Types {
		structs[i] = w.structOf(s.Name, s.Name+" is a payload type shared by the queues of "+g.cfg.Name+", declared under types: in skipjack.yaml.", s.Fields)
	}
	std, other := w.im.split()
	return templates.TypesFile{Package: g.sharedPkg, StdImports: std, OtherImports: other, Structs: structs}
}

// migrateFile builds the model of the shared package's migrate.go.
func (g *gen) migrateFile(plan *migrationPlan) templates.MigrateFile {
	f := templates.MigrateFile{Package: g.sharedPkg, Config: g.cfg.Name, Schema: g.cfg.Schema}
	for _, m := range plan.all {
		f.Migrations = append(f.Migrations, templates.Migration{Version: m.Version, Name: m.Name, Up: goString(m.Up)})
	}
	return f
}

// goString returns s as a Go string literal, raw when it can be.
func goString(s string) string {
	if !strings.Contains(s, "`") && !strings.Contains(s, "\r") {
		return "`" + s + "`"
	}
	return strconv.Quote(s)
}

// durationExpr returns d as a readable Go expression of package time.
func durationExpr(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	units := []struct {
		d    time.Duration
		name string
	}{
		{time.Hour, "time.Hour"}, {time.Minute, "time.Minute"}, {time.Second, "time.Second"},
		{time.Millisecond, "time.Millisecond"}, {time.Microsecond, "time.Microsecond"},
	}
	for _, u := range units {
		if d%u.d == 0 {
			if d == u.d {
				return u.name
			}
			return strconv.FormatInt(int64(d/u.d), 10) + " * " + u.name
		}
	}
	return strconv.FormatInt(int64(d), 10)
}
