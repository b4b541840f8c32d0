package rowspec

import (
	"fmt"

	"github.com/beamdedup/beamdedup/transforms/internal/option"
)

// Option configures every transform of beamdedup (dedup, changelog,
// pgsink; each package names it Option too). It is a role of the rows'
// columns (PartitionBy, KindColumn, OnTime, SequenceBy, Upsert, or a whole
// Spec), or a setting of one transform made by its package
// (dedup.StateTTL, pgsink.Table, ...), which another transform refuses.
// Options apply in order, a later one replacing what an earlier one set. A
// mistake in an option is a construction error that names it.
type Option interface{ apply(*settings) }

type settings struct {
	transform string // "dedup.KeepFirst", in errors
	spec      *Spec  // the roles
	cfg       any    // the transform's own config
	errs      []error
}

func (s *settings) fail(format string, args ...any) {
	s.errs = append(s.errs, fmt.Errorf(format, args...))
}

// column records a mistake when a role names the empty column.
func (s *settings) column(option, col string) string {
	if col == "" {
		s.fail(`%s(""): the column name is empty`, option)
	}
	return col
}

type role func(*settings)

func (r role) apply(s *settings) { r(s) }

type own struct {
	name string
	set  func(cfg any) bool // false: cfg is another transform's
}

func (o own) apply(s *settings) {
	if !o.set(s.cfg) {
		s.fail("%s is not an option of %s", o.name, s.transform)
	}
}

func init() {
	option.Install(func(name string, set func(any) bool) any { return own{name: name, set: set} },
		func(transform string, opts, spec, cfg any) []error {
			s := settings{transform: transform, spec: spec.(*Spec), cfg: cfg}
			list := opts.([]Option)
			for i, o := range list {
				if o == nil {
					s.fail("option %d of %d is nil", i+1, len(list))
					continue
				}
				o.apply(&s)
			}
			return s.errs
		})
}

// apply sets the roles s names; an empty role sets nothing.
func (s Spec) apply(st *settings) {
	if len(s.Key) > 0 {
		st.spec.Key = s.Key
	}
	if s.Kind != "" {
		st.spec.Kind = s.Kind
	}
	if s.OnTime != "" {
		st.spec.OnTime = s.OnTime
	}
	if s.SequenceBy != "" {
		st.spec.SequenceBy = s.SequenceBy
	}
	if s.Upsert {
		st.spec.Upsert = true
	}
}

// PartitionBy names the key columns (PARTITION BY, Spec.Key): a string,
// []byte, bool, integer, float or time.Time, or a pointer to one (nil is
// NULL; NULLs are equal). dedup keeps one row per key (without it, the
// whole input is one key); pgsink.Write needs it, the table's unique key;
// changelog.CountPerKey matches a key's retractions with its rows.
func PartitionBy(columns ...string) Option {
	return role(func(s *settings) {
		if len(columns) == 0 {
			s.fail("PartitionBy() needs at least one column; omit it for no key")
		}
		s.spec.Key = columns // an empty name, a name twice: the Spec's check
	})
}

// KindColumn names the column that holds each row's kind (Spec.Kind): a
// string ("+I", "-U", "+U", "-D"; "" reads as +I) or a rowkind.Kind; a
// row of another kind is a dead letter. dedup reads the input's kinds from
// it and writes the output's (KeepLast needs it unless Upsert is set;
// window dedup refuses it); changelog.CountPerKey needs it; pgsink.Write
// upserts +I/+U, skips -U and deletes (or tombstones) on -D.
func KindColumn(column string) Option {
	return role(func(s *settings) { s.spec.Kind = s.column("KindColumn", column) })
}

// OnTime names the event-time column (Spec.OnTime): a time.Time (compared
// to the microsecond) or int64 Unix milliseconds, or a pointer to one; a
// nil pointer or a zero time.Time makes the row a dead letter.
// dedup.KeepFirst keeps the earliest row and emits it once the watermark
// passes it; KeepLast and window dedup order a key's rows by it;
// pgsink.Write replaces a key's row only with one no older;
// changelog.CountPerKey ignores it.
func OnTime(column string) Option {
	return role(func(s *settings) { s.spec.OnTime = s.column("OnTime", column) })
}

// SequenceBy names the ordering column (Spec.SequenceBy): an integer, a
// float (NaN above every number), a time.Time (to the microsecond) or a
// string (byte order), or a pointer to one (a nil one makes the row a dead
// letter). It orders a key's rows before OnTime does; ties fall back to
// the event time, then to the encoded row. dedup.KeepLast and window dedup
// order by it, KeepFirst on bounded input only; pgsink.Write guards with
// it as with OnTime; changelog.CountPerKey ignores it.
func SequenceBy(column string) Option {
	return role(func(s *settings) { s.spec.SequenceBy = s.column("SequenceBy", column) })
}

// Upsert says the rows are upserts (Spec.Upsert): each replaces its key's
// row, with no -U rows. dedup.KeepLast then emits only each change's new
// row; pgsink.Write upserts every row (without Upsert and KindColumn it
// only inserts). The other transforms refuse it.
func Upsert() Option { return role(func(s *settings) { s.spec.Upsert = true }) }
