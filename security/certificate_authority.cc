#include "security/certificate_authority.h"

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/env.h"
#include "common/status_macros.h"

namespace granary {
namespace {

constexpr long kValiditySeconds = 30L * 24 * 3600;

struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct CertFree {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;
using CertPtr = std::unique_ptr<X509, CertFree>;

absl::Status OpenSslError(const char* call) {
  return absl::InternalError(absl::StrCat("OpenSSL ", call, " failed"));
}

absl::StatusOr<KeyPtr> NewKey() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (key == nullptr) return OpenSslError("EVP_EC_gen");
  return key;
}

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (extension == nullptr) return OpenSslError("X509V3_EXT_conf_nid");
  const int added = X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
  return added == 1 ? absl::OkStatus() : OpenSslError("X509_add_ext");
}

// A certificate for `key` named `common_name`, not yet signed; self-issued when `issuer` is null.
absl::StatusOr<CertPtr> NewCertificate(EVP_PKEY* key, const std::string& common_name,
                                       X509* issuer) {
  CertPtr cert(X509_new());
  if (cert == nullptr) return OpenSslError("X509_new");
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof(serial)) != 1) return OpenSslError("RAND_bytes");
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  const bool serial_set =
      bn != nullptr && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) != nullptr;
  BN_free(bn);
  if (!serial_set) return OpenSslError("BN_to_ASN1_INTEGER");
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_set_version(cert.get(), 2) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValiditySeconds) == nullptr ||
      X509_set_pubkey(cert.get(), key) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) != 1 ||
      X509_set_issuer_name(cert.get(),
                           X509_get_subject_name(issuer != nullptr ? issuer : cert.get())) != 1) {
    return OpenSslError("X509 setup");
  }
  return cert;
}

absl::Status WritePem(const std::string& path, const std::function<int(BIO*)>& write, mode_t mode) {
  std::unique_ptr<BIO, BioFree> bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr || write(bio.get()) != 1) return OpenSslError("PEM_write");
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio.get(), &data);
  RETURN_IF_ERROR(WriteStringToFile(Env::Default(), path, std::string(data, size), false));
  if (::chmod(path.c_str(), mode) != 0) {
    return absl::InternalError(absl::StrCat("chmod ", path));
  }
  return absl::OkStatus();
}

absl::Status WriteKeyAndCert(const std::string& prefix, EVP_PKEY* key, X509* cert) {
  RETURN_IF_ERROR(WritePem(
      prefix + ".key",
      [key](BIO* bio) {
        return PEM_write_bio_PrivateKey(bio, key, nullptr, nullptr, 0, nullptr, nullptr);
      },
      0600));
  return WritePem(
      prefix + ".crt", [cert](BIO* bio) { return PEM_write_bio_X509(bio, cert); }, 0644);
}

}  // namespace

struct CertificateAuthority::Key {
  KeyPtr key;
  CertPtr cert;
};

CertificateAuthority::CertificateAuthority(std::string dir, std::unique_ptr<Key> key)
    : dir_(std::move(dir)), ca_file_(dir_ + "/ca.crt"), key_(std::move(key)) {}

CertificateAuthority::~CertificateAuthority() = default;

absl::StatusOr<std::unique_ptr<CertificateAuthority>> CertificateAuthority::Create(
    const std::string& dir) {
  RETURN_IF_ERROR(Env::Default()->CreateDirs(dir));
  auto key = std::make_unique<Key>();
  ASSIGN_OR_RETURN(key->key, NewKey());
  ASSIGN_OR_RETURN(key->cert, NewCertificate(key->key.get(), "Granary throwaway CA", nullptr));
  X509* cert = key->cert.get();
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_basic_constraints, "critical,CA:TRUE"));
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign"));
  RETURN_IF_ERROR(AddExtension(cert, cert, NID_subject_key_identifier, "hash"));
  if (X509_sign(cert, key->key.get(), EVP_sha256()) == 0) return OpenSslError("X509_sign");
  RETURN_IF_ERROR(WriteKeyAndCert(dir + "/ca", key->key.get(), cert));
  return std::unique_ptr<CertificateAuthority>(new CertificateAuthority(dir, std::move(key)));
}

absl::StatusOr<TransportSecurity> CertificateAuthority::Issue(
    const std::string& name, const std::string& identity_uri,
    const std::vector<std::string>& hosts) {
  ASSIGN_OR_RETURN(KeyPtr key, NewKey());
  ASSIGN_OR_RETURN(CertPtr cert, NewCertificate(key.get(), name, key_->cert.get()));
  std::vector<std::string> sans = {"URI:" + identity_uri, "IP:127.0.0.1", "IP:::1",
                                   "DNS:localhost"};
  for (const std::string& host : hosts) {
    const bool ip = host.find_first_not_of("0123456789.:") == std::string::npos;
    sans.push_back((ip ? "IP:" : "DNS:") + host);
  }
  X509* issuer = key_->cert.get();
  RETURN_IF_ERROR(AddExtension(cert.get(), issuer, NID_basic_constraints, "critical,CA:FALSE"));
  RETURN_IF_ERROR(
      AddExtension(cert.get(), issuer, NID_key_usage, "critical,digitalSignature,keyAgreement"));
  RETURN_IF_ERROR(AddExtension(cert.get(), issuer, NID_ext_key_usage, "serverAuth,clientAuth"));
  RETURN_IF_ERROR(AddExtension(cert.get(), issuer, NID_authority_key_identifier, "keyid"));
  RETURN_IF_ERROR(AddExtension(cert.get(), issuer, NID_subject_alt_name, absl::StrJoin(sans, ",")));
  if (X509_sign(cert.get(), key_->key.get(), EVP_sha256()) == 0) {
    return OpenSslError("X509_sign");
  }
  const std::string prefix = absl::StrCat(dir_, "/", name);
  RETURN_IF_ERROR(WriteKeyAndCert(prefix, key.get(), cert.get()));
  TransportSecurity security;
  security.cert_file = prefix + ".crt";
  security.key_file = prefix + ".key";
  security.ca_file = ca_file_;
  return security;
}

absl::StatusOr<TransportSecurity> LocalSecurityFor(CertificateAuthority* ca,
                                                   const std::string& name,
                                                   const std::string& identity_uri,
                                                   const std::vector<std::string>& hosts) {
  if (ca == nullptr) return TransportSecurity{.insecure = true};
  return ca->Issue(name, identity_uri, hosts);
}

}  // namespace granary
