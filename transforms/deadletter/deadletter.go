// Package deadletter is the one dead-letter type of beamdedup's transforms:
// a row that a transform could not process, or a sink could not write, with
// the reason and the transform that refused it. Every transform that refuses
// rows returns them as a PCollection of DeadLetter instead of failing the
// job or dropping them silently.
package deadletter

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

func init() {
	beam.RegisterType(reflect.TypeFor[DeadLetter]())
	register.Emitter1[DeadLetter]()
}

// DeadLetter is a row a transform refused, with the reason.
type DeadLetter struct {
	Row       string `beam:"row" json:"row"`             // the row as JSON
	Reason    string `beam:"reason" json:"reason"`       // why it was refused
	Transform string `beam:"transform" json:"transform"` // the UID (scope name) of the transform that refused it
}

// New is the dead letter of row, refused by transform for reason. The row
// is written as JSON; a row that JSON cannot represent is written with %+v.
func New(transform string, row any, reason string) DeadLetter {
	return DeadLetter{Row: RowJSON(row), Reason: reason, Transform: transform}
}

// RowJSON is row as a dead letter writes it: JSON, or %+v for a row that
// JSON cannot represent.
func RowJSON(row any) string {
	b, err := json.Marshal(row)
	if err != nil {
		return fmt.Sprintf("%+v", row)
	}
	return string(b)
}
