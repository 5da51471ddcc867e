package generator

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strings"
)

// documentSQLC gives every exported declaration of a file sqlc generated a
// doc comment (sqlc writes them only for queries with SQL comments) and
// spells interface{} as any, so the generated tree reads like the rest of
// the project.
func documentSQLC(name string, src []byte) ([]byte, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
	if err != nil {
		return nil, fmt.Errorf("parse sqlc output %s: %w", name, err)
	}
	type insertion struct {
		offset int
		text   string
	}
	var ins []insertion
	add := func(pos token.Pos, doc string) {
		ins = append(ins, insertion{fset.Position(pos).Offset, "// " + doc + "\n"})
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Doc == nil && d.Name.IsExported() {
				add(d.Pos(), funcDoc(d))
			}
		case *ast.GenDecl:
			if d.Doc != nil || d.Tok != token.TYPE || len(d.Specs) != 1 {
				continue
			}
			if ts := d.Specs[0].(*ast.TypeSpec); ts.Name.IsExported() {
				add(d.Pos(), typeDoc(ts.Name.Name))
			}
		}
	}
	sort.Slice(ins, func(i, j int) bool { return ins[i].offset > ins[j].offset })
	out := append([]byte(nil), src...)
	for _, in := range ins {
		out = append(out[:in.offset], append([]byte(in.text), out[in.offset:]...)...)
	}
	return bytes.ReplaceAll(out, []byte("interface{}"), []byte("any")), nil
}

func funcDoc(d *ast.FuncDecl) string {
	name := d.Name.Name
	switch {
	case d.Recv == nil && name == "New":
		return "New returns the queries of this queue, run on db."
	case name == "WithTx":
		return "WithTx returns the same queries, run in tx."
	case d.Recv != nil && name == "Next":
		return "Next advances to the next row to copy and reports whether there is one."
	case d.Recv != nil && name == "Values":
		return "Values returns the current row's column values."
	case d.Recv != nil && name == "Err":
		return "Err returns the error that ended the iteration, if any."
	default:
		return name + " runs the " + name + " statement of queries.sql."
	}
}

func typeDoc(name string) string {
	switch {
	case name == "DBTX":
		return "DBTX is what Queries run on: a pool, a connection or a transaction."
	case name == "Queries":
		return "Queries runs the statements of queries.sql."
	case strings.HasSuffix(name, "Params"):
		return name + " holds the parameters of " + strings.TrimSuffix(name, "Params") + "."
	case strings.HasSuffix(name, "Row"):
		return name + " is one row returned by " + strings.TrimSuffix(name, "Row") + "."
	default:
		return name + " is a row of the queue table."
	}
}
