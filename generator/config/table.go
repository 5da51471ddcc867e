package config

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// paramKind is the value type of a storage parameter.
type paramKind int

const (
	paramInt paramKind = iota
	paramReal
	paramBool
	paramEnum
)

// paramSpec is the type and range of a storage parameter, as Postgres
// checks them (reloptions.c).
type paramSpec struct {
	kind     paramKind
	min, max float64
	values   []string // for paramEnum
}

// storageParams are the table storage parameters a queue may set.
var storageParams = map[string]paramSpec{
	"fillfactor":                            {kind: paramInt, min: 10, max: 100},
	"toast_tuple_target":                    {kind: paramInt, min: 128, max: 8160},
	"parallel_workers":                      {kind: paramInt, min: 0, max: 1024},
	"autovacuum_enabled":                    {kind: paramBool},
	"vacuum_index_cleanup":                  {kind: paramEnum, values: []string{"auto", "on", "off"}},
	"vacuum_truncate":                       {kind: paramBool},
	"autovacuum_vacuum_threshold":           {kind: paramInt, min: 0, max: math.MaxInt32},
	"autovacuum_vacuum_max_threshold":       {kind: paramInt, min: -1, max: math.MaxInt32},
	"autovacuum_vacuum_scale_factor":        {kind: paramReal, min: 0, max: 100},
	"autovacuum_vacuum_insert_threshold":    {kind: paramInt, min: -1, max: math.MaxInt32},
	"autovacuum_vacuum_insert_scale_factor": {kind: paramReal, min: 0, max: 100},
	"autovacuum_analyze_threshold":          {kind: paramInt, min: 0, max: math.MaxInt32},
	"autovacuum_analyze_scale_factor":       {kind: paramReal, min: 0, max: 100},
	"autovacuum_vacuum_cost_delay":          {kind: paramReal, min: 0, max: 100},
	"autovacuum_vacuum_cost_limit":          {kind: paramInt, min: 1, max: 10000},
	"autovacuum_freeze_min_age":             {kind: paramInt, min: 0, max: 1000000000},
	"autovacuum_freeze_max_age":             {kind: paramInt, min: 100000, max: 2000000000},
	"autovacuum_freeze_table_age":           {kind: paramInt, min: 0, max: 2000000000},
	"autovacuum_multixact_freeze_min_age":   {kind: paramInt, min: 0, max: 1000000000},
	"autovacuum_multixact_freeze_max_age":   {kind: paramInt, min: 10000, max: 2000000000},
	"autovacuum_multixact_freeze_table_age": {kind: paramInt, min: 0, max: 2000000000},
	"log_autovacuum_min_duration":           {kind: paramInt, min: -1, max: math.MaxInt32},
}

// storageParamNames are the keys of storageParams, sorted, for "did you
// mean".
var storageParamNames = func() []string {
	names := make([]string, 0, len(storageParams))
	for name := range storageParams {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}()

// table walks a queue's table: section.
func (w *walker) table(n *yaml.Node) []StorageParam {
	ps, _ := w.pairs(n, "table", "storage parameter")
	var out []StorageParam
	for _, p := range ps {
		spec, ok := storageParams[p.key]
		if !ok {
			w.errorf(p.keyNode, "unknown storage parameter %q%s", p.key, didYouMean(p.key, storageParamNames))
			continue
		}
		value, ok := w.paramValue(p, spec)
		if !ok {
			continue
		}
		out = append(out, StorageParam{Name: p.key, Value: value, Pos: pos(p.keyNode)})
	}
	return out
}

// paramValue checks a storage parameter's value and renders it as SQL.
func (w *walker) paramValue(p entry, spec paramSpec) (string, bool) {
	switch spec.kind {
	case paramBool:
		b, ok := w.boolean(p)
		return strconv.FormatBool(b), ok
	case paramEnum:
		if p.value.Kind == yaml.ScalarNode && p.value.ShortTag() == "!!bool" {
			b, ok := w.boolean(p)
			return strconv.FormatBool(b), ok
		}
		s, ok := w.str(p)
		if !ok {
			return "", false
		}
		if !slices.Contains(spec.values, s) {
			w.errorf(p.value, "%s must be one of %s, not %q", p.key, strings.Join(spec.values, ", "), s)
			return "", false
		}
		return "'" + s + "'", true
	}
	var f float64
	if spec.kind == paramInt {
		n, ok := w.integer(p)
		if !ok {
			return "", false
		}
		f = float64(n)
	} else {
		var ok bool
		if f, ok = w.number(p); !ok {
			return "", false
		}
	}
	if f < spec.min || f > spec.max {
		w.errorf(p.value, "%s must be between %s and %s", p.key, formatNum(spec.min), formatNum(spec.max))
		return "", false
	}
	return formatNum(f), true
}

// formatNum renders f as a SQL numeric literal without an exponent.
func formatNum(f float64) string {
	return strconv.FormatFloat(f, 'f', -1, 64)
}
