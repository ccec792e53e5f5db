#!/usr/bin/python3
"""A flood of silent TCP connections on the gRPC port, measured from outside.

For each server (this build's tide, and with --reference-tide another one, e.g. a build from before
the gRPC connection gate, measured in the same run):
 1. start `tide serve` under `prlimit --nofile=FILES:FILES` with the gRPC edge on a free port;
 2. open FLOOD TCP connections to the gRPC port that never send a byte, and wait SETTLE seconds;
 3. a NEW gRPC client calls KServe ServerReady and grpc.health.v1 Check("liveness") with a
    DEADLINE-second deadline each, and GET /v2/health/ready on the HTTP port;
 4. print how long each took (or its error), and the server's gRPC eviction counters.

usage: bench/grpc_flood/flood.py --models DIR [--tide build/tide] [--reference-tide PATH]
         [--files 4096] [--flood 6000] [--settle 3] [--deadline 10] [--out FILE]
"""
import argparse
import os
import re
import resource
import socket
import subprocess
import sys
import time
import urllib.request

import grpc

TRUE = b"\x08\x01"  # ServerReadyResponse{ready: true}, HealthCheckResponse{status: SERVING}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tide, files, models, grpc_port):
    cmd = ["prlimit", f"--nofile={files}:{files}", tide, "serve", "--model-repository", models,
           "--port", "0", "--grpc-port", str(grpc_port), "--log-level", "warn"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 180
    for line in proc.stdout:
        m = re.match(r"tide: listening on http://([^:]+):(\d+)", line)
        if m:
            return proc, int(m.group(2))
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError(f"{tide} did not start")


def timed(fn):
    t0 = time.monotonic()
    try:
        result = fn()
        return (time.monotonic() - t0) * 1000, result
    except Exception as e:  # noqa: BLE001 - the error is the measurement
        return (time.monotonic() - t0) * 1000, f"error: {getattr(e, 'code', lambda: type(e).__name__)()}"


def metric(text, name, labels):
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(label in line for label in labels):
            total += float(line.rsplit(" ", 1)[1])
    return total


def run(label, tide, args):
    grpc_port = free_port()
    proc, http_port = start(tide, args.files, args.models, grpc_port)
    flood = []
    try:
        for _ in range(args.flood):
            s = socket.socket()
            s.setblocking(False)
            try:
                s.connect(("127.0.0.1", grpc_port))
            except BlockingIOError:
                pass
            flood.append(s)
        time.sleep(args.settle)
        raw = dict(request_serializer=lambda b: b, response_deserializer=lambda b: b)
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        ready = channel.unary_unary("/inference.GRPCInferenceService/ServerReady", **raw)
        check = channel.unary_unary("/grpc.health.v1.Health/Check", **raw)
        ready_ms, ready_r = timed(lambda: ready(b"", timeout=args.deadline))
        check_ms, check_r = timed(lambda: check(b"\x0a\x08liveness", timeout=args.deadline))
        url = f"http://127.0.0.1:{http_port}"
        http_ms, http_r = timed(lambda: urllib.request.urlopen(url + "/v2/health/ready", timeout=args.deadline).status)
        _, metrics = timed(lambda: urllib.request.urlopen(url + "/metrics", timeout=args.deadline).read().decode())
        if metrics.startswith("error"):
            metrics = ""  # the counters are then reported as 0
        channel.close()
    finally:
        for s in flood:
            s.close()
        proc.terminate()
        proc.wait(30)
    ok = lambda r, want: "ok" if r == want else r  # noqa: E731
    evicted = metric(metrics, "tide_http_connection_limit_total", ['listener="grpc"', 'action="evicted"'])
    refused = metric(metrics, "tide_http_connection_limit_total", ['listener="grpc"', 'action="refused"'])
    cap = metric(metrics, "tide_grpc_max_connections", [])
    return (f"{label:10} ServerReady {ready_ms:8.1f} ms {ok(ready_r, TRUE)!s:24} "
            f"health {check_ms:8.1f} ms {ok(check_r, TRUE)!s:24} HTTP ready {http_ms:7.1f} ms {ok(http_r, 200)!s:8} "
            f"grpc cap {cap:.0f} evicted {evicted:.0f} refused {refused:.0f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tide", default="build/tide")
    p.add_argument("--reference-tide")
    p.add_argument("--models", required=True)
    p.add_argument("--files", type=int, default=4096)
    p.add_argument("--flood", type=int, default=6000)
    p.add_argument("--settle", type=float, default=3)
    p.add_argument("--deadline", type=float, default=10)
    p.add_argument("--out")
    args = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < args.flood + 256:
        sys.exit(f"flood: hard open-file limit {hard} is below {args.flood + 256}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    lines = [f"# bench/grpc_flood/flood.py --files {args.files} --flood {args.flood} --settle {args.settle} "
             f"--deadline {args.deadline}; {os.cpu_count()} cores, load {open('/proc/loadavg').read().split()[0]}"]
    if args.reference_tide:
        lines.append(run("reference", args.reference_tide, args))
        print(lines[-1], flush=True)
    lines.append(run("this", args.tide, args))
    print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
