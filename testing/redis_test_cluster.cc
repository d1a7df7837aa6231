#include "testing/redis_test_cluster.h"

#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cache/redis_nodes.h"
#include "hiredis/hiredis.h"

namespace granary::testing {

RedisTestCluster::RedisTestCluster(const Options& options, const std::string& dir)
    : credentials_{"", options.password} {
  const int masters = options.masters;
  const int total = masters * (1 + options.replicas_per_master);
  for (int i = 0; i < total; ++i) {
    std::vector<std::string> flags = {"--cluster-enabled",
                                      "yes",
                                      "--dir",
                                      dir,
                                      "--cluster-config-file",
                                      absl::StrCat("nodes-", i, ".conf"),
                                      "--cluster-node-timeout",
                                      absl::StrCat(options.node_timeout_ms)};
    if (!options.password.empty()) {
      flags.insert(flags.end(),
                   {"--requirepass", options.password, "--masterauth", options.password});
    }
    nodes_.push_back(std::make_unique<LocalRedisServer>(std::move(flags)));
    if (!nodes_.back()->ok()) return;
  }
  ok_ = true;
  for (int i = 0; i < total && ok_; ++i) {
    if (i < masters) {
      const int first = RedisNodes::kSlots * i / masters;
      const int last = RedisNodes::kSlots * (i + 1) / masters - 1;
      Call(i, {"CLUSTER", "ADDSLOTSRANGE", absl::StrCat(first), absl::StrCat(last)});
    }
    Call(i, {"CLUSTER", "SET-CONFIG-EPOCH", absl::StrCat(i + 1)});
    const RedisReply id = Call(i, {"CLUSTER", "MYID"});
    if (id != nullptr) ids_.emplace_back(id->str, id->len);
  }
  for (int i = 1; i < total && ok_; ++i) {
    Call(0, {"CLUSTER", "MEET", "127.0.0.1", absl::StrCat(nodes_[i]->port())});
  }
  // A replica must know its master before it can follow it.
  for (int i = masters; i < total && ok_; ++i) {
    const int master = (i - masters) % masters;
    for (int attempt = 0; attempt < 100; ++attempt) {
      const RedisReply known = Call(i, {"CLUSTER", "NODES"});
      if (known == nullptr) break;
      if (absl::StrContains(std::string(known->str, known->len), ids_[master])) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Call(i, {"CLUSTER", "REPLICATE", ids_[master]});
  }
  ok_ = ok_ && AwaitFormed(masters);
}

RedisReply RedisTestCluster::Call(int node, const std::vector<std::string>& args) {
  absl::StatusOr<std::unique_ptr<RedisConnection>> connection =
      RedisConnection::Open(absl::StrCat("127.0.0.1:", nodes_[node]->port()), credentials_);
  if (!connection.ok()) {
    ok_ = false;
    return nullptr;
  }
  absl::StatusOr<RedisReply> reply = (*connection)->Command(args);
  if (!reply.ok() || (*reply)->type == REDIS_REPLY_ERROR) {
    ok_ = false;
    return nullptr;
  }
  return *std::move(reply);
}

bool RedisTestCluster::AwaitFormed(int masters) {
  const std::string known = absl::StrCat("cluster_known_nodes:", nodes_.size(), "\r");
  for (int attempt = 0; attempt < 300; ++attempt) {
    bool formed = true;
    for (int i = 0; i < size() && formed; ++i) {
      const RedisReply info = Call(i, {"CLUSTER", "INFO"});
      if (info == nullptr) return false;
      const std::string text(info->str, info->len);
      formed = absl::StrContains(text, "cluster_state:ok") && absl::StrContains(text, known);
      if (formed && i >= masters) {  // ROLE: slave, host, port, link state, offset
        const RedisReply role = Call(i, {"ROLE"});
        if (role == nullptr) return false;
        formed = role->elements >= 4 &&
                 std::string(role->element[3]->str, role->element[3]->len) == "connected";
      }
    }
    if (formed) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

bool RedisTestCluster::AwaitReplicated(int node) {
  const RedisReply replicas = Call(node, {"WAIT", "1", "5000"});
  return replicas != nullptr && replicas->integer >= 1;
}

int64_t RedisTestCluster::KeysOn(int node) {
  const RedisReply count = Call(node, {"DBSIZE"});
  return count == nullptr ? -1 : count->integer;
}

int RedisTestCluster::OwnerOf(int slot, int asking) {
  const RedisReply ranges = Call(asking, {"CLUSTER", "SLOTS"});
  if (ranges == nullptr) return -1;
  for (size_t i = 0; i < ranges->elements; ++i) {
    const redisReply* range = ranges->element[i];
    if (slot < range->element[0]->integer || slot > range->element[1]->integer) continue;
    for (int node = 0; node < size(); ++node) {
      if (range->element[2]->element[1]->integer == nodes_[node]->port()) return node;
    }
  }
  return -1;
}

bool RedisTestCluster::MoveSlot(int slot, int to, bool finish) {
  const int from = OwnerOf(slot);
  if (from < 0 || from == to) return false;
  const std::string s = absl::StrCat(slot);
  Call(to, {"CLUSTER", "SETSLOT", s, "IMPORTING", ids_[from]});
  Call(from, {"CLUSTER", "SETSLOT", s, "MIGRATING", ids_[to]});
  while (ok_) {
    const RedisReply keys = Call(from, {"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (keys == nullptr || keys->elements == 0) break;
    std::vector<std::string> migrate = {
        "MIGRATE", "127.0.0.1", absl::StrCat(nodes_[to]->port()), "", "0", "5000", "KEYS"};
    for (size_t i = 0; i < keys->elements; ++i) {
      migrate.emplace_back(keys->element[i]->str, keys->element[i]->len);
    }
    Call(from, migrate);
  }
  if (finish) {
    Call(to, {"CLUSTER", "SETSLOT", s, "NODE", ids_[to]});
    Call(from, {"CLUSTER", "SETSLOT", s, "NODE", ids_[to]});
    for (int node = 0; node < size(); ++node) {
      if (node != from && node != to) Call(node, {"CLUSTER", "SETSLOT", s, "NODE", ids_[to]});
    }
  }
  return ok_;
}

}  // namespace granary::testing
