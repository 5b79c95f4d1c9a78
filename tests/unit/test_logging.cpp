// Log lines and their journald priority: under systemd, stderr is a stream to
// the journal (JOURNAL_STREAM names it) and each line must start with "<N>"
// for `journalctl -p err` to tell errors from the rest; anywhere else the
// lines stay as a person reads them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <spdlog/details/log_msg.h>

#include "netlatd/service/logging.hpp"
#include "scratch.hpp"

using namespace netlatd;
using Catch::Matchers::StartsWith;
using nltest::TempDir;

namespace {

std::string formatted(bool journal, spdlog::level::level_enum level, const std::string &text) {
  spdlog::details::log_msg msg("netlatd", level, text);
  spdlog::memory_buf_t out;
  log_formatter(journal)->format(msg, out);
  return std::string(out.data(), out.size());
}

std::string stream_id(int fd) {
  struct stat st {};
  REQUIRE(fstat(fd, &st) == 0);
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

// The real binary with its stderr in a file; `journal_stream` is put in the
// environment as given, with "SELF" replaced by that file's DEVICE:INODE.
std::string fatal_stderr(const std::string &journal_stream) {
  TempDir dir;
  const std::string err = (dir.path() / "stderr").string();
  std::string env;
  if (journal_stream == "SELF")
    env = "export JOURNAL_STREAM=\"$(stat -c %d:%i '" + err + "')\"; ";
  else if (!journal_stream.empty())
    env = "export JOURNAL_STREAM='" + journal_stream + "'; ";
  // Fails before anything is attached: 77 without root, 68 (no such
  // interface) with it; either way one fatal line. The subshell keeps
  // run_command's own 2>&1 off the daemon's stderr.
  const auto r = nltest::run_command("(: >'" + err + "'; unset JOURNAL_STREAM; " + env + "exec '" + NETLATD_BINARY +
                                     "' --iface netlatd-none0 --port 5000 2>>'" + err + "')");
  INFO(r.output);
  CHECK((r.status == 77 || r.status == 68));
  return nltest::read_file(err);
}

}  // namespace

TEST_CASE("log levels map to syslog priorities", "[logging]") {
  CHECK(journal_priority(spdlog::level::trace) == 7);
  CHECK(journal_priority(spdlog::level::debug) == 7);
  CHECK(journal_priority(spdlog::level::info) == 6);
  CHECK(journal_priority(spdlog::level::warn) == 4);
  CHECK(journal_priority(spdlog::level::err) == 3);
  CHECK(journal_priority(spdlog::level::critical) == 2);
}

TEST_CASE("JOURNAL_STREAM is believed only when it names this very stream", "[logging]") {
  TempDir dir;
  const int fd = open((dir.path() / "stream").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const int other = open((dir.path() / "other").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(other >= 0);
  const std::string id = stream_id(fd);
  CHECK(is_journal_stream(id.c_str(), fd));
  // stderr redirected by a child of the unit (`cmd 2>file`) is not the journal.
  CHECK_FALSE(is_journal_stream(id.c_str(), other));
  CHECK_FALSE(is_journal_stream(nullptr, fd));
  CHECK_FALSE(is_journal_stream("", fd));
  CHECK_FALSE(is_journal_stream((id + "0").c_str(), fd));
  CHECK_FALSE(is_journal_stream((id + ":").c_str(), fd));
  CHECK_FALSE(is_journal_stream("journal", fd));
  close(fd);
  close(other);
}

TEST_CASE("under the journal every line of a message starts with its priority", "[logging]") {
  CHECK(formatted(true, spdlog::level::info, "ready") == "<6>netlatd: info: ready\n");
  CHECK(formatted(true, spdlog::level::warn, "slow") == "<4>netlatd: warning: slow\n");
  CHECK(formatted(true, spdlog::level::err, "broken") == "<3>netlatd: error: broken\n");
  CHECK(formatted(true, spdlog::level::debug, "detail") == "<7>netlatd: debug: detail\n");
  // journald reads each line as an entry: an unprefixed second line would be
  // filed as info.
  CHECK(formatted(true, spdlog::level::err, "verifier says:\n  line 2") ==
        "<3>netlatd: error: verifier says:\n<3>  line 2\n");
  CHECK(formatted(false, spdlog::level::err, "verifier says:\n  line 2") ==
        "netlatd: error: verifier says:\n  line 2\n");
  CHECK(formatted(false, spdlog::level::info, "ready") == "netlatd: info: ready\n");
}

TEST_CASE("the real binary's fatal line: <3> on the journal stream, plain elsewhere", "[logging][cli]") {
  const std::string journal = fatal_stderr("SELF");
  CHECK_THAT(journal, StartsWith("<3>netlatd: error: "));
  CHECK(journal.find('\n') == journal.size() - 1);

  const std::string plain = fatal_stderr("");
  CHECK_THAT(plain, StartsWith("netlatd: error: "));
  CHECK(plain == journal.substr(3));

  // Inherited from a unit, but stderr now goes elsewhere.
  CHECK_THAT(fatal_stderr("1:1"), StartsWith("netlatd: error: "));
}
