// File: tests/deps/package_cycles_test.cc
//
// No package of the tree depends, through any chain, on a package that
// depends on it: read from Bazel's own dependency graph, written at build
// time by the genquery rules in tests/deps/BUILD. The fixture pair in
// tests/deps/testdata/ shows the check can fail.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/deps/package_graph.h"

namespace fsdp_tests {
namespace {

std::string ReadRunfile(const std::string& path) {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  EXPECT_NE(runfiles, nullptr) << "run under bazel test";
  if (runfiles == nullptr) return "";
  std::ifstream in(std::string(runfiles) + "/fsdp_cpp/" + path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(PackageGraphTest, CollapsesTargetsToPackages) {
  const PackageGraph graph = PackageGraphFromQueryGraph(
      "digraph mygraph {\n"
      "  \"//a:x\"\n"
      "  \"//a:x\" -> \"//a:y\"\n"
      "  \"//a:y\" -> \"//b/c:z\"\n"
      "  \"//b/c:z\" -> \"@system//:absl\"\n"
      "}\n");
  ASSERT_EQ(graph.count("//a"), 1u);
  EXPECT_EQ(graph.at("//a"), std::set<std::string>{"//b/c"});
  EXPECT_TRUE(graph.at("//b/c").empty());
  EXPECT_EQ(PackageOf("@system//:absl"), "");
  EXPECT_TRUE(PackageCycles(graph).empty());
}

TEST(PackageGraphTest, FindsACycleOfAcyclicTargets) {
  // //a:x -> //b:y -> //a:z: no target cycle, a package cycle.
  const PackageGraph graph = PackageGraphFromQueryGraph(
      "\"//a:x\" -> \"//b:y\"\n"
      "\"//b:y\" -> \"//a:z\"\n"
      "\"//c:w\" -> \"//a:x\"\n");
  const auto cycles = PackageCycles(graph);
  ASSERT_EQ(cycles.size(), 1u);
  EXPECT_EQ(CycleToString(cycles[0]), "//a -> //b -> //a");
}

TEST(PackageGraphTest, FindsTheShortestCycleInALongerComponent) {
  const PackageGraph graph = PackageGraphFromQueryGraph(
      "\"//p:1\" -> \"//q:1\"\n"
      "\"//q:1\" -> \"//r:1\"\n"
      "\"//r:1\" -> \"//p:2\"\n"
      "\"//q:2\" -> \"//p:3\"\n");
  const auto cycles = PackageCycles(graph);
  ASSERT_EQ(cycles.size(), 1u);
  EXPECT_EQ(CycleToString(cycles[0]), "//p -> //q -> //p");
}

TEST(PackageCyclesTest, TheCheckReportsTheFixtureCycle) {
  const std::string text = ReadRunfile("tests/deps/cyclic_fixture_graph");
  ASSERT_FALSE(text.empty());
  const auto cycles = PackageCycles(PackageGraphFromQueryGraph(text));
  ASSERT_EQ(cycles.size(), 1u);
  EXPECT_EQ(CycleToString(cycles[0]),
            "//tests/deps/testdata/cycle_a -> //tests/deps/testdata/cycle_b -> "
            "//tests/deps/testdata/cycle_a");
}

TEST(PackageCyclesTest, TheTreeHasNoPackageCycle) {
  const std::string text = ReadRunfile("tests/deps/package_graph");
  ASSERT_FALSE(text.empty());
  const PackageGraph graph = PackageGraphFromQueryGraph(text);
  // The graph is the tree's, not an empty file that would pass anything.
  ASSERT_GT(graph.count("//fsdp/train"), 0u);
  ASSERT_GT(graph.count("//comm"), 0u);
  for (const auto& cycle : PackageCycles(graph)) {
    ADD_FAILURE() << "package cycle: " << CycleToString(cycle)
                  << "; a package may not depend on one that depends on it (docs/architecture.md)";
  }
}

}  // namespace
}  // namespace fsdp_tests
