#include "html.hpp"

#include "page_assets.hpp"

namespace netlatd::page {
namespace {

std::string escape_html(const std::string &s) {
  std::string out;
  for (char c : s) {
    switch (c) {
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '&': out += "&amp;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

std::string title_of(const nlohmann::json &model) {
  std::string t = "netlatd report";
  const nlohmann::json &h = model.at("header");
  for (const char *key : {"hosts", "ifaces"})
    for (const auto &v : h.at(key))
      t += " " + v.get<std::string>();
  return t;
}

}  // namespace

std::string embed_json(const nlohmann::json &model) {
  const std::string text = model.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + 64);
  for (char c : text) {
    // Only inside strings: JSON has no '<', '>' or '&' elsewhere.
    if (c == '<')
      out += "\\u003c";
    else if (c == '>')
      out += "\\u003e";
    else if (c == '&')
      out += "\\u0026";
    else
      out += c;
  }
  return out;
}

std::string render_page(const nlohmann::json &model) {
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  // Nothing from elsewhere: no fetch, image, font or frame; the inline style
  // and script only.
  page += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n";
  page += "<title>" + escape_html(title_of(model)) + "</title>\n<style>\n";
  page += kPageCss;
  page += "</style>\n</head>\n<body>\n<noscript><p>This page draws its charts with its own inline script: "
          "allow scripts for this file to see them.</p></noscript>\n<main id=\"page\"></main>\n";
  page += "<script type=\"application/json\" id=\"netlatd-data\">";
  page += embed_json(model);
  page += "</script>\n<script>\n";
  page += kPageJs;
  page += "</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace netlatd::page
