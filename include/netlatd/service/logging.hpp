#pragma once
// The daemon's log: one line per message on stderr, "netlatd: LEVEL: text".
// Under systemd stderr is a stream to the journal; there each line starts
// with its syslog priority, "<3>" for an error (sd-daemon(3)), so that
// `journalctl -p err` finds the errors. Elsewhere the lines stay plain.
#include <memory>
#include <string>

#include <spdlog/formatter.h>
#include <spdlog/common.h>

namespace netlatd {

// The syslog priority (0 emerg .. 7 debug) journald files a line of `level` under.
int journal_priority(spdlog::level::level_enum level);

// True when `fd` is the stream systemd connected to the journal:
// `journal_stream` (the JOURNAL_STREAM variable, "DEVICE:INODE", see
// systemd.exec(5)) names it. A stderr redirected elsewhere no longer matches.
bool is_journal_stream(const char *journal_stream, int fd);

// "netlatd: LEVEL: text"; when `journal`, every line of it (a message may
// hold several) led by "<N>", else journald files the rest as info.
std::unique_ptr<spdlog::formatter> log_formatter(bool journal);

// Makes the default logger write to stderr in that format, prefixed when
// stderr is the journal.
void setup_logging();

// The fatal error main() prints itself, "netlatd: error: what\n", in the
// format setup_logging() chose.
std::string fatal_error_text(const std::string &what);

}  // namespace netlatd
