#pragma once
// `netlatd report`: netlatd's JSON lines in, one self-contained HTML page out.
namespace netlatd::page {

// Exit codes of `netlatd report` (docs/REPORT.md, netlatd(8), --help).
enum ReportExit : int {
  kReportOk = 0,
  kReportUsage = 64,      // bad flag
  kReportNoLines = 65,    // the input holds no netlatd line (empty, or only lines of others)
  kReportNoInput = 66,    // an input file cannot be opened or read
  kReportCantWrite = 73,  // the page cannot be written
};

// argv[0] is "report". Errors are one line on stderr, "netlatd: error: ...".
int report_main(int argc, char **argv);

}  // namespace netlatd::page
