#include "url_query.hpp"

#include <stdexcept>
#include <utility>

namespace distlab::viz {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// (key, value) pairs in order; a key without '=' has an empty value.
std::vector<std::pair<std::string, std::string>> pairs_of(const std::string& query) {
  std::vector<std::pair<std::string, std::string>> pairs;
  size_t start = !query.empty() && query[0] == '?' ? 1 : 0;
  while (start <= query.size()) {
    size_t end = query.find('&', start);
    if (end == std::string::npos) end = query.size();
    const std::string part = query.substr(start, end - start);
    if (!part.empty()) {
      const size_t eq = part.find('=');
      pairs.emplace_back(percent_decode(part.substr(0, eq)),
                         eq == std::string::npos ? std::string() : percent_decode(part.substr(eq + 1)));
    }
    start = end + 1;
  }
  return pairs;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace

std::string percent_decode(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '+') {
      out += ' ';
    } else if (c == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

bool is_flight_file(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  return name.rfind("flight.rank", 0) == 0 && name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

std::vector<std::string> fetched_urls_of_query(const std::string& query) {
  std::vector<std::string> urls;
  for (const auto& [key, value] : pairs_of(query))
    if (key == "trace" || key == "flight")
      for (const std::string& url : split_commas(value)) urls.push_back(url);
  return urls;
}

std::string plan_url_of_query(const std::string& query) {
  std::string url;
  for (const auto& [key, value] : pairs_of(query))
    if (key == "plan") url = value;
  return url;
}

std::vector<std::string> arguments_from_query(const std::string& query, const std::vector<std::string>& fetched_paths,
                                              const std::string& plan_path) {
  std::vector<std::string> args;
  bool files_given = false;
  bool plan_given = false;
  for (auto [key, value] : pairs_of(query)) {
    for (char& c : key)
      if (c == '_') c = '-';
    if (key.empty()) throw std::invalid_argument("a parameter with no name in the address");
    if (key == "trace" || key == "flight") {
      if (!files_given)
        for (const std::string& path : fetched_paths)
          args.insert(args.end(), {is_flight_file(path) ? "--flight" : "--trace", path});
      files_given = true;
      continue;
    }
    if (key == "plan") {
      if (!plan_given && !plan_path.empty()) args.insert(args.end(), {"--plan", plan_path});
      plan_given = true;
      continue;
    }
    if (key == "live") {
      args.insert(args.end(), {"--listen", "0"});
      continue;
    }
    if (key == "screenshot" || key == "listen" || key == "bind")
      throw std::invalid_argument("'" + key + "' is not taken from a page's address");
    if (key == "uneven") {
      if (value != "0" && value != "false" && value != "off") args.push_back("--uneven");
      continue;
    }
    if (key == "algorithm") key = "algorithms";
    args.push_back("--" + key);
    args.push_back(value);
  }
  return args;
}

}  // namespace distlab::viz
