// Command pstestserver serves the Pub/Sub client library's in-memory fake
// (pstest) as a standalone emulator, for PUBSUB_EMULATOR_HOST.
//
//	go run ./testing/pubsubtest/cmd/pstestserver --port=8085 \
//	    --topics=orders,orders-out,orders-dlq --subscriptions=orders-sub:orders
//	export PUBSUB_EMULATOR_HOST=localhost:8085
//
// State is in memory and gone when the process exits.
package main

import (
	"context"
	"flag"
	"fmt"
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
	port := flag.Int("port", 8085, "port to listen on (0 picks a free one)")
	host := flag.String("host", "127.0.0.1", "address to listen on")
	project := flag.String("project", pubsubtest.DefaultProject, "project of the topics and subscriptions created by flags")
	topics := flag.String("topics", "", "comma-separated topic ids to create")
	subs := flag.String("subscriptions", "", "comma-separated sub:topic pairs to create")
	ackDeadline := flag.Duration("ack_deadline", 10*time.Second, "ack deadline of created subscriptions")
	minAck := flag.Duration("min_ack_deadline", 0, "lower pstest's minimum ack deadline (>= 1s)")
	flag.Parse()

	if *minAck > 0 {
		pstest.SetMinAckDeadline(*minAck)
	}
	ctx := context.Background()
	srv, err := pubsubtest.StartAt(ctx, fmt.Sprintf("%s:%d", *host, *port))
	if err != nil {
		log.Fatalf("pstestserver: %v", err)
	}
	defer srv.Close()
	srv.Project = *project
	for _, t := range split(*topics) {
		if _, err := srv.CreateTopic(ctx, t); err != nil {
			log.Fatalf("pstestserver: topic %s: %v", t, err)
		}
	}
	for _, st := range split(*subs) {
		sub, topic, ok := strings.Cut(st, ":")
		if !ok {
			log.Fatalf("pstestserver: --subscriptions wants sub:topic, got %q", st)
		}
		if _, err := srv.CreateSubscription(ctx, topic, sub, *ackDeadline); err != nil {
			log.Fatalf("pstestserver: subscription %s: %v", sub, err)
		}
	}
	fmt.Printf("PUBSUB_EMULATOR_HOST=%s\n", srv.Addr)

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
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
