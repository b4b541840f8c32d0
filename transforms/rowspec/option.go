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

// PartitionBy names the key columns (PARTITION BY, Spec.Key): rows with
// equal values in all of them are one key. A column is a string, []byte,
// bool, integer, float or time.Time, or a pointer to one; a nil pointer is
// NULL, and NULLs are equal to each other (GROUP BY semantics).
//
// dedup keeps one row per key; without PartitionBy the whole input is one
// key, which runs on one worker (dedup.PartitionByAll keys by every
// column). pgsink.Write needs it: the table's unique key, the ON CONFLICT
// target (a nullable key column needs UNIQUE NULLS NOT DISTINCT).
// changelog.CountPerKey, given it, matches each key's retractions with the
// key's own rows on bounded input.
func PartitionBy(columns ...string) Option {
	return role(func(s *settings) {
		if len(columns) == 0 {
			s.fail("PartitionBy() needs at least one column; omit it for no key")
		}
		s.spec.Key = columns // an empty name, a name twice: the Spec's check
	})
}

// KindColumn names the column that holds each row's kind (Spec.Kind): a
// string ("+I", "-U", "+U", "-D"; "" reads as +I) or a rowkind.Kind. A row
// of any other kind is a dead letter.
//
// dedup reads the input's kinds from it (the input may be a changelog) and
// writes the output's into it: KeepFirst emits a key's first +I/+U as +I,
// KeepLast writes +I, -U, +U and -D, and needs it unless Upsert is set;
// window dedup refuses it (insert-only input). changelog.CountPerKey needs
// it: +I/+U add one, -U/-D take one away. pgsink.Write upserts +I/+U rows,
// skips -U and deletes the key of a -D (or writes a tombstone); the column
// is not written to the table.
func KindColumn(column string) Option {
	return role(func(s *settings) { s.spec.Kind = s.column("KindColumn", column) })
}

// OnTime names the event-time column (Spec.OnTime): a time.Time or int64
// Unix milliseconds, or a pointer to one. Rows compare by its value at the
// column's precision: a time.Time to the microsecond (what a PostgreSQL
// timestamp keeps; nanoseconds within a microsecond tie), an int64 to the
// millisecond. A nil pointer, or a zero time.Time, is no event time: the
// row is a dead letter.
//
// dedup.KeepFirst keeps the row with the earliest event time and emits it
// once the watermark passes it (event-time mode); the row's timestamp is
// set from the column. KeepLast and window dedup order a key's rows by it.
// pgsink.Write guards each write with it: a row replaces its key's row
// only if it is no older. changelog.CountPerKey needs no order and ignores
// it.
func OnTime(column string) Option {
	return role(func(s *settings) { s.spec.OnTime = s.column("OnTime", column) })
}

// SequenceBy names the ordering column (Spec.SequenceBy): a signed or
// unsigned integer, a float (-0 equals 0; NaN is larger than every
// number), a time.Time (to the microsecond, as OnTime) or a string (byte
// order), or a pointer to one; a nil pointer is NULL, and such a row is a
// dead letter. It orders a key's rows before OnTime does: the largest
// value is the last, the smallest the first; ties fall back to the event
// time, then to the encoded row, so a rerun keeps the same rows.
//
// dedup.KeepLast and window dedup order a key's rows by it; KeepFirst
// takes it only where a key's rows are all seen before output (bounded
// input; on a stream use OnTime). pgsink.Write guards each write with it,
// as with OnTime. changelog.CountPerKey ignores it.
func SequenceBy(column string) Option {
	return role(func(s *settings) { s.spec.SequenceBy = s.column("SequenceBy", column) })
}

// Upsert says the rows are upserts (Spec.Upsert): each replaces its key's
// row, and there are no -U rows. dedup.KeepLast then emits only the new
// row of each change (+I for a key's first, +U after), for a sink that
// upserts by the key; deletes (-D) still need a KindColumn. pgsink.Write
// upserts every row (with KindColumn, every +I/+U row); without Upsert
// and KindColumn it only inserts, and a key's first row stands. The other
// transforms refuse it.
func Upsert() Option { return role(func(s *settings) { s.spec.Upsert = true }) }
