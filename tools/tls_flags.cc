#include "tools/tls_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) of this process: its identity for mutual TLS (SECURITY.md).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM certificate(s) of the CA every peer is verified against.");
ABSL_FLAG(bool, insecure, false,
          "Plain text: no encryption, no authentication. Only where every host that can reach "
          "the ports is trusted; without it, the TLS flags are required.");

namespace granary {

TransportSecurity TransportSecurityFromFlags() {
  TransportSecurity security;
  security.cert_file = absl::GetFlag(FLAGS_tls_cert);
  security.key_file = absl::GetFlag(FLAGS_tls_key);
  security.ca_file = absl::GetFlag(FLAGS_tls_ca);
  security.insecure = absl::GetFlag(FLAGS_insecure);
  return security;
}

}  // namespace granary
