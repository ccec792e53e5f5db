"""An OTLP/HTTP receiver for bench/tracing_cost/run.sh: answers every POST 200 and discards the body
(nothing is decoded). Writes its port to argv[1], and after each export "N exports, B bytes" to
argv[2]."""
import http.server
import sys
import threading

port_file, count_file = sys.argv[1], sys.argv[2]
lock = threading.Lock()
totals = [0, 0]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        self.rfile.read(length)
        with lock:
            totals[0] += 1
            totals[1] += length
            with open(count_file, "w") as f:
                f.write(f"{totals[0]} exports, {totals[1]} bytes")
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file, "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
