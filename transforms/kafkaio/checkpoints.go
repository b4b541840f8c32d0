package kafkaio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/log"

	"github.com/beamdedup/beamdedup/internal/flinkrest"
)

// checkpointSkew is how much later than a moment a checkpoint must have
// been triggered to hold what happened before it: the JobManager's clock
// and a worker's may differ by this much (one clock on one host; NTP's
// bound across hosts).
const checkpointSkew = time.Second

// checkpointWatch follows, in a worker of a Flink job, the job's completed
// checkpoints on Flink's REST API. With finish_bundle_before_checkpointing
// (the default of the project's job server for a Go job) a bundle that
// ended before a checkpoint was triggered is in that checkpoint: what it
// left pending may be made final once the checkpoint completes, and a job
// restored from it holds that bundle's state and never reads its input
// again.
type checkpointWatch struct {
	rest    *flinkrest.Client
	jobName string

	mu       sync.Mutex
	covered  time.Time // the trigger time of the newest completed checkpoint
	restored time.Time // when the job was last restored (from a savepoint or a checkpoint)
	polled   time.Time // when the REST API last answered
	waiting  []afterCheckpoint
	jobID    string
	off      bool // the job does not checkpoint: nothing waits
	warnedAt time.Time
}

type afterCheckpoint struct {
	end time.Time
	f   func()
}

var (
	cpsOnce sync.Once
	cps     *checkpointWatch
)

// checkpoints returns the process's watch of its Flink job's checkpoints,
// or nil when the job does not run on Flink through the project's job
// server (which sets the options flink_job_name and flink_rest), or runs on
// its embedded cluster, whose REST API it does not know: then nothing
// waits for a checkpoint.
func checkpoints(ctx context.Context) *checkpointWatch {
	cpsOnce.Do(func() {
		name, rest := beam.PipelineOptions.Get("flink_job_name"), beam.PipelineOptions.Get("flink_rest")
		if name == "" {
			return
		}
		if rest == "" {
			log.Warnf(ctx, "kafkaio: the Flink job %s runs without a REST address of its cluster (an embedded cluster; the option flink_rest): a transaction is committed at the end of its bundle, not once a checkpoint holds it, so a failure may write its records twice", name)
			return
		}
		cps = &checkpointWatch{rest: flinkrest.New(rest), jobName: name}
		go cps.run()
	})
	return cps
}

// after runs f, on the watch's goroutine, once a checkpoint triggered
// after end (plus checkpointSkew) has completed; never when the job is
// restored first: the restored job settles what the checkpoint holds.
func (w *checkpointWatch) after(end time.Time, f func()) {
	w.mu.Lock()
	if w.off {
		w.mu.Unlock()
		f()
		return
	}
	defer w.mu.Unlock()
	if w.covered.After(end.Add(checkpointSkew)) {
		go f()
		return
	}
	w.waiting = append(w.waiting, afterCheckpoint{end, f})
}

// lastRestore returns when the job was last restored (zero: never), as
// the REST API says now.
func (w *checkpointWatch) lastRestore(ctx context.Context) (time.Time, error) {
	for {
		w.mu.Lock()
		polled, restored, off := w.polled, w.restored, w.off
		w.mu.Unlock()
		if off || time.Since(polled) < 500*time.Millisecond {
			return restored, nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("kafkaio: the checkpoints of the Flink job %s on %s: no answer from its REST API: %w", w.jobName, w.rest.Addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *checkpointWatch) run() {
	for {
		covered, restored, saving, err := w.poll()
		// A stop with a savepoint ends the job, and its workers, soon
		// after the savepoint completes: what waits for it must be quick.
		pause := 200 * time.Millisecond
		if saving {
			pause = 20 * time.Millisecond
		}
		w.mu.Lock()
		if err != nil {
			if time.Since(w.warnedAt) > time.Minute {
				w.warnedAt = time.Now()
				log.Warnf(context.Background(), "kafkaio: reading the checkpoints of the Flink job %s on %s: %v (%d commits wait for one)", w.jobName, w.rest.Addr, err, len(w.waiting))
			}
			w.mu.Unlock()
			time.Sleep(pause)
			continue
		}
		w.polled = time.Now()
		var due []func()
		if w.off {
			for _, a := range w.waiting {
				due = append(due, a.f)
			}
			w.waiting = nil
			w.mu.Unlock()
			for _, f := range due {
				f()
			}
			return // nothing more to watch
		}
		keep := w.waiting[:0]
		for _, a := range w.waiting {
			switch {
			case restored.After(w.restored) && a.end.Before(restored):
				// Written before a restore: the restored job settles it.
			case covered.After(a.end.Add(checkpointSkew)):
				due = append(due, a.f)
			default:
				keep = append(keep, a)
			}
		}
		w.waiting = keep
		w.covered, w.restored = covered, restored
		w.mu.Unlock()
		for _, f := range due {
			f()
		}
		time.Sleep(pause)
	}
}

// poll returns the trigger time of the job's newest completed checkpoint
// or savepoint, when the job was last restored (each zero: none), and
// whether a savepoint is under way.
func (w *checkpointWatch) poll() (covered, restored time.Time, saving bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if w.jobID == "" {
		jobs, err := w.rest.Jobs(ctx)
		if err != nil {
			return covered, restored, saving, err
		}
		for _, j := range jobs { // newest first
			if j.Name == w.jobName && !j.Terminal() {
				w.jobID = j.ID
				break
			}
		}
		if w.jobID == "" {
			return covered, restored, saving, fmt.Errorf("no running job of that name")
		}
		var cfg struct {
			Mode string `json:"mode"`
		}
		if err := w.rest.Get(ctx, "/jobs/"+w.jobID+"/checkpoints/config", &cfg); err != nil {
			if !strings.Contains(err.Error(), "not enabled") {
				w.jobID = ""
				return covered, restored, saving, err
			}
			log.Infof(ctx, "kafkaio: the Flink job %s does not checkpoint: transactions and offsets are committed at once", w.jobName)
			w.mu.Lock()
			w.off = true
			w.mu.Unlock()
			return covered, restored, saving, nil
		}
	}
	cs, err := w.rest.Checkpoints(ctx, w.jobID)
	if err != nil {
		return covered, restored, saving, err
	}
	var newest int64
	if c := cs.Latest.Completed; c != nil {
		newest = c.Triggered
	}
	for _, c := range cs.History {
		switch {
		case c.Status == "COMPLETED":
			newest = max(newest, c.Triggered)
		case c.Status == "IN_PROGRESS" && c.IsSavepoint:
			saving = true
		}
	}
	if newest > 0 {
		covered = time.UnixMilli(newest)
	}
	if r := cs.Latest.Restored; r != nil && r.Restored > 0 {
		restored = time.UnixMilli(r.Restored)
	}
	return covered, restored, saving, nil
}
