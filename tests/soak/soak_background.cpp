#include "soak_background.hpp"

#include <algorithm>
#include <functional>
#include <sstream>
#include <string>

#include "scratch.hpp"
#include "soak.hpp"

namespace nltest::soak_tier {

Background::Background(Soak &soak, Daemon &nl) {
  try {
    sampler_ = std::async(std::launch::async, &Background::sample, this, nl.proc().pid());
    notifier_ = std::async(std::launch::async, &Background::receive_notify, this, std::ref(nl));
    rotator_ = std::async(std::launch::async, &Background::rotate, this, std::ref(soak));
    consumer_ = std::async(std::launch::async, &Background::consume, this, std::ref(soak));
  } catch (...) {
    // A thread that could not start: those that did end as the members go.
    stop_rotating_ = true;
    stop_ = true;
    throw;
  }
}

// The futures, destroyed after this, join their threads.
Background::~Background() {
  stop_rotating_ = true;
  stop_ = true;
}

void Background::stop_rotating() {
  stop_rotating_ = true;
  rotator_.get();
  consumer_.get();
}

void Background::stop() {
  stop_ = true;
  sampler_.get();
  notifier_.get();
}

// Its memory, twice a second (its CPU time is read at the start and the end).
void Background::sample(pid_t pid) {
  while (!stop_) {
    const std::string status = slurp("/proc/" + std::to_string(pid) + "/status");
    if (const uint64_t rss = status_kib(status, "VmRSS"))
      usage.rss_kib.push_back(rss);
    usage.hwm_kib = std::max(usage.hwm_kib, status_kib(status, "VmHWM"));
    sleep_ms(500);
  }
}

// Its notify socket drained (a full one would block its sd_notify), the
// reloads counted.
void Background::receive_notify(Daemon &nl) {
  while (!stop_) {
    std::istringstream msg(nl.notify().receive(200));
    for (std::string l; std::getline(msg, l);)
      if (l == "READY=1") {
        reloads_done++;
        std::lock_guard lock(times_mu_);
        ready_ns.push_back(mono_ns());
      }
  }
}

// SIGHUP with rotation every second.
void Background::rotate(Soak &soak) {
  int64_t next = mono_ns();
  while (!stop_rotating_) {
    next += 1000000000ll;
    while (!stop_rotating_ && mono_ns() < next)
      sleep_ms(10);
    if (!stop_rotating_) {
      const int64_t sent = soak.rotate();
      std::lock_guard lock(times_mu_);
      hup_ns.push_back(sent);
    }
  }
}

// The outputs read as they complete.
void Background::consume(Soak &soak) {
  while (!stop_rotating_) {
    soak.consume(false);
    sleep_ms(50);
  }
}

}  // namespace nltest::soak_tier
