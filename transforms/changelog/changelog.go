// Package changelog defines the row kinds of an updating input: +I, -U, +U
// and -D, as in Flink's RowKind. A row's kind column may be a string holding
// one of those forms or a Kind (Column reads and writes it).
//
// CountPerKey applies a changelog to a count per group: the downstream half
// of keep-last deduplication, where a GROUP BY over dedup.KeepLast's -U/+U
// pairs counts each key once.
package changelog

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
	if k >= 0 && int(k) < len(kindStrings) {
		return kindStrings[k]
	}
	return fmt.Sprintf("Kind(%d)", int8(k))
}

// Valid reports whether k is one of the four kinds.
func (k Kind) Valid() bool { return k >= 0 && int(k) < len(kindStrings) }

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
