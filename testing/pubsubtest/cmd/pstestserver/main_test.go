package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	pubsub "cloud.google.com/go/pubsub/v2/apiv1"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/beamdedup/beamdedup/internal/pubsubdemo"
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

func TestTheDemoPublishesItsScriptAndReportsWhatItSaw(t *testing.T) {
	in, commands := io.Pipe()
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--port=0", "--project=p", "--demo_keys=20", "--demo_retry_every=5", "--demo_lost_ack_every=-1"}, w, make(chan os.Signal), in)
		w.Close()
	}()
	lines := bufio.NewReader(out)
	line, err := lines.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, "PUBSUB_EMULATOR_HOST="), line)
	say := func(cmd string) string {
		_, err := io.WriteString(commands, cmd+"\n")
		require.NoError(t, err)
		a, err := lines.ReadString('\n')
		require.NoError(t, err)
		return strings.TrimSpace(a)
	}
	var before pubsubdemo.Report
	require.NoError(t, json.Unmarshal([]byte(say("report")), &before))
	assert.Equal(t, "ok", say("later"))
	var after pubsubdemo.Report
	require.NoError(t, json.Unmarshal([]byte(say("report")), &after))
	assert.Equal(t, 20, before.Keys)
	assert.Equal(t, 3, before.Undecodable, "the default")
	assert.Equal(t, before.Published+4, after.Published, "the retries of orders 0, 5, 10 and 15, published on 'later'")
	assert.Zero(t, after.Emitted, "nothing read yet")
	assert.Contains(t, say("what"), "unknown command")
	commands.Close()
	require.NoError(t, <-done)
}
