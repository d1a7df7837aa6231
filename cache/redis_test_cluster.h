// RedisTestCluster: a real Redis Cluster of Debian's redis-server on 127.0.0.1 for tests of the
// cache tier's cluster routing: `masters` nodes, no replicas, no persistence, the 16384 hash
// slots split evenly, formed the way `redis-cli --cluster create` does (ADDSLOTSRANGE, config
// epochs, MEET). MoveSlot reshards one slot as `redis-cli --cluster reshard` does, so a client
// with an old slot map meets MOVED, or ASK mid-migration. Stopped when destroyed.
#ifndef GRANARY_CACHE_REDIS_TEST_CLUSTER_H_
#define GRANARY_CACHE_REDIS_TEST_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "cache/redis_connection.h"
#include "cache/redis_test_server.h"

namespace granary::testing {

class RedisTestCluster {
 public:
  // Starts and forms it; node files (nodes-<i>.conf) go to the existing directory `dir`.
  RedisTestCluster(int masters, const std::string& dir);

  // Every node runs and the cluster's state is ok on each.
  bool ok() const { return ok_; }
  // "redis://127.0.0.1:PORT" of node 0 (any node would do).
  std::string url() const { return nodes_[0]->url(); }
  int size() const { return static_cast<int>(nodes_.size()); }
  // The keys stored on node `node` (DBSIZE); -1 if it does not answer.
  int64_t KeysOn(int node);
  // The node serving `slot`, as node 0 sees it; -1 if none.
  int OwnerOf(int slot);
  // Moves `slot` and its keys to node `to`: importing there, migrating at its owner, every key
  // MIGRATEd; then, if `finish`, the slot assigned to `to` on every node. Unfinished, the old
  // owner answers ASK for the slot's keys. False on any failure.
  bool MoveSlot(int slot, int to, bool finish);

 private:
  // The reply of node `node` to `args`; nullptr (and ok_ false) on failure or an error reply.
  RedisReply Call(int node, const std::vector<std::string>& args);
  // Polls until every node reports cluster_state:ok and knows every other node.
  bool AwaitFormed();

  std::vector<std::unique_ptr<RedisTestServer>> nodes_;
  std::vector<std::string> ids_;  // CLUSTER MYID of each node
  bool ok_ = false;
};

}  // namespace granary::testing

#endif  // GRANARY_CACHE_REDIS_TEST_CLUSTER_H_
