// Package rowkind is the change kind of a row in an updating input or a
// changelog: +I, -U, +U and -D, as in Flink's RowKind. Every transform of
// beamdedup reads and writes kinds through it: dedup's rules (dedup/core),
// KeepLast's output kind column and changelog.CountPerKey. It has no Beam
// imports.
//
// A row's kind column is a string holding one of the four forms, or a Kind;
// rowspec.KindColumn names it.
package rowkind

import "fmt"

// Kind is the change kind of a row. Its zero value is Insert, so a row type
// that never sets its kind column is insert-only.
type Kind int8

// The kinds of a changelog.
const (
	Insert       Kind = iota // +I: a new row
	UpdateBefore             // -U: retracts the old value of an update
	UpdateAfter              // +U: the new value of an update
	Delete                   // -D: a deletion
)

var kindStrings = [...]string{"+I", "-U", "+U", "-D"}

// String returns "+I", "-U", "+U" or "-D".
func (k Kind) String() string {
	if k.Valid() {
		return kindStrings[k]
	}
	return fmt.Sprintf("Kind(%d)", int8(k))
}

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool { return k >= 0 && int(k) < len(kindStrings) }

// IsRetraction reports whether the kind is -U or -D: a row that takes an
// earlier one back rather than adding one.
func (k Kind) IsRetraction() bool { return k == UpdateBefore || k == Delete }

// Parse reads "+I", "-U", "+U" or "-D". Anything else is an error that
// names the accepted forms.
func Parse(s string) (Kind, error) {
	for i, ks := range kindStrings {
		if s == ks {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown row kind %q: want one of +I, -U, +U, -D", s)
}
