// Package deadletter is the one dead-letter type of beamdedup's transforms:
// a row that a transform could not process, or a sink could not write, with
// the reason and the transform that refused it. Every transform that refuses
// rows returns them as a PCollection of DeadLetter instead of failing the
// job or dropping them silently.
package deadletter

import (
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"github.com/beamdedup/beamdedup/transforms/internal/rowjson"
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

// New is the dead letter of row, refused by transform for reason. A
// struct row is written as a JSON object of its columns, under the names
// the transforms' options use (a field's `beam:"name"` tag, else its
// name), in field order; another value as encoding/json writes it; and a
// row JSON cannot represent with %+v.
func New(transform string, row any, reason string) DeadLetter {
	return DeadLetter{Row: rowjson.Row(row), Reason: reason, Transform: transform}
}
