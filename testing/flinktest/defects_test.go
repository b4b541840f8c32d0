package flinktest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/jobrun"
	"github.com/beamdedup/beamdedup/testing/flinktest"
	"github.com/beamdedup/beamdedup/transforms/dedup"
	"github.com/beamdedup/beamdedup/transforms/rowspec"
)

// withNilSlice is a schema row whose slice may be nil.
type withNilSlice struct {
	IDs []string
	N   int64
}

// tagged is a row of a user's with a slice field, nil in some rows.
type tagged struct {
	ID   string   `beam:"id" json:"id"`
	Tags []string `beam:"tags" json:"tags"`
}

// taggedAsSent is tagged for the jobs whose schemas the job server keeps
// as sent: a JVM keeps the row coder it made for a schema id, which Beam Go
// makes from the type's name, so the two need names of their own.
type taggedAsSent tagged

func init() {
	registerTypes(withNilSlice{}, tagged{}, taggedAsSent{})
	register.Function1x2(keyNilSlice)
	register.Function2x1(groupKey)
	register.Iter1[withNilSlice]()
}

func groupKey(k string, _ func(*withNilSlice) bool) string { return k }

func keyNilSlice(r withNilSlice) (string, withNilSlice) { return "k", r }

// asSent runs f with the job's Go row schemas left as Beam Go sends them
// (the job server's keep_go_schemas): with Beam's own job server.
func asSent(f func()) {
	beam.PipelineOptions.Set("keep_go_schemas", "true")
	defer beam.PipelineOptions.Set("keep_go_schemas", "")
	f()
}

// taggedRows are 2,000 rows of 1,500 ids (every fourth id sent twice), the
// slice of every other row nil.
func taggedRows() []any {
	var rows []any
	for i := range 2000 {
		r := tagged{ID: fmt.Sprintf("o%04d", i%1500)}
		if i%2 == 1 {
			r.Tags = []string{"t", fmt.Sprint(i)}
		}
		rows = append(rows, r)
	}
	return rows
}

// The Go SDK (2.77.0) encodes a nil slice or map field of a schema row as
// a null field, of a field its schema declares non-nullable. Beam Java's
// RowCoder (2.62.0 here, 2.70.0 alike) decodes the null, and encodes a row
// of a schema without nullable fields with no null bits and the null field
// left out: the Go worker reading it takes the next field's bytes and the
// next elements' for the missing one. Behind a GroupByKey the job fails;
// behind a Reshuffle rows vanish and the job succeeds: 2,000 rows in, 2
// reach KeepFirst. An empty slice is fine. The project's job server
// declares those fields nullable (GoOptionsJobServer), and every row
// arrives (TestKeepFirst_OnFlinkEveryRowWithANilSliceArrives); this test
// asks it to keep the schemas as sent, as Beam's job server does, and
// fails when a Beam release changes either side.
func TestBeamDefect_ANilSliceInASchemaRowFailsOrVanishesOnFlinkAnEmptyOneDoesNot(t *testing.T) {
	for _, tc := range []struct {
		name  string
		row   withNilSlice
		fails bool
	}{
		{"nil, grouped", withNilSlice{N: 1}, true},
		{"empty, grouped", withNilSlice{IDs: []string{}, N: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			grouped := beam.GroupByKey(s, beam.ParDo(s, keyNilSlice, beam.Create(s, tc.row)))
			out := collect(s, beam.ParDo(s, groupKey, grouped), false)
			if tc.fails {
				// The job restarts until the restart strategy gives up (a
				// minute of delays); its first task failure says why.
				ctx := context.Background()
				var failures []string
				asSent(func() {
					j := start(t, p, jobrun.Options{StallLimit: -1})
					flinktest.Await(t, 2*time.Minute, "a task failure of the job", func() bool {
						id, err := j.FlinkJobID(ctx)
						if err != nil {
							return false
						}
						failures, err = exceptions(ctx, rest(t), id)
						return err == nil && len(failures) > 0
					})
				})
				assert.Contains(t, failures[len(failures)-1], "EOFException")
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var err error
			asSent(func() {
				_, err = jobrun.Run(ctx, p, options(t, jobrun.Options{StallLimit: time.Minute}))
			})
			require.NoError(t, err)
			assert.Equal(t, []string{`"k"`}, rowsOf(out))
		})
	}
	t.Run("nil, reshuffled: rows vanish, the job succeeds", func(t *testing.T) {
		p, s := beam.NewPipelineWithRoot()
		var sent []any
		for _, r := range taggedRows() {
			sent = append(sent, taggedAsSent(r.(tagged)))
		}
		rows := beam.Reshuffle(s, beam.Create(s, sent...))
		dedup.KeepFirst(s, rows, rowspec.PartitionBy("id"))
		var pr beam.PipelineResult
		asSent(func() { pr = runOn(t, onFlink, p, 2*time.Minute) })
		c := dedup.ReadCounters(pr)
		assert.Less(t, c.RowsIn, int64(2000), "rows reaching KeepFirst")
		t.Logf("2000 rows sent, %d reached KeepFirst, %d emitted", c.RowsIn, c.Emitted)
	})
}

// A row type of a user's with a nil slice, reshuffled and deduplicated on
// Flink: every row arrives, with its slice as it was (nil or not), and
// every row is counted.
func TestKeepFirst_OnFlinkEveryRowWithANilSliceArrives(t *testing.T) {
	for _, r := range runners {
		t.Run(string(r), func(t *testing.T) {
			p, s := beam.NewPipelineWithRoot()
			rows := beam.Reshuffle(s, beam.Create(s, taggedRows()...))
			all := collect(s, rows, false)
			out := collect(s, dedup.KeepFirst(s, rows, rowspec.PartitionBy("id")).Rows, false)
			c := dedup.ReadCounters(runOn(t, r, p, 2*time.Minute))
			assert.Equal(t, int64(2000), c.RowsIn)
			assert.Equal(t, int64(1500), c.Emitted)
			assert.Equal(t, int64(500), c.DuplicatesDropped)
			assert.Zero(t, c.Pending(), "every row accounted for")
			want := map[string]bool{}
			for _, row := range taggedRows() {
				b, err := json.Marshal(row)
				require.NoError(t, err)
				want[string(b)] = true
			}
			got := rowsOf(all)
			require.Len(t, got, 2000)
			for _, g := range got {
				assert.True(t, want[g], "a row as it was sent: %s", g)
			}
			assert.Len(t, rowsOf(out), 1500)
		})
	}
}

// Beam's Java job servers (Flink's 2.62.0 here) ignore the name a job is
// submitted under (the Job API's PrepareJobRequest.job_name) and list it
// under one made from the application name, as Java's JobNameFactory does:
// lowercased, each character outside [a-z0-9] a 0, then the user, the time
// and a hex suffix. A client that follows its job by the submitted name
// never finds it (internal/jobrun matches either). This test fails when
// the job server keeps the name.
func TestBeamDefect_TheFlinkJobServerRenamesASubmittedJob(t *testing.T) {
	srv := flinktest.SharedCluster(t)
	name := fmt.Sprintf("Rename_Me-%d", time.Now().UnixNano())
	p, s := beam.NewPipelineWithRoot()
	beam.Create(s, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := jobrun.Run(ctx, p, options(t, jobrun.Options{Name: name, StallLimit: time.Minute}))
	require.NoError(t, err)
	jobs, err := jobrun.Jobs(ctx, srv.Endpoint)
	require.NoError(t, err)
	var listed []string
	for _, j := range jobs {
		listed = append(listed, j.GetJobName())
	}
	assert.NotContains(t, listed, name, "the submitted name")
	assert.True(t, slices.ContainsFunc(listed, func(n string) bool { return strings.HasPrefix(n, "rename0me0"+name[len("Rename_Me-"):]+"-") }),
		"a name made from the application name: %q", listed)
}
