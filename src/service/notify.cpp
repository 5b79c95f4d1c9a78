#include "netlatd/service/notify.hpp"

#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <string>

#include <systemd/sd-daemon.h>

#include "netlatd/base/clock.hpp"

namespace netlatd {

Notifier::Notifier() {
  const char *socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && socket[0] != '\0';
  uint64_t usec = 0;
  // sd_watchdog_enabled() checks WATCHDOG_PID against getpid(): a watchdog meant
  // for a wrapper script must not be fed by us.
  if (enabled_ && sd_watchdog_enabled(0, &usec) > 0)
    watchdog_ = std::chrono::microseconds(usec);
}

bool Notifier::send(std::string_view message) const {
  if (!enabled_)
    return false;
  const std::string text(message);
  return sd_notify(0, text.c_str()) > 0;
}

bool Notifier::ready() const { return send("READY=1"); }

bool Notifier::status(std::string_view text) const {
  std::string message = "STATUS=";
  message.reserve(message.size() + text.size());
  for (char c : text)
    message.push_back(c == '\n' || c == '\r' ? ' ' : c);
  return send(message);
}

bool Notifier::watchdog() const {
  if (watchdog_.count() == 0)
    return false;
  return send("WATCHDOG=1");
}

bool Notifier::stopping() const { return send("STOPPING=1"); }

bool Notifier::reloading() const {
  const uint64_t usec = monotonic_ns() / 1000u;
  return send("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(usec));
}

}  // namespace netlatd
