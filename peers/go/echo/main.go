// Command echo is the goroutine-per-connection peer of schedlab's threads.net.echo
// probe: a TCP server on one address that reads one byte at a time from each connection
// and writes it back, until the client closes it. It speaks exactly the protocol of the
// probe's own servers, so the probe's client measures it with server=ADDR
// (see peers/README.md).
//
// Written as Go programs are: net.Listen, a goroutine per accepted connection, blocking
// Read and Write (the runtime's netpoller parks the goroutine, not a thread). TCP_NODELAY
// is Go's default for TCP connections, as in the probe's servers.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7000", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "echo: listen on %s: %v\n", *addr, err)
		os.Exit(1)
	}
	// The line a script waits for before it starts the client.
	fmt.Printf("listening %s pid %d\n", ln.Addr(), os.Getpid())
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "echo: accept: %v\n", err)
			os.Exit(1)
		}
		go serve(c)
	}
}

// serve echoes one byte at a time until the client closes the connection.
func serve(c net.Conn) {
	defer c.Close()
	b := make([]byte, 1)
	for {
		n, err := c.Read(b)
		if n > 0 {
			if _, werr := c.Write(b[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
