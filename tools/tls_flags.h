// The transport-security flags every networked command shares (SECURITY.md): --tls_cert,
// --tls_key, --tls_ca and --insecure.
#ifndef GRANARY_TOOLS_TLS_FLAGS_H_
#define GRANARY_TOOLS_TLS_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "security/transport_security.h"

ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(bool, insecure);

namespace granary {

// The TransportSecurity the flags give (checked when credentials are made from it).
TransportSecurity TransportSecurityFromFlags();

}  // namespace granary

#endif  // GRANARY_TOOLS_TLS_FLAGS_H_
