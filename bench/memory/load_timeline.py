#!/usr/bin/python3
"""Where a model's load-time memory peak comes from.

Starts `tide serve` on one model entry, samples the process's VmRSS every few milliseconds from
its start until it listens, then sends warm-up rerank requests and reads the steady VmRSS. Prints
the peak (VmHWM), the steady VmRSS after warm-up, their ratio (issue #30's target: <= 1.3), and a
timeline: the RSS high point between consecutive log lines of the server, so the phase that makes
the peak (the graph parse, fusion, a probe session, shared weights, an instance's session,
warm-up) is named by the log line that ends it.

usage: bench/memory/load_timeline.py MODEL_DIR [--tide build/tide] [--requests 4] [--docs 8]
                                     [--interval-ms 5] [-- extra tide serve flags]
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def status_kib(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--tide", default="build/tide")
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--docs", type=int, default=8)
    ap.add_argument("--interval-ms", type=float, default=5.0)
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()

    model = os.path.abspath(args.model.rstrip("/"))
    work = tempfile.mkdtemp(prefix="tide-load-timeline-")
    repo = os.path.join(work, "repo")
    os.mkdir(repo)
    os.symlink(model, os.path.join(repo, os.path.basename(model)))
    port = free_port()
    cmd = [args.tide, "serve", "--model-repository", repo, "--host", "127.0.0.1", "--port", str(port)] + args.extra
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines = []  # (t, text)
    listening = threading.Event()

    def read_log():
        for line in proc.stdout:
            lines.append((time.monotonic() - t0, line.rstrip("\n")))
            if "listening" in line:
                listening.set()

    reader = threading.Thread(target=read_log, daemon=True)
    reader.start()
    samples = []  # (t, rss_kib)
    while not listening.is_set():
        if proc.poll() is not None:
            reader.join(timeout=2)
            print("\n".join(l for _, l in lines[-30:]), file=sys.stderr)
            sys.exit(f"load_timeline: tide exited with {proc.returncode} before listening")
        if time.monotonic() - t0 > args.timeout:
            proc.kill()
            sys.exit("load_timeline: no 'listening' line within the timeout")
        rss = status_kib(proc.pid, "VmRSS")
        if rss is not None:
            samples.append((time.monotonic() - t0, rss))
        time.sleep(args.interval_ms / 1000.0)
    hwm_ready = status_kib(proc.pid, "VmHWM")
    rss_ready = status_kib(proc.pid, "VmRSS")

    texts = [f"Document {i}: water boils at one hundred degrees Celsius at standard atmospheric pressure."
             for i in range(args.docs)]
    body = json.dumps({"query": "what is the boiling point of water at sea level", "texts": texts}).encode()
    for _ in range(args.requests):
        req = urllib.request.Request(f"http://127.0.0.1:{port}/rerank", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            r.read()
    time.sleep(1.0)
    rss_steady = status_kib(proc.pid, "VmRSS")
    hwm_final = status_kib(proc.pid, "VmHWM")
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    reader.join(timeout=2)
    shutil.rmtree(work, ignore_errors=True)

    mib = lambda k: k / 1024.0
    print(f"# bench/memory/load_timeline.py {args.model} ({os.path.getsize(os.path.join(model, '1', 'model.onnx')) >> 20} MiB model.onnx); "
          f"load {open('/proc/loadavg').read().split()[0]}")
    print(f"ready after {samples[-1][0] if samples else 0:.1f} s; VmHWM at ready {mib(hwm_ready):.0f} MiB, "
          f"VmRSS at ready {mib(rss_ready):.0f} MiB")
    print(f"after {args.requests} x {args.docs}-document requests: VmRSS {mib(rss_steady):.0f} MiB, VmHWM {mib(hwm_final):.0f} MiB; "
          f"peak / steady = {hwm_final / rss_steady:.2f}")
    print("timeline (RSS high point before each log line; sampled every "
          f"{args.interval_ms:g} ms, so short spikes may read low: VmHWM is exact):")
    prev_t = 0.0
    for t, text in lines:
        if "listening" in text and t > (samples[-1][0] if samples else 0) + 1:
            break
        seg = [r for (ts, r) in samples if prev_t <= ts <= t]
        if seg:
            print(f"  {t:7.2f} s  max {mib(max(seg)):7.0f} MiB  | {text[:150]}")
        prev_t = t
        if "listening" in text:
            break


if __name__ == "__main__":
    main()
