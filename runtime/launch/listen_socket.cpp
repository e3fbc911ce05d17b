#include "listen_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace accelerate::detail {

bool is_loopback(const std::string &host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

int listen_on(const std::string &host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo *found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    throw ListenError("accelerate: cannot resolve the main process address '" + host +
                          "': " + gai_strerror(rc),
                      0);
  }
  std::string last_error = "no address";
  int last_errno = 0;
  for (addrinfo *candidate = found; candidate != nullptr; candidate = candidate->ai_next) {
    int fd =
        socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC, candidate->ai_protocol);
    if (fd < 0) {
      last_errno = errno;
      last_error = std::strerror(errno);
      continue;
    }
    const int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (bind(fd, candidate->ai_addr, candidate->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      freeaddrinfo(found);
      return fd;
    }
    last_errno = errno;
    last_error = std::strerror(errno);
    close(fd);
  }
  freeaddrinfo(found);
  throw ListenError("accelerate: rank 0 cannot listen on " + host + ":" + service +
                        " for the rendezvous: " + last_error,
                    last_errno);
}

bool accepts_connections(const std::string &host, int port, int within_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return false;
  }
  bool accepted = false;
  for (addrinfo *candidate = found; candidate != nullptr && !accepted;
       candidate = candidate->ai_next) {
    const int fd =
        socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
               candidate->ai_protocol);
    if (fd < 0) {
      continue;
    }
    if (connect(fd, candidate->ai_addr, candidate->ai_addrlen) == 0) {
      accepted = true;
    } else if (errno == EINPROGRESS) {
      pollfd waiting{fd, POLLOUT, 0};
      int error = 0;
      socklen_t length = sizeof(error);
      accepted = poll(&waiting, 1, within_ms) == 1 &&
                 getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return accepted;
}

int inherited_listen_socket(const std::string &descriptor) {
  int fd = -1;
  try {
    fd = std::stoi(descriptor);
  } catch (const std::exception &) {
  }
  int listening = 0;
  socklen_t length = sizeof(listening);
  if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) != 0 ||
      listening == 0) {
    throw std::runtime_error("accelerate: ACCELERATE_STORE_LISTEN_FD=" + descriptor +
                             " is not a listening socket (set by accel launch for rank 0 only)");
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC); // not for any process this one starts
  return fd;
}

} // namespace accelerate::detail
