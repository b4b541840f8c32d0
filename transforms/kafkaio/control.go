package kafkaio

import "github.com/beamdedup/beamdedup/internal/unbounded"

// The option that attaches an unbounded.Control to a Read: the samples'
// and the tests' handle on the readers (a stop request, live counts; its
// Close commits what is safe), out of the public API.
func init() {
	unbounded.RegisterControlOption(func(ctl *unbounded.Control) Option {
		return func(c *config) { c.SetControl(ctl) }
	})
}
