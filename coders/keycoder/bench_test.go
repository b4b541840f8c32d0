package keycoder

import (
	"reflect"
	"testing"
	"time"
)

// Measured with `go test -bench=. -run=^$ ./coders/keycoder/` on a 2-core
// linux/amd64 machine (AMD EPYC), Go 1.26, shared with other builds so
// noisy; range over 4 runs (target: ≤100 ns for 2 columns, 0 allocs):
//
//	BenchmarkAppend_1Column-2    25–34 ns/op   0 B/op   0 allocs/op
//	BenchmarkAppend_2Columns-2   32–58 ns/op   0 B/op   0 allocs/op
//	BenchmarkAppend_4Columns-2   64–76 ns/op   0 B/op   0 allocs/op

type benchRow struct {
	Tenant string
	User   *int64
	Score  float64
	At     *time.Time
	Body   string
}

// benchRows alternates NULL and non-NULL pointer columns.
func benchRows() []reflect.Value {
	at := time.Date(2024, 1, 2, 3, 4, 5, 6, time.UTC)
	rows := make([]benchRow, 8)
	for i := range rows {
		rows[i] = benchRow{Tenant: "tenant-" + string(rune('a'+i)), Score: float64(i) / 3, Body: "ignored"}
		if i%2 == 0 {
			rows[i].User = ptr(int64(i * 1000))
			rows[i].At = ptr(at.Add(time.Duration(i)))
		}
	}
	vals := make([]reflect.Value, len(rows))
	for i := range rows {
		vals[i] = reflect.ValueOf(rows[i]) // a struct value, as a DoFn receives it
	}
	return vals
}

func benchmarkAppend(b *testing.B, cols ...string) {
	e, err := New(reflect.TypeFor[benchRow](), cols)
	if err != nil {
		b.Fatal(err)
	}
	rows := benchRows()
	buf := make([]byte, 0, 128)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		buf = e.Append(buf[:0], rows[i%len(rows)])
		i++
	}
}

func BenchmarkAppend_1Column(b *testing.B)  { benchmarkAppend(b, "User") }
func BenchmarkAppend_2Columns(b *testing.B) { benchmarkAppend(b, "Tenant", "User") }
func BenchmarkAppend_4Columns(b *testing.B) { benchmarkAppend(b, "Tenant", "User", "Score", "At") }
