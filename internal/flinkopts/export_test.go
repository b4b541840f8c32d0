package flinkopts

// Names are the options' names, as flags and as Go options.
func Names() []string {
	names := make([]string, len(table))
	for i, op := range table {
		names[i] = op.name
	}
	return names
}
