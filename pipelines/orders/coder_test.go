package orders

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// schemaOrder is Order without its coder: Beam's schema row coder.
type schemaOrder struct {
	OrderID   string    `json:"order_id" beam:"order_id"`
	Quantity  int64     `json:"quantity" beam:"quantity"`
	Price     float64   `json:"price" beam:"price"`
	CreatedAt time.Time `json:"created_at" beam:"created_at"`
}

func init() { beam.RegisterType(reflect.TypeFor[schemaOrder]()) }

func TestOrderCoderRoundTripsEveryField(t *testing.T) {
	enc, dec := beam.NewElementEncoder(reflect.TypeFor[Order]()), beam.NewElementDecoder(reflect.TypeFor[Order]())
	for _, o := range append(Generate(50, 3),
		Order{},
		Order{OrderID: "ü-\x00", Quantity: -1 << 62, Price: -0.5, CreatedAt: time.Date(1900, 2, 3, 4, 5, 6, 7, time.FixedZone("", -3600))},
	) {
		var b bytes.Buffer
		require.NoError(t, enc.Encode(o, &b))
		got, err := dec.Decode(&b)
		require.NoError(t, err)
		g := got.(Order)
		assert.True(t, o.CreatedAt.Equal(g.CreatedAt), "%v, %v", o.CreatedAt, g.CreatedAt)
		_, off := o.CreatedAt.Zone()
		_, goff := g.CreatedAt.Zone()
		assert.Equal(t, off, goff, "the zone offset")
		o.CreatedAt, g.CreatedAt = time.Time{}, time.Time{}
		assert.Equal(t, o, g)
	}
}

func TestDecodeOrderRefusesTruncatedBytes(t *testing.T) {
	b := encodeOrder(Generate(1, 1)[0])
	for n := range len(b) {
		_, err := decodeOrder(b[:n])
		assert.Error(t, err, "%d of %d bytes", n, len(b))
	}
	_, err := decodeOrder(append(b, 0))
	assert.Error(t, err, "a byte too many")
}

// BenchmarkOrderCoder is an order's encoding and decoding as it crosses a
// stage: Order's coder, and Beam's schema row coder for the same fields.
func BenchmarkOrderCoder(b *testing.B) {
	for _, c := range []struct {
		name string
		t    reflect.Type
		v    func(Order) any
	}{
		{"coder", reflect.TypeFor[Order](), func(o Order) any { return o }},
		{"schema_row", reflect.TypeFor[schemaOrder](), func(o Order) any { return schemaOrder(o) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			enc, dec := beam.NewElementEncoder(c.t), beam.NewElementDecoder(c.t)
			var rows []any
			for _, o := range Generate(1000, 1) {
				rows = append(rows, c.v(o))
			}
			var buf bytes.Buffer
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				buf.Reset()
				if err := enc.Encode(rows[i%len(rows)], &buf); err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					b.ReportMetric(float64(buf.Len()), "bytes/row")
				}
				if _, err := dec.Decode(&buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
