package jobrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/beamdedup/beamdedup/internal/flinkopts"
	"github.com/beamdedup/beamdedup/internal/flinkrest"
)

// Resume is where a pipeline keeps its state on a Flink cluster whose
// state directories this machine reads (file:// URIs, as a local cluster
// has them), so that each run starts from the newest state the one before
// left: its stop with a savepoint, or the latest checkpoint Flink retained
// when the job was cancelled or failed (the job server's default for a Go
// job). A job that finished keeps none: Flink deletes its checkpoints.
type Resume struct {
	// Savepoints and Checkpoints are the pipeline's own directories (URIs)
	// under the cluster's state.savepoints.dir and state.checkpoints.dir.
	Savepoints, Checkpoints string
}

// FindResume returns the pipeline name's directories on the cluster whose
// REST API is rest.
func FindResume(ctx context.Context, rest *flinkrest.Client, name string) (Resume, error) {
	conf, err := rest.ClusterConfig(ctx)
	if err != nil {
		return Resume{}, fmt.Errorf("reading the Flink cluster's configuration: %w", err)
	}
	var r Resume
	for _, d := range []struct {
		key string
		to  *string
	}{{"state.savepoints.dir", &r.Savepoints}, {"state.checkpoints.dir", &r.Checkpoints}} {
		dir := conf[d.key]
		if _, err := localPath(dir); err != nil {
			return Resume{}, fmt.Errorf("the Flink cluster's %s %q: %w", d.key, dir, err)
		}
		*d.to = strings.TrimSuffix(dir, "/") + "/" + name
	}
	return r, nil
}

// localPath is the path of a file:// URI.
func localPath(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || u.Path == "" {
		return "", errors.New("not a directory of this machine (file://...): give --savepoint_path to restore")
	}
	return u.Path, nil
}

// Latest returns the newest savepoint or retained checkpoint of the
// pipeline (the URI of the directory of its _metadata), "" when there
// is none.
func (r Resume) Latest() (string, error) {
	var newest string
	var at time.Time
	for _, uri := range []string{r.Savepoints, r.Checkpoints} {
		root, err := localPath(uri)
		if err != nil {
			return "", err
		}
		err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil || d.IsDir() || d.Name() != "_metadata" {
				return err
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			if info.ModTime().After(at) {
				newest, at = "file://"+filepath.Dir(path), info.ModTime()
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return newest, nil
}

// Apply sets the job's Flink options to the pipeline's checkpoint
// directory and, unless one is given, to restore from latest; it keeps
// what the job sets itself.
func (r Resume) Apply(o *flinkopts.Options, latest string) {
	if o.StateBackendStoragePath == "" {
		o.StateBackend = cmp.Or(o.StateBackend, "filesystem") // filesystem: Flink's heap backend, the cluster's default
		o.StateBackendStoragePath = r.Checkpoints
	}
	if o.SavepointPath == "" {
		o.SavepointPath = latest
	}
}

// CancelEarlier cancels the pipeline's jobs still on the cluster (an
// earlier run that ended without stopping its job: killed, or its SDK
// workers gone), waits until they ended, and returns their ids. Flink
// retains the latest checkpoint of each. A job is the pipeline's when its
// checkpoints are in the pipeline's directory (Apply), where Flink makes a
// directory named after the job's id when the job starts.
func (r Resume) CancelEarlier(ctx context.Context, rest *flinkrest.Client) ([]string, error) {
	root, err := localPath(r.Checkpoints)
	if err != nil {
		return nil, err
	}
	dirs, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var ids []string
	for _, d := range dirs {
		j, err := rest.Job(ctx, d.Name())
		if err != nil || flinkrest.Terminal(j.State) {
			continue // not on this cluster (an earlier one), or ended
		}
		if err := rest.Cancel(ctx, j.ID); err != nil {
			return ids, fmt.Errorf("cancelling the earlier job %s: %w", j.ID, err)
		}
		ids = append(ids, j.ID)
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for _, id := range ids {
		for {
			j, err := rest.Job(ctx, id)
			if err == nil && flinkrest.Terminal(j.State) {
				break
			}
			select {
			case <-ctx.Done():
				return ids, fmt.Errorf("the earlier job %s did not end after its cancel: %w", id, ctx.Err())
			case <-tick.C:
			}
		}
	}
	return ids, nil
}
