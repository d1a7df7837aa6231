// RedisNodes: the Redis behind one cache tier URL `redis://HOST:PORT` — that one server, or the
// Redis Cluster it belongs to. Which of the two is found at the first call (INFO's
// cluster_enabled), so the same URL form names either; a cluster needs only one of its nodes
// in the URL.
//
// In a cluster, a command goes to the master serving its key's hash slot (SlotOf; the map
// from CLUSTER SLOTS). A `MOVED` reply (the slot has moved: resharding, a failover) refreshes
// the map and retries at the new owner; an `ASK` reply (the slot is migrating and the key is
// already at the target) retries once there after ASKING. `TRYAGAIN` (a RENAME in a slot being
// migrated), `CLUSTERDOWN` and a master that cannot be reached (a failover: its replica takes
// over once the cluster's node timeout has passed) are waited out — the map refreshed from
// another node, a retry every 100 ms for up to kBusyWait — and then fail. SCAN runs on every
// master. A pooled connection the server has closed meanwhile (a restart, its idle timeout) is
// retried on a new one, on either kind. Replication is Redis' own (asynchronous): a failover
// can lose the values written just before it, which the cache's checks turn into a recompute.
//
// Connections are pooled per node: each call borrows one (a streamed value keeps its own until
// it is read or dropped), so concurrent readers do not queue behind one another.
//
// Every connection, to the seed and to each node of a cluster, authenticates with the same
// credentials (RedisConnection::Open): a cluster's nodes share their users and passwords.
//
// Errors: Unavailable naming the node when it cannot be reached; Unauthenticated naming the node
// when it refuses the credentials (never retried); PermissionDenied with the server's text when
// an ACL forbids the command or key (NOPERM); Internal with the server's text for any other
// error reply (e.g. OOM under maxmemory-policy noeviction).
//
// Thread-safe.
#ifndef GRANARY_CACHE_REDIS_NODES_H_
#define GRANARY_CACHE_REDIS_NODES_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/redis_connection.h"

namespace granary {

class RedisNodes {
 public:
  static constexpr int kSlots = 16384;
  static constexpr int kMaxAttempts = 6;
  static constexpr absl::Duration kBusyWait = absl::Seconds(15);

  // A key's hash slot, as Redis Cluster computes it: CRC16 (XMODEM) of the key, or of its hash
  // tag (the text between its first `{` and the next `}`, when not empty), mod 16384.
  static int SlotOf(absl::string_view key);

  // `seed`: "HOST:PORT". Connects at the first call, authenticating with `credentials`.
  explicit RedisNodes(std::string seed, RedisCredentials credentials = {});
  ~RedisNodes();

  // The reply to `args`, a command on the one key `key` (which picks the node).
  absl::StatusOr<RedisReply> Command(absl::string_view key, const std::vector<std::string>& args);

  // SET `key` to the concatenation of `value` (sent piece by piece, not copied into one).
  absl::Status Set(const std::string& key, const std::vector<absl::string_view>& value);

  // A value being read: pipelined GETRANGEs of kPiece bytes, kWindow of them in flight, each
  // piece's bytes read off the socket into the caller's buffer. (One GET of a 64 MB value makes
  // Redis copy it into a fresh 64 MB reply buffer first; pieces keep its buffers small and
  // reused.) A value deleted or cut shorter while it is read, or whose slot moves, makes Read
  // fail Unavailable, and every later Read with it. One replaced by a value at least as long is
  // read as a mix of the two: the cache never replaces a committed chunk with other bytes (a
  // commit of the same name writes the same bytes), and checks every chunk's MAC.
  class Value {
   public:
    static constexpr uint64_t kPiece = 1 << 20;
    static constexpr uint64_t kWindow = 4;

    ~Value();
    uint64_t size() const { return size_; }
    // Up to `n` of the value's next bytes into `dst`; 0 at its end.
    absl::StatusOr<size_t> Read(char* dst, size_t n);

   private:
    friend class RedisNodes;
    Value(RedisNodes* nodes, std::unique_ptr<RedisConnection> connection, std::string key,
          uint64_t size, bool asking)
        : nodes_(nodes),
          connection_(std::move(connection)),
          key_(std::move(key)),
          size_(size),
          asking_(asking) {}
    // Sends GETRANGEs until kWindow pieces are in flight (or the value is all asked for).
    absl::Status RequestPieces();
    // Read, without remembering a failure.
    absl::StatusOr<size_t> ReadOnce(char* dst, size_t n);

    RedisNodes* const nodes_;
    std::unique_ptr<RedisConnection> connection_;
    const std::string key_;
    const uint64_t size_;
    const bool asking_;       // the slot is migrating to this node: ASKING before each piece
    uint64_t requested_ = 0;  // bytes asked for
    uint64_t read_ = 0;       // bytes returned
    uint64_t piece_end_ = 0;  // the end of the piece being read
    absl::Status failed_;     // the first failed Read's error
  };
  // The value of `key`, to be read: nullptr when there is no such key.
  absl::StatusOr<std::unique_ptr<Value>> Get(const std::string& key);

  // Every key matching the glob `pattern`, on every master (SCAN), sorted. A master that fails
  // meanwhile (a failover) restarts the scan over the masters as they are then, within
  // kBusyWait. A key migrating between masters while they are scanned may be missed.
  absl::StatusOr<std::vector<std::string>> Scan(const std::string& pattern);

  // Whether `a` and `b` may be named in one command (RENAME): always on a single server; in a
  // cluster, when they hash to one slot.
  absl::StatusOr<bool> SameSlot(absl::string_view a, absl::string_view b);

 private:
  // One attempt of a routed call on `connection` (`asking`: after ASKING): "" for OK, or the
  // error reply's text.
  using Attempt =
      std::function<absl::StatusOr<std::string>(RedisConnection& connection, bool asking)>;
  // Sends one command on `connection` and returns its reply.
  using Send = std::function<absl::StatusOr<RedisReply>(RedisConnection& connection)>;
  // The reply to the command `what` that `send` sends at the node of `key` (an error reply as
  // Internal, after Route's redirects and retries).
  absl::StatusOr<RedisReply> RoutedReply(absl::string_view what, absl::string_view key,
                                         const Send& send);
  // Runs `attempt` (the command `what`) at the node serving `key` (or at `node`, when not
  // empty), following redirects; the connection it succeeded on (to be given back, or kept by a
  // Value), and in `*asked` whether that was after ASKING.
  absl::StatusOr<std::unique_ptr<RedisConnection>> Route(absl::string_view what,
                                                         absl::string_view key,
                                                         const Attempt& attempt,
                                                         const std::string& node = "",
                                                         bool* asked = nullptr);
  // Finds out, once, whether the seed is a cluster node and if so the slot map.
  absl::Status DiscoverOnce() ABSL_LOCKS_EXCLUDED(mu_);
  // Reads the slot map from the first node of `candidates` that answers.
  absl::Status RefreshSlots(std::vector<std::string> candidates) ABSL_LOCKS_EXCLUDED(mu_);
  // The node of `key`'s slot ("" if no node serves it).
  std::string NodeOf(absl::string_view key) ABSL_LOCKS_EXCLUDED(mu_);
  // Every master (the seed alone on a single server).
  std::vector<std::string> Masters() ABSL_LOCKS_EXCLUDED(mu_);
  // An idle connection to `node` (`*pooled` true), else a new one.
  absl::StatusOr<std::unique_ptr<RedisConnection>> Borrow(const std::string& node,
                                                          bool* pooled = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // One SCAN of every master.
  absl::StatusOr<std::vector<std::string>> ScanMasters(const std::string& pattern);
  // Closes the idle connections to `node`.
  void DropIdle(const std::string& node) ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps `connection` for reuse if it is healthy.
  void GiveBack(std::unique_ptr<RedisConnection> connection) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string seed_;
  const RedisCredentials credentials_;
  absl::Mutex mu_;
  bool discovered_ ABSL_GUARDED_BY(mu_) = false;
  bool cluster_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> slot_node_ ABSL_GUARDED_BY(mu_);  // cluster: kSlots entries
  std::map<std::string, std::vector<std::unique_ptr<RedisConnection>>> idle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace granary

#endif  // GRANARY_CACHE_REDIS_NODES_H_
