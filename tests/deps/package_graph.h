// File: tests/deps/package_graph.h
//
// The package graph of a Bazel target graph, and its cycles. The input is
// `bazel query --output=graph --nograph:factored` text (what the genquery
// rules in tests/deps/BUILD write at build time): one `"//a:x" -> "//b:y"`
// line per dependency edge. Targets collapse to their packages ("//a"),
// edges inside a package and edges to other repositories ("@system//...")
// drop out, and what remains must be acyclic: a package may depend on
// another only if nothing in that one depends back on it, target by target
// acyclic or not.
//
//   PackageGraph graph = PackageGraphFromQueryGraph(text);
//   for (const std::vector<std::string>& cycle : PackageCycles(graph)) ...
//   // {"//fsdp/checkpoint", "//fsdp/train", "//fsdp/checkpoint"}
#ifndef TESTS_DEPS_PACKAGE_GRAPH_H_
#define TESTS_DEPS_PACKAGE_GRAPH_H_

#include <map>
#include <set>
#include <string>
#include <vector>

namespace fsdp_tests {

// Package -> the packages it depends on directly (never itself).
using PackageGraph = std::map<std::string, std::set<std::string>>;

// "//fsdp/train:train_step" -> "//fsdp/train"; "" for labels outside the
// main repository.
std::string PackageOf(const std::string& label);

// The package edges of a `--output=graph` dump.
PackageGraph PackageGraphFromQueryGraph(const std::string& query_graph);

// One cycle per strongly connected set of more than one package, each as
// the packages along it with the first repeated at the end, in a stable
// order (the smallest package first). Empty when the graph is acyclic.
std::vector<std::vector<std::string>> PackageCycles(const PackageGraph& graph);

// "//a -> //b -> //a".
std::string CycleToString(const std::vector<std::string>& cycle);

}  // namespace fsdp_tests

#endif  // TESTS_DEPS_PACKAGE_GRAPH_H_
