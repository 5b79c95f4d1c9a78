#include "page_main.hpp"

#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "html.hpp"
#include "model.hpp"
#include "netlatd/base/errors.hpp"

namespace netlatd::page {
namespace {

constexpr size_t kMaxLine = 16u << 20;  // longer is nobody's line: skipped

struct Failure {
  int code;
  std::string what;
};

// Reads plain or gzip-compressed (rotated, compressed by logrotate) lines.
void read_input(const std::string &name, Builder &b) {
  const bool stdin_ = name == "-";
  gzFile f = stdin_ ? gzdopen(dup(0), "rb") : gzopen(name.c_str(), "rb");
  if (!f)
    throw Failure{kReportNoInput, "report: cannot open " + name + ": " + std::strerror(errno ? errno : ENOMEM)};
  const std::string source = stdin_ ? "stdin" : name;
  std::vector<char> buf(1 << 16);
  std::string line;
  bool too_long = false;
  while (gzgets(f, buf.data(), static_cast<int>(buf.size())) != nullptr) {
    const size_t n = std::strlen(buf.data());
    const bool ends = n > 0 && buf[n - 1] == '\n';
    if (line.size() + n <= kMaxLine)
      line.append(buf.data(), ends ? n - 1 : n);
    else
      too_long = true;
    if (ends) {
      b.add_line(too_long ? std::string_view("line longer than 16 MiB") : std::string_view(line), source);
      line.clear();
      too_long = false;
    }
  }
  int err = 0;
  const char *msg = gzerror(f, &err);
  const std::string why = err == Z_ERRNO ? std::strerror(errno) : msg ? msg : "read error";
  gzclose(f);
  if (!line.empty() || too_long)  // the last line, without its newline (a file cut short)
    b.add_line(too_long ? std::string_view("line longer than 16 MiB") : std::string_view(line), source);
  if (err != Z_OK && err != Z_BUF_ERROR)
    throw Failure{kReportNoInput, "report: cannot read " + source + ": " + why};
}

void write_output(const std::string &name, const std::string &page) {
  if (name == "-") {
    if (std::fwrite(page.data(), 1, page.size(), stdout) != page.size() || std::fflush(stdout) != 0)
      throw Failure{kReportCantWrite, std::string("report: cannot write the page to stdout: ") + std::strerror(errno)};
    return;
  }
  std::ofstream out(name, std::ios::binary | std::ios::trunc);
  if (out)
    out.write(page.data(), static_cast<std::streamsize>(page.size()));
  if (out)
    out.close();
  if (!out)
    throw Failure{kReportCantWrite, "report: cannot write " + name + ": " + std::strerror(errno)};
}

const char *const kFooter =
    "Reads netlatd's JSON lines (docs/OUTPUT.md, schema 2): files, rotated files (gzip too) or - for stdin.\n"
    "Writes one HTML file that needs nothing else: per-stage latency heatmaps with p50/p99/p999,\n"
    "each stage's share of total, losses by reason, and the slowest outlier packets as waterfalls.\n"
    "Lines that are not netlatd's are skipped and counted on the page.\n"
    "Exit status: 0 ok, 64 usage, 65 no netlatd line in the input, 66 an input cannot be read,\n"
    "73 the page cannot be written. See docs/REPORT.md and netlatd(8).";

int run(int argc, char **argv) {
  CLI::App app{"netlatd report: one self-contained HTML page from netlatd's JSON lines", "netlatd report"};
  std::vector<std::string> inputs;
  std::string output = "netlatd-report.html";
  app.add_option("input", inputs, "JSON lines files, in any order (- for stdin)")->required();
  app.add_option("-o,--output", output, "The page to write (default netlatd-report.html; - for stdout)");
  app.footer(kFooter);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::fputs(app.help().c_str(), stdout);
    return kReportOk;
  } catch (const CLI::ParseError &e) {
    std::string msg = e.what();
    while (!msg.empty() && msg.back() == '\n')
      msg.pop_back();
    throw Failure{kReportUsage, "report: " + msg + " (see netlatd report --help)"};
  }
  const auto t0 = std::chrono::steady_clock::now();
  Builder b;
  for (const std::string &in : inputs)
    read_input(in, b);
  if (b.usable() == 0)
    throw Failure{kReportNoLines, "report: no netlatd line in the input (" + std::to_string(b.lines()) +
                                      " lines read, " + std::to_string(b.skipped()) + " not netlatd's)"};
  const std::string page = render_page(b.model());
  write_output(output, page);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::fprintf(stderr, "netlatd report: wrote %s (%zu bytes; %llu lines read, %llu skipped) in %lld ms\n",
               output == "-" ? "the page to stdout" : output.c_str(), page.size(),
               static_cast<unsigned long long>(b.lines()), static_cast<unsigned long long>(b.skipped()),
               static_cast<long long>(ms.count()));
  return kReportOk;
}

}  // namespace

int report_main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const Failure &f) {
    std::fprintf(stderr, "netlatd: error: %s\n", one_line_message(f.what).c_str());
    return f.code;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "netlatd: error: report: %s\n", one_line_message(e.what()).c_str());
    return 70;
  }
}

}  // namespace netlatd::page
