#include "tessera/storage/shard_log.h"

#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "temp_dir.h"

using tessera::base::ErrorCode;
using tessera::storage::ShardLog;
using tessera::storage::ShardLogOptions;
using tessera::storage::testing::ReadFile;
using tessera::storage::testing::TempDir;
using tessera::storage::testing::WriteFile;

namespace {

std::string Payload(std::uint64_t i) {
  return "update-" + std::to_string(i) + std::string(40, 'p');
}

// Waits (bounded) until every record up to `seq` is durable; false on an error or timeout.
bool AwaitDurable(ShardLog& log, std::uint64_t seq) {
  auto promise = std::make_shared<std::promise<bool>>();
  auto future = promise->get_future();
  log.WhenDurable(seq,
                  [promise](tessera::base::Result<void> r) { promise->set_value(r.has_value()); });
  return future.wait_for(std::chrono::seconds(10)) == std::future_status::ready && future.get();
}

// Writes records Payload(1) .. Payload(count) to a new log at `dir`, waiting for durability
// after every `every` of them (each wait ends a batch: segments of about that many records),
// and closes it.
void WriteDurably(const std::filesystem::path& dir, const ShardLogOptions& options,
                  std::uint64_t count, std::uint64_t every) {
  auto log = ShardLog::Open(dir, options, nullptr);
  REQUIRE(log);
  for (std::uint64_t i = 1; i <= count; ++i) {
    REQUIRE((*log)->Append(Payload(i)));
    if (i % every == 0) REQUIRE(AwaitDurable(**log, i));
  }
}

// Waits (bounded) until the log deleted `count` segments since it opened.
bool AwaitDropped(ShardLog& log, std::uint64_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (log.stats().segments_dropped < count && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return log.stats().segments_dropped == count;
}

std::uint64_t DiskBytes(const std::filesystem::path& dir) {
  std::uint64_t bytes = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) bytes += e.file_size();
  return bytes;
}

std::vector<std::filesystem::path> Segments(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("A shard log's records come back in order after a reopen, across its segments",
          "[storage]") {
  TempDir tmp;
  ShardLogOptions options;
  options.segment_bytes = 2048;
  {
    auto log = ShardLog::Open(tmp.path, options, nullptr);
    REQUIRE(log);
    CHECK((*log)->TakeRecovered().empty());
    std::uint64_t last = 0;
    for (std::uint64_t i = 1; i <= 500; ++i) {
      auto seq = (*log)->Append(Payload(i));
      REQUIRE(seq);
      CHECK(*seq == i);
      last = *seq;
      if (i % 50 == 0) REQUIRE(AwaitDurable(**log, last));  // batches of many sizes
    }
    REQUIRE(AwaitDurable(**log, last));
    CHECK((*log)->durable_seq() == 500);
    CHECK((*log)->stats().records == 500);
    CHECK((*log)->stats().segments > 5);
  }
  auto reopened = ShardLog::Open(tmp.path, options, nullptr);
  INFO((reopened ? std::string() : reopened.error().message()));
  REQUIRE(reopened);
  CHECK((*reopened)->first_recovered_seq() == 1);
  auto records = (*reopened)->TakeRecovered();
  REQUIRE(records.size() == 500);
  for (std::uint64_t i = 1; i <= 500; ++i) CHECK(records[i - 1] == Payload(i));
  auto next = (*reopened)->Append(Payload(501));
  REQUIRE(next);
  CHECK(*next == 501);  // numbering continues
}

TEST_CASE(
    "Without a waiter a shard log writes at once but syncs only at its interval, and a waiter gets "
    "its records synced, and every waiter is answered once, in order",
    "[storage]") {
  TempDir tmp;
  ShardLogOptions options;
  options.sync_interval_ms = 3'600'000;
  auto log = ShardLog::Open(tmp.path, options, nullptr);
  REQUIRE(log);
  for (int i = 1; i <= 10; ++i) REQUIRE((*log)->Append(Payload(i)));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((*log)->stats().batches == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  CHECK((*log)->stats().batches >= 1);
  CHECK((*log)->stats().syncs == 0);
  CHECK((*log)->durable_seq() == 0);

  // Callbacks run on the flusher thread: they record, the test checks afterwards.
  struct Answer {
    std::uint64_t seq;
    bool ok;
    bool durable;  // durable_seq() covered it when it was answered
  };
  std::mutex mu;
  std::vector<Answer> answered;
  std::uint64_t last = 0;
  ShardLog& shard_log = **log;
  for (std::uint64_t i = 11; i <= 2000; ++i) {
    auto seq = shard_log.Append(Payload(i));
    REQUIRE(seq);
    last = *seq;
    shard_log.WhenDurable(
        *seq, [&mu, &answered, &shard_log, seq = *seq](tessera::base::Result<void> r) {
          std::lock_guard lock(mu);
          answered.push_back({seq, r.has_value(), shard_log.durable_seq() >= seq});
        });
  }
  REQUIRE(AwaitDurable(shard_log, last));
  std::lock_guard lock(mu);
  REQUIRE(answered.size() == 1990);
  for (std::size_t i = 0; i < answered.size(); ++i) {
    INFO("answer " << i);
    CHECK(answered[i].seq == 11 + i);  // once each, in order
    CHECK(answered[i].ok);
    CHECK(answered[i].durable);
  }
  CHECK((*log)->stats().syncs >= 1);
  CHECK((*log)->stats().syncs <= (*log)->stats().batches);
}

TEST_CASE(
    "A shard log answers a WhenWritten waiter once its records are in the file, without a sync, "
    "in order",
    "[storage]") {
  TempDir tmp;
  ShardLogOptions options;
  options.sync_interval_ms = 3'600'000;
  auto log = ShardLog::Open(tmp.path, options, nullptr);
  REQUIRE(log);
  ShardLog& shard_log = **log;
  std::mutex mu;
  std::vector<std::uint64_t> answered;
  auto all = std::make_shared<std::promise<void>>();
  for (std::uint64_t i = 1; i <= 300; ++i) {
    auto seq = shard_log.Append(Payload(i));
    REQUIRE(seq);
    shard_log.WhenWritten(*seq, [&mu, &answered, all, seq = *seq](tessera::base::Result<void> r) {
      std::lock_guard lock(mu);
      if (r) answered.push_back(seq);
      if (seq == 300) all->set_value();
    });
  }
  REQUIRE(all->get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(shard_log.stats().syncs == 0);  // written, not synced: the interval is an hour
  CHECK(shard_log.durable_seq() == 0);
  {
    std::lock_guard lock(mu);
    REQUIRE(answered.size() == 300);
    for (std::size_t i = 0; i < answered.size(); ++i) CHECK(answered[i] == i + 1);
  }
  // What was answered is in the segment file for another process to read.
  auto segments = Segments(tmp.path);
  REQUIRE(segments.size() == 1);
  auto contents = tessera::storage::ReadSegment(segments[0]);
  REQUIRE(contents);
  REQUIRE(contents->records.size() == 300);
  CHECK(contents->records[299] == Payload(300));
}

TEST_CASE(
    "DropBefore deletes only the segments wholly before its bound, and a reopen starts "
    "at the first one kept",
    "[storage]") {
  TempDir tmp;
  ShardLogOptions options;
  options.segment_bytes = 2048;
  std::uint64_t first_kept = 0;
  std::uint64_t segments_before = 0;
  {
    auto log = ShardLog::Open(tmp.path, options, nullptr);
    REQUIRE(log);
    for (std::uint64_t i = 1; i <= 400; ++i) {
      REQUIRE((*log)->Append(Payload(i)));
      if (i % 20 == 0) REQUIRE(AwaitDurable(**log, i));
    }
    REQUIRE(AwaitDurable(**log, 400));
    const auto files = Segments(tmp.path);
    segments_before = files.size();
    REQUIRE(segments_before > 4);
    const std::uint64_t disk = (*log)->stats().disk_bytes;
    CHECK(disk == DiskBytes(tmp.path));
    // Segment names are their first record's number: the bound falls inside the third one,
    // so the first two go and the third, which holds records from before the bound too, stays.
    const std::uint64_t third = std::stoull(files[2].filename().string());
    const std::uint64_t fourth = std::stoull(files[3].filename().string());
    REQUIRE(fourth > third + 1);
    (*log)->DropBefore(third + 1);
    REQUIRE(AwaitDropped(**log, 2));
    CHECK(Segments(tmp.path).size() == segments_before - 2);
    CHECK((*log)->stats().disk_bytes < disk);
    CHECK((*log)->stats().disk_bytes == DiskBytes(tmp.path));
    // A bound past every record never deletes the segment being written.
    (*log)->DropBefore(1'000'000);
    REQUIRE(AwaitDropped(**log, segments_before - 1));
    CHECK(Segments(tmp.path).size() == 1);
    CHECK(std::stoull(Segments(tmp.path)[0].filename().string()) <= 401);
    first_kept = std::stoull(Segments(tmp.path)[0].filename().string());
    REQUIRE((*log)->Append(Payload(401)));
    REQUIRE(AwaitDurable(**log, 401));
  }
  auto reopened = ShardLog::Open(tmp.path, options, nullptr);
  INFO((reopened ? std::string() : reopened.error().message()));
  REQUIRE(reopened);
  CHECK((*reopened)->first_recovered_seq() == first_kept);
  auto records = (*reopened)->TakeRecovered();
  REQUIRE(records.size() == 401 - first_kept + 1);
  for (std::size_t i = 0; i < records.size(); ++i) CHECK(records[i] == Payload(first_kept + i));
  auto next = (*reopened)->Append(Payload(402));
  REQUIRE(next);
  CHECK(*next == 402);
}

TEST_CASE("A torn tail of a shard log's last segment is cut at reopen, with a warning",
          "[storage]") {
  TempDir tmp;
  {
    auto log = ShardLog::Open(tmp.path, {}, nullptr);
    REQUIRE(log);
    for (int i = 1; i <= 10; ++i) REQUIRE((*log)->Append(Payload(i)));
  }  // closing writes and syncs
  const auto segment = Segments(tmp.path).front();
  const std::string bytes = ReadFile(segment);
  WriteFile(segment, bytes.substr(0, bytes.size() - 3));  // a crash mid-append

  std::ostringstream warnings;
  auto logger = std::make_shared<spdlog::logger>(
      "log", std::make_shared<spdlog::sinks::ostream_sink_mt>(warnings));
  auto reopened = ShardLog::Open(tmp.path, {}, logger);
  REQUIRE(reopened);
  auto records = (*reopened)->TakeRecovered();
  REQUIRE(records.size() == 9);
  CHECK(records.back() == Payload(9));
  CHECK_THAT(warnings.str(), Catch::Contains("cut off a torn tail") &&
                                 Catch::Contains(segment.filename().string()));
  auto next = (*reopened)->Append(Payload(10));
  REQUIRE(next);
  CHECK(*next == 10);  // the torn record's number is given again: it was never durable
}

TEST_CASE(
    "A damaged record in the middle of a shard log stops the open naming file and offset, and "
    "with skip_damaged the open goes on without it, numbering on from the next segment",
    "[storage]") {
  TempDir tmp;
  ShardLogOptions options;
  options.segment_bytes = 2048;
  WriteDurably(tmp.path, options, 200, 10);
  const auto files = Segments(tmp.path);
  REQUIRE(files.size() > 3);
  const auto damaged = files[1];  // neither the first nor the last segment
  std::string bytes = ReadFile(damaged);
  const std::size_t at = bytes.size() / 2;
  bytes[at] = static_cast<char>(bytes[at] ^ 0x5a);  // a flipped byte inside some record
  WriteFile(damaged, bytes);

  auto refused = ShardLog::Open(tmp.path, options, nullptr);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == ErrorCode::kStorage);
  CHECK_THAT(refused.error().message(), Catch::Contains(damaged.filename().string()) &&
                                            Catch::Contains("damaged at offset") &&
                                            Catch::Contains("--log-skip-damaged"));

  std::ostringstream warnings;
  auto logger = std::make_shared<spdlog::logger>(
      "log", std::make_shared<spdlog::sinks::ostream_sink_mt>(warnings));
  options.skip_damaged = true;
  auto reopened = ShardLog::Open(tmp.path, options, logger);
  INFO((reopened ? std::string() : reopened.error().message()));
  REQUIRE(reopened);
  auto records = (*reopened)->TakeRecovered();
  CHECK(records.size() == 199);  // the one record the flipped byte was in
  CHECK(records.front() == Payload(1));
  CHECK(records.back() == Payload(200));
  CHECK_THAT(warnings.str(), Catch::Contains("skipped a damaged record at offset") &&
                                 Catch::Contains(damaged.filename().string()));
  auto next = (*reopened)->Append(Payload(201));
  REQUIRE(next);
  CHECK(*next == 201);  // numbered after the last segment's records, as before the damage
}

TEST_CASE(
    "A torn record in a segment that is not the last, or a missing segment, stops the open "
    "naming the file",
    "[storage]") {
  TempDir tmp;
  ShardLogOptions options;
  options.segment_bytes = 256;
  WriteDurably(tmp.path, options, 40, 1);  // one batch each: segments of a few records
  const auto segments = Segments(tmp.path);
  REQUIRE(segments.size() >= 4);
  SECTION("torn before the last") {
    const std::string bytes = ReadFile(segments[1]);
    WriteFile(segments[1], bytes.substr(0, bytes.size() - 5));
    auto opened = ShardLog::Open(tmp.path, options, nullptr);
    REQUIRE(!opened);
    CHECK(opened.error().code() == ErrorCode::kStorage);
    CHECK_THAT(opened.error().message(),
               Catch::Contains(segments[1].string()) && Catch::Contains("not the last segment"));
  }
  SECTION("a segment missing") {
    std::filesystem::remove(segments[2]);
    auto opened = ShardLog::Open(tmp.path, options, nullptr);
    REQUIRE(!opened);
    CHECK_THAT(opened.error().message(),
               Catch::Contains(segments[3].string()) && Catch::Contains("records are missing"));
  }
}

TEST_CASE("A write the file system refuses fails the shard log for good, waiters and appends alike",
          "[storage]") {
  TempDir tmp;
  // In a child process: a file size limit makes the segment's writes fail (EFBIG), as a full
  // disk would (ENOSPC) on the same path.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{16 * 1024, 16 * 1024};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    auto log = ShardLog::Open(tmp.path, {}, nullptr);
    if (!log) ::_exit(10);
    std::uint64_t last = 0;
    for (int i = 0; i < 100; ++i) {
      auto seq = (*log)->Append(std::string(1024, 'x'));
      if (!seq) break;
      last = *seq;
    }
    auto promise = std::make_shared<std::promise<tessera::base::Result<void>>>();
    (*log)->WhenDurable(last, [promise](tessera::base::Result<void> r) { promise->set_value(r); });
    auto future = promise->get_future();
    if (future.wait_for(std::chrono::seconds(10)) != std::future_status::ready) ::_exit(11);
    auto outcome = future.get();
    if (outcome || outcome.error().code() != ErrorCode::kStorage ||
        outcome.error().message().find("File too large") == std::string::npos) {
      ::_exit(12);
    }
    auto after = (*log)->Append("more");
    if (after || after.error().message().find("File too large") == std::string::npos) ::_exit(13);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE(
    "A shard log under its free space reserve refuses new writes and takes them again once "
    "space is freed",
    "[storage]") {
  TempDir tmp;
  auto free = std::make_shared<std::atomic<std::uint64_t>>(100ull << 20);
  ShardLogOptions options;
  options.min_free_bytes = 64ull << 20;
  options.space_check_ms = 5;
  options.free_bytes =
      [free](const std::filesystem::path&) -> tessera::base::Result<std::uint64_t> {
    return free->load();
  };
  auto log = ShardLog::Open(tmp.path, options, nullptr);
  REQUIRE(log);
  CHECK((*log)->CheckSpace());
  CHECK((*log)->stats().free_bytes == 100ull << 20);

  auto await_low = [&](bool low) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while ((*log)->stats().space_low != low && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return (*log)->stats().space_low == low;
  };
  free->store(10ull << 20);
  REQUIRE(await_low(true));
  auto refused = (*log)->CheckSpace();
  REQUIRE_FALSE(refused);
  CHECK(refused.error().code() == ErrorCode::kStorage);
  CHECK(refused.error().reason() == tessera::base::ErrorReason::kDiskLow);
  CHECK(refused.error().message().find("10.0 MiB free, under its reserve of 64.0 MiB") !=
        std::string::npos);
  // What was accepted before still reaches the disk: the reserve is for it.
  auto seq = (*log)->Append(Payload(1));
  REQUIRE(seq);
  CHECK(AwaitDurable(**log, *seq));

  free->store(65ull << 20);
  REQUIRE(await_low(false));
  CHECK((*log)->CheckSpace());
}

TEST_CASE("A shard log reads its file system's real free space when it has a reserve",
          "[storage]") {
  TempDir tmp;
  ShardLogOptions options;
  options.min_free_bytes = 1;
  auto log = ShardLog::Open(tmp.path, options, nullptr);
  REQUIRE(log);
  CHECK((*log)->stats().free_bytes > 0);
  CHECK((*log)->CheckSpace());
  // Without one, it does not read it (and never refuses).
  TempDir other;
  auto unchecked = ShardLog::Open(other.path, {}, nullptr);
  REQUIRE(unchecked);
  CHECK((*unchecked)->stats().free_bytes == 0);
  CHECK((*unchecked)->CheckSpace());
}

TEST_CASE(
    "A shard log's backup holds every record written before it, as whole records, and "
    "opens as a log",
    "[storage]") {
  TempDir tmp;
  TempDir copies;
  ShardLogOptions options;
  options.segment_bytes = 4096;  // several segments, the last one being written
  auto log = ShardLog::Open(tmp.path, options, nullptr);
  REQUIRE(log);
  for (std::uint64_t i = 1; i <= 300; ++i) REQUIRE((*log)->Append(Payload(i)));
  REQUIRE(AwaitDurable(**log, 300));
  const auto dest = copies.path / "shard-0";
  auto bytes = (*log)->Backup(dest);
  REQUIRE(bytes);
  CHECK(*bytes == DiskBytes(dest));
  CHECK(Segments(dest).size() == Segments(tmp.path).size());
  // The log goes on; the copy does not change.
  for (std::uint64_t i = 301; i <= 310; ++i) REQUIRE((*log)->Append(Payload(i)));
  REQUIRE(AwaitDurable(**log, 310));
  auto again = (*log)->Backup(dest);
  REQUIRE_FALSE(again);
  CHECK(again.error().code() == ErrorCode::kConflict);

  std::ostringstream warnings;
  auto logger = std::make_shared<spdlog::logger>(
      "backup", std::make_shared<spdlog::sinks::ostream_sink_mt>(warnings));
  auto restored = ShardLog::Open(dest, options, logger);
  REQUIRE(restored);
  auto records = (*restored)->TakeRecovered();
  REQUIRE(records.size() == 300);
  for (std::uint64_t i = 1; i <= 300; ++i) CHECK(records[i - 1] == Payload(i));
  CHECK(warnings.str().find("torn") == std::string::npos);

  // Taken while records keep coming: a prefix of them, each whole.
  bool appended = true;  // Catch2's assertions are for the test's thread only
  std::thread appender([&] {
    for (std::uint64_t i = 311; i <= 3000; ++i) appended = (*log)->Append(Payload(i)) && appended;
  });
  auto during = (*log)->Backup(copies.path / "shard-1");
  appender.join();
  CHECK(appended);
  REQUIRE(during);
  auto reopened = ShardLog::Open(copies.path / "shard-1", options, logger);
  REQUIRE(reopened);
  records = (*reopened)->TakeRecovered();
  CHECK(records.size() >= 310);
  for (std::size_t i = 0; i < records.size(); ++i) CHECK(records[i] == Payload(i + 1));
  CHECK(warnings.str().find("torn") == std::string::npos);
}

namespace {

// A thread's task queue, as a shard's post is: tasks wait until the test runs them.
struct PostedTasks {
  std::mutex mu;
  std::vector<tessera::base::UniqueFunction<void()>> tasks;
  void Post(tessera::base::UniqueFunction<void()> task) {
    std::lock_guard lock(mu);
    tasks.push_back(std::move(task));
  }
  std::size_t size() {
    std::lock_guard lock(mu);
    return tasks.size();
  }
  // Runs what is queued now; returns how many ran.
  std::size_t RunAll() {
    std::vector<tessera::base::UniqueFunction<void()>> now;
    {
      std::lock_guard lock(mu);
      now.swap(tasks);
    }
    for (auto& task : now) task();
    return now.size();
  }
  // Waits (bounded) until a task is queued.
  bool AwaitTask() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (size() == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return size() != 0;
  }
};

}  // namespace

TEST_CASE(
    "With a post, a shard log writes a round's records on one nudge and answers each batch on the "
    "appending thread, in order",
    "[storage]") {
  TempDir tmp;
  auto tasks = std::make_shared<PostedTasks>();
  ShardLogOptions options;
  options.sync_interval_ms = 60'000;  // no timed write or sync during the test
  options.post = [tasks](tessera::base::UniqueFunction<void()> task) {
    tasks->Post(std::move(task));
  };
  auto log = ShardLog::Open(tmp.path, options, nullptr);
  REQUIRE(log);

  // A round: three records, one nudge posted (not one wake per record).
  for (std::uint64_t i = 1; i <= 3; ++i) REQUIRE((*log)->Append(Payload(i)));
  CHECK(tasks->size() == 1);
  const auto test_thread = std::this_thread::get_id();
  std::vector<std::string> answers;  // touched by the test's thread only, if answers are posted
  bool on_test_thread = true;
  auto answer = [&](std::string name) {
    return [&, name](tessera::base::Result<void> r) {
      on_test_thread = on_test_thread && std::this_thread::get_id() == test_thread;
      answers.push_back(name + (r ? "" : " failed"));
    };
  };
  (*log)->WhenWritten(3, answer("written 3"));
  (*log)->WhenWritten(1, answer("written 1"));
  CHECK(tasks->size() == 1);
  CHECK((*log)->stats().batches == 0);  // not woken by the appends

  CHECK(tasks->RunAll() == 1);  // the nudge: the flusher writes all three in one batch
  REQUIRE(tasks->AwaitTask());  // the batch's answers, in one task
  CHECK(answers.empty());       // not run on the flusher
  CHECK(tasks->RunAll() == 1);
  CHECK(answers == std::vector<std::string>{"written 1", "written 3"});
  CHECK(on_test_thread);
  CHECK((*log)->stats().batches == 1);

  // The next round posts a nudge of its own; a durability waiter is answered after the sync.
  REQUIRE((*log)->Append(Payload(4)));
  CHECK(tasks->size() == 1);
  (*log)->WhenDurable(4, answer("durable 4"));  // wakes the flusher: a waiter makes it sync
  REQUIRE(tasks->AwaitTask());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (answers.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    tasks->RunAll();  // the nudge (nothing left to wake for) and the answer
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(answers == std::vector<std::string>{"written 1", "written 3", "durable 4"});
  CHECK((*log)->durable_seq() == 4);

  // Destroyed with a record appended and its nudge not run: the destructor writes and syncs
  // it and answers its waiter itself (the thread's tasks may never run: a stopped shard); the
  // nudge run later does nothing.
  REQUIRE((*log)->Append(Payload(5)));
  REQUIRE(tasks->size() == 1);
  bool written5 = false;
  (*log)->WhenWritten(5, [&](tessera::base::Result<void> r) { written5 = r.has_value(); });
  log->reset();
  CHECK(written5);
  tasks->RunAll();
  auto reopened = ShardLog::Open(tmp.path, ShardLogOptions{}, nullptr);
  REQUIRE(reopened);
  CHECK((*reopened)->TakeRecovered().size() == 5);
}
