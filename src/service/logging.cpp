#include "netlatd/service/logging.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace netlatd {
namespace {

constexpr const char *kPattern = "netlatd: %l: %v";

// Appends `text` with "<N>" before each of its lines.
void append_with_priority(int priority, const char *text, size_t size, spdlog::memory_buf_t &dest) {
  const char prefix[] = {'<', static_cast<char>('0' + priority), '>'};
  bool line_start = true;
  for (size_t i = 0; i < size; i++) {
    if (line_start)
      dest.append(prefix, prefix + sizeof(prefix));
    dest.push_back(text[i]);
    line_start = text[i] == '\n';
  }
}

class JournalFormatter : public spdlog::formatter {
public:
  JournalFormatter() : plain_(std::make_unique<spdlog::pattern_formatter>(kPattern)) {}
  void format(const spdlog::details::log_msg &msg, spdlog::memory_buf_t &dest) override {
    spdlog::memory_buf_t line;
    plain_->format(msg, line);
    append_with_priority(journal_priority(msg.level), line.data(), line.size(), dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<JournalFormatter>(); }

private:
  std::unique_ptr<spdlog::formatter> plain_;
};

bool &logging_to_journal() {
  static bool journal = false;
  return journal;
}

}  // namespace

int journal_priority(spdlog::level::level_enum level) {
  switch (level) {
  case spdlog::level::trace:
  case spdlog::level::debug: return 7;     // LOG_DEBUG
  case spdlog::level::info: return 6;      // LOG_INFO
  case spdlog::level::warn: return 4;      // LOG_WARNING
  case spdlog::level::err: return 3;       // LOG_ERR
  case spdlog::level::critical: return 2;  // LOG_CRIT
  default: return 6;
  }
}

bool is_journal_stream(const char *journal_stream, int fd) {
  if (!journal_stream)
    return false;
  unsigned long long device = 0, inode = 0;
  int used = 0;
  if (std::sscanf(journal_stream, "%llu:%llu%n", &device, &inode, &used) != 2 || journal_stream[used] != '\0')
    return false;
  struct stat st {};
  return fstat(fd, &st) == 0 && st.st_dev == device && st.st_ino == inode;
}

std::unique_ptr<spdlog::formatter> log_formatter(bool journal) {
  if (journal)
    return std::make_unique<JournalFormatter>();
  return std::make_unique<spdlog::pattern_formatter>(kPattern);
}

void setup_logging() {
  logging_to_journal() = is_journal_stream(std::getenv("JOURNAL_STREAM"), STDERR_FILENO);
  auto logger = spdlog::stderr_logger_mt("netlatd");
  logger->set_formatter(log_formatter(logging_to_journal()));
  spdlog::set_default_logger(logger);
}

std::string fatal_error_text(const std::string &what) {
  const std::string line = "netlatd: error: " + what + "\n";
  if (!logging_to_journal())
    return line;
  spdlog::memory_buf_t out;
  append_with_priority(journal_priority(spdlog::level::err), line.data(), line.size(), out);
  return std::string(out.data(), out.size());
}

}  // namespace netlatd
