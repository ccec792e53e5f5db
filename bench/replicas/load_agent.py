#!/usr/bin/env python3
"""haproxy agent-check for tide replicas: routes by each replica's own load signal (GET /load).

For every replica address A (127.0.0.2, ...), listens on A:--agent-port; haproxy connects every
agent-inter and reads one line: "up ready NN%" (NN = weight percent), "drain" when the replica is
not ready (loading, draining), "down" when /load cannot be read. A poller per replica reads
http://A:--port/load every --interval seconds:
  weight% = min(free_percent, 100 * (1 - queued_tokens / --tokens-full)), at least 1
so a replica full of permits (other clients, direct traffic) or with long requests queued gets
fewer new requests under leastconn (which divides connections by weight) and roundrobin alike.
"""
import argparse, http.client, json, socket, socketserver, threading, time

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addresses", required=True, help="comma-separated replica addresses")
    ap.add_argument("--port", type=int, required=True, help="tide port")
    ap.add_argument("--agent-port", type=int, required=True)
    ap.add_argument("--interval", type=float, default=0.1)
    ap.add_argument("--tokens-full", type=int, default=4096)
    args = ap.parse_args()
    state = {}

    def poll(addr):
        conn = None
        while True:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(addr, args.port, timeout=1)
                conn.request("GET", "/load")
                j = json.loads(conn.getresponse().read())
                if not j["ready"]:
                    state[addr] = "drain\n"
                else:
                    token_free = max(0.0, 1.0 - j["queued_tokens"] / args.tokens_full)
                    pct = max(1, int(min(j["free_percent"], 100 * token_free)))
                    state[addr] = f"up ready {pct}%\n"
            except Exception:
                state[addr] = "down\n"
                try:
                    conn.close()
                except Exception:
                    pass
                conn = None
            time.sleep(args.interval)

    class Agent(socketserver.BaseRequestHandler):
        def handle(self):
            addr = self.server.server_address[0]
            self.request.sendall(state.get(addr, "down\n").encode())

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    for addr in args.addresses.split(","):
        threading.Thread(target=poll, args=(addr,), daemon=True).start()
        srv = socketserver.ThreadingTCPServer((addr, args.agent_port), Agent)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    while True:
        time.sleep(3600)

if __name__ == "__main__":
    main()
