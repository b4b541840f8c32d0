package streaming

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/beamdedup/beamdedup/transforms/dedup"
)

func TestLiveStatusDrainedOnlyWhenEverythingReadWasAckedAndPublished(t *testing.T) {
	// 10 deliveries: 2 undecodable, 8 rows of which 5 distinct keys.
	drained := LiveStatus{Read: 10, Acked: 10, DeadLettered: 2, Published: 7, ReadersEnded: 2,
		Dedup: dedup.Counters{RowsIn: 8, Emitted: 5, DuplicatesDropped: 3}}
	tests := []struct {
		name   string
		change func(*LiveStatus)
		want   bool
	}{
		{"all accounted for", func(*LiveStatus) {}, true},
		{"a reader still running", func(s *LiveStatus) { s.ReadersEnded = 1 }, false},
		{"last bundle not yet acked", func(s *LiveStatus) { s.Acked = 7 }, false},
		{"rows still on their way to KeepFirst", func(s *LiveStatus) { s.Dedup.RowsIn, s.Dedup.DuplicatesDropped = 6, 1 }, false},
		{"an emitted row not yet published", func(s *LiveStatus) { s.Published = 6 }, false},
		{"a dead letter not yet published", func(s *LiveStatus) { s.Published = 5 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := drained
			tt.change(&s)
			assert.Equal(t, tt.want, s.Drained(2))
		})
	}
}

func TestRunLiveRejectsIncompleteOrMalformedNames(t *testing.T) {
	ok := Config{Subscription: "projects/p/subscriptions/s", OutputTopic: "projects/p/topics/o", DeadLetterTopic: "projects/p/topics/d"}
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no dead-letter topic", func(c *Config) { c.DeadLetterTopic = "" }, "RunLive needs DeadLetterTopic"},
		{"short subscription", func(c *Config) { c.Subscription = "s" }, "not a full subscription name"},
		{"native", func(c *Config) { c.Native = true }, "Native is for Dataflow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := ok
			tt.change(&cfg)
			_, err := RunLive(context.Background(), LiveConfig{Config: cfg})
			assert.ErrorContains(t, err, tt.want)
		})
	}
}
