package metricsum

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSumOfNoResultAddsNothing(t *testing.T) {
	n := int64(3)
	Sum(nil, "ns", map[string]*int64{"c": &n})
	assert.Equal(t, int64(3), n)
}
