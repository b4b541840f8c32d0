package flinkrest

import (
	"context"
	"net/http"
)

// ClusterConfig returns the JobManager's configuration (state.savepoints.dir,
// state.checkpoints.dir, ...), as /jobmanager/config lists it.
func (c *Client) ClusterConfig(ctx context.Context) (map[string]string, error) {
	var entries []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	}
	if err := c.do(ctx, http.MethodGet, "/jobmanager/config", nil, &entries); err != nil {
		return nil, err
	}
	conf := make(map[string]string, len(entries))
	for _, e := range entries {
		conf[e.Key] = e.Value
	}
	return conf, nil
}
