package generator

import (
	"fmt"

	"github.com/skipjack-dev/skipjack/generator/config"
)

// diagnostics collects the positioned errors of one run, so that every
// problem is reported together.
type diagnostics struct {
	file string
	errs config.Errors
}

func (d *diagnostics) add(pos config.Pos, msg string) {
	d.errs = append(d.errs, config.Error{File: d.file, Line: pos.Line, Col: pos.Col, Msg: msg})
}

func (d *diagnostics) addf(pos config.Pos, format string, args ...any) {
	d.add(pos, fmt.Sprintf(format, args...))
}

// err returns the collected errors, or nil when there are none.
func (d *diagnostics) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	return d.errs
}
