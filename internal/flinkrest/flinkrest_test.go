package flinkrest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJobRunningNeedsTheJobRunningAndEveryTaskRunningOrFinished(t *testing.T) {
	job := func(state string, tasks ...string) Job {
		j := Job{State: state}
		for _, s := range tasks {
			j.Vertices = append(j.Vertices, Vertex{Status: s})
		}
		return j
	}
	for _, tc := range []struct {
		name string
		job  Job
		want bool
	}{
		{"every task running", job("RUNNING", "RUNNING", "RUNNING"), true},
		{"an impulse finished", job("RUNNING", "FINISHED", "RUNNING"), true},
		{"a task deploying", job("RUNNING", "RUNNING", "DEPLOYING"), false},
		{"a task initializing after a restore", job("RUNNING", "INITIALIZING", "RUNNING"), false},
		{"the job restarting", job("RESTARTING", "RUNNING", "RUNNING"), false},
		{"the job finished", job("FINISHED", "FINISHED"), false},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, tc.job.Running()) })
	}
}
