package dashboard

import (
	"fmt"
	"unicode/utf8"
)

// The workflow graph's geometry, in SVG user units: a column per depth,
// left to right, a node per step.
const (
	nodeW, nodeH = 150.0, 44.0
	colGap       = 56.0
	rowGap       = 18.0
	graphPad     = 8.0
	// nodeLabelMax is how many characters of a step's name fit in a node.
	nodeLabelMax = 18
)

// workflowGraph is the model of a workflow page's SVG: its size, a node
// per step and an edge per after.
type workflowGraph struct {
	Width, Height float64
	Nodes         []graphNode
	Edges         []graphEdge
}

// graphNode is one step's box.
type graphNode struct {
	X, Y, W, H float64
	// Label is the step's name, shortened to fit; Name, State and URL
	// are its row's.
	Label, Name, State, URL string
}

// graphEdge is one arrow from an upstream step to a step after it, as an
// SVG path and the state of the upstream step (which colours it).
type graphEdge struct {
	D, From, To, State string
}

// layoutWorkflow places steps (upstream steps first, as
// WorkflowAdmin.Steps orders them) in columns by depth, the length of the
// longest chain of steps before them, and rows in declaration order, and
// draws an edge from each step to each step that runs after it.
func layoutWorkflow(steps []stepRow) workflowGraph {
	depth := make(map[string]int, len(steps))
	index := make(map[string]int, len(steps))
	rows := map[int]int{}
	var g workflowGraph
	maxRows, maxDepth := 0, 0
	for i, st := range steps {
		d := 0
		for _, a := range st.After {
			d = max(d, depth[a]+1)
		}
		depth[st.Name], index[st.Name] = d, i
		row := rows[d]
		rows[d]++
		maxRows, maxDepth = max(maxRows, rows[d]), max(maxDepth, d)
		label := st.Name
		if utf8.RuneCountInString(label) > nodeLabelMax {
			label = string([]rune(label)[:nodeLabelMax-1]) + "…"
		}
		g.Nodes = append(g.Nodes, graphNode{
			X: graphPad + float64(d)*(nodeW+colGap), Y: graphPad + float64(row)*(nodeH+rowGap), W: nodeW, H: nodeH,
			Label: label, Name: st.Name, State: st.State, URL: st.JobURL,
		})
	}
	for i, st := range steps {
		to := g.Nodes[i]
		for _, a := range st.After {
			j, ok := index[a]
			if !ok {
				continue
			}
			from := g.Nodes[j]
			x1, y1 := from.X+from.W, from.Y+from.H/2
			x2, y2 := to.X-2, to.Y+to.H/2
			mid := (x1 + x2) / 2
			g.Edges = append(g.Edges, graphEdge{
				D:    fmt.Sprintf("M%.1f %.1f C%.1f %.1f %.1f %.1f %.1f %.1f", x1, y1, mid, y1, mid, y2, x2, y2),
				From: a, To: st.Name, State: from.State,
			})
		}
	}
	if len(steps) > 0 {
		g.Width = 2*graphPad + float64(maxDepth+1)*nodeW + float64(maxDepth)*colGap
		g.Height = 2*graphPad + float64(maxRows)*nodeH + float64(maxRows-1)*rowGap
	}
	return g
}
