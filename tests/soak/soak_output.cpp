#include "soak_output.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "scratch.hpp"
#include "soak.hpp"

using nlohmann::json;
namespace fs = std::filesystem;

namespace nltest::soak_tier {
namespace {

// A record checked without the reads: one that names no reader, or no call
// of the soak's was running at its return.
Verdict check_alone(const Record &rec) {
  CheckOptions opt;
  opt.reads_complete = false;
  return check_records({rec}, {}, opt);
}

}  // namespace

void VerdictSum::add(const Verdict &v) {
  records += v.records;
  right += v.right;
  wrong += v.wrong;
  unknown += v.unknown;
  no_return_stamp += v.no_return_stamp;
  unknown_with_reader_side += v.unknown_with_reader_side;
  for (const auto &[k, n] : v.unknown_reasons)
    unknown_reasons[k] += n;
  for (const std::string &e : v.wrong_examples)
    if (wrong_examples.size() < 8)
      wrong_examples.push_back(e);
}

int64_t Soak::rotate() {
  std::lock_guard lock(mu_);
  rotation_++;
  Chunk c;
  c.index = rotation_;
  c.path = dir_ / ("out.jsonl." + std::to_string(rotation_));
  c.renamed_ns = mono_ns();
  std::error_code ec;
  if (fs::exists(out_, ec)) {
    fs::rename(out_, c.path);
    c.fd = current_fifo_fd_;
    c.fifo = current_fifo_fd_ >= 0;
    c.stall_until = current_stall_until_;
    c.text = std::move(current_fifo_text_);
    current_fifo_text_.clear();
    current_fifo_fd_ = -1;
    chunks_.push_back(std::move(c));
    if (rotation_ % kRotationsPerStall == 0) {
      if (mkfifo(out_.c_str(), 0600) != 0)
        throw std::runtime_error("mkfifo failed");
      // Our read end first, so that the daemon's open does not wait.
      current_fifo_fd_ = open(out_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      current_stall_until_ = mono_ns() + int64_t{kStallMs} * 1000000;
      stalls_++;
    }
  }
  const int64_t sent = mono_ns();
  kill(pid_, SIGHUP);
  hups_++;
  return sent;
}

void Soak::consume(bool final) {
  std::vector<std::string> texts;
  {
    std::lock_guard lock(mu_);
    const int64_t now = mono_ns();
    const long holding = final ? -2 : daemon_output_index();
    for (Chunk &c : chunks_)
      if (c.fifo && (final || now >= c.stall_until))
        drain(c);
    if (current_fifo_fd_ >= 0 && (final || now >= current_stall_until_))
      drain_fd(current_fifo_fd_, current_fifo_text_);
    // The daemon holds an output newer than the head chunk: it is complete.
    while (!chunks_.empty() && (final || (holding != -1 && (holding == 0 || holding > chunks_.front().index)))) {
      Chunk &c = chunks_.front();
      if (c.fifo) {
        if (!final && now < c.stall_until)
          break;
        drain(c);
        close(c.fd);
        texts.push_back(std::move(c.text));
      } else {
        texts.push_back(slurp(c.path));
      }
      std::error_code ec;
      fs::remove(c.path, ec);
      completed_renamed_ns_ = c.renamed_ns;
      chunks_.pop_front();
    }
    if (final) {
      if (current_fifo_fd_ >= 0) {
        drain_fd(current_fifo_fd_, current_fifo_text_);
        texts.push_back(std::move(current_fifo_text_));
        close(current_fifo_fd_);
        current_fifo_fd_ = -1;
      } else {
        std::error_code ec;
        if (fs::exists(out_, ec))
          texts.push_back(slurp(out_));
      }
      completed_renamed_ns_ = INT64_MAX;
    }
  }
  for (const std::string &t : texts)
    parse(t);
  check_settled(final);
}

int Soak::begin_round() {
  std::lock_guard lock(mu_);
  Round r;
  r.start = mono_ns();
  rounds_.push_back(std::move(r));
  return static_cast<int>(rounds_.size()) - 1;
}

void Soak::end_round(int i, std::map<uint16_t, std::vector<ReadEntry>> reads,
                     std::map<uint16_t, std::map<int64_t, SentEntry>> sent) {
  std::lock_guard lock(mu_);
  Round &r = rounds_[static_cast<size_t>(i)];
  r.end = mono_ns();
  r.reads = std::move(reads);
  r.sent = std::move(sent);
  r.finished = true;
}

void Soak::drain_fd(int fd, std::string &into) {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0)
      return;
    into.append(buf, static_cast<size_t>(n));
  }
}

long Soak::daemon_output_index() const {
  std::error_code ec;
  const std::string prefix = out_.string();
  for (const auto &e : fs::directory_iterator("/proc/" + std::to_string(pid_) + "/fd", ec)) {
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (ec || target.rfind(prefix, 0) != 0)
      continue;
    if (target == prefix)
      return 0;
    if (target.size() > prefix.size() + 1 && target[prefix.size()] == '.')
      return std::strtol(target.c_str() + prefix.size() + 1, nullptr, 10);
  }
  return -1;
}

void Soak::parse(const std::string &text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty())
      continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const std::exception &) {
      if (bad_lines_++ == 0)
        first_bad_ = line.substr(0, 200);
      continue;
    }
    if (j.value("type", "") == "interval") {
      interval_lines_++;
      last_ifindex_ = j.value("ifindex", 0u);
      if (j.value("final", false))
        finals_++;
      continue;
    }
    if (j.value("type", "") != "outlier") {
      if (bad_lines_++ == 0)
        first_bad_ = line.substr(0, 200);
      continue;
    }
    outlier_lines_++;
    std::vector<Record> recs = records_from({j}, 0);
    place(std::move(recs.front()));
  }
}

void Soak::place(Record rec) {
  std::lock_guard lock(mu_);
  auto ret = rec.mono.find("recv_return");
  if (ret == rec.mono.end() || !rec.reader_tid) {
    // Names no reader, or cannot be checked against a call.
    verdict_.add(check_alone(rec));
    return;
  }
  for (size_t i = rounds_.size(); i-- > 0;) {
    Round &r = rounds_[i];
    if (ret->second < r.start)
      continue;
    if (ret->second > r.end)
      break;
    if (r.dropped) {
      verdict_.too_late++;
      return;
    }
    r.pending[rec.dport].push_back(std::move(rec));
    if (r.checked)
      late_.insert(i);
    return;
  }
  // No receive call of the soak was running then.
  verdict_.add(check_alone(rec));
}

void Soak::check_settled(bool final) {
  std::lock_guard lock(mu_);
  for (size_t i = 0; i < rounds_.size(); i++) {
    Round &r = rounds_[i];
    const bool settled = r.finished && (final || completed_renamed_ns_ >= r.end + 3000000000ll);
    if ((!r.checked && settled) || late_.count(i)) {
      if (r.checked)
        verdict_.late_batches++;
      check_round(r);
      r.checked = true;
    }
  }
  late_.clear();
  size_t checked = 0;
  for (size_t i = rounds_.size(); i-- > 0;) {
    Round &r = rounds_[i];
    if (r.checked && ++checked > 5 && !r.dropped) {
      r.dropped = true;
      r.reads.clear();
      r.sent.clear();
    }
  }
}

void Soak::check_round(Round &r) {
  for (auto &[port, recs] : r.pending) {
    if (recs.empty())
      continue;
    CheckOptions opt;
    opt.sent = &r.sent[port];
    verdict_.add(check_records(recs, r.reads[port], opt));
    recs.clear();
  }
}

}  // namespace nltest::soak_tier
