#pragma once
// netlatd report: the page itself. One HTML file with its style, its script
// and its data inline: it fetches nothing and runs no script but its own.
#include <string>

#include <nlohmann/json.hpp>

namespace netlatd::page {

// The model (Builder::model()) as the text of a <script type="application/json">:
// no "<" in it, so no "</script>" a reader's name or a field could carry
// ends the element early; invalid UTF-8 replaced.
std::string embed_json(const nlohmann::json &model);

// The whole page.
std::string render_page(const nlohmann::json &model);

}  // namespace netlatd::page
