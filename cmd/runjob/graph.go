package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/graphx"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
)

// writeGraph writes p's graph in DOT: composite transforms (scopes such as
// the KeepFirst UID) as clusters, primitive steps as boxes and
// PCollections as edges. Beam's dot runner draws the flat graph without
// scopes, which hides where KeepFirst begins and ends.
func writeGraph(p *beam.Pipeline, file string) error {
	edges, _, err := p.Build()
	if err != nil {
		return err
	}
	model, err := graphx.Marshal(edges, &graphx.Options{Environment: &pipepb.Environment{Urn: "beam:env:docker:v1"}})
	if err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	renderDOT(f, model)
	return f.Close()
}

func renderDOT(w io.Writer, model *pipepb.Pipeline) {
	ts := model.GetComponents().GetTransforms()
	producer := map[string]string{} // PCollection id -> leaf transform id
	for id, t := range ts {
		if len(t.GetSubtransforms()) == 0 {
			for _, pc := range t.GetOutputs() {
				producer[pc] = id
			}
		}
	}
	fmt.Fprintln(w, "digraph pipeline {")
	fmt.Fprintln(w, `  rankdir=TB; fontname="Helvetica"; node [shape=box, style="rounded,filled", fillcolor="#eef3fb", fontname="Helvetica", fontsize=10]; edge [fontname="Helvetica", fontsize=8, color="#555555"];`)
	var leaves []string
	var walk func(ids []string, indent string)
	walk = func(ids []string, indent string) {
		for _, id := range ids {
			t := ts[id]
			name := path.Base(t.GetUniqueName())
			if subs := t.GetSubtransforms(); len(subs) > 0 {
				fill := "#f7f7f7"
				if strings.Contains(t.GetUniqueName(), "dedup") {
					fill = "#fff4d6" // KeepFirst
				}
				fmt.Fprintf(w, "%ssubgraph %q {\n%s  label=%q; style=\"rounded,filled\"; fillcolor=%q; fontsize=11;\n", indent, "cluster_"+id, indent, name, fill)
				walk(subs, indent+"  ")
				fmt.Fprintf(w, "%s}\n", indent)
				continue
			}
			leaves = append(leaves, id)
			fmt.Fprintf(w, "%s%q [label=%q];\n", indent, id, name+"\n"+shortURN(t.GetSpec().GetUrn()))
		}
	}
	walk(model.GetRootTransformIds(), "  ")
	slices.Sort(leaves)
	for _, id := range leaves {
		ins := ts[id].GetInputs()
		for _, tag := range slices.Sorted(maps.Keys(ins)) {
			if from, ok := producer[ins[tag]]; ok {
				fmt.Fprintf(w, "  %q -> %q;\n", from, id)
			}
		}
	}
	fmt.Fprintln(w, "}")
}

// shortURN turns beam:transform:pardo:v1 into pardo.
func shortURN(urn string) string {
	parts := strings.Split(urn, ":")
	if len(parts) >= 2 {
		return parts[len(parts)-2]
	}
	return urn
}
