package prismwarn

import "sync"

// ResetWarnings lets a test see the once-per-process warnings again.
func ResetWarnings() { warned = [2]sync.Once{} }
