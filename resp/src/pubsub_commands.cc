// Pub/sub family over the TopicService. A Redis channel is a topic; a subscription's messages
// are delivered on the connection's shard and written as pushes in reply order.
#include "command_util.h"

namespace tessera::resp {

namespace {

void WriteSubscriptionReply(Connection& conn, std::string_view kind,
                            std::optional<std::string_view> name) {
  auto writer = conn.Reply();
  writer.PushHeader(3);
  writer.Bulk(kind);
  if (name) {
    writer.Bulk(*name);
  } else {
    writer.Null();
  }
  writer.Integer(static_cast<std::int64_t>(conn.SubscriptionCount()));
}

void Subscribe(Connection& conn, Args args) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    conn.SubscribeChannel(args[i]);
    WriteSubscriptionReply(conn, "subscribe", args[i]);
  }
}

void PSubscribe(Connection& conn, Args args) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    conn.SubscribePattern(args[i]);
    WriteSubscriptionReply(conn, "psubscribe", args[i]);
  }
}

// UNSUBSCRIBE / PUNSUBSCRIBE: the named ones, or all when none are named.
void UnsubscribeGeneric(Connection& conn, Args args, bool pattern) {
  const std::string_view kind = pattern ? "punsubscribe" : "unsubscribe";
  std::vector<std::string> names;
  if (args.size() > 1) {
    names.assign(args.begin() + 1, args.end());
  } else {
    names = pattern ? conn.Patterns() : conn.Channels();
  }
  if (names.empty()) return WriteSubscriptionReply(conn, kind, std::nullopt);
  for (const auto& name : names) {
    if (pattern) {
      conn.UnsubscribePattern(name);
    } else {
      conn.UnsubscribeChannel(name);
    }
    WriteSubscriptionReply(conn, kind, name);
  }
}

void Unsubscribe(Connection& conn, Args args) { UnsubscribeGeneric(conn, args, false); }
void PUnsubscribe(Connection& conn, Args args) { UnsubscribeGeneric(conn, args, true); }

void Publish(Connection& conn, Args args) {
  const auto receivers =
      conn.server().topics.Publish(args[1], args[2], "resp:" + std::to_string(conn.id()));
  conn.Reply().Integer(receivers);
}

// PUBSUB CHANNELS [pattern] | NUMSUB [channel ...] | NUMPAT
void PubSub(Connection& conn, Args args) {
  auto& topics = conn.server().topics;
  auto writer = conn.Reply();
  if (EqualsIgnoreCase(args[1], "channels") && args.size() <= 3) {
    const auto names = topics.ActiveTopics(args.size() == 3 ? args[2] : "");
    writer.ArrayHeader(names.size());
    for (const auto& name : names) writer.Bulk(name);
  } else if (EqualsIgnoreCase(args[1], "numsub")) {
    writer.ArrayHeader((args.size() - 2) * 2);
    for (std::size_t i = 2; i < args.size(); ++i) {
      writer.Bulk(args[i]);
      writer.Integer(topics.SubscriberCount(args[i]));
    }
  } else if (EqualsIgnoreCase(args[1], "numpat") && args.size() == 2) {
    writer.Integer(topics.Stats().pattern_subscriptions);
  } else {
    writer.Error("ERR unknown subcommand '" + std::string(args[1]) + "'. Try PUBSUB HELP.");
  }
}

}  // namespace

void RegisterPubSubCommands(CommandTable& table) {
  table.Add({"subscribe", -2, kPubSub, 0, 0, 0, Subscribe});
  table.Add({"psubscribe", -2, kPubSub, 0, 0, 0, PSubscribe});
  table.Add({"unsubscribe", -1, kPubSub, 0, 0, 0, Unsubscribe});
  table.Add({"punsubscribe", -1, kPubSub, 0, 0, 0, PUnsubscribe});
  table.Add({"publish", 3, kFast, 0, 0, 0, Publish});
  table.Add({"pubsub", -2, 0, 0, 0, 0, PubSub});
}

}  // namespace tessera::resp
