#pragma once
// The page's style and script, embedded at build time (page_assets.cpp.in).
namespace netlatd::page {
extern const char *const kPageCss;
extern const char *const kPageJs;
}  // namespace netlatd::page
