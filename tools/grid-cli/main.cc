// grid-cli: one command against a Tessera member, for people (text) and scripts (--json).
//
// Exit codes: 0 ok, 1 runtime error, 2 usage error. Every error is exactly one line on stderr.
// A watchdog bounds the whole run even if the client misbehaved, so the tool never hangs.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "cli_command.h"
#include "cli_runner.h"
#include "stream_commands.h"
#include "value_format.h"

namespace tessera::tools::cli {
namespace {

void PrintErrorLine(std::string message) {
  for (char& c : message) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fprintf(stderr, "grid-cli: %s\n", message.c_str());
  std::fflush(stderr);
}

// Ends the process with one error line if the run outlives `limit`.
// Thread-safety: constructed and destroyed by the same thread.
class Watchdog {
 public:
  Watchdog(std::chrono::milliseconds limit, std::string address)
      : thread_([this, limit, address = std::move(address)] { Watch(limit, address); }) {}
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  void Watch(std::chrono::milliseconds limit, const std::string& address) {
    std::unique_lock lock(mutex_);
    if (wake_.wait_for(lock, limit, [this] { return done_; })) return;
    PrintErrorLine("no answer from " + address + " within " + std::to_string(limit.count()) +
                   " ms; check the member or raise --timeout");
    std::_Exit(1);
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;  // last: starts after the state it uses
};

std::atomic<bool> interrupted{false};

// topic subscribe streams until its bound or Ctrl-C, so no watchdog; connecting is bounded
// by the connect timeout.
int Subscribe(const CliCommand& command) {
  std::signal(SIGINT, [](int) { interrupted.store(true); });
  std::signal(SIGTERM, [](int) { interrupted.store(true); });
  auto r = command.kind == CommandKind::kStreamTail ? RunStreamTail(command, std::cout, interrupted)
                                                    : RunSubscribe(command, std::cout, interrupted);
  if (!r) {
    std::string hint = HintFor(r.error(), command);
    PrintErrorLine(r.error().ToString() + (hint.empty() ? "" : "; " + hint));
    return 1;
  }
  return 0;
}

int Execute(const CliCommand& command) {
  if (command.kind == CommandKind::kTopicSubscribe || command.kind == CommandKind::kStreamTail) {
    return Subscribe(command);
  }
  auto limit = command.client.connect_timeout + command.client.call_timeout +
               std::chrono::milliseconds(3000);
  Watchdog watchdog(limit, command.client.addresses.front());
  auto output = RunCommand(command);
  if (!output) {
    std::string hint = HintFor(output.error(), command);
    PrintErrorLine(output.error().ToString() + (hint.empty() ? "" : "; " + hint));
    return 1;
  }
  if (command.json) {
    std::cout << Dump(output->json) << "\n";
  } else {
    std::cout << output->text;
  }
  std::cout.flush();
  return 0;
}

int Main(int argc, const char* const argv[]) {
  auto command = ParseCommandLine(argc, argv);
  if (!command) {
    PrintErrorLine(command.error().message());
    return 2;
  }
  if (command->kind == CommandKind::kHelp) {
    std::cout << command->help_text;
    return 0;
  }
  return Execute(*command);
}

}  // namespace
}  // namespace tessera::tools::cli

int main(int argc, char** argv) {
  try {
    return tessera::tools::cli::Main(argc, argv);
  } catch (const std::exception& e) {
    tessera::tools::cli::PrintErrorLine(std::string("internal error: ") + e.what() +
                                        "; please report it");
    return 1;
  }
}
