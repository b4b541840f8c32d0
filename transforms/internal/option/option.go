// Package option is how the transforms' packages make and read the one
// option type every transform takes, rowspec.Option: a package makes the
// options of its own transform with Own, and a transform reads the options
// it is given with Apply, which applies the roles (rowspec's) to its Spec
// and its own options to its config. Package rowspec, which defines the
// type and keeps its method unexported, installs both at init.
package option

// Own returns the rowspec.Option (as any) named name, as a user writes it
// ("dedup.StateTTL"), that applies set to the config of the transform whose
// config is a *C. Another transform given it fails with an error that
// names it.
func Own[C any](name string, set func(*C)) any {
	return own(name, func(cfg any) bool {
		c, ok := cfg.(*C)
		if ok {
			set(c)
		}
		return ok
	})
}

// Apply applies opts (a []rowspec.Option) in order for transform (its name
// in errors, "dedup.KeepFirst"): the roles to spec (a *rowspec.Spec), the
// transform's own options to cfg (a *C of Own). It returns every mistake:
// a nil option, an empty column name, another transform's option.
func Apply(transform string, opts, spec, cfg any) []error { return apply(transform, opts, spec, cfg) }

var (
	own   func(name string, set func(cfg any) bool) any
	apply func(transform string, opts, spec, cfg any) []error
)

// Install installs rowspec's constructor of a transform's own option and
// its application of a call's options; rowspec calls it at init.
func Install(newOwn func(name string, set func(cfg any) bool) any, applyAll func(transform string, opts, spec, cfg any) []error) {
	own, apply = newOwn, applyAll
}
