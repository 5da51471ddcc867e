package config

import (
	"fmt"
	"strings"
)

// Workflow is one entry of workflows: a DAG of steps, each step a job of a
// declared queue, started together and run in the order the steps' after
// lists give.
type Workflow struct {
	// Name is the workflow's name as written (fulfil_order).
	Name string
	// Package is the Go package name: Name without underscores.
	Package string
	// Steps are the workflow's steps in file order.
	Steps []Step
	// Pos is where the workflow's name is written.
	Pos Pos
}

// Step is one step of a workflow.
type Step struct {
	// Name is the step's name as written (charge); it names the step in
	// the database and in skipjack.WorkflowRecord.Steps.
	Name string
	// GoName is the exported Go field name of the step (Charge).
	GoName string
	// Queue is the name of the queue whose job the step is.
	Queue string
	// After are the steps that must complete before this one runs, in
	// the order written.
	After []string
	// RunOnUpstreamFailure says the step runs even when a step it waits
	// for fails for good or is cancelled (if_upstream_fails: run); by
	// default (cancel) such a step is cancelled.
	RunOnUpstreamFailure bool
	// Pos is where the step's name is written.
	Pos Pos
}

// UpstreamFailurePolicies are the values if_upstream_fails accepts.
var UpstreamFailurePolicies = []string{"cancel", "run"}

var (
	workflowKeys = []string{"steps"}
	stepKeys     = []string{"queue", "after", "if_upstream_fails"}
)

// workflows walks the workflows: section; queues are the queues already
// walked.
func (w *walker) workflows(e entry, queues []Queue) []Workflow {
	ps, _ := w.pairs(e.value, "workflows", "workflow")
	byName := make(map[string]*Queue, len(queues))
	var names []string
	packages := make(map[string]string, len(queues))
	for i := range queues {
		q := &queues[i]
		byName[q.Name] = q
		names = append(names, q.Name)
		packages[q.Package] = "queue " + q.Name
	}
	var out []Workflow
	for _, p := range ps {
		wf := Workflow{Name: p.key, Package: strings.ReplaceAll(p.key, "_", ""), Pos: pos(p.keyNode)}
		ok := true
		switch {
		case !queueName.MatchString(p.key):
			w.errorf(p.keyNode, "invalid workflow name %q: use lowercase letters, digits and underscores, starting with a letter, at most 40 bytes", p.key)
			ok = false
		case packageProblem(wf.Package) != "":
			w.errorf(p.keyNode, "workflow %q: package name %q %s", p.key, wf.Package, packageProblem(wf.Package))
			ok = false
		case packages[wf.Package] != "":
			w.errorf(p.keyNode, "workflow %q and %s both become package %s", p.key, packages[wf.Package], wf.Package)
			ok = false
		}
		packages[wf.Package] = "workflow " + p.key
		wf.Steps = w.steps(p, byName, names)
		if ok && len(wf.Steps) > 0 {
			out = append(out, wf)
		}
	}
	return out
}

// steps walks one workflow's steps: section.
func (w *walker) steps(p entry, queues map[string]*Queue, queueNames []string) []Step {
	s, _ := w.section(p.value, fmt.Sprintf("workflow %q", p.key), workflowKeys)
	e, ok := s["steps"]
	if !ok {
		w.errorf(p.keyNode, "workflow %q needs steps: at least one step such as {charge: {queue: charge_card}}", p.key)
		return nil
	}
	ps, _ := w.pairs(e.value, "steps", "step")
	if len(ps) == 0 {
		w.errorf(e.keyNode, "workflow %q must declare at least one step", p.key)
		return nil
	}
	var stepNames []string
	goNames := make(map[string]string)
	for _, sp := range ps {
		stepNames = append(stepNames, sp.key)
	}
	var steps []Step
	afterNodes := make(map[string][]item)
	valid := true
	for _, sp := range ps {
		st := Step{Name: sp.key, GoName: GoName(sp.key), Pos: pos(sp.keyNode)}
		if !fieldKey.MatchString(sp.key) || len(sp.key) > 63 {
			w.errorf(sp.keyNode, "invalid step name %q: use lowercase letters, digits and underscores, starting with a letter", sp.key)
			valid = false
		} else if prev, dup := goNames[st.GoName]; dup {
			w.errorf(sp.keyNode, "step %q and step %q both become the Go field %s", sp.key, prev, st.GoName)
			valid = false
		} else {
			goNames[st.GoName] = sp.key
		}
		ss, _ := w.section(sp.value, fmt.Sprintf("step %q", sp.key), stepKeys)
		if q, has := ss["queue"]; !has {
			w.errorf(sp.keyNode, "step %q needs queue: the queue whose job the step is", sp.key)
			valid = false
		} else if name, isStr := w.str(q); !isStr {
			valid = false
		} else if qq, declared := queues[name]; !declared {
			w.errorf(q.value, "unknown queue %q%s", name, didYouMean(name, queueNames))
			valid = false
		} else if len(qq.Schedule) > 0 {
			w.errorf(q.value, "queue %q has a schedule and cannot be a workflow step: its periodic jobs would look like steps; declare a queue without schedule for the step", name)
			valid = false
		} else {
			st.Queue = name
		}
		if a, has := ss["after"]; has {
			items, listOK := w.stringList(a, "[charge]")
			valid = valid && listOK
			seen := make(map[string]bool)
			for _, it := range items {
				switch {
				case it.value == sp.key:
					w.errorf(it.node, "step %q cannot run after itself", sp.key)
					valid = false
				case !contains(stepNames, it.value):
					w.errorf(it.node, "unknown step %q in after%s", it.value, didYouMean(it.value, stepNames))
					valid = false
				case seen[it.value]:
					w.errorf(it.node, "step %q is listed twice in after", it.value)
					valid = false
				default:
					seen[it.value] = true
					st.After = append(st.After, it.value)
					afterNodes[sp.key] = append(afterNodes[sp.key], it)
				}
			}
		}
		if f, has := ss["if_upstream_fails"]; has {
			if v, isStr := w.str(f); isStr {
				switch v {
				case "cancel":
				case "run":
					st.RunOnUpstreamFailure = true
				default:
					w.errorf(f.value, "unknown if_upstream_fails %q: use cancel or run%s", v, didYouMean(v, UpstreamFailurePolicies))
					valid = false
				}
			}
			if _, hasAfter := ss["after"]; !hasAfter {
				w.errorf(f.keyNode, "step %q has if_upstream_fails but no after: it has no upstream step", sp.key)
				valid = false
			}
		}
		steps = append(steps, st)
	}
	if !w.checkStepCycles(steps, afterNodes) {
		valid = false
	}
	if !valid {
		return nil
	}
	return steps
}

// checkStepCycles reports every after entry that closes a cycle, at the
// entry, and reports whether there was none.
func (w *walker) checkStepCycles(steps []Step, afterNodes map[string][]item) bool {
	const (
		unvisited = iota
		visiting
		done
	)
	mark := make(map[string]int, len(steps))
	acyclic := true
	var visit func(name string, path []string)
	visit = func(name string, path []string) {
		mark[name] = visiting
		path = append(path, name)
		for _, it := range afterNodes[name] {
			switch mark[it.value] {
			case visiting:
				start := 0
				for i, n := range path {
					if n == it.value {
						start = i
					}
				}
				cycle := append(append([]string{}, path[start:]...), it.value)
				w.errorf(it.node, "steps form a cycle: %s", strings.Join(cycle, " after "))
				acyclic = false
			case unvisited:
				visit(it.value, path)
			}
		}
		mark[name] = done
	}
	for _, st := range steps {
		if mark[st.Name] == unvisited {
			visit(st.Name, nil)
		}
	}
	return acyclic
}

// workflowSchema returns the JSON Schema of one workflow.
func workflowSchema() obj {
	return obj{
		"type": "object", "additionalProperties": false, "required": []string{"steps"},
		"properties": obj{
			"steps": obj{
				"type":          "object",
				"minProperties": 1,
				"description":   "The workflow's steps: step name -> its queue and the steps it runs after.",
				"propertyNames": obj{"pattern": fieldKey.String()},
				"additionalProperties": obj{
					"type": "object", "additionalProperties": false, "required": []string{"queue"},
					"properties": obj{
						"queue":             obj{"type": "string", "pattern": queueName.String(), "description": "The queue whose job the step is (a queue without schedule)."},
						"after":             obj{"type": "array", "uniqueItems": true, "items": obj{"type": "string", "pattern": fieldKey.String()}, "description": "Steps that must complete before this one runs."},
						"if_upstream_fails": obj{"enum": anyList(UpstreamFailurePolicies), "default": UpstreamFailurePolicies[0], "description": "cancel: the step is cancelled when a step it runs after fails for good or is cancelled; run: it runs anyway."},
					},
				},
			},
		},
	}
}
