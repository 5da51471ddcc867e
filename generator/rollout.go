package generator

import (
	"fmt"
	"slices"

	"github.com/skipjack-dev/skipjack/generator/config"
	"github.com/skipjack-dev/skipjack/schema"
)

// rolloutNote is one change that generate rolls out in steps: what to do,
// in which order, positioned at the queue in the YAML.
type rolloutNote struct {
	pos config.Pos
	msg string
}

// settleSerial returns want with the serial keys marked that must expand
// before they contract (schema.Serial.Expanding), and what to do about
// them. A serial key added to, or changed on, a table that an earlier
// migration created is live code's table: the previous release's workers
// claim it without knowing the key, so a unique index of running keys would
// fail their claims whenever two jobs of one key are running. Such a key
// expands: its migration builds only the index claims look predecessors up
// in, and the new code's claims take turns under the queue's advisory lock
// (exact among themselves without the unique index). It stays expanding in
// every later state until contract is set, when the migration builds the
// unique index (after checking that no running jobs share a key) and the
// code regenerated with it claims without turns.
func settleSerial(cfg *config.Config, last *state, want state, contract bool) (state, []rolloutNote) {
	prev := last.tablesByName()
	pos := map[string]config.Pos{}
	for _, q := range cfg.Queues {
		pos[q.Name] = q.Pos
		if q.Serial != nil {
			pos[q.Name] = q.Serial.Pos
		}
	}
	var notes []rolloutNote
	out := want
	out.Tables = make([]schema.Table, len(want.Tables))
	for i, t := range want.Tables {
		out.Tables[i] = t
		old, live := prev[t.Name]
		if t.Serial == nil || !live {
			continue
		}
		s := *t.Serial
		switch {
		case old.Serial == nil || !slices.Equal(old.Serial.Keys, s.Keys):
			s.Expanding = true
			notes = append(notes, rolloutNote{pos[t.Name], fmt.Sprintf(
				"queue %s: serial key rolled out in two steps: (1) now: migrate, then deploy; until step 2 the new code's claims take turns "+
					"and keep the key exact among themselves, while workers of the previous release may still run jobs of one key at once; "+
					"(2) once no worker of the previous release runs: skipjack generate --contract, migrate, deploy", t.Name)})
		case old.Serial.Expanding && contract:
			notes = append(notes, rolloutNote{pos[t.Name], fmt.Sprintf(
				"queue %s: contract step of its serial key: migrate (builds the unique index of running keys), then deploy", t.Name)})
		case old.Serial.Expanding:
			s.Expanding = true
		}
		out.Tables[i].Serial = &s
	}
	return out, notes
}

// settlePriority returns want with the tables marked whose claim index
// must expand before it contracts (schema.Table.PriorityExpanding), and
// what to do about them. Turning priority on or off changes the columns
// the claim orders by: on a table that an earlier migration created, the
// previous release's workers keep claiming with the old order, which
// without its index reads and sorts every pending job to take a few (and
// loses the jobs to the new code's claims, which take them straight from
// their index). So the old index stays beside the new one until contract
// is set. Changing priority again before that contract step would leave
// three releases' claims on two indexes: it is refused, positioned at the
// queue, unless contract is set too.
func settlePriority(cfg *config.Config, last *state, want state, contract bool) (state, []rolloutNote, error) {
	prev := last.tablesByName()
	pos := map[string]config.Pos{}
	for _, q := range cfg.Queues {
		pos[q.Name] = q.Pos
	}
	diags := diagnostics{file: cfg.Path}
	var notes []rolloutNote
	out := want
	out.Tables = slices.Clone(want.Tables)
	for i, t := range out.Tables {
		old, live := prev[t.Name]
		if !live {
			continue
		}
		switch {
		case old.Priority != t.Priority && old.PriorityExpanding && !contract:
			diags.addf(pos[t.Name], "queue %s: priority changed again before the contract step of its last change: "+
				"once no worker of the release before that change runs, run skipjack generate --contract (with this change, or before it)", t.Name)
		case old.Priority != t.Priority:
			out.Tables[i].PriorityExpanding = true
			notes = append(notes, rolloutNote{pos[t.Name], fmt.Sprintf(
				"queue %s: priority rolled out in two steps: (1) now: migrate, then deploy; the claim index of the previous setting stays "+
					"for the previous release's claims; (2) once no worker of the previous release runs: skipjack generate --contract, migrate "+
					"(drops that index)", t.Name)})
		case old.PriorityExpanding && contract:
			notes = append(notes, rolloutNote{pos[t.Name], fmt.Sprintf(
				"queue %s: contract step of its priority change: migrate (drops the claim index of the previous setting)", t.Name)})
		case old.PriorityExpanding:
			out.Tables[i].PriorityExpanding = true
		}
	}
	if err := diags.err(); err != nil {
		return want, nil, err
	}
	return out, notes, nil
}

// tablesByName returns the tables of s by name; none when s is nil (no
// migration recorded a state yet).
func (s *state) tablesByName() map[string]schema.Table {
	out := map[string]schema.Table{}
	if s != nil {
		for _, t := range s.Tables {
			out[t.Name] = t
		}
	}
	return out
}

// dropNotes says, for every queue whose table an earlier migration created
// and the YAML now drops, that the release before must no longer use it:
// the previous release's workers and producers would fail every claim and
// enqueue once the table is gone, so dropping takes two releases.
func dropNotes(cfg *config.Config, last *state) []rolloutNote {
	if last == nil {
		return nil
	}
	live := map[string]bool{}
	for _, t := range last.Tables {
		live[t.Name] = true
	}
	var notes []rolloutNote
	for _, q := range cfg.Queues {
		if q.Dropped && live[q.Name] {
			notes = append(notes, rolloutNote{q.Pos, fmt.Sprintf(
				"queue %s: its table is dropped by the new migration; apply it only once no running release enqueues to or works the queue "+
					"(first deploy a release that no longer uses it and let the queue drain)", q.Name)})
		}
	}
	return notes
}

// notes returns the rollout notes positioned in cfg's file.
func notes(cfg *config.Config, ns []rolloutNote) config.Errors {
	var out config.Errors
	for _, n := range ns {
		out = append(out, config.Error{File: cfg.Path, Line: n.pos.Line, Col: n.pos.Col, Msg: n.msg})
	}
	return out
}
