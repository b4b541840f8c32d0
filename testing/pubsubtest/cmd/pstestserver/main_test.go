package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestServesTheConfiguredSubscriptionForPubsubEmulatorHost(t *testing.T) {
	r, w := io.Pipe()
	stop := make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--port=0", "--project=p", "--topics=in,out", "--subscriptions=in-sub:in"}, w, stop, nil)
		w.Close()
	}()
	line, err := bufio.NewReader(r).ReadString('\n')
	require.NoError(t, err)
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "PUBSUB_EMULATOR_HOST=")
	require.True(t, ok, line)

	t.Setenv("PUBSUB_EMULATOR_HOST", addr) // the client needs no other option
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pubsub.NewSubscriptionAdminClient(ctx)
	require.NoError(t, err)
	defer c.Close()
	sub, err := c.GetSubscription(ctx, &pubsubpb.GetSubscriptionRequest{Subscription: "projects/p/subscriptions/in-sub"})
	require.NoError(t, err)
	assert.Equal(t, "projects/p/topics/in", sub.Topic)

	stop <- os.Interrupt
	require.NoError(t, <-done)
}

func TestRejectsAMalformedSubscriptionFlag(t *testing.T) {
	err := run([]string{"--port=0", "--subscriptions=nocolon"}, io.Discard, make(chan os.Signal), nil)
	require.ErrorContains(t, err, "sub:topic")
}

func TestExitsWhenStdinEnds(t *testing.T) {
	in, closeIn := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run([]string{"--port=0", "--exit_on_stdin_eof"}, io.Discard, make(chan os.Signal), in) }()
	closeIn.Close()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		require.FailNow(t, "still serving 10s after stdin ended")
	}
}
