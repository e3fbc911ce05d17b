// A TCP listening socket bound to one address, handed to c10d's TCPStore (masterListenFd) so
// the rendezvous store never listens on more interfaces than the job needs.
#pragma once

#include <string>

namespace accelerate::detail {

/// Binds and listens on host:port (a numeric address or a name); returns the socket. Throws
/// std::runtime_error naming the address when it is busy or cannot be bound.
int listen_on(const std::string& host, int port);

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string& host);

} // namespace accelerate::detail
