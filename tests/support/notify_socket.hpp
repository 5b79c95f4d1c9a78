#pragma once
// A stand-in for systemd's NOTIFY_SOCKET: an AF_UNIX datagram socket in a
// private directory (or an abstract one, "@..."). What netlatd sends to it is
// exactly what systemd would read, so "READY=1" here is the readiness a
// service manager sees. Like systemd, it reads every datagram as it comes (a
// thread of its own). A socket nobody reads holds net.unix.max_dgram_qlen
// + 1 (11) of them; then sd_notify() blocks, and netlatd, which does not use it,
// drops its STATUS= lines: Reading::later stands in for such a stalled
// manager until start_reading().
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
  enum class Reading { now, later };
  enum class Address { path, abstract };
  // Throws std::runtime_error when the socket cannot be made.
  explicit NotifySocket(Reading reading = Reading::now, Address address = Address::path);
  ~NotifySocket();
  NotifySocket(const NotifySocket &) = delete;
  NotifySocket &operator=(const NotifySocket &) = delete;

  // What NOTIFY_SOCKET says: a path, or "@name" for an abstract socket.
  const std::string &path() const { return path_; }
  // "NOTIFY_SOCKET=<path>", for a child's environment.
  std::string env() const { return "NOTIFY_SOCKET=" + path_; }

  // Reads from now on (Reading::later); the datagrams queued meanwhile first.
  void start_reading();

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
