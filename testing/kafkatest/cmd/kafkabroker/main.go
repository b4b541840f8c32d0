// Command kafkabroker serves a throwaway Apache Kafka broker (KRaft, the
// one of testing/kafkatest) on loopback until Ctrl-C, for runjob
// --pipeline=kafka and for trying the Kafka IO by hand:
//
//	go run ./testing/kafkatest/cmd/kafkabroker --topics=orders_with_duplicates:2,orders_deduplicated:2
//	KAFKA_BROKERS=127.0.0.1:PORT
//
// It prints the bootstrap address once the broker serves and the topics
// exist. The storage is removed when it exits; the broker dies with it.
// The first run on a machine resolves the broker's jars with mvn.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/beamdedup/beamdedup/testing/kafkatest"
)

func main() {
	topics := flag.String("topics", "", "comma-separated topics to create, each name:partitions (partitions default to 2)")
	heap := flag.String("heap", "512m", "the broker JVM's maximum heap")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *topics, *heap); err != nil {
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, topics, heap string) error {
	b, err := kafkatest.Start(ctx, kafkatest.Options{Heap: heap})
	if err != nil {
		return err
	}
	defer b.Close()
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, t := range strings.Split(topics, ",") {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		name, n, _ := strings.Cut(t, ":")
		partitions := 2
		if n != "" {
			if partitions, err = strconv.Atoi(n); err != nil || partitions <= 0 {
				return fmt.Errorf("--topics: %q: want name:partitions with a positive count", t)
			}
		}
		if err := b.CreateTopic(cctx, name, partitions); err != nil {
			return err
		}
	}
	fmt.Printf("KAFKA_BROKERS=%s\n", b.Addr)
	fmt.Fprintf(os.Stderr, "kafkabroker: Kafka %s serving at %s (storage %s); Ctrl-C stops it\n", kafkatest.KafkaVersion, b.Addr, b.Dir)
	<-ctx.Done()
	return nil
}
