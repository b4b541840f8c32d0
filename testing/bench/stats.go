package bench

import (
	"os"
	"slices"
	"strings"
)

// Median is the median of v, 0 for none; the benchmarks, gridtable and
// the peers' commands report it over runs.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// LoadAvg is the machine's 1, 5 and 15 minute load averages, the first
// three fields of /proc/loadavg, or "?" when they cannot be read.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
