package watchdog

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var (
	prismOnce sync.Once
	prismAddr string
	prismErr  error
)

// PrismEndpoint returns the address of this process's Prism job server,
// starting it on first use. Jobs submitted to it (jobopts.Endpoint set to
// it, LOOPBACK environment) run in this process like beam.Run("prism")'s
// own, but their job service can be reached from outside beam.Run: to
// watch a job's metrics and to cancel it.
func PrismEndpoint() (string, error) {
	prismOnce.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			prismErr = err
			return
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := prism.CreateJobServer(ctx, prism.Options{Port: port}); err != nil {
			prismErr = fmt.Errorf("starting Prism: %w", err)
			return
		}
		prismAddr = fmt.Sprintf("localhost:%d", port)
	})
	return prismAddr, prismErr
}

// Job follows one job, found by its name, on a portable job server
// (Prism's, or a Flink or Spark job server): its metrics and its
// cancellation. Give each run a name of its own (jobopts.JobName): a
// finished job of the same name is ignored, a running one is not.
//
// Committed metrics are those of finished bundles: a job whose bundles
// crawl (a row a second) makes no progress that counts, while its
// in-flight ("attempted") counters would still creep. (Prism's attempted
// values are the latest progress report, not a sum, so they are not
// read at all.)
type Job struct {
	Name string

	mu     sync.Mutex
	conn   *grpc.ClientConn
	client jobpb.JobServiceClient
	id     string
}

// Follow connects to the job server at endpoint for the job called name.
// The job need not be submitted yet.
func Follow(endpoint, name string) (*Job, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("watchdog: job server %s: %w", endpoint, err)
	}
	return &Job{Name: name, conn: conn, client: jobpb.NewJobServiceClient(conn)}, nil
}

// Close closes the connection to the job server.
func (j *Job) Close() { j.conn.Close() }

// ID returns the job's id, once the job has been submitted.
func (j *Job) ID(ctx context.Context) (string, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.id != "" {
		return j.id, nil
	}
	resp, err := j.client.GetJobs(ctx, &jobpb.GetJobsRequest{})
	if err != nil {
		return "", err
	}
	for _, info := range resp.GetJobInfo() {
		if info.GetJobName() == j.Name && !terminal(info.GetState()) {
			j.id = info.GetJobId()
			return j.id, nil
		}
	}
	return "", fmt.Errorf("job %s not submitted yet", j.Name)
}

func terminal(s jobpb.JobState_Enum) bool {
	switch s {
	case jobpb.JobState_DONE, jobpb.JobState_FAILED, jobpb.JobState_CANCELLED, jobpb.JobState_DRAINED, jobpb.JobState_UPDATED:
		return true
	}
	return false
}

func (j *Job) committed(ctx context.Context) ([]*pipepb.MonitoringInfo, error) {
	id, err := j.ID(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := j.client.GetJobMetrics(ctx, &jobpb.GetJobMetricsRequest{JobId: id})
	if err != nil {
		return nil, err
	}
	return resp.GetMetrics().GetCommitted(), nil
}

// Metrics returns the job's committed metrics.
func (j *Job) Metrics(ctx context.Context) (metrics.Results, error) {
	mis, err := j.committed(ctx)
	if err != nil {
		return metrics.Results{}, err
	}
	return *metricsx.FromMonitoringInfos(nil, nil, mis), nil
}

// Counters returns the job's committed user counters (by namespace/name)
// and the sum of its element counts (as "elements").
func (j *Job) Counters(ctx context.Context) (map[string]int64, error) {
	mis, err := j.committed(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, mi := range mis {
		name, ok := counterName(mi)
		if !ok {
			continue
		}
		v, n := binary.Uvarint(mi.GetPayload())
		if n <= 0 {
			continue
		}
		out[name] += int64(v)
	}
	return out, nil
}

func counterName(mi *pipepb.MonitoringInfo) (string, bool) {
	switch mi.GetUrn() {
	case "beam:metric:user:sum_int64:v1":
		l := mi.GetLabels()
		return l["NAMESPACE"] + "/" + l["NAME"], true
	case "beam:metric:element_count:v1":
		return "elements", true
	}
	return "", false
}

// Cancel asks the job server to cancel the job. Unlike cancelling
// beam.Run's context, this stops the job inside the runner too (with Prism
// in process, a job whose client has gone keeps running).
func (j *Job) Cancel(ctx context.Context) error {
	id, err := j.ID(ctx)
	if err != nil {
		return err
	}
	_, err = j.client.Cancel(ctx, &jobpb.CancelJobRequest{JobId: id})
	return err
}
