// Package option is how the transforms' packages make (Own) and read
// (Apply) their options of rowspec.Option, whose method rowspec keeps
// unexported: rowspec installs both at init.
package option

// Own returns the rowspec.Option (as any) named name ("dedup.StateTTL")
// that applies set to a transform's config *C; another transform refuses
// it.
func Own[C any](name string, set func(*C)) any {
	return own(name, func(cfg any) bool {
		c, ok := cfg.(*C)
		if ok {
			set(c)
		}
		return ok
	})
}

// Apply applies opts (a []rowspec.Option) in order for transform: the
// roles to spec (a *rowspec.Spec), its own options to cfg (a *C of Own).
// It returns every mistake.
func Apply(transform string, opts, spec, cfg any) []error { return apply(transform, opts, spec, cfg) }

var (
	own   func(name string, set func(cfg any) bool) any
	apply func(transform string, opts, spec, cfg any) []error
)

// Install installs Own's and Apply's implementations; rowspec calls it.
func Install(newOwn func(name string, set func(cfg any) bool) any, applyAll func(transform string, opts, spec, cfg any) []error) {
	own, apply = newOwn, applyAll
}
