// Why a channel to a Granary server does not connect although something listens at its address:
// the two ends disagree on transport security (SECURITY.md). gRPC reports every failed handshake
// as the server being unavailable and keeps retrying, so a plain-text client of a TLS dispatcher
// would wait out its deadline and call the dispatcher unreachable. Instead:
//
//  * WaitForChannel waits for the channel in short slices; whenever gRPC has given up on an
//    attempt (TRANSIENT_FAILURE), it probes the address once (ProbeHandshake). Nothing listening
//    (refused, or no answer) means the server is down or not up yet: it keeps waiting, and at the
//    deadline the server is unreachable as before. Once something answers, the probe's verdict
//    ends the wait at once with an error saying what to change — or, when the handshake works as
//    configured, the failure lies elsewhere and it waits on without probing again.
//  * ProbeHandshake opens a TCP connection or two and speaks the first bytes of each protocol:
//    an HTTP/2 connection preface in plain text (a plain-text gRPC server answers with its
//    SETTINGS frame; a TLS server does not), and a TLS handshake (ALPN h2, as gRPC's) verifying
//    the server against the CA and the address dialled and presenting the client's certificate
//    when it has one, then reads the server's SETTINGS frame (sending the preface if it waits
//    for it). A server that refuses the client's certificate says so by an alert, which TLS 1.3
//    delivers after the client's side of the handshake — or, as gRPC's does, hangs up without
//    one; then a third handshake without the certificate tells whether the certificate is
//    what it refused.
//
// Thread-safe (no shared state).
#ifndef GRANARY_SECURITY_HANDSHAKE_PROBE_H_
#define GRANARY_SECURITY_HANDSHAKE_PROBE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "security/transport_security.h"

namespace granary {

enum class HandshakeVerdict {
  kNoAnswer,                  // nothing accepts a TCP connection at the address (in time)
  kAgrees,                    // the handshake `security` asks for works
  kServerSpeaksTls,           // a plain-text client, a TLS server
  kServerSpeaksPlainText,     // a TLS client, a plain-text server
  kServerNotTrusted,          // the server's certificate fails verification (CA, or the address)
  kClientCertificateRefused,  // the server refused the client's certificate
  kUnrecognized,  // something answers, neither as a gRPC server in plain text nor in TLS
};

struct HandshakeProbe {
  HandshakeVerdict verdict = HandshakeVerdict::kNoAnswer;
  // OpenSSL's reason for the TLS verdicts (e.g. "unable to get local issuer certificate").
  std::string detail;
};

// Probes the server at `address` ("host:port", "[v6]:port") as a client secured by `security`
// would connect to it, each connection and exchange bounded by `timeout`.
HandshakeProbe ProbeHandshake(const std::string& address, const TransportSecurity& security,
                              absl::Duration timeout);

// The error a client secured by `security` reports when `probe` is what it found at the
// `role` ("dispatcher") at `address`: FailedPrecondition when one end speaks TLS and the other
// plain text, Unauthenticated when a certificate is refused — each naming the setting to pass
// (security.names) — and OK for the verdicts that are no mismatch.
absl::Status HandshakeMismatchError(absl::string_view role, const std::string& address,
                                    const TransportSecurity& security, const HandshakeProbe& probe);

// Waits up to `timeout` for `channel` (to the `role` at `address`, secured by `security`) to
// connect, as the walkthrough above says. Unavailable "<role> <address> is not reachable" when
// it did not connect in time; HandshakeMismatchError's error as soon as a probe finds one.
absl::Status WaitForChannel(grpc::Channel& channel, absl::string_view role,
                            const std::string& address, const TransportSecurity& security,
                            absl::Duration timeout);

}  // namespace granary

#endif  // GRANARY_SECURITY_HANDSHAKE_PROBE_H_
