#include "ops/http_server.h"

#include "gtest/gtest.h"
#include "ops/http_get.h"

namespace granary {
namespace {

TEST(HttpServerTest, RoutesGetRequestsByPathAndAnswers404Otherwise) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server =
      HttpServer::Start("127.0.0.1", 0,
                        {{"/hello",
                          [](const std::string& query) {
                            return HttpResponse{200, "text/plain", "hi " + query};
                          }},
                         {"/down", [](const std::string&) {
                            return HttpResponse{503, "text/plain", "not ready"};
                          }}});
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  absl::StatusOr<HttpGetResult> hello = HttpGet("127.0.0.1", port, "/hello?x=1");
  ASSERT_TRUE(hello.ok()) << hello.status();
  EXPECT_EQ(hello->status, 200);
  EXPECT_EQ(hello->body, "hi x=1");
  absl::StatusOr<HttpGetResult> down = HttpGet("127.0.0.1", port, "/down");
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_EQ(down->status, 503);
  absl::StatusOr<HttpGetResult> missing = HttpGet("127.0.0.1", port, "/nothing");
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->status, 404);
}

TEST(HttpServerTest, APortInUseIsAnErrorNamingTheAddress) {
  absl::StatusOr<std::unique_ptr<HttpServer>> first = HttpServer::Start("127.0.0.1", 0, {});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());
  absl::StatusOr<std::unique_ptr<HttpServer>> second =
      HttpServer::Start("127.0.0.1", (*first)->port(), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(address), std::string::npos) << second.status();
}

TEST(HttpServerTest, AStoppedServerDoesNotAnswer) {
  int port;
  {
    absl::StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start("127.0.0.1", 0, {});
    ASSERT_TRUE(server.ok()) << server.status();
    port = (*server)->port();
  }
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/").status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace granary
