package orders

import (
	"encoding/binary"
	"errors"
	"math"
	"reflect"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
)

// Order's Beam coder. Without one, Beam encodes an Order as a schema row,
// through reflection and with created_at as RFC 3339 text, for every row
// that crosses a stage. This one writes order_id (uvarint length, bytes),
// quantity (varint), price (IEEE bits, 8 bytes big-endian) and created_at
// (time.Time.MarshalBinary, uvarint length first); a runner sees opaque
// bytes and carries them without decoding.
func init() {
	register.Function1x1(encodeOrder)
	register.Function1x2(decodeOrder)
	beam.RegisterCoder(reflect.TypeFor[Order](), encodeOrder, decodeOrder)
}

func encodeOrder(o Order) []byte {
	t, err := o.CreatedAt.MarshalBinary()
	if err != nil {
		// Only a zone offset that is not a whole minute fails; such a
		// time goes as UTC.
		t, _ = o.CreatedAt.UTC().MarshalBinary()
	}
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(o.OrderID)+8+1+len(t))
	b = binary.AppendUvarint(b, uint64(len(o.OrderID)))
	b = append(b, o.OrderID...)
	b = binary.AppendVarint(b, o.Quantity)
	b = binary.BigEndian.AppendUint64(b, math.Float64bits(o.Price))
	b = binary.AppendUvarint(b, uint64(len(t)))
	return append(b, t...)
}

var errCorruptOrder = errors.New("orders: corrupt encoded order")

func decodeOrder(b []byte) (Order, error) {
	var o Order
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return o, errCorruptOrder
	}
	o.OrderID, b = string(b[k:k+int(n)]), b[k+int(n):]
	if o.Quantity, k = binary.Varint(b); k <= 0 {
		return o, errCorruptOrder
	}
	if b = b[k:]; len(b) < 8 {
		return o, errCorruptOrder
	}
	o.Price, b = math.Float64frombits(binary.BigEndian.Uint64(b)), b[8:]
	n, k = binary.Uvarint(b)
	if k <= 0 || n != uint64(len(b)-k) {
		return o, errCorruptOrder
	}
	if err := o.CreatedAt.UnmarshalBinary(b[k:]); err != nil {
		return o, errCorruptOrder
	}
	return o, nil
}
