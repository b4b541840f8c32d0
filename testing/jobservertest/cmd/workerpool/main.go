// Command workerpool serves Beam Go's external worker pool
// (github.com/apache/beam/sdks/v2/go/container/pool), as the boot
// loader's --worker_pool mode does, but on a port of your choice: the boot
// loader listens on :50000, fixed in container/boot.go, so two pools on
// one machine (two tests, or a test and a running service) collide. Each
// worker a runner asks the pool for is started as the boot loader given
// with --boot, exactly as the boot loader's own pool starts itself.
//
//	workerpool --boot=/path/to/boot [--port=0]
//
// With --port=0 it picks a free port. It prints "WORKER_POOL=localhost:PORT"
// once it listens, and serves until interrupted. The pool starts a process
// for anyone who asks, and Beam's listens on every interface: this one
// answers this machine only (internal/jobrun/loopback).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/apache/beam/sdks/v2/go/container/pool"

	"github.com/beamdedup/beamdedup/internal/jobrun/loopback"
)

func main() {
	boot := flag.String("boot", "", "the boot loader each worker runs (required)")
	port := flag.Int("port", 0, "port to listen on; 0 picks a free one")
	flag.Parse()
	if *boot == "" {
		log.Fatal("workerpool: --boot is required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv, addr, err := listen(ctx, *port, *boot)
	if err != nil {
		log.Fatalf("workerpool: %v", err)
	}
	fmt.Printf("WORKER_POOL=%s\n", addr)
	go func() {
		<-ctx.Done()
		srv.Stop(context.Background())
	}()
	if err := srv.ServeAndWait(); err != nil {
		log.Fatalf("workerpool: %v", err)
	}
}

// listen starts the pool on port, or on a free one when port is 0. The
// pool takes a port number, not a listener, so a free port is looked up
// first; a port taken in between is retried with another.
func listen(ctx context.Context, port int, boot string) (*pool.Process, string, error) {
	for attempt := 0; ; attempt++ {
		p := port
		if p == 0 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, "", err
			}
			p = l.Addr().(*net.TCPAddr).Port
			l.Close()
		}
		var srv *pool.Process
		err := loopback.Listen(p, func() (err error) {
			srv, err = pool.New(ctx, p, boot)
			return err
		})
		if srv != nil {
			if err != nil {
				log.Printf("workerpool: warning: listening on every interface: %v", err)
			}
			return srv, fmt.Sprintf("localhost:%d", p), nil
		}
		if port != 0 || attempt == 4 {
			return nil, "", err
		}
	}
}
