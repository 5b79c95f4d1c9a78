// Notifier against a real AF_UNIX datagram socket standing in for systemd's
// NOTIFY_SOCKET: what the daemon sends is exactly what systemd would read.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "netlatd/service/notify.hpp"
#include "notify_socket.hpp"

using nltest::NotifySocket;

namespace {

// Sets or unsets one variable for the scope of a test and restores the old value.
class EnvGuard {
public:
  EnvGuard(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~EnvGuard() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  EnvGuard(const EnvGuard &) = delete;
  EnvGuard &operator=(const EnvGuard &) = delete;

private:
  const char *name_;
  std::optional<std::string> old_;
};

}  // namespace

TEST_CASE("Notifier does nothing without NOTIFY_SOCKET", "[notify]") {
  EnvGuard socket("NOTIFY_SOCKET", nullptr);
  EnvGuard usec("WATCHDOG_USEC", "1000000");
  const std::string pid = std::to_string(::getpid());
  EnvGuard wpid("WATCHDOG_PID", pid.c_str());
  netlatd::Notifier n;
  CHECK_FALSE(n.enabled());
  CHECK_FALSE(n.ready());
  CHECK_FALSE(n.status("x"));
  CHECK_FALSE(n.watchdog());
  CHECK_FALSE(n.stopping());
  CHECK_FALSE(n.reloading());
  CHECK(n.watchdog_interval().count() == 0);
}

TEST_CASE("Notifier sends READY, STATUS, RELOADING, STOPPING datagrams", "[notify]") {
  NotifySocket systemd;
  EnvGuard socket("NOTIFY_SOCKET", systemd.path().c_str());
  EnvGuard usec("WATCHDOG_USEC", nullptr);
  EnvGuard wpid("WATCHDOG_PID", nullptr);
  netlatd::Notifier n;
  REQUIRE(n.enabled());

  CHECK(n.ready());
  CHECK(systemd.receive() == "READY=1");

  CHECK(n.status("attached 9 programs\non lo"));
  CHECK(systemd.receive() == "STATUS=attached 9 programs on lo");

  timespec before{};
  clock_gettime(CLOCK_MONOTONIC, &before);
  CHECK(n.reloading());
  const std::string reload = systemd.receive();
  const std::string prefix = "RELOADING=1\nMONOTONIC_USEC=";
  REQUIRE(reload.rfind(prefix, 0) == 0);
  const unsigned long long sent = std::stoull(reload.substr(prefix.size()));
  const unsigned long long before_usec =
      static_cast<unsigned long long>(before.tv_sec) * 1000000ull +
      static_cast<unsigned long long>(before.tv_nsec) / 1000ull;
  CHECK(sent >= before_usec);
  CHECK(sent < before_usec + 10'000'000ull);

  CHECK(n.stopping());
  CHECK(systemd.receive() == "STOPPING=1");

  // No watchdog was requested: watchdog() must stay silent. The marker proves
  // nothing was queued in between.
  CHECK(n.watchdog_interval().count() == 0);
  CHECK_FALSE(n.watchdog());
  CHECK(n.status("marker"));
  CHECK(systemd.receive() == "STATUS=marker");
}

// The stand-in reads as systemd does, whether or not the test looks: a
// sender that blocks on a full socket (it holds net.unix.max_dgram_qlen + 1,
// 11, datagrams), as
// sd_notify() does and netlatd did before it stopped using it, is never held
// by it.
TEST_CASE("NotifySocket reads every datagram as it comes, as systemd does", "[notify]") {
  NotifySocket systemd;
  EnvGuard socket("NOTIFY_SOCKET", systemd.path().c_str());
  auto sent = std::async(std::launch::async, [] {
    for (int i = 0; i < 40; i++)
      if (sd_notify(0, ("STATUS=interval " + std::to_string(i)).c_str()) <= 0)
        return false;
    return true;
  });
  REQUIRE(sent.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  CHECK(sent.get());
  for (int i = 0; i < 40; i++)
    CHECK(systemd.receive() == "STATUS=interval " + std::to_string(i));
}

namespace {

// What `send` returns, run on a thread of its own against a manager that
// does not read: the calls must return within a bound far above what a
// send that does not block takes, so the verdict does not hang on the load
// of the host. Reading begins when the bound passes, which ends a send that
// blocked, so that such a test fails rather than hangs.
template <typename Send>
auto returns_without_reader(NotifySocket &systemd, Send send) {
  auto sent = std::async(std::launch::async, send);
  const bool returned = sent.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!returned)
    systemd.start_reading();
  REQUIRE(returned);
  return sent.get();
}

}  // namespace

// systemd stalled: the socket fills, and netlatd, which sends a STATUS= an
// interval, must go on, SIGTERM included. Each STATUS= the socket has no room
// for is dropped and counted; READY=1 waits for room, and gets through once
// the manager reads again.
TEST_CASE("Notifier drops STATUS= on a notify socket nobody reads, never blocking", "[notify]") {
  NotifySocket systemd(NotifySocket::Reading::later);
  EnvGuard socket("NOTIFY_SOCKET", systemd.path().c_str());
  netlatd::Notifier n(std::chrono::seconds(10));
  REQUIRE(n.enabled());
  const int delivered = returns_without_reader(systemd, [&n] {
    int ok = 0;
    for (int i = 0; i < 40; i++)
      ok += n.status("interval " + std::to_string(i)) ? 1 : 0;
    return ok;
  });
  CHECK(delivered > 0);
  CHECK(n.dropped() > 0);
  CHECK(delivered + n.dropped() == 40u);

  // READY=1 finds the socket full, and is sent once the reader drains it.
  auto ready = std::async(std::launch::async, [&n] { return n.ready(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  systemd.start_reading();
  REQUIRE(ready.wait_for(std::chrono::seconds(20)) == std::future_status::ready);
  CHECK(ready.get());
  // The first STATUS= lines, those the socket had room for, then READY=1.
  for (int i = 0; i < delivered; i++)
    CHECK(systemd.receive() == "STATUS=interval " + std::to_string(i));
  CHECK(systemd.receive() == "READY=1");
  CHECK(systemd.receive(200).empty());
}

TEST_CASE("Notifier waits for room for READY=1 and STOPPING=1 only so long", "[notify]") {
  NotifySocket systemd(NotifySocket::Reading::later);
  EnvGuard socket("NOTIFY_SOCKET", systemd.path().c_str());
  netlatd::Notifier n(std::chrono::milliseconds(100));
  const int delivered = returns_without_reader(systemd, [&n] {
    int ok = 0;
    while (n.dropped() == 0 && ok < 1000)
      ok += n.status("filling") ? 1 : 0;
    return ok;
  });
  REQUIRE(n.dropped() == 1u);
  CHECK_FALSE(returns_without_reader(systemd, [&n] { return n.ready(); }));
  CHECK_FALSE(returns_without_reader(systemd, [&n] { return n.stopping(); }));
  CHECK(n.dropped() == 3u);
  systemd.start_reading();
  for (int i = 0; i < delivered; i++)
    CHECK(systemd.receive() == "STATUS=filling");
  CHECK(systemd.receive(200).empty());
}

TEST_CASE("Notifier sends to an abstract NOTIFY_SOCKET, @name", "[notify]") {
  NotifySocket systemd(NotifySocket::Reading::now, NotifySocket::Address::abstract);
  REQUIRE(systemd.path().front() == '@');
  EnvGuard socket("NOTIFY_SOCKET", systemd.path().c_str());
  netlatd::Notifier n;
  CHECK(n.ready());
  CHECK(systemd.receive() == "READY=1");
}

TEST_CASE("Notifier sends nothing to a NOTIFY_SOCKET that is no unix socket address", "[notify]") {
  const char *address = GENERATE("vsock:2:9999", "relative/notify.sock");
  EnvGuard socket("NOTIFY_SOCKET", address);
  netlatd::Notifier n;
  CHECK(n.enabled());
  CHECK_FALSE(n.ready());
  CHECK_FALSE(n.status("x"));
  CHECK(n.dropped() == 0u);
}

TEST_CASE("Notifier feeds the watchdog only when it is meant for this process", "[notify]") {
  NotifySocket systemd;
  EnvGuard socket("NOTIFY_SOCKET", systemd.path().c_str());
  EnvGuard usec("WATCHDOG_USEC", "30000000");

  SECTION("WATCHDOG_PID is ours") {
    const std::string pid = std::to_string(::getpid());
    EnvGuard wpid("WATCHDOG_PID", pid.c_str());
    netlatd::Notifier n;
    CHECK(n.watchdog_interval() == std::chrono::seconds(30));
    CHECK(n.watchdog());
    CHECK(systemd.receive() == "WATCHDOG=1");
  }
  SECTION("WATCHDOG_PID is another process") {
    const std::string pid = std::to_string(::getpid() + 1);
    EnvGuard wpid("WATCHDOG_PID", pid.c_str());
    netlatd::Notifier n;
    CHECK(n.watchdog_interval().count() == 0);
    CHECK_FALSE(n.watchdog());
    CHECK(n.status("marker"));
    CHECK(systemd.receive() == "STATUS=marker");
  }
}
