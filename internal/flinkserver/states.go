package flinkserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// OperatorStates are the keyed states an operator's subtask registered, as
// a checkpoint holds them: a state backend writes every registered state
// into each checkpoint.
type OperatorStates struct {
	// States is the most states one subtask of the operator registered.
	States int `json:"states"`
	// Names are the first of their names.
	Names []string `json:"names"`
}

// CheckpointStates reads the metadata of the checkpoint or savepoint at
// path (its directory or its _metadata file; a file:// URI or a path) and
// returns each operator's keyed states, by operator id (the job server's
// io.github.beamdedup.flink.CheckpointStates, run with its classpath).
func CheckpointStates(path string) (map[string]OperatorStates, error) {
	cp, err := Project.Classpath()
	if err != nil {
		return nil, err
	}
	path = strings.TrimPrefix(strings.TrimPrefix(path, "file:"), "//")
	var stderr bytes.Buffer
	cmd := exec.Command("java", "-cp", cp, "io.github.beamdedup.flink.CheckpointStates", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("flinkserver: reading the states of %s: %v\n%s", path, err, tail(stderr.String(), 2000))
	}
	var ops map[string]OperatorStates
	if err := json.Unmarshal(out, &ops); err != nil {
		return nil, fmt.Errorf("flinkserver: reading the states of %s: %v: %s", path, err, out)
	}
	return ops, nil
}
