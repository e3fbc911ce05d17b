// A TCP listening socket bound to one address, handed to c10d's TCPStore (masterListenFd) so
// the rendezvous store never listens on more interfaces than the job needs.
#pragma once

#include <stdexcept>
#include <string>

namespace accelerate::detail {

/// Why listen_on failed: `error` is the errno of the last bind or listen (EADDRINUSE: the port
/// is busy; EADDRNOTAVAIL: the address is not this machine's), 0 when the name did not resolve.
struct ListenError : std::runtime_error {
  ListenError(const std::string &message, int error) : std::runtime_error(message), error(error) {}
  int error;
};

/// Binds and listens on host:port (a numeric address or a name); returns the socket. Throws
/// ListenError naming the address when it is busy or cannot be bound.
int listen_on(const std::string &host, int port);

/// The listening socket a launcher passed down as a descriptor number (decimal text); throws
/// std::runtime_error when it is not an open listening socket.
int inherited_listen_socket(const std::string &descriptor);

/// Whether something accepts TCP connections at host:port now (tried for at most `within_ms`):
/// tells "nothing listens there" from "something else answers there" in rendezvous errors.
bool accepts_connections(const std::string &host, int port, int within_ms);

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string &host);

} // namespace accelerate::detail
