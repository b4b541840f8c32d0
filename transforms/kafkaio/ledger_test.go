package kafkaio

import (
	"testing"

	"github.com/stretchr/testify/assert"
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

func TestEveryDoFnIsRegisteredWithCallersBeamUses(t *testing.T) {
	for _, fn := range []any{&listFn{}, &watchFn{}, &readFn{}, &writeFn{}, &commitFn{}} {
		assert.NoError(t, dofnVerify(fn))
	}
}
