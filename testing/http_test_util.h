// For tests of the HTTP endpoint: raw TCP connections to it, as an idle or slow client (or a
// probe written by hand) would make them.
#ifndef GRANARY_TESTING_HTTP_TEST_UTIL_H_
#define GRANARY_TESTING_HTTP_TEST_UTIL_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace granary::testing {

// A connected TCP socket to 127.0.0.1:port (the caller closes it), or -1.
inline int ConnectLoopback(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (s >= 0 && ::connect(s, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    return s;
  }
  if (s >= 0) ::close(s);
  return -1;
}

}  // namespace granary::testing

#endif  // GRANARY_TESTING_HTTP_TEST_UTIL_H_
