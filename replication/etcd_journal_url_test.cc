// ParseEtcdJournalUrl: members and prefix from --journal, and a clear error for each malformed
// part.
#include "replication/etcd_journal_url.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(EtcdJournalUrlTest, ParsesEveryEndpointAndThePrefix) {
  const absl::StatusOr<EtcdJournalUrl> url =
      ParseEtcdJournalUrl("etcd://127.0.0.1:2379,etcd-1.etcd:2379/granary/prod/");
  ASSERT_TRUE(url.ok()) << url.status();
  EXPECT_THAT(url->endpoints, ElementsAre("127.0.0.1:2379", "etcd-1.etcd:2379"));
  EXPECT_EQ(url->prefix, "/granary/prod");
  EXPECT_TRUE(IsEtcdJournalUrl("etcd://h:1/p"));
  EXPECT_FALSE(IsEtcdJournalUrl("/var/lib/granary/journal"));
}

TEST(EtcdJournalUrlTest, NamesWhatIsWrong) {
  const struct {
    const char* url;
    const char* error;
  } cases[] = {
      {"http://h:1/p", "not an etcd:// URL"},
      {"etcd://h:1", "no /PREFIX"},
      {"etcd://h:1/", "the prefix is empty"},
      {"etcd://h/p", "endpoint 'h' is not HOST:PORT"},
      {"etcd://h:1,:2/p", "endpoint ':2' is not HOST:PORT"},
      {"etcd://h:99999/p", "endpoint 'h:99999'"},
  };
  for (const auto& c : cases) {
    const absl::StatusOr<EtcdJournalUrl> url = ParseEtcdJournalUrl(c.url);
    EXPECT_EQ(url.status().code(), absl::StatusCode::kInvalidArgument) << c.url;
    EXPECT_THAT(url.status().message(), HasSubstr(c.error)) << c.url;
    EXPECT_THAT(url.status().message(), HasSubstr(c.url));
  }
}

}  // namespace
}  // namespace granary
