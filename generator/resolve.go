package generator

import (
	"fmt"
	"go/ast"
	"sort"
	"strings"

	"golang.org/x/tools/go/packages"

	"github.com/skipjack-dev/skipjack/generator/config"
)

// externalUse is one place where the YAML names an external Go type.
type externalUse struct {
	expr *config.TypeExpr
	pos  config.Pos
}

// external is a resolved external package.
type external struct {
	// Name is the package's declared name.
	Name string
}

// resolveExternal checks every import/path.Type of cfg with one batched
// packages.Load, run in the config's folder so the user's go.mod decides
// versions. It reads declarations from source without type-checking, so a
// package that imports the (possibly stale) generated code does not make
// generation impossible.
func resolveExternal(cfg *config.Config, errs *diagnostics) map[string]external {
	uses := collectExternal(cfg)
	if len(uses) == 0 {
		return nil
	}
	paths := map[string]bool{}
	for _, u := range uses {
		paths[u.expr.ImportPath] = true
	}
	list := make([]string, 0, len(paths))
	for p := range paths {
		list = append(list, p)
	}
	sort.Strings(list)

	pkgs, err := packages.Load(&packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedModule,
		Dir:  cfg.Dir,
		// Generated packages under out may not compile while they are
		// regenerated; nothing here needs types.
		Tests: false,
	}, list...)
	if err != nil {
		errs.add(uses[0].pos, fmt.Sprintf("load Go packages: %v", err))
		return nil
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		byPath[p.PkgPath] = p
	}
	resolved := map[string]external{}
	for _, u := range uses {
		p := byPath[u.expr.ImportPath]
		if msg := packageProblem(u.expr.ImportPath, p); msg != "" {
			errs.add(u.pos, msg)
			continue
		}
		if !declaresType(p, u.expr.Name) {
			errs.add(u.pos, fmt.Sprintf("package %s has no exported type %s", u.expr.ImportPath, u.expr.Name))
			continue
		}
		resolved[u.expr.ImportPath] = external{Name: p.Name}
	}
	return resolved
}

// packageProblem explains why p cannot be used, or returns "".
func packageProblem(path string, p *packages.Package) string {
	if p == nil {
		return fmt.Sprintf("package %s not found; run: go get %s", path, path)
	}
	if len(p.GoFiles) > 0 || len(p.Syntax) > 0 {
		return ""
	}
	for _, e := range p.Errors {
		msg := e.Msg
		if strings.Contains(msg, "no required module provides package") || strings.Contains(msg, "cannot find module") ||
			strings.Contains(msg, "is not in std") || strings.Contains(msg, "missing go.sum entry") {
			return fmt.Sprintf("package %s is not in any module this project requires; run: go get %s", path, path)
		}
	}
	if len(p.Errors) > 0 {
		return fmt.Sprintf("package %s: %s", path, p.Errors[0].Msg)
	}
	return fmt.Sprintf("package %s has no Go files", path)
}

// declaresType reports whether p declares the exported type name at top
// level.
func declaresType(p *packages.Package, name string) bool {
	if !ast.IsExported(name) {
		return false
	}
	for _, f := range p.Syntax {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, s := range g.Specs {
				if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == name {
					return true
				}
			}
		}
	}
	return false
}

// collectExternal returns every external type use of cfg in file order.
func collectExternal(cfg *config.Config) []externalUse {
	var uses []externalUse
	visit := func(fields []config.Field) {
		for _, f := range fields {
			for t := f.Type; t != nil; t = t.Elem {
				if t.Kind == config.KindExternal {
					uses = append(uses, externalUse{expr: t, pos: f.Pos})
				}
			}
		}
	}
	for _, s := range cfg.Types {
		visit(s.Fields)
	}
	for _, q := range cfg.Queues {
		visit(q.Payload)
	}
	return uses
}
