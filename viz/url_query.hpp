// A page address's parameters as distlab-viz's command line, so the browser
// build takes the very options the program takes (options.cpp parses both):
//
//   ?panel=collectives&collective=all_reduce&algorithm=ring&ranks=8
//     -> --panel collectives --collective all_reduce --algorithms ring --ranks 8
//
// Keys are the long options without "--" ('_' may stand for '-');
// `algorithm` is `algorithms`; a flag (`uneven`) is on unless its value is
// 0, false or off; `trace=URL` and `flight=URL` (any number, or
// comma-separated) name the files the page fetches, given here as
// `fetched_paths`: each becomes --flight when it is a flight-recorder file
// (flight.rank*.json), else --trace; `plan=URL` names a plan record the
// page fetches too, given as `plan_path`: --plan (nothing when the page
// could not fetch it); `live` listens to the server's relay (--listen 0).
// Values are percent-decoded, '+' is a space.
#pragma once

#include <string>
#include <vector>

namespace distlab::viz {

// "%41+b" -> "A b"; a '%' not followed by two hex digits stays as it is.
std::string percent_decode(const std::string& text);

// The query (with or without its leading '?') as arguments after argv[0].
// Throws std::invalid_argument for what no option takes (a screenshot file,
// a key with no name).
std::vector<std::string> arguments_from_query(const std::string& query, const std::vector<std::string>& fetched_paths,
                                              const std::string& plan_path = "");

// The `trace` and `flight` values of the query, decoded, in order (what the
// page fetches).
std::vector<std::string> fetched_urls_of_query(const std::string& query);
// The `plan` value of the query, decoded (the last, when there are several);
// empty when there is none.
std::string plan_url_of_query(const std::string& query);

// A flight recorder's file by its name (flight.rank3.json, flight.rank3.exit.json)?
bool is_flight_file(const std::string& path);

}  // namespace distlab::viz
