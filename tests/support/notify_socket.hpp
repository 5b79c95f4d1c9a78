#pragma once
// A stand-in for systemd's NOTIFY_SOCKET: an AF_UNIX datagram socket in a
// private directory. What netlatd sends to it is exactly what systemd would
// read, so "READY=1" here is the readiness a service manager sees. Like
// systemd, it reads every datagram as it comes (a thread of its own): a
// socket nobody reads holds net.unix.max_dgram_qlen (10) of them, and then
// the daemon's next sd_notify() blocks, STATUS= once an interval, so a test
// daemon would hang on its own status after some 11 s.
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace nltest {

class NotifySocket {
public:
  NotifySocket();  // throws std::runtime_error when the socket cannot be made
  ~NotifySocket();
  NotifySocket(const NotifySocket &) = delete;
  NotifySocket &operator=(const NotifySocket &) = delete;

  const std::string &path() const { return path_; }
  // "NOTIFY_SOCKET=<path>", for a child's environment.
  std::string env() const { return "NOTIFY_SOCKET=" + path_; }

  // The next datagram, or "" after timeout_ms.
  std::string receive(int timeout_ms = 2000);
  // Reads datagrams until one has a line equal to `line` (e.g. "READY=1");
  // false after timeout_ms. Everything read is kept in received().
  bool wait_for_line(const std::string &line, int timeout_ms);
  const std::vector<std::string> &received() const { return received_; }

private:
  void read_all();

  std::string dir_, path_;
  int fd_ = -1;
  std::vector<std::string> received_;
  // Read by the thread, not yet by receive().
  std::mutex mu_;
  std::condition_variable arrived_;
  std::deque<std::string> inbox_;
  std::atomic<bool> stop_{false};
  std::thread reader_;
};

}  // namespace nltest
