package unbounded

import (
	"fmt"
	"slices"
	"strings"
)

// Record is what the options of one transform call recorded; a package's
// config embeds it.
type Record struct {
	given []string
	errs  []error
}

// Set records that the option name was given.
func (r *Record) Set(name string) { r.given = append(r.given, name) }

// Errorf records a mistake of an option.
func (r *Record) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

// NilOption records the nil option i (0-based) of n.
func (r *Record) NilOption(i, n int) { r.Errorf("option %d of %d is nil", i+1, n) }

// Check returns the error of transform (its name in the message), which
// takes the options named in allowed: the transform's own errors (more,
// nils ignored), the options' mistakes, and every option it does not take,
// joined in one line; nil when there is none.
func (r *Record) Check(transform string, allowed []string, more ...error) error {
	for _, name := range r.given {
		if !slices.Contains(allowed, name) {
			r.Errorf("%s does not apply to %s (it takes %s)", name, transform, strings.Join(allowed, ", "))
		}
	}
	var msgs []string
	for _, err := range append(more, r.errs...) {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%s: %s", transform, strings.Join(msgs, "; "))
	}
	return nil
}
