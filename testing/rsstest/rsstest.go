// Package rsstest measures a benchmark's peak memory and CPU time: Prism
// and the SDK harness run in the test's process, so the process's peak
// resident set (Linux VmHWM) and its CPU time are the runner's plus the
// pipeline's plus the test's.
package rsstest

import (
	"bufio"
	"bytes"
	"os"
	"runtime/debug"
	"strconv"
)

// ResetPeak frees what the Go heap can return and resets the kernel's peak
// RSS of this process, so PeakMB measures what runs after it.
func ResetPeak() {
	debug.FreeOSMemory()
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// PeakMB returns this process's peak RSS (VmHWM) in MB, or 0 where the
// system does not report it.
func PeakMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
			if f := bytes.Fields(rest); len(f) > 0 {
				kb, _ := strconv.ParseFloat(string(f[0]), 64)
				return kb / 1024
			}
		}
	}
	return 0
}
