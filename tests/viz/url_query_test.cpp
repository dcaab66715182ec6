// The browser build's address -> distlab-viz's command line (url_query.hpp):
// what a deck or a README links to must open the view the same command line
// opens natively, and what no option takes must be refused with a reason.
#include <gtest/gtest.h>

#include <stdexcept>

#include "options.hpp"
#include "url_query.hpp"

namespace distlab::viz {
namespace {

using Args = std::vector<std::string>;

TEST(UrlQuery, ParametersBecomeTheLongOptions) {
  EXPECT_EQ(arguments_from_query("?panel=collectives&collective=all_reduce&algorithm=ring&ranks=8", {}),
            (Args{"--panel", "collectives", "--collective", "all_reduce", "--algorithms", "ring", "--ranks", "8"}));
  // '_' for '-', percent-encoding and '+' decoded, a flag without a value.
  EXPECT_EQ(arguments_from_query("bucket_mb=2.5&algorithms=ring%2Ctree&uneven&experts-label=layer+0", {}),
            (Args{"--bucket-mb", "2.5", "--algorithms", "ring,tree", "--uneven", "--experts-label", "layer 0"}));
  EXPECT_EQ(arguments_from_query("uneven=0&uneven=false", {}), Args{});
  EXPECT_EQ(arguments_from_query("", {}), Args{});
  EXPECT_EQ(arguments_from_query("?", {}), Args{});
}

TEST(UrlQuery, TracesAreTheFilesThePageFetched) {
  EXPECT_EQ(fetched_urls_of_query("panel=trace&trace=a%20b.json,traces/x.json&flight=f/flight.rank0.json&trace=y.json"),
            (Args{"a b.json", "traces/x.json", "f/flight.rank0.json", "y.json"}));
  // Flight-recorder files by their names, the rest as traces.
  EXPECT_EQ(arguments_from_query("trace=t.json&flight=flight.rank0.json,flight.rank1.exit.json",
                                 {"/t/1/t.json", "/t/1/flight.rank0.json", "/t/1/flight.rank1.exit.json"}),
            (Args{"--trace", "/t/1/t.json", "--flight", "/t/1/flight.rank0.json", "--flight", "/t/1/flight.rank1.exit.json"}));
  EXPECT_TRUE(is_flight_file("/a/flight.rank12.json"));
  EXPECT_FALSE(is_flight_file("/a/flight.rank12.json/x.json"));
  EXPECT_FALSE(is_flight_file("myflight.rank0.json"));
  EXPECT_EQ(arguments_from_query("trace=a.json,b.json&panel=pipeline&trace=c.json", {"/t/1/a.json", "/t/1/b.json"}),
            (Args{"--trace", "/t/1/a.json", "--trace", "/t/1/b.json", "--panel", "pipeline"}));
  EXPECT_EQ(arguments_from_query("live", {}), (Args{"--listen", "0"}));
}

TEST(UrlQuery, APlanIsTheRecordThePageFetched) {
  EXPECT_EQ(plan_url_of_query("panel=plan&plan=plans/cpu%204.json"), "plans/cpu 4.json");
  EXPECT_EQ(plan_url_of_query("plan=a.json&plan=b.json"), "b.json");
  EXPECT_EQ(plan_url_of_query("trace=t.json"), "");
  // The plan is not among the traces the page fetches.
  EXPECT_EQ(fetched_urls_of_query("plan=p.json&trace=t.json"), Args{"t.json"});
  EXPECT_EQ(arguments_from_query("panel=plan&plan=p.json", {}, "/t/2/p.json"),
            (Args{"--panel", "plan", "--plan", "/t/2/p.json"}));
  EXPECT_EQ(arguments_from_query("plan=p.json&trace=t.json", {"/t/1/t.json"}, "/t/2/p.json"),
            (Args{"--plan", "/t/2/p.json", "--trace", "/t/1/t.json"}));
  // Not fetched (a 404, said by the page): no --plan.
  EXPECT_EQ(arguments_from_query("panel=plan&plan=p.json", {}), (Args{"--panel", "plan"}));
}

TEST(UrlQuery, WhatNoAddressMayAskIsRefused) {
  EXPECT_THROW(arguments_from_query("screenshot=/tmp/x.png", {}), std::invalid_argument);
  EXPECT_THROW(arguments_from_query("listen=29400", {}), std::invalid_argument);
  EXPECT_THROW(arguments_from_query("=3", {}), std::invalid_argument);
}

TEST(UrlQuery, PercentDecoding) {
  EXPECT_EQ(percent_decode("%41%62+c%2"), "Ab c%2");
  EXPECT_EQ(percent_decode("%zz%"), "%zz%");
  EXPECT_EQ(percent_decode("%e2%86%92"), "\xe2\x86\x92");
}

Options parsed(const std::string& query, int* code) {
  const Args args = arguments_from_query(query, {});
  std::vector<const char*> argv{"distlab-viz"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  Options options;
  const auto stop = parse_options(static_cast<int>(argv.size()), argv.data(), options);
  *code = stop.value_or(-1);
  return options;
}

TEST(UrlQuery, TheProgramsOwnParserTakesThem) {
  int code = 0;
  const Options o = parsed("panel=collectives&collective=all-reduce&algorithm=ring&ranks=8&bytes=1000", &code);
  EXPECT_EQ(code, -1);
  EXPECT_EQ(o.panel, "collectives");
  EXPECT_EQ(o.collective, "all_reduce");
  EXPECT_EQ(o.algorithms, "ring");
  EXPECT_EQ(o.ranks, 8);
  EXPECT_EQ(o.bytes, 1000);
  // An unknown panel, an unknown parameter, a value out of range: refused.
  for (const char* refused : {"panel=nonsense", "colour=red", "ranks=99"}) {
    parsed(refused, &code);
    EXPECT_GT(code, 0) << refused;
  }
}

}  // namespace
}  // namespace distlab::viz
