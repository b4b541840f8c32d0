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
//
// With --demo_keys it plays the streaming demo's script
// (internal/pubsubdemo): it creates the demo's topics and subscription,
// publishes orders with exact duplicates and undecodable payloads, loses
// the scripted acks, and takes commands on stdin, one a line, until it
// ends: "later" publishes the publisher retries, "report" prints what it
// saw as one JSON line (pubsubdemo.Report). runjob --pipeline=streaming
// starts it so.
package main

import (
	"bufio"
	"context"
	"encoding/json"
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
	"github.com/beamdedup/beamdedup/internal/pubsubdemo"
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
	var sc pubsubdemo.Script
	fs.IntVar(&sc.Keys, "demo_keys", 0, "play the streaming demo with this many orders (and take commands on stdin until it ends)")
	fs.IntVar(&sc.RetryEvery, "demo_retry_every", 0, "demo: every n-th order published again as a publisher retry (0: the default, negative: none)")
	fs.IntVar(&sc.LostAckEvery, "demo_lost_ack_every", 0, "demo: the first ack of every n-th message lost (0: the default, negative: none)")
	fs.Uint64Var(&sc.Seed, "demo_seed", 0, "demo: the seed of the orders (0: the default)")
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
	if sc.Keys > 0 {
		return demo(ctx, srv, sc, stdout, stdin)
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

// demo plays the demo's script on srv and answers the commands on stdin
// until it ends.
func demo(ctx context.Context, srv *pubsubtest.Server, sc pubsubdemo.Script, stdout io.Writer, stdin io.Reader) error {
	first, later := script(sc)
	for _, t := range []string{pubsubdemo.Input, pubsubdemo.Output, pubsubdemo.DeadLetters} {
		if _, err := srv.CreateTopic(ctx, t); err != nil {
			return err
		}
	}
	if _, err := srv.CreateSubscription(ctx, pubsubdemo.Input, pubsubdemo.Subscription, 10*time.Second); err != nil {
		return err
	}
	lost := map[string]bool{}
	for _, m := range first {
		id := srv.PublishRaw(pubsubdemo.Input, m.Data, m.Attrs)
		if m.LoseAck {
			lost[id+":1"] = true // the first delivery's ack id in pstest
		}
	}
	srv.DropAcks(func(ackID string) bool { return lost[ackID] })
	fmt.Fprintf(stdout, "PUBSUB_EMULATOR_HOST=%s\n", srv.Addr)
	in := bufio.NewScanner(stdin)
	for in.Scan() {
		switch cmd := strings.TrimSpace(in.Text()); cmd {
		case "later":
			for _, m := range later {
				srv.PublishRaw(pubsubdemo.Input, m.Data, m.Attrs)
			}
			fmt.Fprintln(stdout, "ok")
		case "report":
			r := report(sc.Defaults().Keys, len(lost), srv.MessagesOn(pubsubdemo.Input), srv.MessagesOn(pubsubdemo.Output), srv.MessagesOn(pubsubdemo.DeadLetters))
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s\n", b)
		default:
			fmt.Fprintf(stdout, "error: unknown command %q (later, report)\n", cmd)
		}
	}
	return nil
}
