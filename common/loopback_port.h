// Loopback ports for servers started on 127.0.0.1 (the etcd members of `granary cluster
// --replicas`; Redis and etcd in tests): finding a free one and checking that a server accepts
// connections on one.
#ifndef GRANARY_COMMON_LOOPBACK_PORT_H_
#define GRANARY_COMMON_LOOPBACK_PORT_H_

namespace granary {

// Binds 127.0.0.1:`port` (0: any free port) and closes it again: the port bound, or 0 when
// binding failed (something else has it). A port found free may be taken before it is used.
int BindLoopbackPort(int port);

// A TCP connection to 127.0.0.1:`port` (a blocking, close-on-exec socket the caller owns and
// closes), or -1 when nothing accepts it.
int ConnectLoopback(int port);

// Whether something accepts a TCP connection on 127.0.0.1:`port` now.
bool AcceptsOnLoopback(int port);

}  // namespace granary

#endif  // GRANARY_COMMON_LOOPBACK_PORT_H_
