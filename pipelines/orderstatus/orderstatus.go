// Package orderstatus is the keep-last sample: order events (created →
// paid → shipped or cancelled) with identical resends and out-of-order
// delivery, counted per status. Counting the events per status counts one
// order in several statuses; keep-last by order_id in event time, then a
// count per status applied from its changelog (+1 on +I/+U, −1 on -U/-D),
// counts each order once, in its current status.
package orderstatus

import (
	"errors"
	"reflect"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// Event is one status event of an order. Op is empty on input; the
// keep-last step writes each output row's changelog kind into it.
type Event struct {
	Op      string    `json:"op,omitempty" beam:"op"`
	OrderID string    `json:"order_id" beam:"order_id"`
	Status  string    `json:"status" beam:"status"`
	TS      time.Time `json:"ts" beam:"ts"`
}

func init() { beam.RegisterType(reflect.TypeFor[Event]()) }

// Validate rejects events without the columns the pipeline needs.
func (e *Event) Validate() error {
	switch {
	case e.OrderID == "":
		return errors.New("missing order_id")
	case e.Status == "":
		return errors.New("missing status")
	case e.TS.IsZero():
		return errors.New("missing ts")
	}
	return nil
}
