package kafkaio

import "github.com/beamdedup/beamdedup/internal/unbounded"

// The option that attaches the samples' and tests' unbounded.Control to a
// Read, out of the public API.
func init() {
	unbounded.RegisterControlOption(func(ctl *unbounded.Control) Option {
		return func(c *config) { c.SetControl(ctl) }
	})
}
