#!/bin/sh
# Issue 29's table: threads.net.echo's servers (os, rt io=std, rt io=net, tokio) beside
# Go's goroutine-per-connection server
# (peers/go/echo), 16 / 256 / 2,000 connections, ROUNDS rounds interleaved (every server
# at every count once per round), each server started fresh. Every line is one variant:
# its parameters, the median time per round trip, round trips per second, the median's
# 95% interval, the samples and the probe's notes (memory per idle connection, kernel
# threads). A variant that fails prints its error and the table goes on.
#
#   sh peers/echo-table.sh [ROUNDS] [SERVERS]    from the repository's root
#
# ROUNDS defaults to 2; SERVERS to "os rt-std rt-net tokio go" (rt-live: rt-net with
# idle stacks' live frames reclaimed too, io=net-live); COUNTS=... in the
# environment replaces "16 256 2000".
# Needs cargo and Go (/usr/local/go/bin/go, or go on PATH); Go builds offline (standard
# library only). Go's binary and the server's output go to a temporary directory that is
# removed however the script ends (done, failed, Ctrl-C), with Go's server if it runs.
set -eu
rounds=${1:-2}
servers=${2:-"os rt-std rt-net tokio go"}
counts=${COUNTS:-"16 256 2000"}
go=/usr/local/go/bin/go
[ -x "$go" ] || go=go
cargo build --quiet --release -p schedlab-probes --example echo
client=target/release/examples/echo
tmp=$(mktemp -d)
pid=
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
# A signal ends the script through `exit`, so the EXIT trap runs (sh runs it on exit only).
trap 'exit 130' INT
trap 'exit 143' TERM HUP
goecho=$tmp/echo
(cd peers/go/echo && GOFLAGS=-mod=mod GOPROXY=off "$go" build -o "$goecho" .)
# The probe pins its servers to the first usable CPU; Go's goes there too (GOMAXPROCS
# follows the mask).
cpu=$(taskset -cp $$ | sed 's/.*: *//; s/[,-].*//')
echo "# $(date -u +%Y-%m-%dT%H:%MZ) load $(cut -d' ' -f1-3 /proc/loadavg) server CPU $cpu"
round=1
while [ "$round" -le "$rounds" ]; do
    for n in $counts; do
        for s in $servers; do
            case $s in
            os) "$client" "connections=$n,backend=os" || true ;;
            rt-std) "$client" "connections=$n,backend=rt,io=std" || true ;;
            rt-net) "$client" "connections=$n,backend=rt,io=net" || true ;;
            rt-live) "$client" "connections=$n,backend=rt,io=net-live" || true ;;
            tokio) "$client" "connections=$n,backend=tokio" || true ;;
            go)
                out=$tmp/go.out
                taskset -c "$cpu" "$goecho" -addr 127.0.0.1:0 >"$out" 2>&1 &
                pid=$!
                while ! grep -q listening "$out"; do sleep 0.05; done
                addr=$(sed -n 's/^listening \([^ ]*\) .*/\1/p' "$out")
                "$client" "connections=$n,server=$addr,server_pid=$pid,backend=go" || true
                kill "$pid"
                wait "$pid" 2>/dev/null || true
                pid=
                rm -f "$out"
                ;;
            *) echo "unknown server $s (os, rt-std, rt-net, rt-live, tokio, go)" >&2; exit 2 ;;
            esac
        done
    done
    round=$((round + 1))
done
echo "# $(date -u +%Y-%m-%dT%H:%MZ) load $(cut -d' ' -f1-3 /proc/loadavg)"
