#include "security/bearer_tokens.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace granary {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(BearerTokensTest, MapsEachTokenToItsClient) {
  const absl::StatusOr<BearerTokens> tokens = BearerTokens::Parse(
      "# team tokens\n"
      "\n"
      "0123456789abcdef-alice alice\n"
      "  fedcba9876543210-bob\tbob  \n",
      "tokens.txt");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(tokens->size(), 2u);
  EXPECT_EQ(tokens->ClientFor("0123456789abcdef-alice"), "alice");
  EXPECT_EQ(tokens->ClientFor("fedcba9876543210-bob"), "bob");
  EXPECT_EQ(tokens->ClientFor("0123456789abcdef-alic"), std::nullopt);
  EXPECT_EQ(tokens->ClientFor(""), std::nullopt);
}

TEST(BearerTokensTest, NamesTheFileAndLineOfABadLine) {
  const auto error = [](const std::string& text) {
    return std::string(BearerTokens::Parse(text, "t.txt").status().message());
  };
  EXPECT_THAT(error("0123456789abcdef alice extra\n"),
              HasSubstr("t.txt line 1: expected '<token> <client name>'"));
  EXPECT_THAT(error("# ok\nshort alice\n"),
              HasSubstr("t.txt line 2: the token is shorter than 16 characters"));
  EXPECT_THAT(error("0123456789abcdef a/b\n"), HasSubstr("a client name cannot hold '/'"));
  EXPECT_THAT(error("0123456789abcdef alice\n0123456789abcdef bob\n"),
              HasSubstr("t.txt line 2: the token is given twice"));
}

TEST(BearerTokensTest, TheBearerSchemeIsCaseInsensitive) {
  const absl::StatusOr<BearerTokens> tokens =
      BearerTokens::Parse("0123456789abcdef-alice alice\n", "tokens.txt");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  for (const char* scheme : {"Bearer", "bearer", "BEARER", "bEaReR"}) {
    const PeerIdentity identity =
        IdentityOfAuthorization(absl::StrCat(scheme, " 0123456789abcdef-alice"), &*tokens);
    EXPECT_EQ(identity.role, PeerIdentity::Role::kClient) << scheme;
    EXPECT_EQ(identity.name, "alice") << scheme;
  }
}

TEST(BearerTokensTest, ARefusedTokenIsSaidToBeRefusedWithoutQuotingIt) {
  const absl::StatusOr<BearerTokens> tokens =
      BearerTokens::Parse("0123456789abcdef-alice alice\n", "tokens.txt");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  const std::string guess = "guessed-0123456789abcdef";
  const PeerIdentity unknown = IdentityOfAuthorization("Bearer " + guess, &*tokens);
  EXPECT_EQ(unknown.role, PeerIdentity::Role::kNone);
  EXPECT_THAT(unknown.refusal, HasSubstr("the bearer token was refused"));
  EXPECT_THAT(unknown.refusal, Not(HasSubstr(guess)));
  const absl::Status status = RequireClient(unknown, "RegisterDataset");
  EXPECT_TRUE(absl::IsUnauthenticated(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("RegisterDataset refused: the bearer token was refused"));
  EXPECT_THAT(status.message(), Not(HasSubstr("certificate")));
  EXPECT_THAT(status.message(), Not(HasSubstr(guess)));

  const PeerIdentity basic = IdentityOfAuthorization("Basic " + guess, &*tokens);
  EXPECT_EQ(basic.role, PeerIdentity::Role::kNone);
  EXPECT_THAT(basic.refusal, HasSubstr("not 'Bearer <token>'"));
  EXPECT_THAT(basic.refusal, Not(HasSubstr(guess)));
  const PeerIdentity untaken = IdentityOfAuthorization("Bearer " + guess, nullptr);
  EXPECT_THAT(untaken.refusal, HasSubstr("no --tokens_file"));
  EXPECT_THAT(untaken.refusal, Not(HasSubstr(guess)));
}

TEST(BearerTokensTest, LoadNamesAMissingFile) {
  const absl::Status status = BearerTokens::Load("/nonexistent/tokens.txt").status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(std::string(status.message()), HasSubstr("/nonexistent/tokens.txt"));
}

}  // namespace
}  // namespace granary
