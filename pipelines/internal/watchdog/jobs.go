package watchdog

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	pipepb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/pipeline_v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Jobs observes and cancels the running jobs of a portable job server
// (Prism's in-process one included: its address is in jobopts.Endpoint
// once beam.Run has started it). It reads the committed metrics, those of
// finished bundles: a job whose bundles crawl (a row a second) makes no
// progress that counts, while its in-flight ("attempted") counters would
// still creep.
type Jobs struct {
	// Endpoint returns the job server's address; "" while unknown.
	Endpoint func() string

	mu     sync.Mutex
	addr   string
	conn   *grpc.ClientConn
	client jobpb.JobServiceClient
}

func (j *Jobs) dial() (jobpb.JobServiceClient, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	addr := j.Endpoint()
	if addr == "" {
		return nil, fmt.Errorf("no job server yet")
	}
	if j.client != nil && addr == j.addr {
		return j.client, nil
	}
	if j.conn != nil {
		j.conn.Close()
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	j.addr, j.conn, j.client = addr, conn, jobpb.NewJobServiceClient(conn)
	return j.client, nil
}

// Close closes the connection to the job server.
func (j *Jobs) Close() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.conn != nil {
		j.conn.Close()
		j.conn, j.client = nil, nil
	}
}

func (j *Jobs) running(ctx context.Context) (jobpb.JobServiceClient, []string, error) {
	c, err := j.dial()
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.GetJobs(ctx, &jobpb.GetJobsRequest{})
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, info := range resp.GetJobInfo() {
		if info.GetState() == jobpb.JobState_RUNNING {
			ids = append(ids, info.GetJobId())
		}
	}
	return c, ids, nil
}

// Counters sums the committed user counters (by namespace/name) and element
// counts (as "elements") of the running jobs.
func (j *Jobs) Counters(ctx context.Context) (map[string]int64, error) {
	c, ids, err := j.running(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, id := range ids {
		resp, err := c.GetJobMetrics(ctx, &jobpb.GetJobMetricsRequest{JobId: id})
		if err != nil {
			return nil, err
		}
		for _, mi := range resp.GetMetrics().GetCommitted() {
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

// CancelRunning asks the job server to cancel every running job. Unlike
// cancelling beam.Run's context, this stops the job inside the runner too
// (with Prism in process, a job whose client has gone keeps running).
func (j *Jobs) CancelRunning(ctx context.Context) error {
	c, ids, err := j.running(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := c.Cancel(ctx, &jobpb.CancelJobRequest{JobId: id}); err != nil {
			return err
		}
	}
	return nil
}
