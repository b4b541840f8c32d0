package jobrun_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/jobrun"
)

// Latest is the newest savepoint or retained checkpoint of the pipeline,
// by the time its _metadata was written; a directory Flink has not
// finished (no _metadata) and another pipeline's state do not count.
func TestResumeLatestIsThePipelinesNewestSavepointOrCheckpoint(t *testing.T) {
	root := t.TempDir()
	r := jobrun.Resume{Savepoints: "file://" + root + "/savepoints/p", Checkpoints: "file://" + root + "/checkpoints/p"}
	base := time.Now().Add(-time.Hour)
	state := func(dir string, age time.Duration, complete bool) {
		path := filepath.Join(root, dir)
		require.NoError(t, os.MkdirAll(path, 0o755))
		if complete {
			meta := filepath.Join(path, "_metadata")
			require.NoError(t, os.WriteFile(meta, nil, 0o644))
			require.NoError(t, os.Chtimes(meta, base.Add(age), base.Add(age)))
		}
	}
	for _, tc := range []struct {
		name, dir string
		age       time.Duration
		complete  bool
		want      string
	}{
		{"none yet", "", 0, false, ""},
		{"a savepoint", "savepoints/p/savepoint-a", time.Minute, true, "savepoints/p/savepoint-a"},
		{"a later checkpoint of a cancelled job", "checkpoints/p/job1/chk-4", 2 * time.Minute, true, "checkpoints/p/job1/chk-4"},
		{"a later checkpoint not finished", "checkpoints/p/job1/chk-5", 3 * time.Minute, false, "checkpoints/p/job1/chk-4"},
		{"another pipeline's later savepoint", "savepoints/q/savepoint-b", 4 * time.Minute, true, "checkpoints/p/job1/chk-4"},
		{"a later savepoint", "savepoints/p/savepoint-c", 5 * time.Minute, true, "savepoints/p/savepoint-c"},
	} {
		if tc.dir != "" {
			state(tc.dir, tc.age, tc.complete)
		}
		got, err := r.Latest()
		require.NoError(t, err, tc.name)
		want := ""
		if tc.want != "" {
			want = "file://" + filepath.Join(root, tc.want)
		}
		assert.Equal(t, want, got, tc.name)
	}
}

// Apply points the job's checkpoints at the pipeline's directory and
// restores the latest state, unless the job says otherwise.
func TestResumeApplyKeepsWhatTheJobSetsItself(t *testing.T) {
	r := jobrun.Resume{Savepoints: "file:///s/p", Checkpoints: "file:///c/p"}
	for _, tc := range []struct {
		name     string
		in, want flinkopts.Options
	}{
		{"nothing set", flinkopts.Options{},
			flinkopts.Options{StateBackend: "filesystem", StateBackendStoragePath: "file:///c/p", SavepointPath: "file:///latest"}},
		{"its own backend", flinkopts.Options{StateBackend: "rocksdb"},
			flinkopts.Options{StateBackend: "rocksdb", StateBackendStoragePath: "file:///c/p", SavepointPath: "file:///latest"}},
		{"its own storage and savepoint", flinkopts.Options{StateBackend: "rocksdb", StateBackendStoragePath: "file:///mine", SavepointPath: "file:///sp"},
			flinkopts.Options{StateBackend: "rocksdb", StateBackendStoragePath: "file:///mine", SavepointPath: "file:///sp"}},
	} {
		o := tc.in
		r.Apply(&o, "file:///latest")
		assert.Equal(t, tc.want, o, tc.name)
	}
}

// A cluster whose state directories are not on this machine cannot be
// resumed from: the error says what to do instead.
func TestResumeLatestRefusesAStateDirectoryElsewhere(t *testing.T) {
	_, err := jobrun.Resume{Savepoints: "s3://bucket/savepoints/p", Checkpoints: "s3://bucket/checkpoints/p"}.Latest()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--savepoint_path")
}
