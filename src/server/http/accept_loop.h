// tide::http accept loop — takes new connections off the listening socket, applies
// max_connections (evict one for the new connection, or refuse it), and starts a connection state
// machine (http_connection.h) for each one admitted.
//
// Contract: internal to server/http (included by .cc files of this folder only).
//  - StartAccepting(core) starts the first asynchronous accept on core->acceptor (opened and
//    listening); each accept starts the next, on core->accept_strand, until the acceptor closes
//    (StopAccepting/Stop). A transient accept error (EMFILE, ...) retries after 10 ms instead of
//    spinning.
//  - At max_connections the victim is ranked by EvictionChooser (connection_policy.h) over the
//    published tiers of every open connection (O(open connections), only at the cap), and closed
//    on its own strand; with no victim the new connection is refused: a plaintext one gets
//    ServerErrorResponse(kUnavailable) (503, Retry-After: 1) sent without waiting, a TLS one is
//    closed without an answer. Each eviction and refusal is counted in Core and reported to
//    options.on_connection_limit.
#pragma once

#include <memory>

#include "server/http/server_core.h"

namespace tide::http::internal {

void StartAccepting(std::shared_ptr<HttpServer::Core> core);

}  // namespace tide::http::internal
