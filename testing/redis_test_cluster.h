// RedisTestCluster: a real Redis Cluster of Debian's redis-server on 127.0.0.1 for tests of the
// cache tier's cluster routing: masters with the 16384 hash slots split evenly, optionally
// replicas, no persistence, formed the way `redis-cli --cluster create` does (ADDSLOTSRANGE,
// config epochs, MEET, REPLICATE). MoveSlot reshards one slot as `redis-cli --cluster reshard`
// does, so a client with an old slot map meets MOVED, or ASK mid-migration; Kill stops a node
// (a master's replica then takes over after the node timeout). Stopped when destroyed.
#ifndef GRANARY_TESTING_REDIS_TEST_CLUSTER_H_
#define GRANARY_TESTING_REDIS_TEST_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "cache/local_redis_server.h"
#include "cache/redis_connection.h"

namespace granary::testing {

class RedisTestCluster {
 public:
  struct Options {
    int masters = 3;
    int replicas_per_master = 0;
    int node_timeout_ms = 5000;
    // Non-empty: every node asks for it (requirepass; masterauth for its replicas).
    std::string password;
  };
  // Starts and forms it; node files (nodes-<i>.conf) go to the existing directory `dir`. Nodes
  // 0..masters-1 are the masters; node masters+k replicates master k % masters.
  RedisTestCluster(const Options& options, const std::string& dir);

  // Every node runs and the cluster's state is ok on each.
  bool ok() const { return ok_; }
  // "redis://127.0.0.1:PORT" of node 0 (any node would do).
  std::string url() const { return nodes_[0]->url(); }
  int size() const { return static_cast<int>(nodes_.size()); }
  // The keys stored on node `node` (DBSIZE); -1 if it does not answer.
  int64_t KeysOn(int node);
  // The node serving `slot`, as node `asking` sees it; -1 if none.
  int OwnerOf(int slot, int asking = 0);
  // SIGKILLs node `node`.
  void Kill(int node) { nodes_[node]->Kill(); }
  // Waits until node `node`'s writes so far reached a replica (WAIT); false if they did not.
  bool AwaitReplicated(int node);
  // Moves `slot` and its keys to node `to`: importing there, migrating at its owner, every key
  // MIGRATEd; then, if `finish`, the slot assigned to `to` on every node. Unfinished, the old
  // owner answers ASK for the slot's keys. False on any failure.
  bool MoveSlot(int slot, int to, bool finish);

 private:
  // The reply of node `node` to `args`; nullptr (and ok_ false) on failure or an error reply.
  RedisReply Call(int node, const std::vector<std::string>& args);
  // Polls until every node reports cluster_state:ok and knows every other node, and every
  // replica is connected to its master.
  bool AwaitFormed(int masters);

  const RedisCredentials credentials_;  // what Call authenticates with
  std::vector<std::unique_ptr<LocalRedisServer>> nodes_;
  std::vector<std::string> ids_;  // CLUSTER MYID of each node
  bool ok_ = false;
};

}  // namespace granary::testing

#endif  // GRANARY_TESTING_REDIS_TEST_CLUSTER_H_
