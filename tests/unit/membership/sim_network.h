#pragma once
// SimNetwork: many Membership instances in one process on a manual clock, connected by an
// in-memory network that can drop (seeded, so runs repeat exactly), delay and partition
// messages, and crash members. Every message goes through the real codec.

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/base/clock.h"
#include "tessera/membership/membership.h"

namespace tessera::membership::testing {

class SimNetwork {
 public:
  explicit SimNetwork(std::uint64_t seed = 1) : random_(seed) {}

  // Starts a member at `address`; its uuid is "<address>#<n>" (n counts starts).
  Membership& Start(const std::string& address, MembershipOptions options) {
    auto node = std::make_unique<Node>();
    node->transport.network = this;
    node->transport.from = address;
    node->log = std::make_shared<spdlog::logger>(
        address, std::make_shared<spdlog::sinks::ostream_sink_mt>(node->log_text));
    MemberInfo self{address + "#" + std::to_string(++starts_), address, clock_.WallMs()};
    node->membership =
        std::make_unique<Membership>(self, std::move(options), node->transport, clock_, node->log);
    Membership& m = *node->membership;
    nodes_[address] = std::move(node);
    m.Start();
    return m;
  }

  // The process at `address` dies: it neither sends nor receives any more.
  void Crash(const std::string& address) { nodes_.erase(address); }

  // The process at `address` is stopped (SIGSTOP): it neither ticks nor sends, and what is
  // sent to it is lost, until Thaw (its next Tick then sees the time it missed).
  void Freeze(const std::string& address) { frozen_.insert(address); }
  void Thaw(const std::string& address) { frozen_.erase(address); }

  // Messages between the two groups are lost until Heal().
  void Partition(std::set<std::string> a, std::set<std::string> b) {
    split_a_ = std::move(a);
    split_b_ = std::move(b);
  }
  void Heal() { split_a_.clear(), split_b_.clear(), one_way_.clear(), slow_.clear(); }
  // Messages from `from` to `to` are lost (the other direction works) until Heal().
  void BlockOneWay(const std::string& from, const std::string& to) { one_way_.insert({from, to}); }
  // Messages from `from` to `to` take `ms` longer to arrive (a slow link, a busy receiver)
  // until Heal().
  void DelayOneWay(const std::string& from, const std::string& to, base::Millis ms) {
    slow_[{from, to}] = ms;
  }
  void set_drop_rate(double rate) { drop_rate_ = rate; }
  void set_max_delay_ms(base::Millis ms) { max_delay_ms_ = ms; }

  // Advances time by `duration` in `step` increments, delivering due messages and ticking
  // every live member at each step.
  void Run(base::Millis duration, base::Millis step = 50) {
    for (base::Millis t = 0; t < duration; t += step) {
      clock_.Advance(step);
      Deliver();
      for (auto& [address, node] : nodes_) {
        if (!frozen_.count(address)) node->membership->Tick();
      }
      Deliver();
    }
  }

  Membership* Find(const std::string& address) {
    auto it = nodes_.find(address);
    return it == nodes_.end() ? nullptr : it->second->membership.get();
  }
  std::string Log(const std::string& address) {
    auto it = nodes_.find(address);
    return it == nodes_.end() ? "" : it->second->log_text.str();
  }
  std::vector<std::string> LiveAddresses() const {
    std::vector<std::string> out;
    for (const auto& [address, node] : nodes_) out.push_back(address);
    return out;
  }
  base::ManualClock& clock() { return clock_; }
  std::size_t delivered() const { return delivered_; }

 private:
  struct Envelope {
    base::Millis due;
    std::string from, to, bytes;
  };
  struct NodeTransport final : Transport {
    SimNetwork* network = nullptr;
    std::string from;
    void Send(const std::string& address, const ClusterMessage& message) override {
      network->Enqueue(from, address, EncodeClusterMessage(message));
    }
  };
  struct Node {
    NodeTransport transport;
    std::ostringstream log_text;
    std::shared_ptr<spdlog::logger> log;
    std::unique_ptr<Membership> membership;
  };

  bool Split(const std::string& a, const std::string& b) const {
    return one_way_.count({a, b}) != 0 || (split_a_.count(a) && split_b_.count(b)) ||
           (split_a_.count(b) && split_b_.count(a));
  }

  void Enqueue(const std::string& from, const std::string& to, std::string bytes) {
    if (Split(from, to) || frozen_.count(from)) return;
    if (drop_rate_ > 0 && std::uniform_real_distribution<double>(0, 1)(random_) < drop_rate_) {
      return;
    }
    base::Millis delay =
        max_delay_ms_ ? std::uniform_int_distribution<base::Millis>(0, max_delay_ms_)(random_) : 0;
    if (auto slow = slow_.find({from, to}); slow != slow_.end()) delay += slow->second;
    queue_.push_back({clock_.NowMs() + delay, from, to, std::move(bytes)});
  }

  void Deliver() {
    for (std::size_t round = 0; round < 100; ++round) {
      std::vector<Envelope> due;
      std::vector<Envelope> later;
      for (auto& e : queue_) (e.due <= clock_.NowMs() ? due : later).push_back(std::move(e));
      queue_ = std::move(later);
      if (due.empty()) return;
      for (auto& e : due) {
        auto it = nodes_.find(e.to);
        if (it == nodes_.end() || Split(e.from, e.to) || frozen_.count(e.to)) continue;
        auto message = DecodeClusterMessage(e.bytes);
        if (!message) throw std::runtime_error(message.error().message());
        ++delivered_;
        it->second->membership->OnMessage(*message);
      }
    }
  }

  base::ManualClock clock_;
  std::mt19937_64 random_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;
  std::vector<Envelope> queue_;
  std::set<std::string> split_a_, split_b_;
  std::set<std::string> frozen_;
  std::set<std::pair<std::string, std::string>> one_way_;  // (from, to)
  std::map<std::pair<std::string, std::string>, base::Millis> slow_;
  double drop_rate_ = 0;
  base::Millis max_delay_ms_ = 0;
  std::size_t starts_ = 0;
  std::size_t delivered_ = 0;
};

}  // namespace tessera::membership::testing
