// Command fib is the Go peer of schedlab's threads.forkjoin kind=fib (issue 23): fib(n)
// where every call above the cut-off (depth levels from the root) starts a goroutine for
// fib(n-1), computes fib(n-2) itself and then waits for the goroutine's result on a
// channel; below the cut-off it recurses sequentially. It prints the wall time of each
// round and the process's peak resident memory (getrusage ru_maxrss).
//
// One processor or two: set GOMAXPROCS (and pin with taskset) as peers/README.md shows.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"
)

func fib(n int) uint64 {
	if n < 2 {
		return uint64(n)
	}
	return fib(n-1) + fib(n-2)
}

// pfib is fib(n) with a goroutine per call down to depth levels.
func pfib(n, depth int) uint64 {
	if n < 2 || depth == 0 {
		return fib(n)
	}
	ch := make(chan uint64, 1)
	go func() { ch <- pfib(n-1, depth-1) }()
	b := pfib(n-2, depth-1)
	return <-ch + b
}

// spawns counts the goroutines pfib(n, depth) starts.
func spawns(n, depth int) uint64 {
	if n < 2 || depth == 0 {
		return 0
	}
	return 1 + spawns(n-1, depth-1) + spawns(n-2, depth-1)
}

func main() {
	n := flag.Int("n", 32, "fib(n)")
	depth := flag.Int("depth", 20, "levels from the root that start a goroutine")
	rounds := flag.Int("rounds", 3, "rounds to time")
	flag.Parse()
	want := fib(*n)
	fmt.Printf("fib(%d) depth %d: %d goroutines per round, GOMAXPROCS=%d\n",
		*n, *depth, spawns(*n, *depth), runtime.GOMAXPROCS(0))
	for r := 1; r <= *rounds; r++ {
		t := time.Now()
		got := pfib(*n, *depth)
		elapsed := time.Since(t)
		if got != want {
			fmt.Fprintf(os.Stderr, "fib: fib(%d) gave %d, expected %d\n", *n, got, want)
			os.Exit(1)
		}
		fmt.Printf("round %d: %.3f s\n", r, elapsed.Seconds())
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fmt.Fprintf(os.Stderr, "fib: getrusage: %v\n", err)
		os.Exit(1)
	}
	// ru_maxrss is in KiB on Linux.
	fmt.Printf("peak RSS %.1f MiB, minor faults %d, system time %.2f s\n",
		float64(ru.Maxrss)/1024, ru.Minflt,
		float64(ru.Stime.Sec)+float64(ru.Stime.Usec)/1e6)
}
