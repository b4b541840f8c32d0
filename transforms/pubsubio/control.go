package pubsubio

import "github.com/beamdedup/beamdedup/internal/unbounded"

// The option that attaches an unbounded.Control to a Read: the samples'
// and the tests' handle on the readers (a stop request, live counts; its
// Close hands back what the Read still holds), out of the public API.
func init() {
	unbounded.RegisterControlOption(func(ctl *unbounded.Control) Option {
		return func(c *config) { c.SetControl(ctl) }
	})
}
