// Package api lists the exported API of Go packages one feature per line,
// in the manner of the Go project's api/go1.*.txt files, so that a
// committed list shows what a change removes or alters.
//
// A feature is an exported constant (with its value), variable, function,
// type, struct field, or method in the method set of an exported type
// (promoted ones included). An interface is also listed as one line naming
// all its methods, so that adding a method, which breaks every
// implementation outside the package, changes a line rather than only
// adding one.
package api

import (
	"fmt"
	"go/types"
	"slices"
	"strings"

	"golang.org/x/tools/go/packages"
)

// Features loads the packages named by patterns from dir (with the go
// command's environment, so go.work applies) and returns the features of
// each, keyed by import path.
func Features(dir string, patterns ...string) (map[string][]string, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes, Dir: dir}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, err
	}
	var errs []string
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			errs = append(errs, e.Error())
		}
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("load %s:\n%s", strings.Join(patterns, " "), strings.Join(errs, "\n"))
	}
	out := map[string][]string{}
	for _, p := range pkgs {
		out[p.PkgPath] = List(p.Types)
	}
	return out, nil
}

// List returns the features of pkg, sorted.
func List(pkg *types.Package) []string {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Path()
	}
	str := func(t types.Type) string { return types.TypeString(t, qual) }
	sig := func(s *types.Signature) string { return strings.TrimPrefix(types.TypeString(s, qual), "func") }
	var fs []string
	add := func(format string, args ...any) { fs = append(fs, fmt.Sprintf(format, args...)) }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			add("const %s %s = %s", name, str(obj.Type()), obj.Val().ExactString())
		case *types.Var:
			add("var %s %s", name, str(obj.Type()))
		case *types.Func:
			add("func %s%s", name, sig(obj.Type().(*types.Signature)))
		case *types.TypeName:
			fs = append(fs, typeFeatures(obj, str, sig)...)
		}
	}
	slices.Sort(fs)
	return slices.Compact(fs)
}

// typeFeatures lists a type: its kind, its exported fields or interface
// methods, and the exported methods of T and *T.
func typeFeatures(obj *types.TypeName, str func(types.Type) string, sig func(*types.Signature) string) []string {
	name := obj.Name()
	if named, ok := obj.Type().(*types.Named); ok && named.TypeParams().Len() > 0 {
		var ps []string
		for i := range named.TypeParams().Len() {
			p := named.TypeParams().At(i)
			ps = append(ps, p.Obj().Name()+" "+str(p.Constraint()))
		}
		name += "[" + strings.Join(ps, ", ") + "]"
	}
	t := obj.Type()
	var fs []string
	if obj.IsAlias() {
		// What the alias names is the API: a generated queue's Job and
		// Worker are instances of the runtime's generic types.
		rhs := types.Unalias(t)
		if a, ok := t.(*types.Alias); ok {
			rhs = a.Rhs()
		}
		fs = append(fs, fmt.Sprintf("type %s = %s", name, str(rhs)))
		t = types.Unalias(t)
	}
	switch u := t.Underlying().(type) {
	case *types.Struct:
		if !obj.IsAlias() {
			fs = append(fs, fmt.Sprintf("type %s struct", name))
		}
		for i := range u.NumFields() {
			f := u.Field(i)
			switch {
			case f.Embedded():
				fs = append(fs, fmt.Sprintf("type %s struct, embedded %s", name, str(f.Type())))
			case f.Exported():
				fs = append(fs, fmt.Sprintf("type %s struct, %s %s", name, f.Name(), str(f.Type())))
			}
		}
	case *types.Interface:
		var ms []string
		for i := range u.NumMethods() {
			m := u.Method(i)
			if !m.Exported() {
				ms = append(ms, "unexported methods")
				continue
			}
			ms = append(ms, m.Name())
			fs = append(fs, fmt.Sprintf("type %s interface, %s%s", name, m.Name(), sig(m.Type().(*types.Signature))))
		}
		slices.Sort(ms)
		ms = slices.Compact(ms)
		if !u.IsMethodSet() {
			ms = append(ms, "type set "+str(u))
		}
		fs = append(fs, fmt.Sprintf("type %s interface { %s }", name, strings.Join(ms, ", ")))
		return fs // an interface's method set is its methods, listed above
	default:
		if !obj.IsAlias() {
			fs = append(fs, fmt.Sprintf("type %s %s", name, str(u)))
		}
	}
	if _, ok := t.(*types.Named); !ok {
		return fs // no methods
	}
	value := types.NewMethodSet(t)
	ptr := types.NewMethodSet(types.NewPointer(t))
	for i := range ptr.Len() {
		sel := ptr.At(i)
		m := sel.Obj()
		if !m.Exported() {
			continue
		}
		recv := "*" + obj.Name()
		if value.Lookup(m.Pkg(), m.Name()) != nil {
			recv = obj.Name()
		}
		fs = append(fs, fmt.Sprintf("method (%s) %s%s", recv, m.Name(), sig(sel.Type().(*types.Signature))))
	}
	return fs
}
