package jobrun

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/core/runtime/metricsx"
	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Remote is one job on a portable job server (Prism's, or a Flink or
// Spark job server), found by its name: its state, its metrics and its
// cancellation. Give each run a name of its own: a finished job of the
// same name is ignored, a running one is not.
type Remote struct {
	Name     string
	Endpoint string

	mu     sync.Mutex
	conn   *grpc.ClientConn
	client jobpb.JobServiceClient
	id     string
	listed string // the name the job server lists the job under
}

// Follow connects to the job server at endpoint for the job called name.
// The job need not be submitted yet.
func Follow(endpoint, name string) (*Remote, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("jobrun: job server %s: %w", endpoint, err)
	}
	return &Remote{Name: name, Endpoint: endpoint, conn: conn, client: jobpb.NewJobServiceClient(conn)}, nil
}

// Close closes the connection to the job server.
func (r *Remote) Close() { r.conn.Close() }

// ID returns the job's id, once the job has been submitted.
func (r *Remote) ID(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.id != "" {
		return r.id, nil
	}
	resp, err := r.client.GetJobs(ctx, &jobpb.GetJobsRequest{})
	if err != nil {
		return "", err
	}
	java := javaJobName(r.Name)
	for _, info := range resp.GetJobInfo() {
		name := info.GetJobName()
		if (name == r.Name || strings.HasPrefix(name, java)) && !terminal(info.GetState()) {
			r.id, r.listed = info.GetJobId(), name
			return r.id, nil
		}
	}
	return "", fmt.Errorf("job %s is not on the job server at %s", r.Name, r.Endpoint)
}

// ListedName is the name the job server lists the job under (a Java job
// server's own, on Flink also the Flink job's name), once submitted.
func (r *Remote) ListedName(ctx context.Context) (string, error) {
	if _, err := r.ID(ctx); err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listed, nil
}

// javaJobName is the start of the name Beam's Java job servers give a job
// submitted as name, as Java's PipelineOptions.JobNameFactory makes it:
// "<app>-<user>-<MMddHHmmss>-<hex>", with app lowercased, each character
// outside [a-z0-9] made a 0 and a first character that is not a letter an a.
func javaJobName(name string) string {
	b := []byte(strings.ToLower(name))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			b[i] = '0'
		}
	}
	if len(b) > 0 && (b[0] < 'a' || b[0] > 'z') {
		b[0] = 'a'
	}
	return string(b) + "-"
}

func terminal(s jobpb.JobState_Enum) bool {
	switch s {
	case jobpb.JobState_DONE, jobpb.JobState_FAILED, jobpb.JobState_CANCELLED, jobpb.JobState_DRAINED, jobpb.JobState_UPDATED:
		return true
	}
	return false
}

// monitoring returns the job's committed monitoring infos (of finished
// bundles) and attempted ones (bundles in flight; Prism's are its latest
// progress report, not a sum).
func (r *Remote) monitoring(ctx context.Context) (committed, attempted []*pipepb.MonitoringInfo, err error) {
	id, err := r.ID(ctx)
	if err != nil {
		return nil, nil, err
	}
	resp, err := r.client.GetJobMetrics(ctx, &jobpb.GetJobMetricsRequest{JobId: id})
	if err != nil {
		return nil, nil, err
	}
	return resp.GetMetrics().GetCommitted(), resp.GetMetrics().GetAttempted(), nil
}

// Metrics returns the job's committed metrics.
func (r *Remote) Metrics(ctx context.Context) (metrics.Results, error) {
	committed, _, err := r.monitoring(ctx)
	if err != nil {
		return metrics.Results{}, err
	}
	return *metricsx.FromMonitoringInfos(nil, nil, committed), nil
}

// Counters returns the job's committed user counters (by namespace/name)
// and the sum of its element counts (as "elements").
func (r *Remote) Counters(ctx context.Context) (map[string]int64, error) {
	committed, _, err := r.monitoring(ctx)
	if err != nil {
		return nil, err
	}
	return counters(committed), nil
}

func counters(mis []*pipepb.MonitoringInfo) map[string]int64 {
	out := map[string]int64{}
	for _, mi := range mis {
		var name string
		switch mi.GetUrn() {
		case "beam:metric:user:sum_int64:v1":
			name = mi.GetLabels()["NAMESPACE"] + "/" + mi.GetLabels()["NAME"]
		case "beam:metric:element_count:v1":
			name = "elements"
		default:
			continue
		}
		if v, n := binary.Uvarint(mi.GetPayload()); n > 0 {
			out[name] += int64(v)
		}
	}
	return out
}

// Cancel asks the job server to cancel the job. Unlike cancelling
// beam.Run's context, this stops the job inside the runner too (a job
// whose client has gone keeps running there).
func (r *Remote) Cancel(ctx context.Context) error {
	id, err := r.ID(ctx)
	if err != nil {
		return err
	}
	_, err = r.client.Cancel(ctx, &jobpb.CancelJobRequest{JobId: id})
	return err
}

// Jobs lists the jobs on the job server at endpoint, finished ones
// included.
func Jobs(ctx context.Context, endpoint string) ([]*jobpb.JobInfo, error) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	resp, err := jobpb.NewJobServiceClient(conn).GetJobs(ctx, &jobpb.GetJobsRequest{})
	return resp.GetJobInfo(), err
}
