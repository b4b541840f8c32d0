// Package pcol holds what the transforms need to know about a
// PCollection that Beam Go does not expose.
package pcol

import (
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// IsBounded reports whether col is bounded. Beam Go has no public
// accessor; the node's String form marks unbounded collections.
func IsBounded(col beam.PCollection) bool {
	return !strings.HasSuffix(col.String(), ":unbounded}")
}
