// Command pstestserver serves the Pub/Sub client library's in-memory fake
// (pstest) as a standalone emulator, for PUBSUB_EMULATOR_HOST.
//
//	go run ./testing/pubsubtest/cmd/pstestserver --port=8085 \
//	    --topics=orders,orders-out,orders-dlq --subscriptions=orders-sub:orders
//	export PUBSUB_EMULATOR_HOST=localhost:8085
//
// State is in memory and gone when the process exits. A test that starts
// it as a child process passes --exit_on_stdin_eof and keeps its stdin
// open: the server then exits with the test, however the test exits.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2/pstest"
	"github.com/beamdedup/beamdedup/testing/pubsubtest"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	if err := run(os.Args[1:], os.Stdout, sig, os.Stdin); err != nil {
		log.Fatalf("pstestserver: %v", err)
	}
}

// run serves until stop receives (or, with --exit_on_stdin_eof, stdin
// ends); it prints PUBSUB_EMULATOR_HOST=addr once the topics and
// subscriptions exist.
func run(args []string, stdout io.Writer, stop <-chan os.Signal, stdin io.Reader) error {
	fs := flag.NewFlagSet("pstestserver", flag.ContinueOnError)
	port := fs.Int("port", 8085, "port to listen on (0 picks a free one)")
	host := fs.String("host", "127.0.0.1", "address to listen on")
	project := fs.String("project", pubsubtest.DefaultProject, "project of the topics and subscriptions created by flags")
	topics := fs.String("topics", "", "comma-separated topic ids to create")
	subs := fs.String("subscriptions", "", "comma-separated sub:topic pairs to create")
	ackDeadline := fs.Duration("ack_deadline", 10*time.Second, "ack deadline of created subscriptions")
	minAck := fs.Duration("min_ack_deadline", 0, "lower pstest's minimum ack deadline (>= 1s)")
	stdinEOF := fs.Bool("exit_on_stdin_eof", false, "exit when stdin ends (a parent process that holds it open has exited)")
	if err := fs.Parse(args); err != nil {
		return err
	}

	if *minAck > 0 {
		if *minAck < time.Second {
			return fmt.Errorf("--min_ack_deadline must be >= 1s, got %v", *minAck)
		}
		pstest.SetMinAckDeadline(*minAck)
	}
	ctx := context.Background()
	srv, err := pubsubtest.StartAt(ctx, fmt.Sprintf("%s:%d", *host, *port))
	if err != nil {
		return err
	}
	defer srv.Close()
	srv.Project = *project
	for _, t := range split(*topics) {
		if _, err := srv.CreateTopic(ctx, t); err != nil {
			return fmt.Errorf("topic %s: %w", t, err)
		}
	}
	for _, st := range split(*subs) {
		sub, topic, ok := strings.Cut(st, ":")
		if !ok {
			return fmt.Errorf("--subscriptions wants sub:topic, got %q", st)
		}
		if _, err := srv.CreateSubscription(ctx, topic, sub, *ackDeadline); err != nil {
			return fmt.Errorf("subscription %s: %w", sub, err)
		}
	}
	fmt.Fprintf(stdout, "PUBSUB_EMULATOR_HOST=%s\n", srv.Addr)
	eof := make(chan struct{})
	if *stdinEOF {
		go func() {
			io.Copy(io.Discard, stdin)
			close(eof)
		}()
	}
	select {
	case <-stop:
	case <-eof:
	}
	return nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
