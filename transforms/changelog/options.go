package changelog

import (
	"errors"
	"fmt"

	"github.com/beamdedup/beamdedup/internal/rowcol"
	"github.com/beamdedup/beamdedup/transforms/internal/option"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// Option configures CountPerKey: the rows' roles (rowspec.KindColumn,
// rowspec.PartitionBy, or a rowspec.Spec) and this package's settings.
type Option = rowspec.Option

// config is what CountPerKey's options set.
type config struct {
	kindCol string
	key     []string // the rows' key (rowspec.PartitionBy): bounded input matches a key's retractions with its rows
	groupBy []string
	uid     string
	stream  bool // AsStream
	errs    []error
}

func own(name string, set func(*config)) Option {
	return option.Own("changelog."+name, set).(Option)
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// newConfig applies opts and reports every mistake at once.
func newConfig(opts []Option) (config, error) {
	c := config{uid: "CountPerKey"}
	var roles rowspec.Spec
	errs := option.Apply("changelog.CountPerKey", opts, &roles, &c)
	if err := rowcol.Err(roles); err != nil {
		errs = append(errs, err)
	}
	if roles.Upsert {
		errs = append(errs, errors.New("the rows are upserts (rowspec.Upsert), which retract nothing, and a count applies a changelog's retractions: count KeepLast's changelog (a KindColumn, without Upsert)"))
	}
	c.kindCol, c.key = roles.Kind, roles.Key
	return c, errors.Join(append(errs, c.errs...)...)
}

// GroupBy names the columns whose values form the group (types as for
// rowspec.PartitionBy). Without it every row counts towards one group, "".
func GroupBy(cols ...string) Option {
	return own("GroupBy", func(c *config) {
		if len(cols) == 0 {
			c.fail("GroupBy() needs at least one column; omit it for one group")
		}
		for _, col := range cols {
			if col == "" {
				c.fail("GroupBy(%q): a column name is empty", cols)
				break
			}
		}
		c.groupBy = append([]string(nil), cols...)
	})
}

// UID names the transform's scope, and with it its state (default
// "CountPerKey"), and tells its counters apart (CountersOf).
func UID(uid string) Option {
	return own("UID", func(c *config) {
		if uid == "" {
			c.fail(`UID(""): the UID is empty; omit UID for the default name`)
		}
		c.uid = uid
	})
}

// AsStream counts bounded input as a stream is counted: a count per
// group emitted every time it changes, rather than one total at the end.
func AsStream() Option { return own("AsStream", func(c *config) { c.stream = true }) }
