package kafkaio

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLedgerCommitsOnlyUpToTheFirstOffsetThatIsNotSafe(t *testing.T) {
	type mark struct{ from, to int64 }
	tests := []struct {
		name  string
		base  int64
		marks []mark
		want  int64
		spans []span
	}{
		{"nothing safe", 10, nil, 10, nil},
		{"in order", 10, []mark{{10, 11}, {11, 12}, {12, 13}}, 13, nil},
		{"a hole holds back what follows", 10, []mark{{10, 11}, {12, 13}, {13, 14}}, 11, []span{{12, 14}}},
		{"the hole filled", 10, []mark{{12, 13}, {13, 14}, {10, 11}, {11, 12}}, 14, nil},
		{"out of order, merged", 0, []mark{{5, 6}, {3, 4}, {4, 5}, {8, 9}, {0, 1}}, 1, []span{{3, 6}, {8, 9}}},
		{"a gap the reader passed over", 0, []mark{{0, 1}, {1, 5}, {5, 6}}, 6, nil},
		{"marks below the base change nothing", 10, []mark{{3, 4}, {9, 10}}, 10, nil},
		{"a mark twice", 0, []mark{{0, 1}, {0, 1}, {2, 3}, {2, 3}}, 1, []span{{2, 3}}},
		{"a span across others", 0, []mark{{2, 3}, {5, 6}, {8, 9}, {1, 10}}, 0, []span{{1, 10}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := &ledger{base: tt.base}
			for _, m := range tt.marks {
				l.markSafe(m.from, m.to)
			}
			assert.Equal(t, tt.want, l.base)
			if len(tt.spans) == 0 {
				assert.Empty(t, l.spans)
			} else {
				assert.Equal(t, tt.spans, l.spans)
			}
		})
	}
}

func TestMarksMergeARecordWithTheOffsetsPassedOverBeforeIt(t *testing.T) {
	fn := &markFn{}
	var got []marks
	emit := func(k string, m marks) {
		assert.Equal(t, ledgerKey(m.Topic, m.Partition), k)
		got = append(got, m)
	}
	fn.StartBundle(context.Background(), emit)
	for _, r := range []Record{{Topic: "t", Partition: 1, Offset: 9, Skipped: 2}, {Topic: "t", Partition: 1, Offset: 3},
		{Topic: "t", Partition: 1, Offset: 4}, {Topic: "t", Partition: 1, Offset: 6, Skipped: 1}} {
		fn.ProcessElement(context.Background(), r, emit)
	}
	fn.FinishBundle(context.Background(), emit)
	assert.Equal(t, []marks{{Topic: "t", Partition: 1, From: []int64{3}, To: []int64{10}}}, got,
		"3 and 4, 5 passed over and 6, 7 and 8 passed over and 9")
	fn.ProcessElement(context.Background(), Record{Topic: "t", Partition: 0, Offset: 5}, emit)
	fn.ProcessElement(context.Background(), Record{Topic: "t", Partition: 0, Offset: 8}, emit)
	got = nil
	fn.FinishBundle(context.Background(), emit)
	assert.Equal(t, []marks{{Topic: "t", Partition: 0, From: []int64{5, 8}, To: []int64{6, 9}}}, got, "a hole between")
	topic, partition, err := parseLedgerKey(ledgerKey("a.b-c", 12))
	require.NoError(t, err)
	assert.Equal(t, "a.b-c", topic)
	assert.Equal(t, int32(12), partition)
}

func TestEveryDoFnIsRegisteredWithCallersBeamUses(t *testing.T) {
	for _, fn := range []any{&listFn{}, &watchFn{}, &readFn{}, &writeFn{}, &droppedFn{}, &markFn{}, &ledgerFn{}} {
		assert.NoError(t, dofnVerify(fn))
	}
}
